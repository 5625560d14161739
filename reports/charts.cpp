// report.html's static charts; see charts.hpp. Every chart has the same
// shape: groups as rows, in blocks of one framing and max_tokens, each row
// labelled with its server's name beside a swatch of the server's colour;
// the value axis runs along the top and bottom. Rows keep labels apart
// whatever the number of servers or the length of their names.
#include <reports/charts.hpp>

#include <reports/tables.hpp>

#include <harness/analysis/summary.hpp>
#include <harness/util/escape.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace diffeval::reports {

// Tick values for [lo, hi]: about six at 1, 2 or 5 times a power of ten.
std::vector<double> ticks(double lo, double hi) {
    const double span = std::max(hi - lo, 1e-9);
    const double raw = span / 6;
    const double mag = std::pow(10, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
        if (m * mag >= raw) {
            step = m * mag;
            break;
        }
    }
    std::vector<double> out;
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-6; v += step) {
        out.push_back(std::abs(v) < step * 1e-6 ? 0.0 : v);
    }
    return out;
}

std::string tick_text(double v) {
    return std::abs(v - std::round(v)) < 1e-9 ? fmt::format("{:.0f}", v) : fmt::format("{:g}", v);
}

namespace {

constexpr int k_series_colours = 8;
constexpr double k_width = 1080;    // drawn size, px: the report's column
constexpr double k_row = 24;        // one group
constexpr double k_block_head = 22; // "raw, max_tokens 256"
constexpr double k_char_px = 7.5;   // an upper bound for 12 px system-ui
constexpr size_t k_max_label = 40;  // characters before a name is cut

// One row of a chart: a group and where its server's colour comes from.
struct Row {
    const analysis::GroupSummary* group = nullptr;
    int colour = 0;
    bool block_start = false;
};

// Groups in blocks of (framing, max_tokens), servers in stored order inside.
std::vector<Row> chart_rows(const ReportData& data) {
    std::vector<Row> rows;
    const auto& servers = data.results.servers;
    for (const auto& g : data.summary.groups) {
        const int s =
            static_cast<int>(std::find(servers.begin(), servers.end(), g.server) - servers.begin());
        rows.push_back({&g, s % k_series_colours, false});
    }
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
        return std::tie(a.group->framing, a.group->max_tokens) <
               std::tie(b.group->framing, b.group->max_tokens);
    });
    for (size_t i = 0; i < rows.size(); ++i) {
        rows[i].block_start = i == 0 || rows[i].group->framing != rows[i - 1].group->framing ||
                              rows[i].group->max_tokens != rows[i - 1].group->max_tokens;
    }
    return rows;
}

// The frame of a row chart: the label column, the plot, and each row's y.
struct Layout {
    double label_w = 0, plot_x = 0, plot_w = 0, top = 34, height = 0;
    std::vector<double> row_y; // centre of each row
};

Layout layout(const std::vector<Row>& rows, double right_margin, double top = 34) {
    Layout l;
    l.top = top;
    size_t longest = 8;
    for (const auto& r : rows) {
        longest = std::max(longest, std::min(k_max_label, util::utf8_length(r.group->server)));
    }
    l.label_w = 40 + k_char_px * static_cast<double>(longest);
    l.plot_x = l.label_w + 10;
    l.plot_w = k_width - l.plot_x - right_margin;
    double y = l.top;
    for (const auto& r : rows) {
        if (r.block_start) {
            y += k_block_head;
        }
        l.row_y.push_back(y + k_row / 2);
        y += k_row;
    }
    l.height = y + 30;
    return l;
}

std::string svg_open(const Layout& l, const std::string& label) {
    return fmt::format(R"(<svg class="chart" width="{0}" height="{1}" viewBox="0 0 {0} {1}" )"
                       R"(role="img" aria-label="{2}">)",
                       k_width, l.height, util::xml_escape(label));
}

