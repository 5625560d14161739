// The Markdown report; see markdown.hpp.
#include <reports/markdown.hpp>

#include <reports/tables.hpp>

#include <harness/analysis/results.hpp>
#include <harness/analysis/summary.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace diffeval::reports {

namespace {

// The largest flips of `c` (by how much the two sides' mean correctness
// differs), both directions together, with what each side answered.
std::string flips_section(const analysis::Comparison& c) {
    std::vector<const analysis::Flip*> all;
    for (const auto* list : {&c.a_better, &c.b_better}) {
        for (const auto& f : *list) {
            all.push_back(&f);
        }
    }
    if (all.empty()) {
        return "No question flipped.\n";
    }
    std::stable_sort(all.begin(), all.end(), [](const auto* x, const auto* y) {
        const double gx = std::abs(x->a - x->b), gy = std::abs(y->a - y->b);
        return gx != gy ? gx > gy : x->question_idx < y->question_idx;
    });
    std::vector<std::vector<std::string>> rows = {{"q", "right more often in", c.a.text() + " %",
                                                   c.b.text() + " %", "baseline answered",
                                                   "candidate answered"}};
    size_t shown = 0;
    for (const auto* f : all) {
        if (shown == k_flips_shown) {
            break;
        }
        rows.push_back({std::to_string(f->question_idx), f->a > f->b ? c.a.text() : c.b.text(),
                        fmt::format("{:.0f}", 100.0 * f->a), fmt::format("{:.0f}", 100.0 * f->b),
                        f->a_excerpt, f->b_excerpt});
        ++shown;
    }
    std::string out = render_table(rows, Style::markdown);
    if (all.size() > shown) {
        out += fmt::format("\n{} more flipped questions: every one, with both sides' full "
                           "responses, is in `report.html` (question explorer, \"flips between A "
                           "and B\").\n",
                           all.size() - shown);
    }
    return out;
}

// `text` for running prose or a heading: markup characters backslash-escaped.
std::string md_text(const std::string& text) {
    return markdown_escape(text);
}

// What actually ran: one row per fact, one column per server; differing
// facts are marked, and every conflict the fingerprint found gets a line.
std::string servers_section(const ReportData& data) {
    std::vector<std::vector<std::string>> rows = {{"fact"}};
    for (const auto& s : data.servers) {
        rows[0].push_back(s.name);
    }
    rows[0].push_back("differs");
    for (const auto& f : analysis::fact_rows(data.servers)) {
        std::vector<std::string> row = {f.name};
        for (size_t i = 0; i < f.values.size(); ++i) {
            row.push_back(fact_cell(f.values[i], f.stated[i]));
        }
        row.push_back(f.differs ? "yes" : "");
        rows.push_back(std::move(row));
    }
    // Facts are text, whatever they look like: a server that reported none
    // ("-" all down) was right-aligned beside its neighbours (interop audit).
    std::string out = render_table(rows, Style::markdown, Columns::text);
    bool any_fingerprint = false;
    for (const auto& s : data.servers) {
        any_fingerprint = any_fingerprint || s.fingerprinted;
        for (const auto& c : s.fingerprint.conflicts) {
            out += fmt::format("\n**CONFLICT** on {}: {} ({})", md_text(s.name), md_text(c.message),
                               md_text(c.name));
            for (const auto& e : c.evidence) {
                out += fmt::format("\n  - evidence: {}", md_text(e));
            }
            out += "\n";
        }
        for (const auto& m : analysis::mixed_answers(s)) {
            out += fmt::format("\n**{}** on {}: {}\n", m.heading, md_text(s.name),
                               md_text(m.conflict.message));
        }
    }
    if (!any_fingerprint) {
        out += "\nNo server log was fingerprinted; attach one with `--server-log` to see the "
               "engine's own facts.\n";
    }
    return out;
}

} // namespace

namespace {

// The probe's lines (docs/probe.md); "" when the run sent no probe.
std::string probe_section(const ReportData& data) {
    if (data.probes.empty() && data.probe_notes.empty()) {
        return "";
    }
    std::string out = "## Decision-point probe\n\nP(open): the probability the first answer "
                      "token opens a think block, read from the engine's top log-probabilities "
                      "(docs/probe.md). Shifts are in logits, paired per question.\n\n";
    for (const auto& p : data.probes) {
        out += "- " + md_text(analysis::probe_line(p)) + "\n";
    }
    for (const auto& n : data.probe_notes) {
        out += "- " + md_text(n) + "\n";
    }
    return out + "\n";
}

} // namespace

