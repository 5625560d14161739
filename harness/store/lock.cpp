// The run lock; see lock.hpp.
#include <harness/store/lock.hpp>
#include <harness/store/merge.hpp>

#include <harness/store/store.hpp>
#include <harness/util/file.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace diffeval::store {

using util::ErrorKind;
using util::make_error;

namespace {

// Who holds the lock, as the holder wrote it ("" when unreadable).
std::string holder_of(int fd) {
    char buf[256] = {};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
        text.pop_back();
    }
    return text;
}

// Who holds the lock, for a message: "diffeval merge (pid 1234, started
// ...)" from what this diffeval writes ("pid 1234, started ..., diffeval
// merge"); what an older one wrote ("pid 1234, started ...") was a run's or
// a merge's.
std::string holder_words(const std::string& text) {
    const auto at = text.rfind(", diffeval ");
    if (at != std::string::npos) {
        return fmt::format("{} ({})", text.substr(at + 2), text.substr(0, at));
    }
    return fmt::format("another diffeval process ({})",
                       text.empty() ? std::string("which did not say who it is") : text);
}

} // namespace

std::string RunLock::path_for(const std::string& db_path) {
    // One lock per file, however it is named: a symbolic link to the
    // database (or to its directory) locks the file it points to.
    return util::resolved_path(db_path) + std::string(k_suffix);
}

namespace {

// The lock files this process holds: its own lock is no other writer's.
std::mutex g_held_mutex;
std::set<std::string> g_held;

} // namespace

std::optional<std::string> RunLock::holder(const std::string& db_path) {
    const auto path = path_for(db_path);
    {
        std::lock_guard lock(g_held_mutex);
        if (g_held.count(path) > 0) {
            return std::nullopt;
        }
    }
    // Never through a link, and never a FIFO's open that waits for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        return std::nullopt;
    }
    std::optional<std::string> who;
    if (struct stat st{}; fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
            (void)flock(fd, LOCK_UN);
        } else if (errno == EWOULDBLOCK) {
            who = holder_words(holder_of(fd));
        }
    }
    ::close(fd);
    return who;
}

std::string RunLock::database_of(const std::string& lock_path) {
    return lock_path.substr(0, lock_path.size() - k_suffix.size());
}

namespace {

// What tells a file's content changed: device, inode, size, modification
// time; nullopt when nothing is at `path`.
std::optional<RunLock::FileState> file_state(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        return std::nullopt;
    }
    return RunLock::FileState{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec,
                              st.st_mtim.tv_nsec};
}

// Whether `fd` is still the file `path` names: a holder may remove the lock
// file it created (an import that created its database and failed leaves
// nothing behind), and a lock taken on the removed file locks nothing
// another process can see.
bool still_named(int fd, const std::string& path) {
    struct stat held {};
    struct stat named {};
    return fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
           held.st_ino == named.st_ino && held.st_dev == named.st_dev;
}

} // namespace

util::Result<RunLock> RunLock::acquire(const std::string& db_path, std::string_view command,
                                       Wait wait, const std::atomic<bool>* stop,
                                       std::string_view advice) {
    // What can be no database is said before the lock's file is made
    // beside it (a pipe, a directory, another database's -wal file).
    if (auto r = check_db_file(db_path, Store::Mode::read_write); !r) {
        return r.error();
    }
    // Beside a database written go files named after it, the longest
    // `-journal` (and merge's `.merge-tmp-journal`): a name within the file
    // system's bound but too long for them made SQLite call a new database
    // "not a diffeval database", leaving an empty file and its lock (a
    // user-side audit).
    {
        const std::string longest = command == "merge"
                                        ? std::string(k_merge_tmp_suffix) + "-journal"
                                        : std::string("-journal");
        const std::filesystem::path file(db_path);
        const auto name = file.filename().string();
        const auto dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
        const long most = ::pathconf(dir.c_str(), _PC_NAME_MAX);
        const size_t bound = most > 0 ? static_cast<size_t>(most) : 255;
        if (name.size() + longest.size() > bound) {
            return make_error(ErrorKind::usage,
                              fmt::format("the file name of {} is {} bytes: the files kept beside "
                                          "it add up to {} more ({}), past the {} a name may hold "
                                          "there; give a name of at most {} bytes",
                                          db_path, name.size(), longest.size(), longest, bound,
                                          bound - longest.size()));
        }
    }
    // `merge X` removes X.merge-tmp first, without asking who writes it: a
    // database of that name was lost to the next merge of X.
    if (db_path.size() > k_merge_tmp_suffix.size() && db_path.ends_with(k_merge_tmp_suffix)) {
        return make_error(
            ErrorKind::usage,
            fmt::format("{} is the name 'diffeval merge {}' builds its result in, "
                        "and removes first; give the database another name",
                        db_path, db_path.substr(0, db_path.size() - k_merge_tmp_suffix.size())));
    }
    const auto path = path_for(db_path);
    bool told = false;
    // A reader's test (holder) holds a shared lock for microseconds: a lock
    // refused only that long is not held by another writer.
    constexpr auto k_grace = std::chrono::milliseconds(20);
    const auto refused_after = std::chrono::steady_clock::now() + k_grace;
    for (;;) {
        // Never through a link: the lock is truncated and written, and a
        // planted r.sqlite.lock -> /etc/passwd (or -> r.sqlite) was.
        constexpr int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
        int fd = ::open(path.c_str(), flags | O_CREAT | O_EXCL, 0644);
        const bool created = fd >= 0;
        if (fd < 0 && errno == EEXIST) {
            fd = ::open(path.c_str(), flags);
            if (fd < 0 && errno == ENOENT) {
                continue; // its holder removed it meanwhile
            }
        }
        if (fd < 0 && errno == ELOOP) {
            return make_error(ErrorKind::usage,
                              fmt::format("the lock file {} is a symbolic link, which diffeval "
                                          "never writes through; remove it (diffeval makes the "
                                          "lock file itself) and run again",
                                          path));
        }
        if (fd < 0) {
            return make_error(ErrorKind::usage,
                              fmt::format("cannot create the lock file {}: {}; put the database "
                                          "{} in a directory that exists and you can write",
                                          path, std::strerror(errno), db_path));
        }
        RunLock lock(fd, path);
        if (struct stat st{}; fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
            return make_error(ErrorKind::usage,
                              fmt::format("the lock file {} is not a file of its own (another "
                                          "kind of file, or another name of one); remove it "
                                          "(diffeval makes the lock file itself) and run again",
                                          path));
        }
        while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            if (errno != EWOULDBLOCK && errno != EINTR) {
                return make_error(ErrorKind::io,
                                  fmt::format("cannot lock {}: {}", path, std::strerror(errno)));
            }
            if (wait == Wait::no && std::chrono::steady_clock::now() < refused_after) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                continue;
            }
            const auto holder = holder_words(holder_of(fd));
            if (wait == Wait::no) {
                return make_error(ErrorKind::usage,
                                  fmt::format("{} is in use by {}; {}", db_path, holder, advice));
            }
            if (!told) {
                fmt::print(stderr, "diffeval: waiting for {}, which writes {}\n", holder, db_path);
                told = true;
            }
            if (stop && stop->load()) {
                return make_error(ErrorKind::usage,
                                  fmt::format("interrupted while waiting for {}", db_path));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (!still_named(fd, path)) {
            continue; // its holder removed it meanwhile: lock the file named now
        }
        lock.m_created = created;
        {
            std::lock_guard held(g_held_mutex);
            g_held.insert(path);
            lock.m_held = true;
        }
        if (auto r = lock.lock_database_file(db_path, wait, stop); !r) {
            return r.error();
        }
        lock.m_db_at_lock = file_state(database_of(path));
        const auto me =
            fmt::format("pid {}, started {}, diffeval {}\n", getpid(), now_iso8601(), command);
        if (ftruncate(fd, 0) != 0 ||
            pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
            // Only the message of a later run would lack the PID; the lock holds.
        }
        return lock;
    }
}