// Block headings and row labels: a swatch and the (possibly cut) server name.
std::string row_labels(const std::vector<Row>& rows, const Layout& l) {
    std::string out;
    for (size_t i = 0; i < rows.size(); ++i) {
        const auto& g = *rows[i].group;
        const double y = l.row_y[i];
        if (rows[i].block_start) {
            out += fmt::format(R"(<text class="head" x="4" y="{:.1f}">{}, max_tokens {}</text>)",
                               y - k_row / 2 - 6, util::xml_escape(g.framing), g.max_tokens);
        }
        out += fmt::format(R"(<rect class="s{}" x="12" y="{:.1f}" width="10" height="10"/>)",
                           rows[i].colour, y - 5);
        out += fmt::format(R"(<text x="28" y="{:.1f}"><title>{}</title>{}</text>)", y + 4,
                           util::xml_escape(g.server),
                           util::xml_escape(abbreviate(g.server, k_max_label)));
    }
    return out;
}

// Grid lines over the rows, tick labels above and below, the axis title
// under them.
std::string value_axis(const Layout& l, double lo, double hi, const std::string& title) {
    std::string out;
    const double y0 = l.top - 4, y1 = l.height - 30;
    for (double v : ticks(lo, hi)) {
        const double x = l.plot_x + l.plot_w * (v - lo) / (hi - lo);
        out += fmt::format(R"(<line class="grid" x1="{0:.1f}" x2="{0:.1f}" y1="{1:.1f}" )"
                           R"(y2="{2:.1f}"/>)",
                           x, y0, y1);
        out += fmt::format(R"(<text class="muted" x="{:.1f}" y="{:.1f}" )"
                           R"(text-anchor="middle">{}</text>)",
                           x, l.top - 10, tick_text(v));
        out += fmt::format(R"(<text class="muted" x="{:.1f}" y="{:.1f}" )"
                           R"(text-anchor="middle">{}</text>)",
                           x, y1 + 14, tick_text(v));
    }
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)",
                       l.plot_x + l.plot_w / 2, l.height - 2, util::xml_escape(title));
    return out;
}

double x_of(const Layout& l, double lo, double hi, double v) {
    return l.plot_x + l.plot_w * (std::clamp(v, lo, hi) - lo) / (hi - lo);
}

// Accuracy: the mean over repeats as a dot, min-max over repeats as a
// whisker, the value at the right. The axis covers the data, not 0-100, so
// differences of a point are visible; its title says where it starts.
std::string accuracy_chart(const ReportData& data, const std::vector<Row>& rows) {
    const auto& scorers = data.summary.scorers;
    const auto k = static_cast<size_t>(
        std::find(scorers.begin(), scorers.end(), data.layout.lead_scorer) - scorers.begin());
    double lo = 100, hi = 0;
    for (const auto& r : rows) {
        if (k < r.group->scorers.size()) {
            // The mean too: with uneven repeats it is over questions and can
            // lie outside every repeat's accuracy.
            const auto& s = r.group->scorers[k].spread;
            lo = std::min({lo, 100 * s.min, 100 * s.mean});
            hi = std::max({hi, 100 * s.max, 100 * s.mean});
        }
    }
    if (lo > hi) {
        return "";
    }
    lo = std::max(0.0, std::floor((lo - 2) / 5) * 5);
    hi = std::min(100.0, std::ceil((hi + 2) / 5) * 5);
    if (hi - lo < 10) {
        hi = std::min(100.0, lo + 10);
        lo = hi - 10;
    }
    auto l = layout(rows, 150);
    std::string out = svg_open(l, "accuracy per group, mean and min-max over repeats");
    out += value_axis(l, lo, hi,
                      lo > 0 ? fmt::format("accuracy ({} scorer), %; the axis starts at {:.0f}%",
                                           data.layout.lead_scorer, lo)
                             : fmt::format("accuracy ({} scorer), %", data.layout.lead_scorer));
    out += row_labels(rows, l);
    for (size_t i = 0; i < rows.size(); ++i) {
        const auto& g = *rows[i].group;
        if (k >= g.scorers.size()) {
            continue;
        }
        const auto& s = g.scorers[k].spread;
        const double y = l.row_y[i];
        const double x_min = x_of(l, lo, hi, 100 * s.min), x_max = x_of(l, lo, hi, 100 * s.max);
        out += fmt::format(R"(<g><title>{}: {}</title>)", util::xml_escape(g.label()),
                           util::xml_escape(pct_spread(s)));
        out += fmt::format(R"(<line class="whisker" x1="{0:.1f}" x2="{1:.1f}" y1="{2:.1f}" )"
                           R"(y2="{2:.1f}"/>)",
                           x_min, x_max, y);
        for (double x : {x_min, x_max}) {
            out += fmt::format(R"(<line class="whisker" x1="{0:.1f}" x2="{0:.1f}" y1="{1:.1f}" )"
                               R"(y2="{2:.1f}"/>)",
                               x, y - 5, y + 5);
        }
        out += fmt::format(R"(<circle class="s{}" cx="{:.1f}" cy="{:.1f}" r="5"/></g>)",
                           rows[i].colour, x_of(l, lo, hi, 100 * s.mean), y);
        out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{}</text>)", l.plot_x + l.plot_w + 10,
                           y + 4, util::xml_escape(pct_spread(s)));
    }
    return out + "</svg>";
}

