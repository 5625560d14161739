// Whole-file reads; see file.hpp.
#include <harness/util/file.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace diffeval::util {

namespace {

// A descriptor open on `path`, closed when it goes.
class ReadFd {
public:
    explicit ReadFd(const std::filesystem::path& path);
    ~ReadFd() {
        if (m_fd >= 0) {
            ::close(m_fd);
        }
    }
    ReadFd(const ReadFd&) = delete;
    ReadFd& operator=(const ReadFd&) = delete;
    int get() const { return m_fd; }
    explicit operator bool() const { return m_fd >= 0; }

private:
    int m_fd = -1;
};

ReadFd::ReadFd(const std::filesystem::path& path) {
    // Without waiting: a FIFO no process writes to held open(2) until one
    // did, forever for a mistyped `mkfifo` name (SIGINT's handler ran and the
    // open went on waiting). Once open, reads wait again, so a pipe with a
    // writer (`<(cat file)`) streams as before; one without reads as empty.
    m_fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (m_fd < 0) {
        return;
    }
    const int flags = ::fcntl(m_fd, F_GETFL);
    if (flags < 0 || ::fcntl(m_fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        const int err = errno;
        ::close(m_fd);
        m_fd = -1;
        errno = err;
    }
}

// Up to `size` bytes of `fd` into `out`: how many, 0 at the end, -1 on an
// error (errno says which).
ssize_t read_some(int fd, char* out, size_t size) {
    for (;;) {
        const auto got = ::read(fd, out, size);
        if (got >= 0 || errno != EINTR) {
            return got;
        }
    }
}

// The size of the regular file `fd` is open on; nullopt for anything else
// (a pipe, a device), whose size says nothing of what it holds.
std::optional<uint64_t> regular_size(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        return std::nullopt;
    }
    return static_cast<uint64_t>(st.st_size);
}

// read_file's loop, stopping once more than `max_bytes` are read (nullopt
// then, with `too_big` set), or, with `enough`, once it says the bytes read
// so far suffice (the first read is then 64 KiB, so a start is all that is
// touched).
std::optional<std::string> read_at_most(const std::filesystem::path& path, size_t max_bytes,
                                        bool* too_big, const ReadEnough* enough = nullptr);

} // namespace

std::optional<std::string> read_file(const std::filesystem::path& path) {
    return read_at_most(path, std::numeric_limits<size_t>::max(), nullptr);
}

Result<std::string> read_input(const std::filesystem::path& path, size_t max_bytes,
                               const ReadEnough& enough) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        return make_error(ErrorKind::usage, fmt::format("{}: it is a directory", path.string()));
    }
    errno = 0;
    bool too_big = false;
    auto text = read_at_most(path, max_bytes, &too_big, enough ? &enough : nullptr);
    if (too_big) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: it holds more than {} MiB, more than any file of this "
                                      "kind diffeval reads",
                                      path.string(), max_bytes >> 20));
    }
    if (!text) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: {}", path.string(),
                                      errno != 0 ? std::strerror(errno) : "cannot be read"));
    }
    return std::move(*text);
}

namespace {

std::optional<std::string> read_at_most(const std::filesystem::path& path, size_t max_bytes,
                                        bool* too_big, const ReadEnough* enough) {
    const ReadFd fd(path);
    if (!fd) {
        return std::nullopt;
    }
    // Read in large blocks into a string grown geometrically: a stream
    // buffer copied into an ostringstream cost 5 ms for the 4 MB train file.
    // The size is not trusted (a pipe or /proc file reports 0 or less than
    // it holds): reading goes on until the end, or one byte past the bound.
    std::string text;
    // The size a regular file reports is room to reserve, so the string is
    // not regrown (and its fresh pages touched again) block by block.
    if (const auto size = regular_size(fd.get()); size && *size > max_bytes) {
        if (too_big) {
            *too_big = true;
        }
        return std::nullopt;
    } else if (size && *size < (uint64_t{1} << 32) && !enough) {
        text.reserve(static_cast<size_t>(*size) + 1);
    }
    const size_t limit = max_bytes < std::numeric_limits<size_t>::max() ? max_bytes + 1 : max_bytes;
    constexpr size_t k_block = 1 << 20;
    // With `enough`, a first small read (a few-shot file's first items are
    // a few KiB), then the same blocks as a whole read.
    size_t block = enough ? size_t{64} << 10 : k_block;
    size_t used = 0;
    for (;;) {
        // Within what is reserved while it lasts (its last byte is where the
        // end shows), then a block at a time.
        const size_t room = text.capacity() > used ? text.capacity() - used : 0;
        const size_t want = std::min(room > 0 ? std::min(room, block) : block, limit - used);
        block = k_block;
        text.resize(used + want);
        const auto got = read_some(fd.get(), text.data() + used, want);
        if (got < 0) {
            return std::nullopt;
        }
        used += static_cast<size_t>(got);
        if (used > max_bytes) {
            if (too_big) {
                *too_big = true;
            }
            return std::nullopt;
        }
        if (got == 0 || (enough && (*enough)(std::string_view(text.data(), used)))) {
            break;
        }
    }
    text.resize(used);
    return text;
}

} // namespace