util::Result<void> RunLock::lock_database_file(const std::string& db_path, Wait wait,
                                               const std::atomic<bool>* stop) {
    if (m_db_fd >= 0) {
        return {};
    }
    // check_db_file found a regular file or nothing here; never a FIFO's
    // open that waits for a writer.
    const int fd = ::open(database_of(m_path).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return {}; // no database yet: hold_database_file once there is
    }
    bool told = false;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) {
            continue;
        }
        if (errno != EWOULDBLOCK) {
            ::close(fd); // a file system without flock: the lock file stands alone
            return {};
        }
        constexpr std::string_view who =
            "another diffeval process, which reached the file through another name (a hard "
            "link, or a bind mount such as docker's -v FILE:FILE) or whose lock file was "
            "removed while it ran";
        if (wait == Wait::no || (stop && stop->load())) {
            ::close(fd);
            return make_error(
                ErrorKind::usage,
                wait == Wait::no
                    ? fmt::format("{} is in use by {}; wait for it to finish", db_path, who)
                    : fmt::format("interrupted while waiting for {}", db_path));
        }
        if (!told) {
            fmt::print(stderr, "diffeval: waiting for {}, which writes {}\n", who, db_path);
            told = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    m_db_fd = fd;
    return {};
}

util::Result<void> RunLock::hold_database_file(const std::string& db_path) {
    return lock_database_file(db_path, Wait::no, nullptr);
}

RunLock::RunLock(RunLock&& other) noexcept
    : m_fd(std::exchange(other.m_fd, -1)), m_db_fd(std::exchange(other.m_db_fd, -1)),
      m_path(std::move(other.m_path)), m_created(other.m_created),
      m_held(std::exchange(other.m_held, false)), m_db_at_lock(other.m_db_at_lock) {}

RunLock& RunLock::operator=(RunLock&& other) noexcept {
    if (this != &other) {
        release();
        m_fd = std::exchange(other.m_fd, -1);
        m_db_fd = std::exchange(other.m_db_fd, -1);
        m_path = std::move(other.m_path);
        m_created = other.m_created;
        m_held = std::exchange(other.m_held, false);
        m_db_at_lock = other.m_db_at_lock;
    }
    return *this;
}

RunLock::~RunLock() {
    release();
}

void RunLock::release() {
    if (m_fd < 0) {
        return;
    }
    // Removed while still held, and only if it is still the file named: a
    // process waiting on it then finds it gone and locks the file named
    // next (still_named). Kept beside a database only once written: one
    // refused as another program's, or left as it was, keeps no lock file
    // this lock made. Only a lock that was taken: a command refused the
    // lock would otherwise remove the file its holder locks while that
    // holder has not created the database yet (a merge builds OUT beside
    // it), and the next command would lock a new file and write beside it.
    const auto now = file_state(database_of(m_path));
    const bool untouched = m_created && now && m_db_at_lock == now;
    if (m_held && (!now || untouched) && still_named(m_fd, m_path)) {
        ::unlink(m_path.c_str());
    }
    // The database file's lock first: a command that takes the lock file
    // the moment it is free then finds the file free too, not held by
    // "another process through another name".
    if (m_db_fd >= 0) {
        ::close(m_db_fd);
        m_db_fd = -1;
    }
    ::close(m_fd); // releases the flock
    m_fd = -1;
    if (std::exchange(m_held, false)) {
        std::lock_guard held(g_held_mutex);
        g_held.erase(m_path);
    }
}

} // namespace diffeval::store