// The attributes that paint outcome `o`: its palette class; the unrecorded
// outcome (only imports have it) is outside the stylesheet's palette, so a
// report of runs alone keeps its stylesheet, and is painted a pale grey here.
std::string outcome_paint(int o) {
    return o == static_cast<int>(scorers::Outcome::unrecorded)
               ? fmt::format(R"(class="o{}" fill="#dddddd")", o)
               : fmt::format(R"(class="o{}")", o);
}

// Where the responses went: one 100% bar per group in the outcome palette,
// the share written inside each segment wide enough to hold it.
std::string outcome_chart(const std::vector<Row>& rows) {
    auto l = layout(rows, 20, 34 + 26); // room for the legend
    std::string out = svg_open(l, "where the responses went, per group");
    // The legend, wrapped to the plot's width.
    double x = l.plot_x, y = 16;
    // Imported answers record no finish state; their outcome is in the legend
    // when some group has one.
    const bool unrecorded =
        std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.group->unrecorded > 0; });
    const int outcomes = unrecorded ? scorers::k_outcome_count : scorers::k_outcome_count - 1;
    for (int o = 0; o < outcomes; ++o) {
        const std::string name(scorers::outcome_name(o));
        const double w = 24 + k_char_px * static_cast<double>(name.size());
        if (x + w > l.plot_x + l.plot_w) {
            x = l.plot_x;
            y += 18;
        }
        out += fmt::format(R"(<rect {} x="{:.1f}" y="{:.1f}" width="12" height="12"/>)",
                           outcome_paint(o), x, y - 10);
        out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{}</text>)", x + 16, y, name);
        x += w;
    }
    out += value_axis(l, 0, 100, "share of responses, %");
    out += row_labels(rows, l);
    for (size_t i = 0; i < rows.size(); ++i) {
        const auto& g = *rows[i].group;
        const double parts[] = {g.finished, g.stop_truncated, g.length_truncated,
                                g.other,    g.errors,         g.unrecorded};
        static_assert(std::size(parts) == scorers::k_outcome_count);
        double total = 0;
        for (double p : parts) {
            total += p;
        }
        double at = 0;
        for (int o = 0; o < scorers::k_outcome_count; ++o) {
            if (total <= 0 || parts[o] <= 0) {
                continue;
            }
            const double x0 = x_of(l, 0, 100, 100 * at / total);
            at += parts[o];
            const double x1 = x_of(l, 0, 100, 100 * at / total);
            const double share = 100 * parts[o] / total;
            out += fmt::format(R"(<rect {} x="{:.1f}" y="{:.1f}" width="{:.1f}" )"
                               R"(height="{:.1f}"><title>{}: {} {:.1f}% ({:.1f} of {:.0f} )"
                               R"(per repeat)</title></rect>)",
                               outcome_paint(o), x0, l.row_y[i] - 8, x1 - x0, 16.0,
                               util::xml_escape(g.label()), scorers::outcome_name(o), share,
                               parts[o], total);
            const auto text = fmt::format("{:.0f}%", share);
            if (x1 - x0 > k_char_px * static_cast<double>(text.size()) + 6) {
                out += fmt::format(R"(<text class="on-o" x="{:.1f}" y="{:.1f}" )"
                                   R"(text-anchor="middle">{}</text>)",
                                   (x0 + x1) / 2, l.row_y[i] + 4, text);
            }
        }
    }
    return out + "</svg>";
}

