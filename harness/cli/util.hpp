// Small helpers shared by the subcommands: comma lists and error lines.
#pragma once

#include <harness/analysis/rescore.hpp>
#include <harness/analysis/results.hpp>
#include <harness/cli/cli.hpp>
#include <harness/store/store.hpp>
#include <harness/util/result.hpp>

#include <cstdint>
#include <memory>

#include <string>
#include <string_view>
#include <vector>

namespace diffeval::cli {

// Split "a,b,c" (and repeated flags) into items, dropping empty ones.
std::vector<std::string> split_list(const std::vector<std::string>& values);

// --alpha and --resamples of the paired commands (diff, plan, gate), checked
// before any data is read: "--alpha 2: must be in (0, 0.5] (e.g. 0.05)".
util::Result<void> check_paired_flags(double alpha, uint32_t resamples);

// Whether the directory `dir` given as `flag` ("--out") can take the files
// `files` (names in it) a command writes when its work is done: checked
// before the work starts. A missing directory is fine when the nearest
// directory above it that exists may be written (it is created); a file
// named in `files` may not be a directory, nor a file nobody may write.
// `writes` says what goes there ("the demo writes its database and reports
// into it"). A usage error naming the path and what to do.
// None of `files` may be one of `databases` (or their side files).
util::Result<void> check_output_dir(const std::string& flag, const std::string& dir,
                                    const std::vector<std::string>& files,
                                    const std::string& writes,
                                    const std::vector<std::string>& databases = {});

// Whether the file `path` given as `flag` ("--junit") can be written when
// the command's work is done: not a directory, and in a directory that
// exists and may be written (or a file that may be). A usage error naming
// the path and what to do. Nor may it be one of `databases`: `gate --junit
// r.sqlite --db r.sqlite` replaced the results with XML.
util::Result<void> check_output_file(const std::string& flag, const std::string& path,
                                     const std::vector<std::string>& databases = {});

// Print `message` on stderr as the one line every error is, after
// "diffeval: ": a control character in it (a line end or a terminal escape
// in a path or a name as the user typed it) is printed as a space.
void print_error(std::string_view message);

// Print `error` as one line on stderr (print_error) and return its exit code.
int report(const util::Error& error);

// A usage error when the results database `db` is not there to read: what
// store::check_db_file refuses to read (a directory, a pipe, another
// database's -wal file), none ("run first"), or a directory on its path this
// process may not search.
util::Result<void> check_existing_db(const std::string& db);

// A usage error naming the command that holds `db`'s lock, for a command
// that judges finished results only (gate); nothing when none does.
util::Result<void> refuse_if_written(const std::string& db);

// Open the results database `db` that a run wrote; a missing file is a usage
// error saying to run first (opening never creates one here). Opened for
// reading while another command writes it, one line on stderr says so
// (what follows is what it stored so far), or, while it holds no
// response yet, that is the error.
// Read commands get it read-only when it is current and fully scored (see
// util.cpp); `for_writing` (rescore) always opens it for writing.
// A damaged file (store::check_pages) is refused before anything reads or
// writes it, unless the caller has checked its pages (`Pages::checked`).
enum class Pages { check, checked };
util::Result<std::unique_ptr<store::Store>>
open_existing_store(const std::string& db, bool for_writing = false, Pages pages = Pages::check);

// Classify and score what `db` holds and has not been scored yet: the stage
// after every command that stores responses (run, import, merge), so
// v_scores and v_responses.outcome are complete when it returns. The user
// scorers `added` (from analysis::read_scorer_files) are stored first; one
// new to `db` or changed scores every response.
util::Result<analysis::RescoreSummary>
score_stored(const std::string& db, const std::vector<scorers::ScorerSource>& added = {},
             std::optional<scorers::ScoreText> mode = {});

// The text `name` says ("full", "after-think", as a database stores it),
// for score_stored: nullopt when `name` is, or names none.
std::optional<scorers::ScoreText> score_text_named(const std::optional<std::string>& name);

// One line per user scorer a scoring pass of `db` stored (new, or with a
// changed definition), saying what was scored; "" when none was.
std::string stored_scorer_lines(const analysis::RescoreSummary& pass, const std::string& db);

// A run's database (opened as open_existing_store opens it, so scored) with
// its results loaded.
struct OpenResults {
    std::unique_ptr<store::Store> store;
    analysis::Results results;
};
util::Result<OpenResults> open_results(const std::string& db, Pages pages = Pages::check);

// True when stderr is a terminal (progress bars).
bool stderr_is_tty();

} // namespace diffeval::cli
