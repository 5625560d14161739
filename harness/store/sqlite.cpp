// RAII over sqlite3 handles and statements; see sqlite.hpp.
#include <harness/store/sqlite.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <filesystem>
#include <mutex>
#include <sys/resource.h>

namespace diffeval::store {

namespace {

// Whether the process may not write files past some size (RLIMIT_FSIZE).
bool file_size_limited() {
    rlimit limit{};
    return getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
}

// Whether the last error on `db` is a write the disk or the file-size limit
// refused. SQLite says SQLITE_FULL when a write stopped short or failed with
// ENOSPC; a write, truncation or growth of the shared-memory file that
// failed otherwise is an I/O error, whose system error SQLite keeps for the
// last (ENOSPC, EDQUOT, EFBIG) but not for the others: under a file-size
// limit, they are taken for it.
bool disk_full(sqlite3* db) {
    const int rc = sqlite3_errcode(db);
    if (rc == SQLITE_FULL) {
        return true;
    }
    if (rc != SQLITE_IOERR) {
        return false;
    }
    const int os = sqlite3_system_errno(db);
    if (os == ENOSPC || os == EDQUOT || os == EFBIG) {
        return true;
    }
    const int ext = sqlite3_extended_errcode(db);
    return (ext == SQLITE_IOERR_WRITE || ext == SQLITE_IOERR_TRUNCATE ||
            ext == SQLITE_IOERR_SHMSIZE) &&
           file_size_limited();
}

// diffeval's words for the last error on `db` when they are not SQLite's
// message: a full disk (k_disk_full), a damaged file (k_damaged); empty
// otherwise.
std::string_view own_words(sqlite3* db) {
    if (disk_full(db)) {
        return k_disk_full;
    }
    if ((sqlite3_errcode(db) & 0xff) == SQLITE_CORRUPT) {
        return k_damaged;
    }
    return {};
}

} // namespace

std::string error_message(sqlite3* db) {
    if (db == nullptr) {
        return "not open";
    }
    const auto own = own_words(db);
    return own.empty() ? std::string(sqlite3_errmsg(db)) : std::string(own);
}

bool is_disk_full(std::string_view message) {
    return message.find(k_disk_full) != std::string_view::npos;
}

bool is_damaged(std::string_view message) {
    return message.find(k_damaged) != std::string_view::npos;
}

bool has_moved(sqlite3* db) {
    int moved = 0;
    return db != nullptr &&
           sqlite3_file_control(db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK &&
           moved != 0;
}

bool is_moved(std::string_view message) {
    return message.find(k_moved) != std::string_view::npos;
}

Statement::Statement(sqlite3* db, std::string_view sql) : m_db(db) {
    if (sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                           &m_stmt, nullptr) != SQLITE_OK) {
        m_error = error_message(db);
        m_stmt = nullptr;
    }
}

Statement::~Statement() {
    sqlite3_finalize(m_stmt);
}

Statement::Statement(Statement&& other) noexcept
    : m_db(other.m_db), m_stmt(other.m_stmt), m_error(std::move(other.m_error)) {
    other.m_stmt = nullptr;
}

Statement& Statement::operator=(Statement&& other) noexcept {
    if (this != &other) {
        sqlite3_finalize(m_stmt);
        m_db = other.m_db;
        m_stmt = other.m_stmt;
        m_error = std::move(other.m_error);
        other.m_stmt = nullptr;
    }
    return *this;
}

void Statement::reset() {
    if (m_stmt) {
        sqlite3_reset(m_stmt);
        sqlite3_clear_bindings(m_stmt);
    }
    m_bind_mismatch = false;
}

bool Statement::step() {
    if (m_bind_mismatch) {
        m_error = "internal error: wrong number of SQL parameters bound";
        return false;
    }
    int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) {
        return true;
    }
    if (rc != SQLITE_DONE) {
        m_error = error_message(m_db);
    } else {
        m_error.clear();
    }
    return false;
}

