// Reading a whole file, the one way every loader in diffeval does it; the
// file a path names.
#pragma once

#include <harness/util/result.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace diffeval::util {

// The bytes of the file at `path`, or nullopt when it cannot be read. Reads
// here never wait for a FIFO's writer: one no process writes to is empty.
std::optional<std::string> read_file(const std::filesystem::path& path);

// The most bytes read_input reads of a file a user names, by what it is: a
// dataset or a samples file (the official train set is 4 MB), and a
// configuration (a framing, an experiment, a scorer, a profile, rules).
inline constexpr size_t k_max_data_bytes = size_t{1} << 30;
inline constexpr size_t k_max_config_bytes = size_t{16} << 20;

// Whether the bytes a file starts with are all a reader needs of it.
using ReadEnough = std::function<bool(std::string_view start)>;

// A file a user names, read whole when it holds at most `max_bytes`: an
// ErrorKind::usage error "PATH: REASON" otherwise (cannot be opened, is a
// directory, or holds more, as /dev/zero or a mistyped multi-gigabyte path
// does, which reading whole would take all memory for; a stream is read up
// to the bound and no further). With `enough`, reading stops as soon as it
// says the bytes read so far suffice: what is returned is then the file's
// start (a regular file's size still counts against `max_bytes`).
Result<std::string> read_input(const std::filesystem::path& path, size_t max_bytes,
                               const ReadEnough& enough = {});

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
// whatever the file's size, also for a pipe; what is no regular file (a
// pipe, a device) is read through up to k_max_data_bytes, an error past it
// (/dev/zero never ends). A FIFO no process writes to reads as empty.
// With `from`, the file is read from that byte (a log this launch appended
// to): nothing when it has no more, an error when it is no regular file.
// Errors are ErrorKind::usage, "PATH: REASON".
Result<FileEnds> read_file_ends(const std::filesystem::path& path, size_t head, size_t tail,
                                uint64_t from = 0);

// The file `path` names, absolute, its symbolic links followed (a link to
// nowhere too: to the file a write through it would create): one file under
// every name, for its lock, for replacing it and for telling two names of
// one file apart. `path` itself when it cannot be resolved.
std::string resolved_path(const std::string& path);

// Whether the mode of `path` gives nobody write permission (chmod a-w): a
// file or directory made read-only on purpose, which root may write all the
// same. False when `path` cannot be read.
bool nobody_may_write(const std::string& path);

// Whether this process may write the file at `path`: access(2) allows it and
// the file's mode gives someone write permission. root may write any file,
// but a file nobody may write (chmod a-w) was made read-only on purpose.
// `error` gets why not.
bool may_write(const std::string& path, std::string* error = nullptr);

// An output file (a report, a JUnit file, a samples file) written whole or
// not at all. The bytes go to a new file beside the one `path` names
// (".NAME.PID-N.tmp"), which commit() renames over it: a reader (a CI job
// uploading artifacts, a browser) finds the old file or the new one, never
// half of one; two processes writing one path each leave a whole file; a
// failure leaves the old file as it was and removes the new one. A symbolic
// link stays one (the file it names is replaced) and an existing file's
// permissions are kept. Where no new file can be made beside it (a directory
// that is not writable, holding a writable file) the file is written in
// place, as before. What is not a regular file is written as it is and never
// replaced: a device or FIFO in place, and a stream named by its descriptor
// (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N) through that
// descriptor, after what the process wrote to it.
// "cannot write PATH: REASON" (ErrorKind::io), saying what to do when the
// disk, a quota or the file-size limit is full.
Error write_error(const std::string& path, int err);

class ReplacingFile {
public:
    // Errors are ErrorKind::io, "cannot write PATH: REASON".
    static Result<ReplacingFile> create(const std::string& path);
    ReplacingFile(ReplacingFile&& other) noexcept;
    ReplacingFile& operator=(ReplacingFile&&) = delete;
    ReplacingFile(const ReplacingFile&) = delete;
    ReplacingFile& operator=(const ReplacingFile&) = delete;
    ~ReplacingFile(); // an uncommitted file's new bytes are removed

    std::FILE* stream() const { return m_file; }
    // Whether all of `bytes` went to the stream.
    bool write(std::string_view bytes);
    // Flush and close the new file, leaving the old one in place: what a
    // full disk refuses is refused here, so several files can each be
    // closed before any replaces its old one (commit).
    Result<void> close();
    // Close (if not yet) and put the new file in the old one's place.
    Result<void> commit();

private:
    ReplacingFile() = default;
    std::string m_path;   // as the caller named it, for messages
    std::string m_target; // the file replaced (links followed)
    std::string m_tmp;    // the new file; empty when writing in place
    std::FILE* m_file = nullptr;
    bool m_closed = false;
    bool m_committed = false;
};

} // namespace diffeval::util