// Percentiles like numpy's linear interpolation; `v` is sorted.
double percentile(const std::vector<double>& v, double p) {
    if (v.empty()) {
        return 0;
    }
    const double at = p * static_cast<double>(v.size() - 1);
    const auto i = static_cast<size_t>(at);
    const double frac = at - static_cast<double>(i);
    return i + 1 < v.size() ? v[i] + frac * (v[i + 1] - v[i]) : v[i];
}

using GroupKey = std::tuple<int, int, int>; // server, framing, max_tokens indices/values

GroupKey key_of(const ReportData& data, const analysis::GroupSummary& g) {
    const auto& s = data.results.servers;
    const auto& f = data.results.framings;
    return {static_cast<int>(std::find(s.begin(), s.end(), g.server) - s.begin()),
            static_cast<int>(std::find(f.begin(), f.end(), g.framing) - f.begin()), g.max_tokens};
}

// Box plots per group: whiskers p5-p95, box p25-p75, median line; for
// tokens, the group's max_tokens marked as a dashed red line.
std::string box_chart(const ReportData& data, const std::vector<Row>& rows,
                      const std::map<GroupKey, std::vector<double>>& values,
                      const std::string& label, const std::string& title, bool mark_limit) {
    double hi = 0;
    for (const auto& r : rows) {
        if (auto it = values.find(key_of(data, *r.group)); it != values.end()) {
            hi = std::max(hi, percentile(it->second, 0.95));
        }
        if (mark_limit) {
            hi = std::max(hi, static_cast<double>(r.group->max_tokens));
        }
    }
    if (hi <= 0) {
        return "";
    }
    hi = ticks(0, hi * 1.05).back() < hi * 1.05 ? hi * 1.1 : ticks(0, hi * 1.05).back();
    auto l = layout(rows, 190);
    std::string out = svg_open(l, label);
    out += value_axis(l, 0, hi, title);
    out += row_labels(rows, l);
    for (size_t i = 0; i < rows.size(); ++i) {
        const auto& g = *rows[i].group;
        const double y = l.row_y[i];
        if (mark_limit) {
            const double x = x_of(l, 0, hi, g.max_tokens);
            out += fmt::format(R"(<line class="limit" x1="{0:.1f}" x2="{0:.1f}" y1="{1:.1f}" )"
                               R"(y2="{2:.1f}"><title>max_tokens {3}</title></line>)",
                               x, y - 11, y + 11, g.max_tokens);
        }
        auto it = values.find(key_of(data, g));
        if (it == values.end() || it->second.empty()) {
            out += fmt::format(R"(<text class="muted" x="{:.1f}" y="{:.1f}">none measured</text>)",
                               l.plot_x + 4, y + 4);
            continue;
        }
        const auto& v = it->second;
        const double p5 = percentile(v, 0.05), p25 = percentile(v, 0.25), p50 = percentile(v, 0.5),
                     p75 = percentile(v, 0.75), p95 = percentile(v, 0.95);
        auto x = [&](double value) { return x_of(l, 0, hi, value); };
        out += fmt::format(R"(<g><title>{}: p5 {:.0f}, p25 {:.0f}, median {:.0f}, p75 )"
                           R"({:.0f}, p95 {:.0f} ({})</title>)",
                           util::xml_escape(g.label()), p5, p25, p50, p75, p95,
                           util::counted(v.size(), "response"));
        out += fmt::format(R"(<line class="whisker" x1="{0:.1f}" x2="{1:.1f}" y1="{2:.1f}" )"
                           R"(y2="{2:.1f}"/>)",
                           x(p5), x(p95), y);
        out += fmt::format(R"(<rect class="s{} box" x="{:.1f}" y="{:.1f}" width="{:.1f}" )"
                           R"(height="14" fill-opacity="0.55"/>)",
                           rows[i].colour, x(p25), y - 7, std::max(1.0, x(p75) - x(p25)));
        out += fmt::format(R"(<line class="whisker" x1="{0:.1f}" x2="{0:.1f}" y1="{1:.1f}" )"
                           R"(y2="{2:.1f}"/></g>)",
                           x(p50), y - 8, y + 8);
        out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">median {:.0f}, p95 {:.0f}</text>)",
                           l.plot_x + l.plot_w + 10, y + 4, p50, p95);
    }
    return out + "</svg>";
}

} // namespace

