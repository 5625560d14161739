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
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace diffeval::util {

namespace {

// read_file's loop, stopping once more than `max_bytes` are read (nullopt
// then, with `too_big` set).
std::optional<std::string> read_at_most(const std::filesystem::path& path, size_t max_bytes,
                                        bool* too_big);

} // namespace

std::optional<std::string> read_file(const std::filesystem::path& path) {
    return read_at_most(path, std::numeric_limits<size_t>::max(), nullptr);
}

Result<std::string> read_input(const std::filesystem::path& path, size_t max_bytes) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        return make_error(ErrorKind::usage, fmt::format("{}: it is a directory", path.string()));
    }
    errno = 0;
    bool too_big = false;
    auto text = read_at_most(path, max_bytes, &too_big);
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
                                        bool* too_big) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    // Read in large blocks into a string grown geometrically: a stream
    // buffer copied into an ostringstream cost 5 ms for the 4 MB train file.
    // The size is not trusted (a pipe or /proc file reports 0 or less than
    // it holds): reading goes on until the end.
    std::string text;
    // The size a regular file reports is room to reserve, so the string is
    // not regrown (and its fresh pages touched again) block by block.
    std::error_code ec;
    if (const auto size = std::filesystem::file_size(path, ec); !ec && size > max_bytes) {
        if (too_big) {
            *too_big = true;
        }
        return std::nullopt;
    } else if (!ec && size < (size_t{1} << 32)) {
        text.reserve(static_cast<size_t>(size) + 1);
    }
    constexpr size_t k_block = 1 << 20;
    size_t used = 0;
    for (;;) {
        // Within what is reserved while it lasts (its last byte is where the
        // end shows), then a block at a time.
        const size_t room = text.capacity() > used ? text.capacity() - used : 0;
        const size_t want = room > 0 ? std::min(room, k_block) : k_block;
        text.resize(used + want);
        in.read(text.data() + used, static_cast<std::streamsize>(want));
        used += static_cast<size_t>(in.gcount());
        if (used > max_bytes) {
            if (too_big) {
                *too_big = true;
            }
            return std::nullopt;
        }
        if (!in) {
            break;
        }
    }
    if (in.bad()) {
        return std::nullopt;
    }
    text.resize(used);
    return text;
}

} // namespace

std::optional<FileEnds> read_file_ends(const std::filesystem::path& path, size_t head, size_t tail,
                                       uint64_t from) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    constexpr size_t k_block = 1 << 20;
    std::string first;
    std::string last; // the bytes after `first`, trimmed to `tail` from time to time
    uint64_t after_first = 0;
    std::vector<char> block(k_block);
    // A regular file longer than what is kept: past its start, straight to
    // its end (a pipe, or a size that cannot be read, is read through).
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    const bool regular = !ec && std::filesystem::is_regular_file(path, ec) && !ec;
    if (from > 0) {
        if (!regular) {
            return std::nullopt;
        }
        if (from >= size) {
            return FileEnds{}; // nothing written since
        }
        in.seekg(static_cast<std::streamoff>(from));
        if (!in) {
            return std::nullopt;
        }
    }
    const bool seek = regular && size - from > static_cast<uint64_t>(head) + tail;
    for (;;) {
        if (seek && first.size() == head && after_first == 0) {
            in.seekg(static_cast<std::streamoff>(size - tail));
            if (!in) {
                return std::nullopt;
            }
            after_first = size - from - tail - head;
        }
        // The start is read to its exact length, so the seek below comes
        // right after it.
        const size_t want = first.size() < head ? std::min(k_block, head - first.size()) : k_block;
        in.read(block.data(), static_cast<std::streamsize>(want));
        const auto got = static_cast<size_t>(in.gcount());
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
        if (!in) {
            break;
        }
    }
    if (in.bad()) {
        return std::nullopt;
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

bool may_write(const std::string& path, std::string* error) {
    if (access(path.c_str(), W_OK) != 0) {
        if (error) {
            *error = std::strerror(errno);
        }
        return false;
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto perms = fs::status(path, ec).permissions();
    if (!ec && (perms & (fs::perms::owner_write | fs::perms::group_write |
                         fs::perms::others_write)) == fs::perms::none) {
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
    auto resolved = std::filesystem::weakly_canonical(absolute, ec);
    return ec || resolved.empty() ? path : resolved.string();
}

namespace {

Error write_error(const std::string& path, int err) {
    return make_error(ErrorKind::io, fmt::format("cannot write {}: {}", path, std::strerror(err)));
}

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
      m_tmp(std::move(other.m_tmp)), m_file(other.m_file), m_committed(other.m_committed) {
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

Result<void> ReplacingFile::commit() {
    if (!m_file) {
        return write_error(m_path, EBADF);
    }
    const bool flushed = std::fflush(m_file) == 0 && !std::ferror(m_file);
    int err = errno;
    const bool closed = std::fclose(m_file) == 0;
    m_file = nullptr;
    if (!flushed || !closed) {
        return write_error(m_path, flushed ? errno : err);
    }
    if (!m_tmp.empty() && ::rename(m_tmp.c_str(), m_target.c_str()) != 0) {
        err = errno;
        ::unlink(m_tmp.c_str());
        m_tmp.clear();
        return write_error(m_path, err);
    }
    m_committed = true;
    return {};
}

} // namespace diffeval::util
