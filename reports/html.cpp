// The HTML report; see html.hpp. The page is built in four parts: the
// head with its policy and styles (reports/assets/report.css), the charts
// (charts.cpp) and tables computed from the summary, the embedded data
// (streamed from the store), and the script that runs the question explorer
// and the transition chart over that data (reports/assets/report.js).
#include <reports/html.hpp>
#include <reports/probe_html.hpp>

#include <harness/analysis/compare.hpp>
#include <harness/analysis/results.hpp>
#include <harness/store/readers.hpp>
#include <harness/util/embedded.hpp>
#include <harness/util/escape.hpp>
#include <harness/util/file.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/pyjson.hpp>
#include <harness/util/text.hpp>

#include <reports/charts.hpp>
#include <reports/tables.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace diffeval::reports {

namespace {

// The page's head up to its styles; the styles and the script are asset
// files (reports/assets/) compiled into the binary.
const char k_head[] =
    R"(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src SCRIPT_HASH; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>diffeval report</title>
<style>
)";

std::string_view asset(std::string_view path) {
    auto a = util::embedded_file(path);
    return a ? *a : std::string_view{};
}

// `k_head` with the policy's script source: the page's own `script` (as it
// stands between its tags) by its sha256, so no other inline script runs.
// 'unsafe-inline' let escaping alone stand between model output and script
// (an outside audit found no way through it; this is the second wall).
std::string page_head(std::string_view script) {
    std::string head = k_head;
    const std::string_view mark = "SCRIPT_HASH";
    head.replace(head.find(mark), mark.size(), "'sha256-" + util::sha256_base64(script) + "'");
    return head;
}

// ---- tables ----

// Latency and tokens per group, then each comparison's tail difference.
std::string latency_tables(const ReportData& data) {
    std::string out = "<h2 id=\"latency\">Latency and tokens</h2>\n<p class=\"note\">Successful "
                      "responses over all repeats; ms, completion tokens, requests per second "
                      "achieved.</p>\n" +
                      latency_table(data.summary, Style::html);
    if (auto tails = tail_table(data, Style::html); !tails.empty()) {
        out += "<p class=\"note\">Tail against the baseline on the paired questions. From longer "
               "outputs: both sides' p99 predicted from their token counts at the baseline's "
               "speed (least squares latency ~ tokens); rest: what they leave unexplained, the "
               "candidate's own speed or noise (not tested). " +
               tail_interval_note() + tail_flat_note(data) + "</p>\n" + tails;
    }
    return out;
}

// What actually ran: facts by server, differing rows marked, conflicts red.
std::string what_ran(const ReportData& data) {
    std::string out = "<h2 id=\"servers\">What actually ran</h2>\n<table class=\"facts\">\n<tr>"
                      "<th>fact</th>";
    for (const auto& s : data.servers) {
        out += "<th>" + util::xml_escape(s.name) + "</th>";
    }
    out += "</tr>\n";
    for (const auto& f : analysis::fact_rows(data.servers)) {
        out += f.differs ? "<tr class=\"differs\" title=\"differs between servers\">" : "<tr>";
        out += "<td>" + util::xml_escape(f.name) + "</td>";
        for (size_t i = 0; i < f.values.size(); ++i) {
            out += "<td>" + util::xml_escape(fact_cell(f.values[i], f.stated[i])) + "</td>";
        }
        out += "</tr>\n";
    }
    out += "</table>\n";
    bool any_fingerprint = false;
    for (const auto& s : data.servers) {
        any_fingerprint = any_fingerprint || s.fingerprinted;
        for (const auto& c : s.fingerprint.conflicts) {
            out += "<div class=\"conflict\"><strong>CONFLICT</strong> on " +
                   util::xml_escape(s.name) + ": " + util::xml_escape(c.message) + " (" +
                   util::xml_escape(c.name) + ")";
            if (!c.evidence.empty()) {
                out += "<ul>";
                for (const auto& e : c.evidence) {
                    out += "<li><code>" + util::xml_escape(e) + "</code></li>";
                }
                out += "</ul>";
            }
            out += "</div>\n";
        }
        for (const auto& m : analysis::mixed_answers(s)) {
            out += "<div class=\"conflict\"><strong>" + std::string(m.heading) + "</strong> on " +
                   util::xml_escape(s.name) + ": " + util::xml_escape(m.conflict.message) +
                   "</div>\n";
        }
    }
    if (!any_fingerprint) {
        out += "<p class=\"note\">No server log was fingerprinted; attach one with "
               "--server-log to see the engine's own facts.</p>\n";
    }
    return out;
}

