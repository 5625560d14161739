// Shared CLI helpers; see util.hpp.
#include <harness/cli/util.hpp>

#include <harness/analysis/rescore.hpp>
#include <harness/analysis/results.hpp>
#include <harness/analysis/stats.hpp>
#include <harness/store/lock.hpp>
#include <harness/util/file.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <cmath>

#include <filesystem>
#include <iostream>
#include <optional>
#include <unistd.h>

namespace diffeval::cli {

std::vector<std::string> split_list(const std::vector<std::string>& values) {
    std::vector<std::string> out;
    for (const auto& v : values) {
        size_t start = 0;
        while (start <= v.size()) {
            auto comma = v.find(',', start);
            auto item =
                v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            if (!item.empty()) {
                out.push_back(item);
            }
            if (comma == std::string::npos) {
                break;
            }
            start = comma + 1;
        }
    }
    return out;
}

util::Result<void> check_paired_flags(double alpha, uint32_t resamples) {
    if (auto r = analysis::check_alpha(alpha); !r) {
        return r;
    }
    analysis::BootstrapOptions bootstrap;
    bootstrap.resamples = resamples;
    if (auto r = analysis::check_options(bootstrap); !r) {
        return r;
    }
    // Each end of the interval is a percentile of the resamples: with fewer
    // than one resample beyond it, it is only the most extreme one drawn.
    if (static_cast<double>(resamples) * alpha / 2.0 < 1.0) {
        const double needed = std::ceil(2.0 / alpha);
        if (needed > analysis::k_max_resamples) {
            return util::make_error(
                util::ErrorKind::usage,
                fmt::format("--alpha {:g}: each end of the interval would rest on less than one "
                            "of the {} resamples diffeval draws at most; pass --alpha {:g} or "
                            "larger",
                            alpha, analysis::k_max_resamples, 2.0 / analysis::k_max_resamples));
        }
        return util::make_error(
            util::ErrorKind::usage,
            fmt::format("--alpha {:g} with --resamples {}: each end of the interval would rest "
                        "on less than one resample; pass --resamples {:.0f} or more, or a larger "
                        "--alpha",
                        alpha, resamples, needed));
    }
    return {};
}

namespace {

namespace fs = std::filesystem;

// What `path` (which exists, or is a link) is, said of one that is not a
// directory: "is a file, not a directory".
std::string is_not_a_directory(const fs::path& path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
        return "is a link to nowhere, not a directory";
    }
    return fs::is_regular_file(path, ec) ? "is a file, not a directory" : "is not a directory";
}

// The one of `databases` that writing `file` would write, if any.
std::optional<std::string> database_at(const std::string& file,
                                       const std::vector<std::string>& databases) {
    for (const auto& db : databases) {
        if (store::names_database(file, db)) {
            return db;
        }
    }
    return std::nullopt;
}

// Why an output may not go where a database is.
std::string replaces_database(const std::string& db, const std::string& flag) {
    return fmt::format("the database {} or one of its files; writing there would replace the "
                       "stored results: choose another {}",
                       db, flag);
}

} // namespace

util::Result<void> check_output_dir(const std::string& flag, const std::string& dir,
                                    const std::vector<std::string>& files,
                                    const std::string& writes,
                                    const std::vector<std::string>& databases) {
    std::error_code ec;
    const fs::path wanted = fs::absolute(dir, ec);
    // Up to what exists: the directory itself, or the one it would be made in.
    fs::path at = wanted;
    while (!fs::exists(fs::symlink_status(at, ec)) && at.has_relative_path()) {
        at = at.parent_path();
    }
    const bool itself = at == wanted;
    if (!fs::is_directory(at, ec)) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("{} {}: {} {}; choose another {} ({})", flag, dir,
                                            itself ? "it" : at.string(), is_not_a_directory(at),
                                            flag, writes));
    }
    if (std::string why; !util::may_write(at.string(), &why)) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("{} {}: cannot write in {}: {}; choose a writable {}",
                                            flag, dir, at.string(), why, flag));
    }
    if (!itself) {
        return {};
    }
    for (const auto& name : files) {
        const auto file = (fs::path(dir) / name).string();
        if (const auto db = database_at(file, databases)) {
            return util::make_error(
                util::ErrorKind::usage,
                fmt::format("{} {}: {} is {}", flag, dir, file, replaces_database(*db, flag)));
        }
        if (fs::is_directory(file, ec)) {
            return util::make_error(util::ErrorKind::usage,
                                    fmt::format("{} {}: {} is a directory, where a file goes; "
                                                "remove it or choose another {}",
                                                flag, dir, file, flag));
        }
        if (std::string why; fs::exists(file, ec) && !util::may_write(file, &why)) {
            return util::make_error(util::ErrorKind::usage,
                                    fmt::format("{} {}: cannot write {}: {}; choose another {}",
                                                flag, dir, file, why, flag));
        }
    }
    return {};
}

