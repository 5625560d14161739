// Whether the write-ahead log beside a database can be its own. SQLite
// cannot tell: a log names no database, and the first connection to open
// the file applies every committed frame it holds. A `-wal` left from
// another file of the same name (a crashed run's, then a fresh copy put in
// its place) or copied from another database was folded into the file by a
// command that only reads, and cut it to the other database's size: 480
// stored responses lost (a hostile-file audit). Internal to harness/store.
#pragma once

#include <optional>
#include <string>

namespace diffeval::store {

// Why `db`'s `-wal` cannot be its log, in words that say what to do, or
// nullopt: no log, an empty one, one with no committed frame (SQLite reads
// nothing from it), or one that fits. A log does not fit when its pages are
// not the file's size, or when a commit in it leaves the database smaller
// than before (than the file, for its first) without rewriting every page
// it leaves. A database grows through its log; only a VACUUM shrinks it,
// and a VACUUM writes the whole database it leaves into the log (diffeval
// runs one when it migrates a file older than schema 9, and a user's
// sqlite3 may; until a checkpoint copies it, the file is the larger).
// Frames count as SQLite counts them: those whose salts are the log
// header's and whose checksums chain from it.
std::optional<std::string> log_that_does_not_fit(const std::string& db);

} // namespace diffeval::store