// The forest plot: one row per comparison, its difference as a dot and its
// interval as a bar, on a shared points axis with a line at 0 (and at +-m when
// a margin was asked for), coloured by verdict. Self-contained (inline SVG,
// its own colours) so the chart can be restyled in one place.
// The forest plot's colour for a verdict.
const char* verdict_colour(analysis::VerdictKind k) {
    switch (k) {
    case analysis::VerdictKind::worse:
        return "#c0392b";
    case analysis::VerdictKind::better:
        return "#1e8449";
    case analysis::VerdictKind::equivalent:
        return "#2874a6";
    case analysis::VerdictKind::no_evidence:
    case analysis::VerdictKind::no_detectable_difference:
        break;
    }
    return "#7f8c8d";
}

// The forest plot's axis in points: every interval, 0 and the margin, padded.
struct ForestRange {
    double lo = 0, hi = 0;
    std::optional<double> margin;
};

ForestRange forest_range(const ReportData& data) {
    ForestRange r;
    for (const auto& c : data.comparisons) {
        r.lo = std::min(r.lo, 100.0 * c.stats.interval.lo);
        r.hi = std::max(r.hi, 100.0 * c.stats.interval.hi);
        if (c.verdict.margin) {
            r.margin = 100.0 * *c.verdict.margin;
        }
    }
    if (r.margin) {
        r.lo = std::min(r.lo, -*r.margin);
        r.hi = std::max(r.hi, *r.margin);
    }
    const double pad = std::max(1.0, 0.1 * (r.hi - r.lo));
    r.lo -= pad;
    r.hi += pad;
    return r;
}

