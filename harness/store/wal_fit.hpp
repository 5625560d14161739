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
// nothing from it), or one that fits. A log fits when its pages are the
// file's size and its last commit leaves the database at least as many
// pages as the file holds: a database grows through its log, and its file
// shrinks only when a checkpoint copies a VACUUM's commit (which diffeval
// runs only on migrating a file older than schema 9), so a commit that
// would cut the file short is another database's. Frames count as SQLite
// counts them: those whose salts are the log header's and whose checksums
// chain from it.
std::optional<std::string> log_that_does_not_fit(const std::string& db);

} // namespace diffeval::store