Result<FileEnds> read_file_ends(const std::filesystem::path& path, size_t head, size_t tail,
                                uint64_t from) {
    auto cannot_read = [&] {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: {}", path.string(),
                                      errno != 0 ? std::strerror(errno) : "cannot be read"));
    };
    errno = 0;
    const ReadFd fd(path);
    if (!fd) {
        return cannot_read();
    }
    constexpr size_t k_block = 1 << 20;
    std::string first;
    std::string last; // the bytes after `first`, trimmed to `tail` from time to time
    uint64_t after_first = 0;
    std::vector<char> block(k_block);
    // A regular file longer than what is kept: past its start, straight to
    // its end. Anything else (a pipe, a device) is read through, up to a
    // bound: /dev/zero never ends.
    const auto size = regular_size(fd.get());
    if (from > 0) {
        if (!size) {
            errno = 0;
            return cannot_read();
        }
        if (from >= *size) {
            return FileEnds{}; // nothing written since
        }
        if (::lseek(fd.get(), static_cast<off_t>(from), SEEK_SET) < 0) {
            return cannot_read();
        }
    }
    const bool seek = size && *size - from > static_cast<uint64_t>(head) + tail;
    uint64_t streamed = 0;
    for (;;) {
        if (seek && first.size() == head && after_first == 0) {
            if (::lseek(fd.get(), static_cast<off_t>(*size - tail), SEEK_SET) < 0) {
                return cannot_read();
            }
            after_first = *size - from - tail - head;
        }
        // The start is read to its exact length, so the seek below comes
        // right after it.
        const size_t want = first.size() < head ? std::min(k_block, head - first.size()) : k_block;
        const auto read = read_some(fd.get(), block.data(), want);
        if (read < 0) {
            return cannot_read();
        }
        if (read == 0) {
            break;
        }
        const auto got = static_cast<size_t>(read);
        streamed += got;
        if (!size && streamed > k_max_data_bytes) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: it is no regular file and streams more than {} "
                                          "MiB; save it to a file and give that",
                                          path.string(), k_max_data_bytes >> 20));
        }
        size_t used = 0;
        if (first.size() < head) {
            used = std::min(got, head - first.size());
            first.append(block.data(), used);
        }
        last.append(block.data() + used, got - used);
        after_first += got - used;
        if (last.size() > 2 * tail + k_block) {
            last.erase(0, last.size() - tail);
        }
    }
    FileEnds ends;
    if (after_first <= tail) {
        ends.text = std::move(first) + last;
        return ends;
    }
    if (last.size() > tail) {
        last.erase(0, last.size() - tail);
    }
    // Whole lines only: the start up to its last line break, the end from
    // past its first (the byte before `last` began no line when it is cut).
    const auto head_end = first.rfind('\n');
    first.resize(head_end == std::string::npos ? 0 : head_end + 1);
    const auto tail_start = last.find('\n');
    last.erase(0, tail_start == std::string::npos ? last.size() : tail_start + 1);
    ends.left_out = static_cast<uint64_t>(head) + after_first - first.size() - last.size();
    ends.text = std::move(first);
    ends.text += fmt::format("[diffeval: {} bytes of this file left out here: {}]\n", ends.left_out,
                             path.string());
    ends.text += last;
    return ends;
}

bool nobody_may_write(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto perms = fs::status(path, ec).permissions();
    return !ec && (perms & (fs::perms::owner_write | fs::perms::group_write |
                            fs::perms::others_write)) == fs::perms::none;
}

bool may_write(const std::string& path, std::string* error) {
    if (access(path.c_str(), W_OK) != 0) {
        if (error) {
            *error = std::strerror(errno);
        }
        return false;
    }
    if (nobody_may_write(path)) {
        if (error) {
            *error = "it is read-only (no write permission for anyone)";
        }
        return false;
    }
    return true;
}

std::string resolved_path(const std::string& path) {
    // Absolute first: a relative path none of whose parts exists resolved
    // to itself, so "r.sqlite" and "./r.sqlite-wal" were not named alike.
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(path, ec);
    if (ec) {
        return path;
    }
    // A link to nowhere names the file a write through it creates (open
    // with O_CREAT follows it), which weakly_canonical leaves unresolved: a
    // report.md linking to the database's -wal, made only once the database
    // was opened, passed the check and was written into the log.
    std::filesystem::path at = absolute;
    for (int hops = 0; hops < 40; ++hops) {
        const auto st = std::filesystem::symlink_status(at, ec);
        if (ec || !std::filesystem::is_symlink(st) || std::filesystem::exists(at, ec)) {
            break;
        }
        const auto target = std::filesystem::read_symlink(at, ec);
        if (ec) {
            break;
        }
        at = target.is_absolute() ? target : at.parent_path() / target;
    }
    ec.clear();
    auto resolved = std::filesystem::weakly_canonical(at, ec);
    return ec || resolved.empty() ? path : resolved.string();
}