std::string forest_plot(const ReportData& data) {
    if (data.comparisons.empty()) {
        return "";
    }
    // Named copies, not a structured binding: clang 14 (the sanitized and
    // fuzz tree) cannot capture a binding in the lambdas below.
    const ForestRange range = forest_range(data);
    const double lo = range.lo;
    const double hi = range.hi;
    const auto& margin = range.margin;
    // The verdict's words after the plot take up to 26 characters ("no
    // detectable difference*"), about 170 px at 12 px: the SVG clipped the
    // asterisk at 140 (reports audit #7). A row's label is cut to what its
    // 330 px hold, whole in its tooltip.
    const int label_w = 330, plot_w = 420, words_w = 200, row_h = 22, top = 26;
    constexpr size_t k_label_chars = 40; // as the other charts cut names
    const int height = top + row_h * static_cast<int>(data.comparisons.size()) + 30;
    auto x = [&](double points) { return label_w + (points - lo) / (hi - lo) * plot_w; };
    std::string out =
        fmt::format(R"(<figure class="forest"><svg width="{}" height="{}" )"
                    R"(role="img" aria-label="difference and interval of every comparison" )"
                    R"(font-family="sans-serif" font-size="12">)",
                    label_w + plot_w + words_w, height);
    auto vline = [&](double points, const char* dash) {
        out += fmt::format(R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="#555" )"
                           R"(stroke-dasharray="{3}"/>)",
                           x(points), top - 8, height - 24, dash);
    };
    vline(0, "none");
    if (margin) {
        vline(-*margin, "4 3");
        vline(*margin, "4 3");
    }
    // Round values, 0 among them (an audit: -44 -37 ... 5 12, no 0).
    for (const double tick : ticks(lo, hi)) {
        out += fmt::format(R"(<text x="{:.1f}" y="{}" text-anchor="middle" fill="#555">{}</text>)",
                           x(tick), height - 8, tick_text(tick));
    }
    out += fmt::format(R"(<text x="{}" y="14" fill="#555">points, candidate minus baseline)"
                       R"( ({:g}% interval){}</text>)",
                       label_w, 100 * (1 - data.comparisons.front().stats.alpha),
                       margin ? fmt::format("; dashed: ±{:.1f} margin", *margin) : "");
    // A borderline no-difference (interval and test disagree) is marked
    // with an asterisk: its whole words would not fit beside the chart.
    bool borderline = false;
    auto chart_words = [&](const analysis::Comparison& c) {
        if (c.verdict.borderline) {
            borderline = true;
            return std::string(analysis::verdict_name(c.verdict.kind)) + "*";
        }
        return c.verdict.words;
    };
    int y = top;
    for (const auto& c : data.comparisons) {
        const auto* col = verdict_colour(c.verdict.kind);
        const double cy = y + row_h / 2.0;
        const auto pair = fmt::format("{} vs {}", c.b.text(), c.a.text());
        const auto label = fmt::format("{} ({})", pair, c.scorer);
        // Cut, the pair gives way before the scorer: two rows of one pair
        // differ by their scorer alone (an audit: "(vll…" beside "(lm-…").
        const auto scorer = fmt::format(" ({})", abbreviate(c.scorer, 16));
        const size_t room = k_label_chars - util::utf8_length(scorer);
        const auto shown =
            util::utf8_length(label) <= k_label_chars ? label : abbreviate(pair, room) + scorer;
        out +=
            fmt::format(R"(<text x="{}" y="{:.1f}" text-anchor="end"><title>{}</title>{}</text>)",
                        label_w - 8, cy + 4, util::xml_escape(label), util::xml_escape(shown));
        out += fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="{}" )"
                           R"(stroke-width="3"/>)",
                           x(100.0 * c.stats.interval.lo), x(100.0 * c.stats.interval.hi), cy, cy,
                           col);
        out += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="4.5" fill="{}"><title>{}</title>)"
                           R"(</circle>)",
                           x(100.0 * c.stats.diff), cy, col, util::xml_escape(c.verdict.sentence));
        out += fmt::format(R"(<text x="{}" y="{:.1f}" fill="{}">{}</text>)", label_w + plot_w + 8,
                           cy + 4, col, util::xml_escape(chart_words(c)));
        y += row_h;
    }
    return out +
           "</svg><figcaption class=\"note\">Each comparison's difference (dot) and "
           "interval (bar), coloured by verdict: red worse, green better, grey no "
           "detectable difference, blue equivalent within the margin." +
           (borderline ? std::string(" *: the interval excludes 0 but the sign-flip test does "
                                     "not reject, or the reverse (the table's verdict column "
                                     "says which).")
                       : std::string()) +
           "</figcaption></figure>\n";
}

std::string tables(const ReportData& data) {
    std::string out = "<h2 id=\"verdicts\">Harness verdicts</h2>\n<p class=\"note\">Accuracy "
                      "%, mean (min-max) over repeats" +
                      analysis::scored_text_words(data.results.score_text) + ".</p>\n" +
                      verdict_table(data.summary, Style::html);
    if (auto cmp = comparison_table(data, Style::html); !cmp.empty()) {
        out += "<h2 id=\"compare\">Against the baseline</h2>\n" + forest_plot(data) +
               "<p class=\"note\">Points, candidate minus baseline, the question as the unit; "
               "paired BCa bootstrap interval over questions; sign-flip mid-p over questions, raw "
               "and Holm-adjusted; A is the baseline and B the candidate, A/B better = questions "
               "right more often on that side; noise SD = a side's accuracy spread on a re-run; "
               "MDD = the "
               "smallest difference detected at 80% power (docs/statistics.md).</p>\n" +
               cmp;
    }
    out += probe_html(data);
    out += latency_tables(data);
    out += what_ran(data);
    return out;
}

