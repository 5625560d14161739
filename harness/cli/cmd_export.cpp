// `diffeval export`: write a run in another tool's format
// (lm-eval's --log_samples files).
#include <harness/cli/commands.hpp>
#include <harness/cli/util.hpp>
#include <harness/interop/lm_eval_samples.hpp>
#include <harness/store/lock.hpp>
#include <harness/store/scoring.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

namespace diffeval::cli {

namespace {

struct ExportFlags {
    std::string db = "diffeval.sqlite";
    std::string format;
    std::string out;
};

int export_command(const ExportFlags& f) {
    if (f.format != "lm-eval-samples") {
        return report(util::make_error(
            util::ErrorKind::usage,
            fmt::format("--format '{}': the only export format is lm-eval-samples", f.format)));
    }
    // The files are written after what is not scored yet is scored: a
    // --out that cannot take them is refused first.
    if (auto r = check_output_dir("--out", f.out, {}, "export writes its samples files into it");
        !r) {
        return report(r.error());
    }
    // 1. Open and score what is not scored yet (the lines carry verdicts).
    auto opened = open_results(f.db);
    if (!opened) {
        return report(opened.error());
    }
    // 2. One samples file per group.
    auto r = interop::export_samples(*opened->store, f.out, interop::lm_eval_date_id());
    if (!r) {
        return report(r.error());
    }
    // Planned requests and no response (a run killed while planning): as
    // summary, report and gate say, there is nothing to give.
    if (r->files.empty()) {
        return report(util::make_error(
            util::ErrorKind::data,
            fmt::format("{} holds no response to export; run 'diffeval run' (the same command "
                        "again resumes a killed run)",
                        f.db)));
    }
    for (const auto& file : r->files) {
        std::cout << file << "\n";
    }
    std::cerr << fmt::format("wrote {} ({}) to {}\n",
                             util::counted(r->files.size(), "samples file"),
                             util::counted(r->lines, "line"), f.out);
    // A request planned and never sent has no line, and lm-eval reads the
    // files as whole: a killed run's 6 answered questions of 60 came back
    // as 100% (an outside audit). Said, as summary says it.
    const auto unsent =
        std::count_if(opened->results.rows.begin(), opened->results.rows.end(),
                      [](const analysis::ResultRow& row) { return row.response_id == 0; });
    if (unsent > 0) {
        // A run still writing the file has not sent them yet: running it
        // again would be refused, and is not what to do (hostile-input audit).
        // (A merge or an import writing it sends nothing: they stay unsent.)
        auto writer = store::RunLock::holder(f.db);
        if (writer && !writer->starts_with("diffeval run")) {
            writer.reset();
        }
        std::cerr << fmt::format(
            "note: {} planned in {} {} {}, and {} no line: lm-eval reads these files as the "
            "whole run; {}, then export\n",
            util::counted(static_cast<uint64_t>(unsent), "request"), f.db,
            unsent == 1 ? "was" : "were",
            writer ? fmt::format("not answered yet ({} still writes it)", *writer)
                   : std::string("never sent (a run stopped first)"),
            unsent == 1 ? "has" : "have",
            writer ? "wait for it to finish" : "finish the run (the same command again)");
    }
    // Verdicts of the text after the think block beside the whole text in
    // `resps`: lm-eval's filters on resps may give others (interop audit #5).
    if (auto text = store::stored_score_text(*opened->store);
        text && *text && **text == "after-think") {
        std::cerr << fmt::format("note: {} is scored on the text after the think block (rescore "
                                 "--score-text after-think): each line's filtered_resps and "
                                 "exact_match are of that text, its resps the whole text\n",
                                 f.db);
    }
    return k_exit_ok;
}

} // namespace

void add_export_command(CLI::App& root, Dispatch& dispatch) {
    auto flags = std::make_shared<ExportFlags>();
    auto* cmd = root.add_subcommand("export", "Write stored runs in another tool's format");
    cmd->add_option("--db", flags->db, "SQLite results file (default diffeval.sqlite)");
    cmd->add_option("--format", flags->format, "lm-eval-samples: lm-eval --log_samples files")
        ->required();
    cmd->add_option("--out", flags->out, "Directory to write into (created)")->required();
    dispatch[cmd] = [flags] { return export_command(*flags); };
}

} // namespace diffeval::cli