std::string abbreviate(const std::string& name, size_t max_chars) {
    if (util::utf8_length(name) <= max_chars) {
        return name;
    }
    return std::string(util::utf8_prefix(name, max_chars - 1)) + "\u2026";
}

std::string charts_section(const ReportData& data) {
    const auto rows = chart_rows(data);
    std::map<GroupKey, std::vector<double>> tokens, latency;
    for (const auto& r : data.results.rows) {
        const GroupKey key{r.server, r.framing, r.max_tokens};
        if (r.completion_tokens) {
            tokens[key].push_back(static_cast<double>(*r.completion_tokens));
        }
        if (r.ok && r.latency_ms && *r.latency_ms > 0) {
            latency[key].push_back(*r.latency_ms);
        }
    }
    for (auto* m : {&tokens, &latency}) {
        for (auto& [key, v] : *m) {
            std::sort(v.begin(), v.end());
        }
    }
    std::string out = "<h2 id=\"charts\">Charts</h2>\n<p class=\"note\">One row per server, "
                      "framing and max_tokens; each server keeps its colour in every chart. "
                      "Hover a row for its figures.</p>\n<div class=\"charts\">\n";
    out += "<figure><figcaption>Accuracy per group <span class=\"note\">dot = mean over "
           "repeats, whisker = min-max over repeats</span></figcaption>" +
           accuracy_chart(data, rows) + "</figure>\n";
    const auto unsent = analysis::unsent_errors_text(data.completeness);
    out += "<figure><figcaption>Where the responses went <span class=\"note\">share of each "
           "group's responses by outcome" +
           (unsent.empty() ? std::string() : ". " + util::xml_escape(unsent)) +
           "</span></figcaption>" + outcome_chart(rows) + "</figure>\n";
    out += "<figure id=\"transitions\"><figcaption>From one group to another <span "
           "class=\"note\">how each question's outcome moved between the two groups you pick "
           "(repeats averaged per question)</span></figcaption><div class=\"controls\">"
           "<label>from <select id=\"tr-a\"></select></label><label>to <select "
           "id=\"tr-b\"></select></label><label>scorer <select id=\"tr-s\"></select></label>"
           "</div><div id=\"tr-chart\"><p class=\"note\">The "
           "transition chart needs JavaScript.</p></div></figure>\n";
    out += "<figure><figcaption>Completion tokens per group <span class=\"note\">box = p25-p75, "
           "line = median, whisker = p5-p95, dashed red = the group's max_tokens"
           "</span></figcaption>" +
           box_chart(data, rows, tokens, "completion tokens per group", "completion tokens", true) +
           "</figure>\n";
    if (!latency.empty()) {
        out += "<figure><figcaption>Latency per group <span class=\"note\">successful responses; "
               "box = p25-p75, line = median, whisker = p5-p95</span></figcaption>" +
               box_chart(data, rows, latency, "latency per group", "latency, ms", false) +
               "</figure>\n";
    } else {
        out += "<p class=\"note\">No latencies were recorded.</p>\n";
    }
    return out + "</div>\n";
}

} // namespace diffeval::reports