const char k_explorer[] = R"(<h2 id="explorer">Question explorer</h2>
<div class="controls">
<label>A <select id="sel-a"></select></label>
<label>B <select id="sel-b"></select></label>
<label>framing <select id="sel-f"></select></label>
<label>max_tokens <select id="sel-m"></select></label>
<label>scorer <select id="sel-s"></select></label>
<label>show <select id="sel-show"><option value="all">all questions</option><option value="flips">flips between A and B</option></select></label>
<label>sort <select id="sel-sort"><option value="q">question</option><option value="diff">largest difference</option><option value="lost">B lost most</option><option value="gained">B gained most</option></select></label>
</div>
<p class="pager"><span id="count"></span> &middot; <button id="prev" type="button">&larr; previous</button> <span id="pageinfo"></span> <button id="next" type="button">next &rarr;</button></p>
<table id="qlist"><thead><tr><th>q</th><th>question</th><th id="th-a">A right</th><th id="th-b">B right</th><th>B&minus;A</th></tr></thead><tbody id="qbody"></tbody></table>
<div id="detail"><p class="note">Click a question to see both servers' responses side by side (the explorer needs JavaScript).</p></div>
)";

// ---- data ----

// Rows are written in chunks of about this size.
constexpr size_t k_chunk_bytes = 1 << 20;

void json_text(std::string& buf, std::string_view text) {
    util::append_json_string(buf, text, util::JsonStringStyle::script);
}

void json_opt_text(std::string& buf, const std::optional<std::string_view>& text) {
    if (text) {
        json_text(buf, *text);
    } else {
        buf += "null";
    }
}

} // namespace

void ExplorerRows::Closer::operator()(std::FILE* f) const {
    std::fclose(f);
}

util::Result<void> ExplorerRows::open(const std::filesystem::path& temp_dir) {
    // The temporary files sit beside report.html (which needs the same space
    // anyway) and are unlinked at once, so nothing is left behind.
    for (auto& part : m_parts) {
        std::string name = (temp_dir / ".report.html.XXXXXX").string();
        const int fd = mkstemp(name.data());
        if (fd >= 0) {
            unlink(name.c_str());
            part.file.reset(fdopen(fd, "w+b"));
            if (!part.file) {
                close(fd);
            }
        }
        if (!part.file) {
            return util::make_error(util::ErrorKind::io,
                                    fmt::format("cannot create a temporary file in {}: {}",
                                                temp_dir.string(), std::strerror(errno)));
        }
    }
    return {};
}

util::Result<void> ExplorerRows::read_questions(const std::string& db_path) {
    auto st = store::Store::open(db_path, store::Store::Mode::read_only);
    if (!st) {
        return st.error();
    }
    // Questions asked, with the gold answer.
    m_questions = "\"questions\":{";
    bool first = true;
    auto read = store::for_each_asked_question(
        **st, [&](int64_t idx, std::string_view question, std::string_view answer) {
            fmt::format_to(std::back_inserter(m_questions), "{}\"{}\":[", first ? "" : ",", idx);
            json_text(m_questions, question);
            m_questions += ',';
            json_text(m_questions, answer);
            m_questions += ']';
            first = false;
        });
    if (!read) {
        return read;
    }
    m_questions += '}';
    return {};
}

std::array<analysis::ResponseVisitor, 2> ExplorerRows::visitors() {
    std::array<analysis::ResponseVisitor, 2> out;
    for (size_t i = 0; i < m_parts.size(); ++i) {
        out[i] = [this, i](const analysis::ResultRow& row, const analysis::ResponseDetail& d) {
            return add(m_parts[i], row, d);
        };
    }
    return out;
}

util::Result<void> ExplorerRows::flush(Part& part) {
    if (!part.buf.empty() &&
        std::fwrite(part.buf.data(), 1, part.buf.size(), part.file.get()) != part.buf.size()) {
        return util::make_error(util::ErrorKind::io,
                                fmt::format("cannot write report.html's rows to a temporary "
                                            "file: {}",
                                            std::strerror(errno)));
    }
    part.buf.clear();
    return {};
}