util::Result<void> check_output_file(const std::string& flag, const std::string& path,
                                     const std::vector<std::string>& databases) {
    std::error_code ec;
    const auto refuse = [&](const std::string& why) {
        return util::make_error(util::ErrorKind::usage, fmt::format("{} {}: {}", flag, path, why));
    };
    if (const auto db = database_at(path, databases)) {
        return refuse("it is " + replaces_database(*db, flag));
    }
    // Any other database too, and its side files: `--junit r.sqlite` typed
    // for `--db r.sqlite` replaced the results with the gate's XML.
    if (const auto db = store::database_of_side_file(path)) {
        return refuse("it is " + replaces_database(*db, flag));
    }
    if (store::is_sqlite_file(path)) {
        return refuse(fmt::format("it is an SQLite database, which writing there would replace; "
                                  "choose another {}",
                                  flag));
    }
    if (fs::is_directory(path, ec)) {
        return refuse(fmt::format("it is a directory; give the path of a file, or choose "
                                  "another {}",
                                  flag));
    }
    if (fs::exists(path, ec)) {
        if (std::string why; !util::may_write(path, &why)) {
            return refuse(fmt::format("cannot write it: {}; choose another {}", why, flag));
        }
        return {};
    }
    const fs::path parent =
        fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
    if (!fs::exists(fs::symlink_status(parent, ec))) {
        return refuse(fmt::format("there is no directory {}; create it or choose another {}",
                                  parent.string(), flag));
    }
    if (!fs::is_directory(parent, ec)) {
        return refuse(fmt::format("{} {}; choose another {}", parent.string(),
                                  is_not_a_directory(parent), flag));
    }
    if (std::string why; !util::may_write(parent.string(), &why)) {
        return refuse(fmt::format("cannot write in {}: {}; choose a writable {}", parent.string(),
                                  why, flag));
    }
    return {};
}

void print_error(std::string_view message) {
    std::cerr << "diffeval: " + util::controls_as_spaces(message) + "\n";
}

int report(const util::Error& error) {
    // A damaged file (SQLITE_CORRUPT), from whichever statement met it: bad
    // input (exit 2), with what to do. A file that is not SQLite at all is
    // said so where it is opened ("not a diffeval database"), with its own.
    if (store::is_damaged(error)) {
        print_error(error.message +
                    "; the database file is damaged: restore it from a copy (sqlite3's "
                    ".recover may save what is left)");
        return k_exit_usage;
    }
    // A write the disk (or the file-size limit) refused: SQLite's words
    // alone do not say what to do.
    if (store::is_disk_full(error)) {
        auto message = error.message;
        const auto at = message.find(store::k_disk_full);
        message.replace(at, store::k_disk_full.size(), store::k_disk_full_words);
        print_error(message + "; free space, then run the same command again");
        return k_exit_failed;
    }
    print_error(error.message);
    switch (error.kind) {
    case util::ErrorKind::usage:
    case util::ErrorKind::no_match:
    case util::ErrorKind::data:
    case util::ErrorKind::other_questions:
        return k_exit_usage;
    default:
        return k_exit_failed;
    }
}

util::Result<void> check_existing_db(const std::string& db) {
    // Its kind first: a pipe is said to be one before anything opens it
    // (opening waits for a writer that never comes), and r.sqlite-wal is
    // named as r.sqlite's file, not as one a run should create.
    if (auto r = store::check_db_file(db, store::Store::Mode::read_only); !r) {
        return r.error();
    }
    std::error_code ec; // set only when whether it exists cannot be told
    if (std::filesystem::exists(db, ec)) {
        return {};
    }
    return util::make_error(
        util::ErrorKind::usage,
        ec ? fmt::format("cannot read {}: {}; check the permissions of the directories on its path",
                         db, ec.message())
           : fmt::format("no database {}; run 'diffeval run --db {}' first", db, db));
}

namespace {

// One line saying that `writer` (store::RunLock::holder's words for a run,
// a merge or an import) still writes `db`, and that what follows is what it
// has stored so far, its unanswered requests counted as wrong answers.
void note_written(const std::string& db, const std::string& writer) {
    print_error(fmt::format("{} is still being written by {}: what follows is what it has "
                            "stored so far, and its requests with no response yet count as "
                            "wrong answers ({})",
                            db, writer, analysis::k_unanswered_counting));
}

} // namespace

util::Result<void> refuse_if_written(const std::string& db) {
    if (auto who = store::RunLock::holder(db)) {
        return util::make_error(
            util::ErrorKind::usage,
            fmt::format("{} is still being written by {}, and a gate judges finished results "
                        "(its requests with no response yet would count as failed); gate once "
                        "it has ended",
                        db, *who));
    }
    return {};
}

