// A database's -wal is read before SQLite folds it into the file: a log a
// crash left with the file fits it, one of another database (or of an
// earlier file of the same name) does not, and a log SQLite would read
// nothing from is no matter.
#include <harness/store/wal_fit.hpp>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>

using namespace diffeval::store;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
    auto dir = fs::temp_directory_path() / ("diffeval_test_wal_fit_" + name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

void exec(sqlite3* db, const std::string& sql) {
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
}

// A WAL database at `path` holding `rows` rows of 1 KB, committed and
// checkpointed (no log beside it). With `crash_into`, `more` rows are then
// committed to the log alone, and the file and its log as a process killed
// then would leave them are copied to `crash_into` (and `crash_into`-wal).
void make(const fs::path& path, int rows, const fs::path& crash_into = {}, int more = 0) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    exec(db, "PRAGMA journal_mode = WAL; CREATE TABLE t (x BLOB)");
    exec(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
                 std::to_string(rows) + ") INSERT INTO t SELECT randomblob(1000) FROM n");
    exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    if (!crash_into.empty()) {
        exec(db, "PRAGMA wal_autocheckpoint = 0");
        exec(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
                     std::to_string(more) + ") INSERT INTO t SELECT randomblob(1000) FROM n");
        fs::copy_file(path, crash_into, fs::copy_options::overwrite_existing);
        fs::copy_file(path.string() + "-wal", crash_into.string() + "-wal",
                      fs::copy_options::overwrite_existing);
    }
    sqlite3_close(db);
}

long long rows_in(const fs::path& path) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    long long n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        n = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

} // namespace

// What a crash leaves (the file as it was, and its log) fits, and reads as
// everything committed.
TEST(WalFit, TheLogACrashLeftFitsItsFile) {
    auto dir = scratch("crash");
    make(dir / "a.sqlite", 50, dir / "crashed.sqlite", 30);
    EXPECT_EQ(log_that_does_not_fit((dir / "crashed.sqlite").string()), std::nullopt);
    EXPECT_EQ(rows_in(dir / "crashed.sqlite"), 80);
}

// Another database's log beside a larger file would cut the file to the
// other's size: it is named, with what to do, and the file is untouched.
TEST(WalFit, AnotherDatabasesLogDoesNotFit) {
    auto dir = scratch("foreign");
    make(dir / "big.sqlite", 400);
    make(dir / "small.sqlite", 5, dir / "small-crashed.sqlite", 2);
    fs::copy_file(dir / "small-crashed.sqlite-wal", dir / "big.sqlite-wal");
    const auto before = fs::file_size(dir / "big.sqlite");
    const auto why = log_that_does_not_fit((dir / "big.sqlite").string());
    ASSERT_TRUE(why.has_value());
    EXPECT_NE(why->find("big.sqlite-wal is not the log of "), std::string::npos) << *why;
    EXPECT_NE(why->find("a commit in it leaves the database "), std::string::npos) << *why;
    EXPECT_NE(why->find("rewrites only some of them, as no VACUUM does"), std::string::npos)
        << *why;
    EXPECT_NE(why->find("(SQLite would cut the file to "), std::string::npos) << *why;
    EXPECT_NE(why->find("Move "), std::string::npos) << *why;
    EXPECT_EQ(fs::file_size(dir / "big.sqlite"), before);
}

// A VACUUM shrinks a database through its log: until a checkpoint copies
// it, the log's commits leave the database smaller than the file. That log
// is the file's own (a migration from before schema 9 runs one; so may a
// user's sqlite3), with commits after it or not, killed then or still open.
TEST(WalFit, AVacuumsLogFitsItsFile) {
    auto dir = scratch("vacuum");
    const auto db = dir / "a.sqlite";
    make(db, 300);
    for (const bool more_after : {false, true}) {
        sqlite3* h = nullptr;
        ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
        exec(h, "PRAGMA wal_autocheckpoint = 0; DELETE FROM t WHERE rowid % 3 <> 0; VACUUM");
        if (more_after) {
            exec(h, "INSERT INTO t VALUES (randomblob(1000))");
        }
        const auto copy = dir / (more_after ? "more.sqlite" : "vacuumed.sqlite");
        fs::copy_file(db, copy, fs::copy_options::overwrite_existing);
        fs::copy_file(db.string() + "-wal", copy.string() + "-wal",
                      fs::copy_options::overwrite_existing);
        // Still open, and as a process killed now leaves it.
        EXPECT_EQ(log_that_does_not_fit(db.string()), std::nullopt) << more_after;
        sqlite3_close(h);
        EXPECT_EQ(log_that_does_not_fit(copy.string()), std::nullopt) << more_after;
        EXPECT_EQ(rows_in(copy), more_after ? 101 : 100);
        for (const char* side : {"", "-wal", "-shm"}) {
            fs::remove(db.string() + side); // a fresh file for the next case
        }
        make(db, 300);
    }
}

// A log of other pages than the file's is not its own either.
TEST(WalFit, ALogOfAnotherPageSizeDoesNotFit) {
    auto dir = scratch("page-size");
    make(dir / "a.sqlite", 20);
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open((dir / "b.sqlite").c_str(), &db), SQLITE_OK);
        exec(db, "PRAGMA page_size = 8192; PRAGMA journal_mode = WAL; PRAGMA "
                 "wal_autocheckpoint = 0; CREATE TABLE t (x BLOB); INSERT INTO t "
                 "VALUES (randomblob(100))");
        fs::copy_file(dir / "b.sqlite-wal", dir / "a.sqlite-wal");
        sqlite3_close(db);
    }
    const auto why = log_that_does_not_fit((dir / "a.sqlite").string());
    ASSERT_TRUE(why.has_value());
    EXPECT_NE(why->find("its pages are 8192 bytes, the file's 4096"), std::string::npos) << *why;
}

// No log, an empty one, and bytes SQLite reads no frame from are no matter.
TEST(WalFit, ALogSqliteReadsNothingFromIsNoMatter) {
    auto dir = scratch("nothing");
    const auto db = dir / "a.sqlite";
    make(db, 20);
    EXPECT_EQ(log_that_does_not_fit(db.string()), std::nullopt);
    std::ofstream(db.string() + "-wal");
    EXPECT_EQ(log_that_does_not_fit(db.string()), std::nullopt);
    std::ofstream(db.string() + "-wal", std::ios::binary) << std::string(70000, '\x5a');
    EXPECT_EQ(log_that_does_not_fit(db.string()), std::nullopt);
    EXPECT_EQ(rows_in(db), 20);
}
