// The probe's part of report.html; see probe_html.hpp.
#include <reports/probe_html.hpp>

#include <harness/probe/reading.hpp>
#include <harness/util/escape.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace diffeval::reports {

namespace {

constexpr int k_size = 320;                 // the square's side, in SVG units
constexpr int k_margin = 64;                // room for the axis labels
constexpr const char* k_lost = "#d62728";   // B lost the answer
constexpr const char* k_gained = "#2ca02c"; // B gained it
constexpr const char* k_same = "#7f7f7f";

} // namespace

std::string probe_scatter_svg(const analysis::ProbeComparison& c) {
    // Logit axes: probabilities near 0 and 1, where a decision is made,
    // spread out as the analysis sees them; ticks are labelled as
    // probabilities.
    double lo = 1e9, hi = -1e9;
    for (const auto& p : c.points) {
        lo = std::min({lo, probe::logit(p.p_a), probe::logit(p.p_b)});
        hi = std::max({hi, probe::logit(p.p_a), probe::logit(p.p_b)});
    }
    if (c.points.empty()) {
        lo = -1;
        hi = 1;
    }
    const double pad = std::max((hi - lo) * 0.05, 0.1);
    lo -= pad;
    hi += pad;
    const int inner = k_size - k_margin; // the plot's side
    auto x = [&](double l) { return k_margin + (l - lo) / (hi - lo) * inner; };
    auto y = [&](double l) { return k_margin / 2.0 + inner - (l - lo) / (hi - lo) * inner; };
    std::string out = fmt::format(
        // Drawn at the size shown, as the other charts are: with a viewBox
        // alone it stretched to the page's width, its 12 px text to 35 px.
        R"s(<svg class="probe-scatter" width="{0}" height="{0}" viewBox="0 0 {0} {0}" role="img" )s"
        R"s(aria-label="{1}">)s",
        k_size + k_margin / 2,
        util::xml_escape(
            fmt::format("P(open) per question: {} against {} on {}", c.b, c.a, c.framing)));
    // The frame, the diagonal ("no change") and probability ticks.
    out += fmt::format(R"s(<rect x="{0:.1f}" y="{1:.1f}" width="{2}" height="{2}" fill="none" )s"
                       R"s(stroke="#999"/>)s",
                       x(lo), y(hi), inner);
    out += fmt::format(R"s(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#999" )s"
                       R"s(stroke-dasharray="4 3"/>)s",
                       x(lo), y(lo), x(hi), y(hi));
    for (double t : {0.001, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999}) {
        const double l = probe::logit(t);
        if (l < lo || l > hi) {
            continue;
        }
        out += fmt::format(R"s(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)s", x(l),
                           y(lo) + 14, t);
        out += fmt::format(R"s(<text x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>)s",
                           x(lo) - 3, y(l) + 4, t);
    }
    out += fmt::format(R"s(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{} P(open)</text>)s",
                       x((lo + hi) / 2), y(lo) + 30, util::xml_escape(c.a));
    out += fmt::format(R"s(<text x="{0}" y="{1:.1f}" text-anchor="middle" )s"
                       R"s(transform="rotate(-90 {0} {1:.1f})">{2} P(open)</text>)s",
                       12, y((lo + hi) / 2), util::xml_escape(c.b));
    for (const auto& p : c.points) {
        const char* colour = p.flipped < 0 ? k_lost : p.flipped > 0 ? k_gained : k_same;
        const char* what = p.flipped < 0   ? "answer lost"
                           : p.flipped > 0 ? "answer gained"
                                           : "no flip";
        out += fmt::format(R"s(<circle cx="{:.1f}" cy="{:.1f}" r="3.5" fill="{}" )s"
                           R"s(fill-opacity="0.75"><title>question {}: {:.4f} -&gt; {:.4f} )s"
                           R"s(({})</title></circle>)s",
                           x(probe::logit(p.p_a)), y(probe::logit(p.p_b)), colour, p.question_idx,
                           p.p_a, p.p_b, what);
    }
    return out + "</svg>";
}

std::string probe_html(const ReportData& data) {
    if (data.probes.empty() && data.probe_notes.empty()) {
        return "";
    }
    std::string out =
        "<h2 id=\"probe\">Decision-point probe</h2>\n<p class=\"note\">P(open): the probability "
        "the first answer token opens a think block, from the engine's top log-probabilities; "
        "shifts in logits, paired per question. Points above the dashed diagonal open more often "
        "under the candidate; <span style=\"color:#d62728\">red</span>: the candidate lost the "
        "answer, <span style=\"color:#2ca02c\">green</span>: it gained it.</p>\n<ul>\n";
    for (const auto& p : data.probes) {
        out += "<li>" + util::xml_escape(analysis::probe_line(p)) + "</li>\n";
    }
    for (const auto& n : data.probe_notes) {
        out += "<li>" + util::xml_escape(n) + "</li>\n";
    }
    out += "</ul>\n<div class=\"charts\">\n";
    for (const auto& p : data.probes) {
        if (!p.points.empty()) {
            out += "<figure>" + probe_scatter_svg(p) + "<figcaption>" +
                   util::xml_escape(fmt::format("{} against {}, {} framing", p.b, p.a, p.framing)) +
                   "</figcaption></figure>\n";
        }
    }
    return out + "</div>\n";
}

} // namespace diffeval::reports
