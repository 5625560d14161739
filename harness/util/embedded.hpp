// Data files compiled into the binary (built-in framings, simulator
// profiles, fingerprint rules, the sample dataset), so `diffeval` works from
// any directory. Users' own files are read from disk by path instead.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::util {

// Contents of the embedded file at `path` (relative to the source root, e.g.
// "prompts/raw.toml"), or nullopt.
std::optional<std::string_view> embedded_file(std::string_view path);

// Paths of embedded files under `dir` (e.g. "prompts/"), sorted.
std::vector<std::string> embedded_files_under(std::string_view dir);

} // namespace diffeval::util