// One response: [server, framing, max_tokens, repeat, question, text,
// reasoning, finish_reason, stop_reason, completion_tokens, outcome, error,
// [[extracted, correct] or null per scorer of the part], stop_cause,
// opened (0 or 1)], as the page's script reads it.
util::Result<void> ExplorerRows::add(Part& part, const analysis::ResultRow& row,
                                     const analysis::ResponseDetail& d) {
    auto& buf = part.buf;
    if (part.rows++ > 0) {
        buf += ',';
    }
    if (d.scorers && d.scorers->size() > part.scorers.size()) {
        part.scorers = *d.scorers;
    }
    fmt::format_to(std::back_inserter(buf), "[{},{},{},{},{},", row.server, row.framing,
                   row.max_tokens, row.repeat, row.question_idx);
    json_opt_text(buf, d.text);
    buf += ',';
    json_opt_text(buf, d.reasoning);
    buf += ',';
    json_opt_text(buf, d.finish_reason);
    buf += ',';
    if (const auto* id = std::get_if<int64_t>(&d.stop_reason)) {
        fmt::format_to(std::back_inserter(buf), "{}", *id);
    } else if (const auto* text = std::get_if<std::string>(&d.stop_reason)) {
        json_text(buf, *text);
    } else {
        buf += "null";
    }
    buf += ',';
    if (row.completion_tokens) {
        fmt::format_to(std::back_inserter(buf), "{},", *row.completion_tokens);
    } else {
        buf += "null,";
    }
    // A planned request with no response is unsent, as the comparisons'
    // transitions say, not a server's error.
    json_text(buf, analysis::transition_state_name(analysis::transition_state(row)));
    buf += ',';
    json_opt_text(buf, d.error);
    buf += ",[";
    for (size_t k = 0; k < d.scored.size(); ++k) {
        buf += k ? "," : "";
        if (d.scored[k]) {
            buf += '[';
            json_text(buf, d.extracted[k]);
            buf += row.correct[k] ? ",1]" : ",0]";
        } else {
            buf += "null";
        }
    }
    buf += "],";
    json_opt_text(buf, d.stop_cause);
    buf += d.opened ? ",1]" : ",0]";
    return buf.size() >= k_chunk_bytes ? flush(part) : util::Result<void>{};
}

std::string ExplorerRows::data_head(const ReportData& data) const {
    nlohmann::json parts = nlohmann::json::array();
    for (const auto& part : m_parts) {
        parts.push_back({{"rows", part.rows}, {"scorers", part.scorers}});
    }
    nlohmann::json head = {{"servers", data.results.servers},
                           {"framings", data.results.framings},
                           {"scorers", data.results.scorers},
                           {"baseline", data.baseline},
                           {"parts", parts}};
    std::string h = script_safe_json(head);
    h.back() = ','; // reopen the object for the questions and responses
    return "<script type=\"application/json\" id=\"data\">" + h + m_questions + ",\"responses\":[";
}

namespace {

// Append the whole of `in_fd` to `out_fd`: in the kernel where the
// filesystem allows (the file sits beside the report), else via a buffer.
util::Result<void> append_file(int in_fd, int out_fd) {
    const off_t size = lseek(in_fd, 0, SEEK_END);
    off_t at = 0;
    while (at < size) {
        const ssize_t n =
            copy_file_range(in_fd, &at, out_fd, nullptr, static_cast<size_t>(size - at), 0);
        if (n > 0) {
            continue;
        }
        if (n < 0 && errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP) {
            break;
        }
        std::vector<char> chunk(k_chunk_bytes);
        ssize_t got = 0;
        while (at < size && (got = pread(in_fd, chunk.data(), chunk.size(), at)) > 0) {
            for (ssize_t done = 0; done < got;) {
                const ssize_t w =
                    write(out_fd, chunk.data() + done, static_cast<size_t>(got - done));
                if (w <= 0) {
                    return util::write_error("report.html", errno);
                }
                done += w;
            }
            at += got;
        }
        break;
    }
    if (at != size) {
        return util::write_error("report.html", errno);
    }
    return {};
}

} // namespace

