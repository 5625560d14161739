// `diffeval import lm-eval`: store another tool's results as a group that
// scorers, the classifier, `diff` and the gate read like diffeval's own.
#include <datasets/dataset.hpp>
#include <harness/analysis/rescore.hpp>
#include <harness/cli/commands.hpp>
#include <harness/cli/util.hpp>
#include <harness/engine/config.hpp>
#include <harness/interop/lm_eval_samples.hpp>
#include <harness/store/lock.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <unistd.h>

namespace diffeval::cli {

namespace {

struct ImportFlags {
    std::string db = "diffeval.sqlite";
    std::string name;
    std::string framing;
    std::string dataset = "gsm8k";
    std::string path;
    int first_repeat = 0;
    bool first_repeat_given = false; // set from the option's count at dispatch
};

int import_command(const ImportFlags& f) {
    // In the words of every number flag (CLI11's Range also answered "abc"
    // with "Value abc not in range").
    if (auto r = engine::check_whole_range("--first-repeat", f.first_repeat, 0, 1'000'000); !r) {
        return report(r.error());
    }
    // An empty --framing is the default: the framing the samples show.
    for (const auto& [flag, value] : {std::pair{"--name", f.name}, {"--framing", f.framing}}) {
        auto problem = util::name_problem(value);
        if (problem && !(flag == std::string_view("--framing") && value.empty())) {
            return report(util::make_error(
                util::ErrorKind::usage,
                fmt::format("{} '{}' {}", flag, util::one_line(value, 80), *problem)));
        }
    }
    // 1. Open (or create) the store, once the samples file is known to be
    // readable: a mistyped path must not leave an empty database behind.
    std::error_code ec;
    if (std::filesystem::is_directory(f.path, ec)) {
        return report(util::make_error(
            util::ErrorKind::usage,
            fmt::format("{} is a directory; give the samples_*.jsonl file lm-eval --log_samples "
                        "wrote in it",
                        f.path)));
    }
    if (::access(f.path.c_str(), R_OK) != 0) {
        return report(util::make_error(
            util::ErrorKind::usage,
            fmt::format("cannot read {}: {}; give the samples_*.jsonl file lm-eval "
                        "--log_samples wrote",
                        f.path, std::strerror(errno))));
    }
    // The dataset the documents are checked against (its test questions).
    auto dataset = datasets::open_test_set(f.dataset);
    if (!dataset) {
        return report(dataset.error());
    }
    // One writer at a time, as for run and merge: a merge into this file
    // would replace it by another and lose what is imported meanwhile.
    auto lock = store::RunLock::acquire(f.db, "import", store::RunLock::Wait::no, nullptr,
                                        "wait for it to finish, then import again");
    if (!lock) {
        return report(lock.error());
    }
    // A database this command creates is removed again if the file turns out
    // not to be samples: a failed import leaves no empty database behind.
    const bool new_db = !std::filesystem::exists(f.db, ec);
    auto st = store::Store::open(f.db, store::Store::Mode::read_write);
    if (!st) {
        return report(st.error());
    }
    if (auto r = lock->hold_database_file(f.db); !r) {
        return report(r.error());
    }
    // A run or import whose process died (its lock is free, we hold it)
    // is marked killed, as a run and a merge mark it: a killed import's
    // row stayed `running` for good.
    if (auto killed = (*st)->mark_stale_runs_killed(); !killed) {
        return report(killed.error());
    }
    // 2. Read the samples file and store it as one group.
    auto r = interop::import_samples(**st, {f.path, f.name, f.framing, std::move(*dataset),
                                            f.first_repeat, f.first_repeat_given});
    if (!r) {
        st->reset();
        if (new_db) {
            store::remove_with_sidecars(f.db); // the lock file goes when the lock is let go
        }
        return report(r.error());
    }
    if (auto scored = analysis::ensure_scored(**st); !scored) {
        return report(scored.error());
    }
    std::cout << fmt::format("imported {} as {}: {}, {} stored, {} already stored\n", f.path,
                             r->group, util::counted(r->documents, "document"),
                             util::counted(r->responses, "response"), r->already_stored);
    if (r->other_strict_rule) {
        std::cout << fmt::format("note: a chain-of-thought task's strict-match filter reads "
                                 "\"{}\", not gsm8k's \"#### N\" that the lm-eval-strict scorer "
                                 "reads; lm-eval's own verdicts per filter are kept in "
                                 "response_json (lm_eval.filters)\n",
                                 r->final_answer_rule ? "The final answer is N"
                                                      : "The answer is N.");
    }
    if (r->several_answers > 0) {
        std::cout << fmt::format(
            "note: {} in the file {} several answers (up to {}), stored as repeats {} to {}: "
            "every accuracy diffeval prints averages a document's repeats, where lm-eval's "
            "take_first filter scores its first answer only, so the two differ; lm-eval's own "
            "verdicts per filter are kept in response_json (lm_eval.filters)\n",
            util::counted(r->several_answers, "document"),
            r->several_answers == 1 ? "holds" : "hold", r->most_answers, r->first_repeat,
            r->first_repeat + static_cast<int>(r->most_answers) - 1);
    }
    if (r->responses == 0 && r->already_stored > 0) {
        std::cout << fmt::format("nothing new: every answer in the file is stored already; a file "
                                 "of another run of the same requests is stored as further "
                                 "repeats with --first-repeat {}\n",
                                 r->first_repeat + 1);
    }
    return k_exit_ok;
}

} // namespace

void add_import_command(CLI::App& root, Dispatch& dispatch) {
    auto flags = std::make_shared<ImportFlags>();
    auto* cmd = root.add_subcommand("import", "Store another tool's results as a group");
    cmd->require_subcommand(1);
    auto* lm = cmd->add_subcommand("lm-eval", "An lm-eval --log_samples file (gsm8k tasks)");
    lm->add_option("--db", flags->db, "SQLite results file (default diffeval.sqlite)");
    lm->add_option("--name", flags->name, "Server name of the imported group")->required();
    lm->add_option("--framing", flags->framing,
                   "Framing name of the group (default: the task in the file name)");
    lm->add_option("--dataset", flags->dataset,
                   "Dataset the documents come from (default gsm8k; sample for the sample set)");
    auto* first = lm->add_option(
        "--first-repeat", flags->first_repeat,
        "Repeat number of the file's first answer to each document (default 0, or N for a "
        "file 'diffeval export' wrote for repeat N, task ending -rN); a file of another run of "
        "the same requests is further repeats (0 to 1000000)");
    lm->add_option("PATH", flags->path, "samples_<task>_<date>.jsonl")->required();
    dispatch[lm] = [flags, first] {
        flags->first_repeat_given = first->count() > 0;
        return import_command(*flags);
    };
}

} // namespace diffeval::cli