Error write_error(const std::string& path, int err) {
    // A full disk (or quota, or file-size limit) says what to do.
    const bool full = err == ENOSPC || err == EDQUOT || err == EFBIG;
    return make_error(ErrorKind::io,
                      fmt::format("cannot write {}: {}{}", path, std::strerror(err),
                                  full ? "; free space, then run the same command again" : ""));
}

namespace {

// The descriptor a path names by number: /dev/stdout, /dev/stderr,
// /dev/fd/N and /proc/self/fd/N (a CI step's `--json /dev/stdout`).
std::optional<int> descriptor_named(std::string_view path) {
    if (path == "/dev/stdout") {
        return 1;
    }
    if (path == "/dev/stderr") {
        return 2;
    }
    for (std::string_view dir : {"/dev/fd/", "/proc/self/fd/"}) {
        if (!path.starts_with(dir)) {
            continue;
        }
        const auto digits = path.substr(dir.size());
        int n = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
        if (ec == std::errc{} && end == digits.data() + digits.size() && !digits.empty()) {
            return n;
        }
    }
    return std::nullopt;
}

} // namespace

Result<ReplacingFile> ReplacingFile::create(const std::string& path) {
    static std::atomic<unsigned> serial{0};
    ReplacingFile f;
    f.m_path = path;
    int fd = -1;
    int err = 0; // why the new file beside the target could not be made
    struct stat named {};
    if (const auto n = descriptor_named(path)) {
        // A stream or a device is written as it is, never replaced: renaming
        // a file over /dev/stdout or /dev/full (which root may) replaced the
        // device node with a regular file for every later process. A stream
        // named by number is written through that descriptor, after what the
        // process wrote to it before (not opened again: that would start at
        // its first byte).
        fd = ::fcntl(*n, F_DUPFD_CLOEXEC, 3);
    } else if (::stat(path.c_str(), &named) == 0 && !S_ISREG(named.st_mode) &&
               !S_ISDIR(named.st_mode)) {
        fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    } else {
        f.m_target = resolved_path(path);
        const std::filesystem::path target(f.m_target);
        struct stat old {};
        const bool existed = ::stat(f.m_target.c_str(), &old) == 0;
        if (existed && S_ISDIR(old.st_mode)) {
            return write_error(path, EISDIR);
        }
        f.m_tmp = (target.parent_path() /
                   fmt::format(".{}.{}-{}.tmp", target.filename().string(), ::getpid(), serial++))
                      .string();
        fd = ::open(f.m_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        err = errno;
        if (fd < 0 && existed && (err == EACCES || err == EROFS || err == EPERM)) {
            // No new file beside it: write this one in place.
            f.m_tmp.clear();
            fd = ::open(f.m_target.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
        }
        if (fd >= 0 && existed && !f.m_tmp.empty()) {
            (void)::fchmod(fd, old.st_mode & 07777);
        }
    }
    if (fd < 0) {
        return write_error(path, f.m_tmp.empty() ? errno : err);
    }
    f.m_file = ::fdopen(fd, "wb"); // "ab" would set O_APPEND on a shared stream
    if (!f.m_file) {
        const int e = errno;
        ::close(fd);
        if (!f.m_tmp.empty()) {
            ::unlink(f.m_tmp.c_str());
        }
        return write_error(path, e);
    }
    return f;
}

ReplacingFile::ReplacingFile(ReplacingFile&& other) noexcept
    : m_path(std::move(other.m_path)), m_target(std::move(other.m_target)),
      m_tmp(std::move(other.m_tmp)), m_file(other.m_file), m_closed(other.m_closed),
      m_committed(other.m_committed) {
    other.m_file = nullptr;
    other.m_tmp.clear();
    other.m_committed = true;
}

ReplacingFile::~ReplacingFile() {
    if (m_file) {
        std::fclose(m_file);
    }
    if (!m_committed && !m_tmp.empty()) {
        ::unlink(m_tmp.c_str());
    }
}

bool ReplacingFile::write(std::string_view bytes) {
    return m_file && std::fwrite(bytes.data(), 1, bytes.size(), m_file) == bytes.size();
}

Result<void> ReplacingFile::close() {
    if (m_closed) {
        return {};
    }
    if (!m_file) {
        return write_error(m_path, EBADF);
    }
    const bool flushed = std::fflush(m_file) == 0 && !std::ferror(m_file);
    const int err = errno;
    const bool closed = std::fclose(m_file) == 0;
    m_file = nullptr;
    if (!flushed || !closed) {
        return write_error(m_path, flushed ? errno : err);
    }
    m_closed = true;
    return {};
}

Result<void> ReplacingFile::commit() {
    if (auto r = close(); !r) {
        return r;
    }
    if (!m_tmp.empty() && ::rename(m_tmp.c_str(), m_target.c_str()) != 0) {
        const int err = errno;
        ::unlink(m_tmp.c_str());
        m_tmp.clear();
        return write_error(m_path, err);
    }
    m_committed = true;
    return {};
}

} // namespace diffeval::util
