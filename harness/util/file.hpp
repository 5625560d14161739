// Reading a whole file, the one way every loader in diffeval does it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace diffeval::util {

// The bytes of the file at `path`, or nullopt when it cannot be read.
std::optional<std::string> read_file(const std::filesystem::path& path);

} // namespace diffeval::util