bool Statement::run() {
    while (step()) {
    }
    bool ok = m_error.empty();
    sqlite3_reset(m_stmt);
    return ok;
}

std::string Statement::column_text(int col) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(m_stmt, col)))
             : std::string{};
}

Value Statement::column_value(int col) const {
    switch (sqlite3_column_type(m_stmt, col)) {
    case SQLITE_INTEGER:
        return column_int(col);
    case SQLITE_FLOAT:
        return column_double(col);
    case SQLITE_NULL:
        return std::monostate{};
    default:
        return column_text(col);
    }
}

void Statement::bind_one(int i, std::nullptr_t) {
    sqlite3_bind_null(m_stmt, i);
}
void Statement::bind_one(int i, int64_t v) {
    sqlite3_bind_int64(m_stmt, i, v);
}
void Statement::bind_one(int i, double v) {
    sqlite3_bind_double(m_stmt, i, v);
}
void Statement::bind_one(int i, std::string_view v) {
    sqlite3_bind_text(m_stmt, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}

util::StopReason Statement::column_stop_reason(int col) const {
    switch (column_type(col)) {
    case SQLITE_INTEGER:
        return column_int(col);
    case SQLITE_TEXT:
        return std::string(column_view(col));
    default:
        return std::monostate{};
    }
}

Database::~Database() {
    // SQLite does not copy a moved file's log into it on close, and leaves
    // the log under the old name, where the next connection to that name
    // would replay it into the file now there. Copied here, what was
    // written stays with the file it was written to (all of it, if that
    // was renamed), and the log left under the name is empty.
    if (has_moved(m_db)) {
        (void)sqlite3_wal_checkpoint_v2(m_db, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr,
                                        nullptr);
    }
    sqlite3_close_v2(m_db);
    if (!m_tidy.empty()) {
        tidy_side_files(m_tidy);
    }
}

namespace {

// SQLite's process-wide settings, made once before its first use (they can
// not change after). Memory statistics are off: nothing reads them, and
// keeping them takes a global mutex on every allocation SQLite makes, from
// every thread.
void configure_sqlite_once() {
    static std::once_flag once;
    std::call_once(once, [] { (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
}

} // namespace

util::Result<void> Database::open(const std::string& path, Create create) {
    configure_sqlite_once();
    int flags = (create == Create::read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
                SQLITE_OPEN_NOMUTEX;
    if (create == Create::yes) {
        flags |= SQLITE_OPEN_CREATE;
    }
    // SQLite takes "file:..." for a URI (Debian builds it so) and ":memory:"
    // for no file at all: a path is a path, so such a name is made plainly
    // relative. Data written to ":memory:" was lost, and "file:r.sqlite"
    // wrote r.sqlite under another name's lock.
    const bool special = path.starts_with("file:") || path == ":memory:";
    const std::string target = special ? "./" + path : path;
    std::error_code ec;
    const bool had_sides =
        create == Create::read_only && (std::filesystem::exists(target + "-wal", ec) ||
                                        std::filesystem::exists(target + "-shm", ec));
    if (auto r = open_as(target, flags, path); !r) {
        return r;
    }
    if (create == Create::read_only) {
        if (auto r = open_immutable_if_needed(path); !r) {
            return r;
        }
        // The side files its reads made (none when read as immutable) go
        // when it closes; ones that were there are left as they were.
        if (!had_sides && std::filesystem::exists(target + "-shm", ec)) {
            m_tidy = target;
        }
    }
    return {};
}

void Database::tidy_side_files(const std::string& target) {
    // A read-only connection leaves the -wal and -shm files its reads
    // made: only a writer removes them, as the last connection closes. One
    // that opens and closes again removes them when nothing else has the
    // file open (SQLite takes the file's exclusive lock to), and writes
    // nothing when the log is empty: a log that is not (a run began
    // writing meanwhile) is left to its writer. A file this user may not
    // write opens read-only, and keeps them.
    std::error_code ec;
    const auto wal = target + "-wal";
    if (!std::filesystem::exists(wal, ec) || std::filesystem::file_size(wal, ec) != 0 || ec) {
        return;
    }
    sqlite3* writer = nullptr;
    if (sqlite3_open_v2(target.c_str(), &writer, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                        nullptr) == SQLITE_OK &&
        sqlite3_db_readonly(writer, "main") == 0) {
        (void)sqlite3_exec(writer, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
    }
    sqlite3_close_v2(writer);
}

util::Result<void> Database::open_as(const std::string& target, int flags,
                                     const std::string& path) {
    if (sqlite3_open_v2(target.c_str(), &m_db, flags, nullptr) != SQLITE_OK) {
        std::string msg = m_db ? sqlite3_errmsg(m_db) : "out of memory";
        sqlite3_close_v2(m_db);
        m_db = nullptr;
        return util::make_error(util::ErrorKind::io,
                                fmt::format("cannot open database {}: {}", path, msg));
    }
    sqlite3_busy_timeout(m_db, 10000);
    return {};
}

util::Result<void> Database::open_immutable_if_needed(const std::string& path) {
    // A WAL database is read through its -shm file; a reader that can
    // neither open nor create it (file and directory read-only) gets
    // SQLITE_READONLY on its first read. Nobody can write such a file, so
    // it is opened as immutable instead, which needs no -shm.
    const int rc =
        sqlite3_exec(m_db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
    if ((rc & 0xff) != SQLITE_READONLY && (rc & 0xff) != SQLITE_CANTOPEN) {
        return {};
    }
    sqlite3_close_v2(m_db);
    m_db = nullptr;
    return open_as(file_uri(path, "immutable=1"),
                   SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, path);
}

std::string sql_quote(std::string_view s) {
    std::string out = "'";
    for (char c : s) {
        out += c == '\'' ? std::string("''") : std::string(1, c);
    }
    return out + "'";
}

std::string file_uri(const std::string& path, std::string_view query) {
    // "file:./:memory:" is the file of that name; "file::memory:" none.
    std::string uri = path.starts_with('/') ? "file:" : "file:./";
    for (unsigned char c : path) {
        if (c == '?' || c == '#' || c == '%' || c < 0x20) {
            uri += fmt::format("%{:02X}", c);
        } else {
            uri += static_cast<char>(c);
        }
    }
    return uri + "?" + std::string(query);
}

util::Result<void> Database::attach_read_only(const std::string& path, std::string_view schema) {
    const auto attach = [&](std::string_view query) {
        return exec(fmt::format("ATTACH {} AS {}", sql_quote(file_uri(path, query)), schema));
    };
    // As open_immutable_if_needed: the attach, or the first read, shows
    // whether the -shm file could be opened or made.
    const auto unwritable = [](int rc) {
        return (rc & 0xff) == SQLITE_READONLY || (rc & 0xff) == SQLITE_CANTOPEN;
    };
    if (auto r = attach("mode=ro"); !r) {
        if (!unwritable(sqlite3_extended_errcode(m_db))) {
            return r;
        }
        return attach("immutable=1");
    }
    const int rc =
        sqlite3_exec(m_db, fmt::format("SELECT count(*) FROM {}.sqlite_master", schema).c_str(),
                     nullptr, nullptr, nullptr);
    if (!unwritable(rc)) {
        return {};
    }
    if (auto r = exec(fmt::format("DETACH {}", schema)); !r) {
        return r;
    }
    return attach("immutable=1");
}

util::Result<void> Database::exec(std::string_view sql) {
    char* err = nullptr;
    if (sqlite3_exec(m_db, std::string(sql).c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        // sqlite3_exec's message, unless diffeval has its own words for it.
        std::string msg = error_message(m_db);
        if (own_words(m_db).empty() && err != nullptr) {
            msg = err;
        }
        sqlite3_free(err);
        return util::make_error(util::ErrorKind::io, fmt::format("database error: {}", msg));
    }
    return {};
}

std::string Database::last_error() const {
    return error_message(m_db);
}

} // namespace diffeval::store
