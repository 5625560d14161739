// The Markdown report; see markdown.hpp.
#include <reports/markdown.hpp>

#include <reports/tables.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace diffeval::reports {

namespace {

std::string flips_section(const analysis::Comparison& c) {
    std::vector<std::vector<std::string>> rows = {{"q", "right more often in", c.a.text() + " %",
                                                   c.b.text() + " %", "baseline says",
                                                   "candidate says"}};
    auto add = [&](const std::vector<analysis::Flip>& flips, const std::string& side) {
        for (const auto& f : flips) {
            rows.push_back({std::to_string(f.question_idx), side,
                            fmt::format("{:.0f}", 100.0 * f.a), fmt::format("{:.0f}", 100.0 * f.b),
                            markdown_cell(f.a_excerpt), markdown_cell(f.b_excerpt)});
        }
    };
    add(c.a_better, c.a.text());
    add(c.b_better, c.b.text());
    if (rows.size() == 1) {
        return "No question flipped.\n";
    }
    return render_table(rows, Style::markdown);
}

// `text` for running prose or a heading: markup characters backslash-escaped.
std::string md_text(const std::string& text) {
    return markdown_escape(markdown_cell(text));
}

// What actually ran: one row per fact, one column per server; differing
// facts are marked, and every conflict the fingerprint found gets a line.
std::string servers_section(const ReportData& data) {
    std::vector<std::vector<std::string>> rows = {{"fact"}};
    for (const auto& s : data.servers) {
        rows[0].push_back(markdown_cell(s.name));
    }
    rows[0].push_back("differs");
    for (const auto& f : analysis::fact_rows(data.servers)) {
        std::vector<std::string> row = {markdown_cell(f.name)};
        for (const auto& v : f.values) {
            row.push_back(markdown_cell(v.empty() ? "-" : v));
        }
        row.push_back(f.differs ? "yes" : "");
        rows.push_back(std::move(row));
    }
    std::string out = render_table(rows, Style::markdown);
    bool any_fingerprint = false;
    for (const auto& s : data.servers) {
        any_fingerprint = any_fingerprint || s.fingerprinted;
        for (const auto& c : s.conflicts) {
            out += fmt::format("\n**CONFLICT** on {}: {} ({})", md_text(s.name), md_text(c.message),
                               md_text(c.name));
            for (const auto& e : c.evidence) {
                out += fmt::format("\n  - evidence: {}", md_text(e));
            }
            out += "\n";
        }
    }
    if (!any_fingerprint) {
        out += "\nNo server log was fingerprinted; attach one with `--server-log` to see the "
               "engine's own facts.\n";
    }
    return out;
}

} // namespace

std::string markdown_cell(const std::string& text) {
    std::string out;
    for (char c : text) {
        auto u = static_cast<unsigned char>(c);
        if (c == '&') {
            out += "&amp;";
        } else {
            out += u < 0x20 || u == 0x7F ? ' ' : c;
        }
    }
    return out;
}

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
    // 1. The headline a reviewer reads first.
    out += md_text(headline(data)) + "\n\n";
    out += fmt::format("Baseline: `{}`. Charts, every question and every response side by side: "
                       "`report.html` next to this file.\n\n",
                       markdown_cell(data.baseline));

    // 2. The harness verdicts and where the responses went.
    out += "## Harness verdicts\n\nAccuracy %, mean (min-max) over repeats.\n\n";
    out += verdict_table(data.summary, Style::markdown) + "\n";
    out += "## Where the responses went\n\nMean responses per run; accuracy by `vllm`.\n\n";
    out += breakdown_table(data.summary, "vllm", Style::markdown) + "\n";

    // 3. Every server against the baseline.
    if (!data.comparisons.empty()) {
        out += fmt::format(
            "## Against the baseline\n\nDifferences in points (candidate minus baseline), paired "
            "bootstrap interval ({} resamples), McNemar mid-p over paired responses, noise "
            "floor = the baseline's largest difference between its own repeats. Beyond noise = "
            "the interval excludes 0 and the difference exceeds the noise floor.\n\n",
            data.comparisons.front().interval.resamples);
        out += comparison_table(data, Style::markdown) + "\n";
        const auto* lead = lead_comparison(data);
        out += fmt::format("## Top flipped questions: {} vs {} ({})\n\n", md_text(lead->b.text()),
                           md_text(lead->a.text()), lead->scorer);
        out += flips_section(*lead) + "\n";
    }

    // 4. The decision-point probe: one line per comparison.
    out += probe_section(data);

    // 5. How fast, and how much of a slower tail longer outputs explain.
    out += "## Latency and tokens\n\nSuccessful responses over all repeats; ms, completion "
           "tokens, requests per second achieved.\n\n";
    out += latency_table(data.summary, Style::markdown) + "\n";
    if (auto tail = tail_table(data, Style::markdown); !tail.empty()) {
        out += "Tail against the baseline on the paired questions. \"From longer outputs\" "
               "predicts both sides' p99 from their token counts at the baseline's speed "
               "(least squares latency ~ tokens); \"rest\" is the candidate being slower per "
               "request.\n\n" +
               tail + "\n";
    }

    // 6. What each server said it ran.
    out += "## What actually ran\n\n" + servers_section(data);
    return out;
}

} // namespace diffeval::reports
