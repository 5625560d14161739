// Plain-text and Markdown renderings of summaries and comparisons, shared by
// `diffeval summary`, `diffeval diff`, the demo and the Markdown report.
// Text tables are aligned to fit 100 columns; Markdown is GitHub-flavoured.
#pragma once

#include <harness/analysis/compare.hpp>
#include <harness/analysis/summary.hpp>

#include <optional>
#include <string>
#include <vector>

namespace diffeval::reports {

enum class Style { text, markdown, html };

// How a table's columns align: by what their cells read as (numbers right,
// the rest left), or all left, for a table of text whose cells may read as
// numbers ("What actually ran": a version "0.28.0", a context "4096", "-").
enum class Columns { inferred, text };

// A table of strings; the first row is the header. Cells are plain text:
// each style escapes them (Markdown markup characters, HTML entities).
std::string render_table(const std::vector<std::vector<std::string>>& rows, Style style,
                         Columns columns = Columns::inferred);

// `text` (untrusted: a name, a server's words, model output) as Markdown that
// renders as that text on one line: markup characters (| \ ` * _ < > [ ] ~ $)
// backslash-escaped, & as &amp; (so no entity turns into another character
// or markup) and control characters (line ends, terminal escapes) as spaces.
std::string markdown_escape(const std::string& text);

// `text` as a Markdown code span, shown as written (inside one, backslashes
// and entities are literal): fenced by more backticks than any run in it, so
// a backtick in a name cannot end the span; control characters as spaces.
std::string markdown_code(const std::string& text);

// One server's cell of "What actually ran": its `value` ("-" when it reports
// none), and its own words `stated` beside it when there are any, as
// `diffeval fingerprint` prints them ("enabled (stated: auto)"). Both come
// bounded from analysis::load_server_facts (one line of at most
// util::k_server_words_bytes each). Plain text: escape it for the report's
// format.
std::string fact_cell(const std::string& value, const std::string& stated);

// The harness verdicts: accuracy per group and scorer, mean (min-max) over
// repeats, in percent.
std::string verdict_table(const analysis::Summary& summary, Style style);

// Where the responses went: per group, mean counts over repeats.
std::string breakdown_table(const analysis::Summary& summary, const std::string& scorer,
                            Style style);

// Latency and tokens: per group, latency p50/p90/p99/max and TTFT p50/p99
// in ms, output tokens p50/p99/mean, and requests per second achieved.
std::string latency_table(const analysis::Summary& summary, Style style);

// A difference in whole milliseconds with its sign ("+3", "-23"; "0").
std::string signed_ms(double v);

// The tail's figures as printed, in whole milliseconds. Each difference is
// the difference of the printed values beside it (62 -> 40 is -22, however
// the two rounded), and the rest is the printed p99 difference less the
// printed part from longer outputs, so the text adds up. The interval is
// rounded outward: it still holds the exact difference, and so the printed
// one, which is within a millisecond of it.
struct ShownTail {
    double a_p50 = 0, b_p50 = 0, a_p99 = 0, b_p99 = 0;
    double p50_diff = 0, p99_diff = 0;
    std::optional<analysis::Interval> p99_diff_ci;
    std::optional<double> explained; // unset when no part was put down to lengths
    double rest = 0;                 // p99_diff - explained (0 when unset)
};
ShownTail shown_tail(const analysis::TailDifference& tail);

// The tail difference in lines under 100 columns: p50 and p99 of both sides
// and how much of the p99 difference follows from longer outputs.
std::string tail_sentence(const analysis::TailDifference& tail);

// One paired comparison: difference, interval, McNemar, noise floor,
// transitions, and the top flips.
std::string comparison_text(const analysis::Comparison& comparison, Style style, size_t max_flips);

// "81.2 (80.9-81.5)" from proportions.
std::string pct_spread(const analysis::Spread& spread);

} // namespace diffeval::reports
