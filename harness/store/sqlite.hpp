// Thin RAII wrappers over the SQLite C API: a database handle and prepared
// statements that reset and clear their bindings when a use ends, with a bind
// helper that checks the argument count.
#pragma once

#include <harness/util/result.hpp>
#include <harness/util/stop_reason.hpp>

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace diffeval::store {

// The words every error of a write the disk had no room for carries:
// SQLite's own for SQLITE_FULL, also given to the I/O errors ("disk I/O
// error") of a write past the process's file-size limit (EFBIG) or of a
// shared-memory file the disk had no room for.
inline constexpr std::string_view k_disk_full = "database or disk is full";

// SQLite's message for the last error on `db`, in k_disk_full's words when
// the disk (or the file-size limit) refused a write, in k_damaged's when
// the file is damaged.
std::string error_message(sqlite3* db);

// How diffeval says it to a user, with what SQLite's words leave out.
inline constexpr std::string_view k_disk_full_words = "the disk (or the file-size limit) is full";

// True when `error` came from a write the disk or the file-size limit
// refused (its message holds k_disk_full).
bool is_disk_full(std::string_view message);
inline bool is_disk_full(const util::Error& error) {
    return is_disk_full(error.message);
}

// The words every error from reading a damaged database file carries:
// SQLite's own for SQLITE_CORRUPT, given by error_message from the error
// code, so that is_damaged does not depend on how SQLite words it.
inline constexpr std::string_view k_damaged = "database disk image is malformed";

// True when `error` came from a database file SQLite found damaged
// (SQLITE_CORRUPT: its message holds k_damaged).
bool is_damaged(std::string_view message);
inline bool is_damaged(const util::Error& error) {
    return is_damaged(error.message);
}

// The words of the error a write gets once its database file's name no
// longer names the file the connection opened (the file was deleted,
// renamed, or replaced by another, such as a `mv` over it).
inline constexpr std::string_view k_moved = "was removed or replaced while this run wrote it";

// True when the main database file `db` opened is no longer the file its
// path names. SQLite then keeps writing the file it opened, but leaves its
// write-ahead log under the old name on close, where the next connection to
// that name replays it into whatever file is there now.
bool has_moved(sqlite3* db);

// True when `error` came from a write refused because has_moved (its
// message holds k_moved).
bool is_moved(std::string_view message);

// A value SQLite keeps with its type: NULL, integer, real or text.
using Value = std::variant<std::monostate, int64_t, double, std::string>;

class Statement {
public:
    Statement() = default;
    Statement(sqlite3* db, std::string_view sql);
    ~Statement();
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
    Statement(Statement&& other) noexcept;
    Statement& operator=(Statement&& other) noexcept;

    bool valid() const { return m_stmt != nullptr; }
    const std::string& error() const { return m_error; }

    // Bind `args` to parameters 1..N; the count must match the statement's.
    template <typename... Args> Statement& bind(const Args&... args) {
        reset();
        if (sizeof...(Args) != static_cast<size_t>(sqlite3_bind_parameter_count(m_stmt))) {
            m_bind_mismatch = true;
        }
        int i = 1;
        (bind_one(i++, args), ...);
        return *this;
    }

    // Step once: true while a row is available. Errors are kept in error().
    bool step();
    // Step to completion; false on error.
    bool run();
    void reset();

    int64_t column_int(int col) const { return sqlite3_column_int64(m_stmt, col); }
    double column_double(int col) const { return sqlite3_column_double(m_stmt, col); }
    std::string column_text(int col) const;
    // The text of `col` without a copy; valid until the next step or reset.
    std::string_view column_view(int col) const {
        auto* p = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, col));
        return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(m_stmt, col)))
                 : std::string_view{};
    }
    int column_type(int col) const { return sqlite3_column_type(m_stmt, col); }
    bool column_null(int col) const { return sqlite3_column_type(m_stmt, col) == SQLITE_NULL; }
    Value column_value(int col) const;
    // A stored stop reason: NULL, a token id (integer) or a stop string
    // (text); any other type reads as none.
    util::StopReason column_stop_reason(int col) const;

private:
    void bind_one(int i, std::nullptr_t);
    void bind_one(int i, int64_t v);
    void bind_one(int i, int v) { bind_one(i, static_cast<int64_t>(v)); }
    void bind_one(int i, double v);
    void bind_one(int i, std::string_view v);
    void bind_one(int i, const std::string& v) { bind_one(i, std::string_view(v)); }
    void bind_one(int i, const char* v) { bind_one(i, std::string_view(v)); }
    void bind_one(int i, std::monostate) { bind_one(i, nullptr); }
    // A Value or a util::StopReason: whichever alternative it holds.
    template <typename... Ts> void bind_one(int i, const std::variant<Ts...>& v) {
        std::visit([&](const auto& x) { bind_one(i, x); }, v);
    }
    template <typename T> void bind_one(int i, const std::optional<T>& v) {
        if (v) {
            bind_one(i, *v);
        } else {
            bind_one(i, nullptr);
        }
    }

    sqlite3* m_db = nullptr;
    sqlite3_stmt* m_stmt = nullptr;
    std::string m_error;
    bool m_bind_mismatch = false;
};

// `s` as an SQL string literal: in single quotes, each quote doubled.
std::string sql_quote(std::string_view s);

// `path` as an SQLite URI ("file:...") with `query` ("mode=ro"): the file of
// that name, relative or not, with the characters a URI gives a meaning
// escaped.
std::string file_uri(const std::string& path, std::string_view query);

// An open database connection.
class Database {
public:
    Database() = default;
    ~Database();
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    // Open `path`: `yes` creates a missing file, `no` opens an existing one
    // for reading and writing, `read_only` an existing one for reading only
    // (no write reaches the file, so it may be read-only).
    enum class Create { yes, no, read_only };
    util::Result<void> open(const std::string& path, Create create);
    // ATTACH `path` AS `schema`, read-only and read as open(path,
    // read_only) reads it: a name SQLite would take for a URI or for no
    // file (":memory:") is the file of that name, and a WAL file nobody can
    // write (its directory read-only) is read as immutable.
    util::Result<void> attach_read_only(const std::string& path, std::string_view schema);
    util::Result<void> exec(std::string_view sql);
    sqlite3* handle() const { return m_db; }
    std::string last_error() const;

private:
    // sqlite3_open_v2 of `target` (a path or URI) with `flags`; errors name `path`.
    util::Result<void> open_as(const std::string& target, int flags, const std::string& path);
    util::Result<void> open_immutable_if_needed(const std::string& path);
    // Remove the empty -wal and the -shm a read-only connection to `target`
    // made, when nothing else has the file open.
    static void tidy_side_files(const std::string& target);

    sqlite3* m_db = nullptr;
    // Opened read-only with no -wal or -shm beside it: the path whose side
    // files its reads made, removed on close (tidy_side_files).
    std::string m_tidy;
};

} // namespace diffeval::store
