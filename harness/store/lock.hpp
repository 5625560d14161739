// One run per database at a time. Two runs writing one file would each send
// and store every request; the second is refused (or waits) instead.
//
// The lock is flock() on "<db>.lock" beside the database: the kernel releases
// it when its process ends, however it ends, so a crashed or SIGKILLed run
// leaves no stale lock. The file holds the holder's PID and start time for
// the message the next run prints; its mere presence means nothing. Its
// holder may remove it (an import that created its database and failed):
// a lock taken on a file no longer under that name is let go and the file
// named then is locked instead. A lock let go while its database does not
// exist (a command that failed before creating it) removes its file: a
// mistyped --server left "new.sqlite.lock" and nothing else. So does a lock
// that made its file and whose database was not written meanwhile (a file
// refused as another program's, or not SQLite).
//
// The database file itself is flock()ed too, once it exists: a file with a
// second name (a hard link made later, a bind mount such as docker's
// `-v FILE:FILE`) has a lock file per name, and a lock file removed while
// its run goes on (`rm -f *.lock` in a CI step) lets the next command make
// another; both let two runs send and store every request. The lock on the
// file is one whatever the name. Its descriptor is closed when the lock is
// let go, which drops every POSIX lock this process holds on the file, the
// SQLite connection's among them: let the lock go after closing the store.
#pragma once

#include <harness/util/result.hpp>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace diffeval::store {

class RunLock {
public:
    enum class Wait { no, yes };

    // Take the lock of the database at `db_path` for diffeval's `command`
    // ("run", "merge", ...), once check_db_file finds `db_path` can be a
    // database to write (its error otherwise). Held by another process: a
    // usage error naming its command, PID and start time, or with Wait::yes
    // poll until it is free or `stop` is set (then an error saying so).
    // `advice` ends the message when it is held.
    static util::Result<RunLock>
    acquire(const std::string& db_path, std::string_view command, Wait wait,
            const std::atomic<bool>* stop,
            std::string_view advice = "wait for it to finish or pass --wait-lock");

    RunLock(RunLock&& other) noexcept;
    RunLock& operator=(RunLock&& other) noexcept;
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;
    ~RunLock();

    // Lock the database file itself, when acquire found none to lock (a
    // command that created it since): an error (usage) when another
    // process holds it, as acquire's with Wait::no.
    util::Result<void> hold_database_file(const std::string& db_path);

    // "<db>.lock" for the database at `db_path`.
    static std::string path_for(const std::string& db_path);

    // Who holds the lock of the database at `db_path` now, in a message's
    // words ("diffeval run (pid 1234, started ...)"); nullopt when nobody
    // does, or no lock file is there. A command that reads the database
    // says it is still being written. The test takes a shared lock for a
    // moment, which acquire with Wait::no waits out.
    static std::optional<std::string> holder(const std::string& db_path);

    // A file's identity and last change, to tell whether the database was
    // written while the lock was held.
    struct FileState {
        uint64_t dev = 0;
        uint64_t ino = 0;
        int64_t size = 0;
        int64_t mtime_s = 0;
        int64_t mtime_ns = 0;
        bool operator==(const FileState&) const = default;
    };

private:
    static constexpr std::string_view k_suffix = ".lock"; // path_for's
    // The database the lock file at `lock_path` locks (path_for's inverse).
    static std::string database_of(const std::string& lock_path);
    void release();
    // flock the database file (when there is one) into m_db_fd; Wait::yes
    // polls until it is free or `stop` is set.
    util::Result<void> lock_database_file(const std::string& db_path, Wait wait,
                                          const std::atomic<bool>* stop);
    RunLock(int fd, std::string path) : m_fd(fd), m_path(std::move(path)) {}
    int m_fd = -1;
    int m_db_fd = -1;                      // the database file's, flock()ed; -1 while it has none
    std::string m_path;                    // the lock file's
    bool m_created = false;                // this lock made the file
    bool m_held = false;                   // locked, and in holder()'s list
    std::optional<FileState> m_db_at_lock; // the database when locked
};

} // namespace diffeval::store
