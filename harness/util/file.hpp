// Reading a whole file, the one way every loader in diffeval does it; the
// file a path names.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace diffeval::util {

// The bytes of the file at `path`, or nullopt when it cannot be read.
std::optional<std::string> read_file(const std::filesystem::path& path);

// The file `path` names, its symbolic links followed (as far as they exist):
// one file under every name, for its lock and for replacing it. `path`
// itself when it cannot be resolved.
std::string resolved_path(const std::string& path);

// Whether this process may write the file at `path`: access(2) allows it and
// the file's mode gives someone write permission. root may write any file,
// but a file nobody may write (chmod a-w) was made read-only on purpose.
// `error` gets why not.
bool may_write(const std::string& path, std::string* error = nullptr);

} // namespace diffeval::util
