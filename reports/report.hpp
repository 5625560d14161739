// `diffeval report`: everything the three reports share, computed once from
// the store with the analysis layer (the summary, every server against the
// baseline, server facts), and the writer that puts report.md, report.html
// and summary.json into one directory.
#pragma once

#include <harness/analysis/compare.hpp>
#include <harness/analysis/facts.hpp>
#include <harness/analysis/probe.hpp>
#include <harness/analysis/summary.hpp>
#include <harness/store/readers.hpp>
#include <harness/store/store.hpp>
#include <harness/util/result.hpp>
#include <reports/layout.hpp>
#include <reports/tables.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace diffeval::reports {

// The analysed content of a report.
struct ReportData {
    std::string baseline;
    ReportLayout layout; // which scorers and framings lead
    analysis::Results results;
    analysis::Summary summary;
    std::vector<analysis::Comparison> comparisons; // in the layout's order
    // One line per server with no group paired with the baseline's (other
    // framings or token limits): it is not compared, and the headline says so.
    std::vector<std::string> comparison_notes;
    // Baseline groups a compared server never ran (the baseline ran chat and
    // raw, the server raw only), as (the baseline's group, the one it would
    // pair with): no comparison covers them, and the headline says so.
    std::vector<std::pair<analysis::Selector, analysis::Selector>> not_compared;
    // Why a layout comparison was skipped ("no group has framing 'x'", "no
    // scorer 'y' is stored"): the headline says so when none was made.
    std::vector<std::string> layout_skipped;
    std::vector<analysis::ServerFacts> servers; // what each server said it ran
    // The decision-point probe (docs/probe.md): every server against the
    // baseline per framing, and one line per server it was skipped for.
    std::vector<analysis::ProbeComparison> probes;
    std::vector<std::string> probe_notes;
    // The command still writing the database as it was read ("diffeval run
    // (pid 1234, started ...)"), if any: the headline's first sentence says
    // the report shows a partial result.
    std::optional<std::string> writing;
    // Per group, what the database lacks of what its runs asked
    // (store::completeness): the headline says so before any verdict.
    std::vector<store::GroupCompleteness> completeness;
};

// Which files `write_reports` produces.
struct ReportFormats {
    bool markdown = true;
    bool html = true;
    bool json = true;
};

// The names of the files `formats` has write_reports write into its
// output directory (report.md, summary.json, report.html), in that order:
// what a command checks can be written before its work starts.
std::vector<std::string> report_files(const ReportFormats& formats);

// Paths of the files written.
struct ReportPaths {
    std::vector<std::filesystem::path> written;
};

// Analyse `store` against `baseline` (empty: the first server stored). Every
// other server is compared with the baseline as `layout` lists (built in: the
// vllm scorer per framing and max_tokens, then lm-eval-strict on the chat
// framing). An unknown baseline or lead scorer is a usage error listing the
// known ones.
// `visit` sees every response's texts in the pass that loads the results.
util::Result<ReportData>
analyse_for_report(store::Store& store, const std::string& baseline, const ReportLayout& layout,
                   const std::array<analysis::ResponseVisitor, 2>& visit = {});

// The probe's part of summary.json: {"comparisons": [...], "skipped": [lines]}.
nlohmann::json probes_json(const ReportData& data);

// The "diffeval.report/3" JSON document: the headline, the summary and diff documents.
nlohmann::json report_json(const ReportData& data);

// Flipped questions shown per direction of a comparison (report.md lists the
// top ones; report.html has them all).
inline constexpr size_t k_flips_shown = 10;

// The headline: an overview sentence counting the verdicts, then one
// sentence per comparison in the verdict's words (what regressed, what shows
// no detectable difference).
std::vector<std::string> headline_sentences(const ReportData& data);

// The outcome transitions that carried comparison `c`, at most `max_cells`,
// as "finished -> length_truncated (-40/+2)": ranked by points lost net of
// those gained when `toward` < 0 (a regression), gained net when > 0, by
// pairs that changed when 0; "none" when nothing qualifies.
std::string carrying_transitions(const analysis::Comparison& c, size_t max_cells, int toward = 0);

// The headline sentences joined into one paragraph.
std::string headline(const ReportData& data);

// The comparison a reader should look at first: worse, then better, then the
// rest, one with a side that answered nothing last, and within each the
// largest difference; null when nothing was compared.
const analysis::Comparison* lead_comparison(const ReportData& data);

// Every comparison against the baseline: difference, interval, sign-flip
// mid-p raw and Holm-adjusted, questions better each way, run-to-run noise,
// minimum detectable difference, verdict and the transitions that carry it;
// "" when nothing was compared. Shared by report.md and report.html.
std::string comparison_table(const ReportData& data, Style style);

// Each comparison's latency tail (of the first scorer compared): p50 and p99
// both sides and how much of the p99 difference longer outputs explain; ""
// when no comparison has latencies.
std::string tail_table(const ReportData& data, Style style);

// The tail table's note on its p99 interval column, for both formats.
std::string tail_interval_note();

// The tail table's note on its rows where the baseline's latency does not
// grow with its token count (" " and a sentence; "" when it lists none).
std::string tail_flat_note(const ReportData& data);

class ExplorerRows;

// Write the reports chosen by `formats` into `out_dir` (created if needed);
// report.html needs the explorer's `rows`, collected from the same database.
util::Result<ReportPaths> write_reports(const ReportData& data,
                                        const std::filesystem::path& out_dir,
                                        const ReportFormats& formats, ExplorerRows* rows);

// Analyse `store` against `baseline` and write the chosen reports: the entry
// point of `diffeval report` and `diffeval demo`. Every response is read
// once, in two halves on two cores, and its texts streamed into the HTML
// explorer's data in the same pass.
// `analysed`, when given, receives the analysis the reports were written from.
util::Result<ReportPaths> generate_reports(store::Store& store, const std::string& baseline,
                                           const ReportLayout& layout,
                                           const std::filesystem::path& out_dir,
                                           const ReportFormats& formats,
                                           ReportData* analysed = nullptr);

} // namespace diffeval::reports
