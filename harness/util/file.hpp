// Reading a whole file, the one way every loader in diffeval does it; the
// file a path names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace diffeval::util {

// The bytes of the file at `path`, or nullopt when it cannot be read.
std::optional<std::string> read_file(const std::filesystem::path& path);

// What read_file_ends keeps of a file.
struct FileEnds {
    std::string text;      // the kept lines, with a line for what was left out
    uint64_t left_out = 0; // bytes of the file not in `text` (0: all of it is)
};

// The start and the end of a file that may be too long to keep whole (a
// server's log): whole lines from its first `head` bytes and from its last
// `tail` bytes, and between them one line saying how many bytes were left
// out. A line longer than what is kept of its end is left out whole, so
// nothing in `text` is a piece of a line. The whole file when it is no
// longer than head + tail. Memory stays within head + 2 * tail + 1 MiB
// whatever the file's size, also for a pipe; nullopt when it cannot be read.
std::optional<FileEnds> read_file_ends(const std::filesystem::path& path, size_t head, size_t tail);

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