std::string render_markdown(const ReportData& data) {
    std::string out = "# diffeval report\n\n";
    // 1. The headline a reviewer reads first: the verdicts counted, then one
    // sentence per comparison.
    const auto sentences = headline_sentences(data);
    out += md_text(sentences.front()) + "\n\n";
    for (size_t i = 1; i < sentences.size(); ++i) {
        out += "- " + md_text(sentences[i]) + "\n";
    }
    out += sentences.size() > 1 ? "\n" : "";
    out += fmt::format("Baseline: {}. Charts, every question and every response side by side: "
                       "`report.html` next to this file.\n\n",
                       markdown_code(data.baseline));
    if (const auto simulated = analysis::simulated_sentence(data.servers); !simulated.empty()) {
        out += md_text(simulated) + "\n\n";
    }

    // 2. The harness verdicts and where the responses went.
    out += fmt::format("## Harness verdicts\n\nAccuracy %, mean (min-max) over repeats{}.\n\n",
                       analysis::scored_text_words(data.results.score_text));
    out += verdict_table(data.summary, Style::markdown) + "\n";
    out += fmt::format("## Where the responses went\n\nMean responses per run; accuracy by {}.\n\n",
                       markdown_code(data.layout.lead_scorer));
    out += breakdown_table(data.summary, data.layout.lead_scorer, Style::markdown) + "\n";
    // Which of its errors are unsent requests, as `summary` says under its
    // table (an audit read "err 160" for a server that never failed).
    if (const auto note = analysis::unsent_errors_text(data.completeness); !note.empty()) {
        out += md_text(note) + "\n\n";
    }

    // 3. Every server against the baseline.
    if (!data.comparisons.empty()) {
        const auto& first = data.comparisons.front().stats;
        out += fmt::format(
            "## Against the baseline\n\nDifferences in points (candidate minus baseline) with "
            "the question as the unit: each side's repeats of a question are averaged. {:g}% "
            "paired BCa bootstrap interval over questions ({} resamples); mid-p of the sign-flip "
            "permutation test over questions, and Holm-adjusted over the {}; A is the baseline "
            "and B the candidate; A/B better = questions right more often on that side; noise SD "
            "= the standard deviation of a side's accuracy on a re-run, from the spread between "
            "its repeats; MDD = the "
            "smallest difference the run detects at {:g}% power. The verdict is worse or better "
            "when the adjusted mid-p is below {:g} and the interval excludes 0 "
            "(docs/statistics.md).\n\n",
            100 * (1 - first.alpha), first.interval.resamples,
            util::counted(data.comparisons.size(), "comparison"), 100 * first.power, first.alpha);
        out += comparison_table(data, Style::markdown) + "\n";
        const auto* lead = lead_comparison(data);
        out += fmt::format("## Top flipped questions: {} vs {} ({})\n\n", md_text(lead->b.text()),
                           md_text(lead->a.text()), md_text(lead->scorer));
        out += md_text(lead->verdict.sentence) + "\n\n" +
               md_text(analysis::noise_sentence(lead->stats, lead->a.text(), lead->b.text())) +
               "\n\n";
        out += flips_section(*lead) + "\n";
    }

    // 4. The decision-point probe: one line per comparison.
    out += probe_section(data);

    // 5. How fast, and how much of a slower tail longer outputs explain.
    out += "## Latency and tokens\n\nSuccessful responses over all repeats, those with a latency "
           "(`timed`: imported answers have none); ms, completion tokens, requests per second "
           "achieved.\n\n";
    out += latency_table(data.summary, Style::markdown) + "\n";
    if (auto tail = tail_table(data, Style::markdown); !tail.empty()) {
        out += "Tail against the baseline on the paired questions. \"From longer outputs\" "
               "predicts both sides' p99 from their token counts at the baseline's speed "
               "(least squares latency ~ tokens); \"rest\" is what they leave unexplained: the "
               "candidate's own speed, or noise (not tested). " +
               tail_interval_note() + tail_flat_note(data) + "\n\n" + tail + "\n";
    }

    // 6. What each server said it ran.
    out += "## What actually ran\n\n" + servers_section(data);
    return out;
}

} // namespace diffeval::reports