util::Result<std::unique_ptr<store::Store>> open_existing_store(const std::string& db,
                                                                bool for_writing, Pages pages) {
    if (auto r = check_existing_db(db); !r) {
        return r.error();
    }
    // Another command writing it: said once the store is open, or, when it
    // has stored nothing yet, the one thing said (what follows would be
    // nothing, and a note to run diffeval would name a run that is
    // running).
    const auto writer = for_writing ? std::nullopt : store::RunLock::holder(db);
    const auto opened =
        [&](std::unique_ptr<store::Store> st) -> util::Result<std::unique_ptr<store::Store>> {
        if (writer && st->holds_no_responses()) {
            return util::make_error(util::ErrorKind::usage,
                                    fmt::format("{} is still being written by {} and holds no "
                                                "response yet; read it once the run has stored "
                                                "some",
                                                db, *writer));
        }
        if (writer) {
            note_written(db, *writer);
        }
        return st;
    };
    // Opening for writing would create the schema in an empty file; a
    // command that only reads results must leave it as it found it.
    std::error_code ec;
    if (std::filesystem::is_regular_file(db, ec) && std::filesystem::file_size(db, ec) == 0) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("{} holds no responses (an empty file, left as it "
                                            "is); run 'diffeval run --db {}' first",
                                            db, db));
    }
    // A page SQLite cannot tell is damaged reads as fewer rows: a summary
    // printed 80% for 100% with exit 0 (an audit, a leaf page's cell count
    // lowered). Before anything is read, or scored into the file.
    if (pages == Pages::check) {
        if (auto r = store::check_pages_of_checked_file(db); !r) {
            return r.error();
        }
    }
    // Read commands only read: a database that is current and fully scored
    // is opened read-only, so they work on a read-only file and never write.
    // One written by an older diffeval, or by a run killed before it scored
    // its responses, is brought up to date first (migrated and scored: both
    // derived from what is stored), which needs write access once.
    if (for_writing) {
        return store::Store::open(db, store::Store::Mode::read_write);
    }
    auto ro = store::Store::open(db, store::Store::Mode::read_only);
    if (ro) {
        auto missing = analysis::unscored_count(**ro);
        if (!missing) {
            return missing.error();
        }
        if (*missing == 0) {
            return opened(std::move(*ro));
        }
        ro = util::make_error(util::ErrorKind::data,
                              fmt::format("{} holds {} not scored yet, and is not writable; "
                                          "run 'diffeval rescore --db {}' on a writable copy",
                                          db, util::counted(*missing, "response"), db));
    }
    if (!util::may_write(db)) {
        return ro.error();
    }
    // An SQLite file with no table (made by sqlite3 or another tool) would
    // get diffeval's whole schema from a command that only reads.
    if (store::Store::holds_no_schema(db)) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("{} holds no diffeval results (an SQLite file with no "
                                            "table, left as it is); run 'diffeval run --db {}' "
                                            "first, or give the file it wrote",
                                            db, db));
    }
    auto rw = store::Store::open(db, store::Store::Mode::read_write);
    if (!rw) {
        return rw.error();
    }
    if (auto r = analysis::ensure_scored(**rw); !r) {
        return r.error();
    }
    return opened(std::move(*rw));
}

util::Result<analysis::RescoreSummary> score_stored(const std::string& db,
                                                    const std::vector<scorers::ScorerSource>& added,
                                                    std::optional<scorers::ScoreText> mode) {
    auto st = store::Store::open(db, store::Store::Mode::read_write);
    if (!st) {
        return st.error();
    }
    return analysis::ensure_scored(**st, added, mode);
}

namespace {

// "all 3 responses", "the one response".
std::string all_responses(int64_t n) {
    return n == 1 ? std::string("the one response") : fmt::format("all {} responses", n);
}

} // namespace

std::optional<scorers::ScoreText> score_text_named(const std::optional<std::string>& name) {
    if (!name) {
        return std::nullopt;
    }
    auto parsed = scorers::parse_score_text(*name);
    return parsed ? std::optional<scorers::ScoreText>(*parsed) : std::nullopt;
}

std::string stored_scorer_lines(const analysis::RescoreSummary& pass, const std::string& path) {
    // A path is shown as one line, as print_error shows it.
    const auto db = util::controls_as_spaces(path);
    std::string out;
    for (const auto& name : pass.added) {
        out += fmt::format("scorer '{}' is stored in {} now: {} {} scored with it, and later "
                           "runs, imports and merges into {} score with it too\n",
                           name, db, all_responses(pass.responses),
                           pass.responses == 1 ? "is" : "are", db);
    }
    for (const auto& name : pass.replaced) {
        out += fmt::format("scorer '{}' has a new definition in {}: {} {} scored again\n", name, db,
                           all_responses(pass.responses), pass.responses == 1 ? "was" : "were");
    }
    return out;
}

util::Result<OpenResults> open_results(const std::string& db, Pages pages) {
    auto st = open_existing_store(db, false, pages);
    if (!st) {
        return st.error();
    }
    auto results = analysis::load_results(**st);
    if (!results) {
        return results.error();
    }
    return OpenResults{std::move(*st), std::move(*results)};
}

bool stderr_is_tty() {
    return isatty(STDERR_FILENO) == 1;
}

} // namespace diffeval::cli