util::Result<void> ExplorerRows::copy_to(int out_fd) {
    for (size_t i = 0; i < m_parts.size(); ++i) {
        auto& part = m_parts[i];
        if (!part.file) {
            return util::make_error(util::ErrorKind::internal,
                                    "report.html's rows were not collected");
        }
        if (auto f = flush(part); !f) {
            return f;
        }
        if (std::fflush(part.file.get()) != 0) {
            return util::write_error("report.html", errno);
        }
        // Parts after a non-empty one start with the comma between them.
        if (i > 0 && part.rows > 0 && m_parts[0].rows > 0 && write(out_fd, ",", 1) != 1) {
            return util::write_error("report.html", errno);
        }
        if (auto r = append_file(fileno(part.file.get()), out_fd); !r) {
            return r;
        }
    }
    return {};
}

std::string script_safe_json(const nlohmann::json& j) {
    // ensure_ascii turns U+2028/2029 into \u escapes; the rest we do here,
    // which is safe because < > & only ever occur inside JSON strings.
    const auto raw = j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    std::string out;
    out.reserve(raw.size());
    for (char c : raw) {
        switch (c) {
        case '<':
            out += "\\u003c";
            break;
        case '>':
            out += "\\u003e";
            break;
        case '&':
            out += "\\u0026";
            break;
        default:
            out += c;
        }
    }
    return out;
}

util::Result<util::ReplacingFile> staged_html(const ReportData& data, ExplorerRows& rows,
                                              const std::filesystem::path& path) {
    // 1. Head, headline and navigation; charts and tables from the summary;
    // the explorer's frame and the start of its data.
    const std::string script = "\n" + std::string(asset("reports/assets/report.js"));
    std::string before = page_head(script);
    before += asset("reports/assets/report.css");
    before += "</style>\n</head>\n";
    const auto sentences = headline_sentences(data);
    before += "<body>\n<h1>diffeval report</h1>\n<div class=\"headline\"><p>" +
              util::xml_escape(sentences.front()) + "</p>";
    if (sentences.size() > 1) {
        before += "<ul>";
        for (size_t i = 1; i < sentences.size(); ++i) {
            before += "<li>" + util::xml_escape(sentences[i]) + "</li>";
        }
        before += "</ul>";
    }
    before += "</div>\n<p class=\"note\">Baseline: " + util::xml_escape(data.baseline) +
              ". Accuracy by the " + util::xml_escape(data.layout.lead_scorer) +
              " scorer unless a table says otherwise.</p>\n";
    if (const auto simulated = analysis::simulated_sentence(data.servers); !simulated.empty()) {
        before += "<p class=\"note\">" + util::xml_escape(simulated) + "</p>\n";
    }
    before += "<nav><a href=\"#charts\">charts</a> &middot; <a href=\"#verdicts\">"
              "verdicts</a> &middot; <a href=\"#compare\">against the baseline</a> "
              "&middot; <a href=\"#latency\">latency</a> &middot; <a href=\"#servers\">what "
              "ran</a> &middot; <a href=\"#explorer\">question explorer</a></nav>\n";
    before += charts_section(data);
    before += tables(data);
    before += k_explorer;
    before += rows.data_head(data);
    // 2. The collected questions and responses, then the script.
    const std::string after = "]}</script>\n<script>" + script + "</script>\n</body>\n</html>\n";
    // Written beside and renamed into place: a report killed half-way, or
    // written by two jobs at once, is never left as half a page.
    auto out = util::ReplacingFile::create(path.string());
    if (!out) {
        return out.error();
    }
    auto failed = [&] { return util::write_error(path.string(), errno); };
    if (!out->write(before) || std::fflush(out->stream()) != 0) {
        return failed();
    }
    if (auto r = rows.copy_to(fileno(out->stream())); !r) {
        return r.error();
    }
    (void)out->write(after);
    if (auto r = out->close(); !r) {
        return r.error();
    }
    return std::move(*out);
}

} // namespace diffeval::reports
