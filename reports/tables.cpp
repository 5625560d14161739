// Table rendering; see tables.hpp.
#include <reports/tables.hpp>

#include <harness/util/escape.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <clocale>
#include <cmath>
#include <cstdint>
#include <cwchar>
#include <locale.h>
#include <wchar.h>

namespace diffeval::reports {

namespace {

// Columns a UTF-8 string takes in a terminal: glibc's wcwidth under its
// built-in C.UTF-8 locale (2 for a Chinese character or an emoji, 0 for a
// combining mark), whatever locale the user runs under; a code point each
// where that locale is missing. A server name in Chinese otherwise pushed
// every cell after it out of its column. Three emoji cases glibc's
// per-code-point tables miss, as terminals draw them: an emoji newer than
// those tables (wcwidth -1 in the emoji blocks) is 2; a skin tone joins the
// emoji before it (0); the emoji presentation selector U+FE0F makes a
// narrow symbol before it an emoji (❤️, 2). Sequences joined by U+200D are
// no name's: names refuse invisible formatting characters.
size_t width(const std::string& s) {
    static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t{});
    if (!utf8) {
        return util::utf8_length(s);
    }
    const locale_t before = uselocale(utf8);
    size_t out = 0;
    std::mbstate_t state{};
    bool last_narrow = false; // the last character was a one-column symbol
    for (size_t i = 0; i < s.size();) {
        wchar_t c = 0;
        const size_t n = std::mbrtowc(&c, s.data() + i, s.size() - i, &state);
        if (n == 0 || n > s.size() - i) { // a NUL, or a byte that starts no character
            state = std::mbstate_t{};
            ++out;
            ++i;
            continue;
        }
        const auto code = static_cast<uint32_t>(c);
        int w = wcwidth(c);
        if (code >= 0x1F3FB && code <= 0x1F3FF) {
            w = 0; // a skin tone: part of the emoji before it
        } else if (code == 0xFE0F) {
            w = last_narrow ? 1 : 0; // the symbol before it drawn as an emoji
        } else if (w < 0 && code >= 0x1F000 && code <= 0x1FAFF) {
            w = 2; // an emoji newer than glibc's tables
        }
        last_narrow = w == 1 && code > 0x7F;
        out += w < 0 ? 1 : static_cast<size_t>(w);
        i += n;
    }
    uselocale(before);
    return out;
}

std::string pct(double p) {
    return fmt::format("{:.1f}", 100.0 * p);
}

std::string ms(double v) {
    return fmt::format("{:.0f}", v);
}

std::string optional_cell(const std::optional<double>& v, const char* spec) {
    return v ? fmt::format(fmt::runtime(spec), *v) : "-";
}

// A cell that reads as a number ("12", "-3.4", "+1.0", "[-1.0, 2.0]", "4.7e-07",
// "-", "n/a"): such columns are right-aligned, all others left-aligned.
bool numeric_cell(const std::string& s) {
    if (s.empty() || s == "-" || s == "n/a") {
        return true;
    }
    const char c = s[0];
    return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == '[' || c == '<';
}

// `text` broken at spaces into lines of at most `columns` (a longer word
// stays whole).
std::string wrap(const std::string& text, size_t columns) {
    std::string out, line;
    size_t line_width = 0; // width(line), kept as words are added
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find(' ', start);
        if (end == std::string::npos) {
            end = text.size();
        }
        const std::string word = text.substr(start, end - start);
        const size_t word_width = width(word);
        if (!line.empty() && line_width + 1 + word_width > columns) {
            out += line + "\n";
            line.clear();
        }
        line_width = line.empty() ? word_width : line_width + 1 + word_width;
        line += line.empty() ? word : " " + word;
        start = end + 1;
    }
    return out + line;
}

// "+12" or "-3" milliseconds, never "-0".

std::vector<bool> numeric_columns(const std::vector<std::vector<std::string>>& rows) {
    std::vector<bool> numeric(rows[0].size(), true);
    for (size_t r = 1; r < rows.size(); ++r) {
        for (size_t c = 0; c < rows[r].size() && c < numeric.size(); ++c) {
            numeric[c] = numeric[c] && numeric_cell(rows[r][c]);
        }
    }
    if (!numeric.empty()) {
        numeric[0] = false;
    }
    return numeric;
}

} // namespace

std::string signed_ms(double v) {
    auto s = fmt::format("{:+.0f}", v);
    return s == "-0" || s == "+0" ? std::string("0") : s;
}

ShownTail shown_tail(const analysis::TailDifference& t) {
    // Each value as ms() prints it.
    const auto shown = [](double v) { return util::printed_value(ms(v)); };
    ShownTail s;
    s.a_p50 = shown(t.a_p50_ms);
    s.b_p50 = shown(t.b_p50_ms);
    s.a_p99 = shown(t.a_p99_ms);
    s.b_p99 = shown(t.b_p99_ms);
    s.p50_diff = s.b_p50 - s.a_p50;
    s.p99_diff = s.b_p99 - s.a_p99;
    if (t.p99_diff_ci) {
        s.p99_diff_ci =
            analysis::Interval{std::floor(t.p99_diff_ci->lo), std::ceil(t.p99_diff_ci->hi)};
    }
    if (const auto e = t.explained_ms()) {
        s.explained = shown(*e);
        s.rest = s.p99_diff - *s.explained;
    }
    return s;
}

std::string markdown_escape(const std::string& raw) {
    // A direction override or a zero-width character shows as what it is,
    // its "<U+XXXX>" escaped below as any '<' is: read raw it reorders or
    // hides text.
    const std::string text = util::format_chars_shown(raw);
    // GitHub makes a mention of "@name" (it notifies), an issue link of
    // "#12", and a link of "https://..." or "www.": a zero-width space after
    // the '@', the '#' and the scheme's ':' and inside "www." leaves each the
    // text it is, as it reads.
    constexpr std::string_view k_zero_width_space = "\u200b";
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (const size_t n = util::control_length(text, i); n > 0) {
            out += ' ';
            i += n - 1;
            continue;
        }
        const char c = text[i];
        if (c == '&') {
            out += "&amp;";
            continue;
        }
        // '$' opens GitHub's inline math: model text "$x^{2}$" rendered styled.
        if (c == '|' || c == '\\' || c == '`' || c == '*' || c == '_' || c == '<' || c == '>' ||
            c == '[' || c == ']' || c == '~' || c == '$') {
            out += '\\';
        }
        out += c;
        const std::string_view rest = std::string_view(text).substr(i + 1);
        const bool digit_next = !rest.empty() && rest[0] >= '0' && rest[0] <= '9';
        if (c == '@' || (c == '#' && digit_next) || (c == ':' && rest.starts_with("//")) ||
            ((c == 'w' || c == 'W') && (rest.starts_with("ww.") || rest.starts_with("WW.")))) {
            out += k_zero_width_space;
        }
    }
    return out;
}

std::string markdown_code(const std::string& text) {
    const std::string body = util::format_chars_shown(util::controls_as_spaces(text));
    size_t run = 0, longest = 0;
    for (char c : body) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    // A span opened by more backticks than any run inside it ends only at
    // its own fence; a space pads a body that starts or ends with one.
    const std::string fence(longest + 1, '`');
    const bool pad = !body.empty() && (body.front() == '`' || body.back() == '`');
    return fence + (pad ? " " : "") + body + (pad ? " " : "") + fence;
}

std::string fact_cell(const std::string& value, const std::string& stated) {
    std::string out = value.empty() ? "-" : value;
    if (!stated.empty()) {
        out += " (stated: " + stated + ")";
    }
    return out;
}

std::string render_table(const std::vector<std::vector<std::string>>& rows, Style style,
                         Columns columns) {
    if (rows.empty()) {
        return "";
    }
    std::string out;
    if (style == Style::html) {
        out = "<table>\n";
        for (size_t r = 0; r < rows.size(); ++r) {
            out += "<tr>";
            for (const auto& cell : rows[r]) {
                out += r == 0 ? "<th>" + util::xml_escape(cell) + "</th>"
                              : "<td>" + util::xml_escape(cell) + "</td>";
            }
            out += "</tr>\n";
        }
        return out + "</table>\n";
    }
    const auto numeric =
        columns == Columns::text ? std::vector<bool>(rows[0].size(), false) : numeric_columns(rows);
    if (style == Style::markdown) {
        for (size_t r = 0; r < rows.size(); ++r) {
            out += "|";
            for (const auto& cell : rows[r]) {
                out += " " + markdown_escape(cell) + " |";
            }
            out += "\n";
            if (r == 0) {
                out += "|";
                for (size_t c = 0; c < rows[0].size(); ++c) {
                    out += numeric[c] ? " ---: |" : " --- |";
                }
                out += "\n";
            }
        }
        return out;
    }
    std::vector<size_t> widths(rows[0].size(), 0);
    for (const auto& row : rows) {
        for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
            widths[c] = std::max(widths[c], width(row[c]));
        }
    }
    for (size_t r = 0; r < rows.size(); ++r) {
        std::string line;
        for (size_t c = 0; c < rows[r].size(); ++c) {
            const auto& cell = rows[r][c];
            auto pad = std::string(widths[c] - width(cell), ' ');
            // Text left, numbers right.
            line += r == 0 || c >= numeric.size() || !numeric[c] ? cell + pad : pad + cell;
            if (c + 1 < rows[r].size()) {
                line += "  ";
            }
        }
        while (!line.empty() && line.back() == ' ') {
            line.pop_back();
        }
        out += line + "\n";
        if (r == 0) {
            size_t total = 0;
            for (auto w : widths) {
                total += w + 2;
            }
            out += std::string(total - 2, '-') + "\n";
        }
    }
    return out;
}

std::string pct_spread(const analysis::Spread& s) {
    // The range is left out only where the mean is it: with uneven repeats
    // the mean (over questions) can lie outside every repeat's accuracy,
    // and "85.0" alone read as each repeat's 75.0.
    if (s.min == s.max && pct(s.mean) == pct(s.min)) {
        return pct(s.mean);
    }
    // A mean outside the range (each repeat ran other questions) read as a
    // contradiction under "mean (min-max)": the range is named as the
    // repeats'.
    const double mean = util::printed_value(pct(s.mean));
    if (mean < util::printed_value(pct(s.min)) || mean > util::printed_value(pct(s.max))) {
        return fmt::format("{} (repeats {}-{})", pct(s.mean), pct(s.min), pct(s.max));
    }
    return fmt::format("{} ({}-{})", pct(s.mean), pct(s.min), pct(s.max));
}

std::string verdict_table(const analysis::Summary& summary, Style style) {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header = {"group", "n", "reps"};
    for (const auto& s : summary.scorers) {
        header.push_back(s);
    }
    rows.push_back(header);
    bool uneven = false;
    for (const auto& g : summary.groups) {
        uneven = uneven || g.uneven;
        std::vector<std::string> row = {g.label(), std::to_string(g.questions),
                                        std::to_string(g.repeats.size()) + (g.uneven ? "*" : "")};
        for (const auto& sc : g.scorers) {
            row.push_back(pct_spread(sc.spread));
        }
        rows.push_back(row);
    }
    if (!uneven) {
        return render_table(rows, style);
    }
    const std::string note =
        "* its repeats ran different questions (a later run added repeats on fewer of them): "
        "its mean is over its questions, each question's repeats averaged first, and so are its "
        "breakdown's counts; min-max is over repeats, each over the questions it ran, so the "
        "mean can lie outside it (then shown as \"repeats min-max\").";
    return render_table(rows, style) +
           (style == Style::html ? "<p class=\"note\">" + util::xml_escape(note) + "</p>\n"
                                 : "\n" + note + "\n");
}

namespace {

// Whole numbers for `parts` (means over repeats) that add up to their
// rounded total, each within 1 of its mean: the largest remainders take the
// units that rounding each down leaves (Hamilton's method). Rounding each
// alone printed "0" and "0" for two outcomes of half a response each, in a
// row of 4 responses whose other outcomes printed 3.
std::vector<int64_t> whole_parts(const std::vector<double>& parts) {
    double total = 0;
    for (double p : parts) {
        total += p;
    }
    const auto target = static_cast<int64_t>(std::llround(total));
    std::vector<int64_t> out;
    std::vector<size_t> order;
    int64_t sum = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
        // A mean of whole counts sums to within rounding of a whole number.
        out.push_back(static_cast<int64_t>(std::floor(parts[i] + 1e-9)));
        sum += out.back();
        order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return parts[a] - static_cast<double>(out[a]) > parts[b] - static_cast<double>(out[b]);
    });
    for (size_t k = 0; k < order.size() && sum < target; ++k, ++sum) {
        ++out[order[k]];
    }
    return out;
}

} // namespace

std::string breakdown_table(const analysis::Summary& summary, const std::string& scorer,
                            Style style) {
    auto k = static_cast<size_t>(std::find(summary.scorers.begin(), summary.scorers.end(), scorer) -
                                 summary.scorers.begin());
    // Imported answers record no finish state: their column is there when
    // some group holds one.
    const bool unrecorded = analysis::any_unrecorded(summary);
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"group", "reasoned", "never fin.", "stop", "length", "other", "err", "finished",
                    "fin. acc", "score", "tokens"});
    if (unrecorded) {
        rows.back().insert(rows.back().begin() + 7, "unrec.");
    }
    for (const auto& g : summary.groups) {
        bool have = k < g.scorers.size();
        // The outcomes add up as printed: never finished is stop + length +
        // other, and with finished, errors and unrecorded they make the
        // responses.
        std::vector<double> parts = {g.finished, g.stop_truncated, g.length_truncated, g.other,
                                     g.errors};
        if (unrecorded) {
            parts.push_back(g.unrecorded);
        }
        const auto w = whole_parts(parts);
        rows.push_back(
            {g.label(), fmt::format("{:.0f}", g.started_reasoning),
             std::to_string(w[1] + w[2] + w[3]), std::to_string(w[1]), std::to_string(w[2]),
             std::to_string(w[3]), std::to_string(w[4]), std::to_string(w[0]),
             have && g.scorers[k].finished_accuracy ? pct(g.scorers[k].finished_accuracy->mean)
                                                    : "-",
             have ? pct(g.scorers[k].spread.mean) : "-",
             optional_cell(g.mean_completion_tokens, "{:.0f}")});
        if (unrecorded) {
            rows.back().insert(rows.back().begin() + 7, std::to_string(w[5]));
        }
    }
    return render_table(rows, style);
}

std::string latency_table(const analysis::Summary& summary, Style style) {
    std::vector<std::vector<std::string>> rows;
    // Short headers keep the text table within 100 columns; ms throughout.
    rows.push_back({"group", "timed", "p50", "p90", "p99", "max", "ttft50", "ttft99", "tok50",
                    "tok99", "tokavg", "req/s"});
    for (const auto& g : summary.groups) {
        const auto& l = g.latency;
        const bool any = l.responses > 0;
        rows.push_back(
            {g.label(), std::to_string(l.responses), any ? ms(l.p50_ms) : "-",
             any ? ms(l.p90_ms) : "-", any ? ms(l.p99_ms) : "-", any ? ms(l.max_ms) : "-",
             optional_cell(l.ttft_p50_ms, "{:.0f}"), optional_cell(l.ttft_p99_ms, "{:.0f}"),
             optional_cell(l.tokens_p50, "{:.0f}"), optional_cell(l.tokens_p99, "{:.0f}"),
             optional_cell(l.tokens_mean, "{:.1f}"), optional_cell(l.requests_per_s, "{:.2f}")});
    }
    return render_table(rows, style);
}

std::string tail_sentence(const analysis::TailDifference& t) {
    const auto s = shown_tail(t);
    auto out =
        fmt::format("Latency p50 {} -> {} ms ({}), p99 {} -> {} ms ({}); {} and {} successful "
                    "responses.",
                    ms(s.a_p50), ms(s.b_p50), signed_ms(s.p50_diff), ms(s.a_p99), ms(s.b_p99),
                    signed_ms(s.p99_diff), t.a_responses, t.b_responses);
    if (s.p99_diff_ci) {
        out += fmt::format("\np99 difference's 95% interval over questions: [{}, {}] ms, without "
                           "run-to-run timing noise.",
                           signed_ms(s.p99_diff_ci->lo), signed_ms(s.p99_diff_ci->hi));
    }
    // The rest is what output lengths leave unexplained: B's own speed, or
    // noise, which one p99 against another cannot tell apart (no test is
    // made of it; against servers that answer at once it is scheduling). The
    // words follow the printed number's sign; none left over says nothing of
    // B's speed (two p99s of three responses each are their maxima).
    const auto rest_words = [](double rest) {
        return rest < 0   ? "B faster per request, or noise, which no test here separates"
               : rest > 0 ? "B slower per request, or noise, which no test here separates"
                          : "nothing to put down to B's own speed";
    };
    if (t.from_tokens) {
        const auto& f = *t.from_tokens;
        out += fmt::format(
            "\nOf the {} ms p99 difference, about {} ms follows from output lengths\n(token "
            "counts at A's speed: {:.0f} ms {:+.2f} ms/token) and {} ms is left over:\n{}.",
            signed_ms(s.p99_diff), signed_ms(*s.explained), f.intercept_ms, f.ms_per_token,
            signed_ms(s.rest), rest_words(s.rest));
    } else if (t.tokens_beyond_fit) {
        out += fmt::format("\nA's per-token speed was fitted on {} to {} tokens, and B's p99 "
                           "response has {:.0f}:\ntoo far outside them to say how much of the {} "
                           "ms p99 difference follows from output lengths.",
                           t.a_fit_tokens_min, t.a_fit_tokens_max, t.b_p99_tokens,
                           signed_ms(s.p99_diff));
    } else if (t.tokens_flat) {
        out += fmt::format("\nA's latency does not grow with its token count (its least-squares "
                           "slope is at or below\n0 ms/token), so none of the {} ms p99 difference "
                           "follows from output lengths:\n{}.",
                           signed_ms(s.p99_diff), rest_words(s.p99_diff));
    } else {
        out += "\nA's responses have too few distinct token counts to fit a per-token speed.";
    }
    return out;
}

std::string comparison_text(const analysis::Comparison& c, Style style, size_t max_flips) {
    std::string out;
    const bool md = style == Style::markdown;
    const auto title = fmt::format("{} vs {} ({} scorer)", c.b.text(), c.a.text(), c.scorer);
    out += md ? "### " + markdown_escape(title) + "\n\n"
              : title + "\n" + std::string(width(title), '=') + "\n";
    // The title names B first (the candidate against its baseline); every
    // line below says A and B, so which is which is said once, plainly.
    const auto sides = fmt::format("A is {}, B is {}.", c.a.text(), c.b.text());
    out += md ? markdown_escape(sides) + "\n" : sides + "\n";
    const auto& s = c.stats;
    const double shown = analysis::shown_diff(s);
    // Markdown reads the interval's brackets as markup, as the verdict's
    // line escapes them (an audit); its two lines are one paragraph there.
    const auto accuracy = fmt::format(
        "{} ({}). Accuracy {}% -> {}%: {} points, {:g}% CI {}{}(paired BCa bootstrap over "
        "questions, {} resamples, seed {}; clustered SE {:.1f} points).",
        util::counted(c.questions, "question"), analysis::repeats_text(s.noise_a, s.noise_b),
        analysis::accuracy_text(s.accuracy_a), analysis::accuracy_text(s.accuracy_b),
        analysis::signed_points(shown), 100 * (1 - s.alpha),
        analysis::interval_text(s.interval.lo, s.interval.hi, shown, {0.0}), md ? " " : "\n",
        s.interval.resamples, s.interval.seed, 100.0 * s.se);
    out += (md ? markdown_escape(accuracy) : accuracy) + "\n";
    // "mid-p = 0.0215", "mid-p < 1e-300": a p past a double's range is a bound.
    const auto is = [](double p) {
        const auto text = util::p_text(p);
        return text.starts_with("<") ? text : "= " + text;
    };
    out += fmt::format("Sign-flip test over questions ({}): {} right more often in A, {} in B;\n"
                       "mid-p {} (p {}){}.\n",
                       s.test.method == analysis::SignFlipMethod::exact ? "exact" : "Monte Carlo",
                       util::counted(s.a_better, "question"), s.b_better, is(s.test.p_mid),
                       is(s.test.p),
                       c.verdict.comparisons > 1
                           ? fmt::format(", Holm-adjusted {} over {} comparisons",
                                         util::p_text(c.verdict.p_adjusted), c.verdict.comparisons)
                           : std::string());
    const auto prose = [&](const std::string& text) {
        return md ? markdown_escape(text) + "\n" : wrap(text, 100) + "\n";
    };
    out += prose(analysis::noise_sentence(s, c.a.text(), c.b.text()));
    out += prose("Verdict: " + c.verdict.sentence);
    if (c.latency) {
        out += tail_sentence(*c.latency) + "\n";
    }
    out += "\n";
    // Where the points went: transitions that carry lost or gained answers.
    // Every repeat of A against every repeat of B on the same question.
    std::vector<std::vector<std::string>> rows = {
        {"A outcome -> B outcome", "response pairs", "pairs lost", "pairs gained"}};
    std::vector<std::tuple<int64_t, int, int>> cells;
    for (int i = 0; i < analysis::k_transition_states; ++i) {
        for (int j = 0; j < analysis::k_transition_states; ++j) {
            if (c.transitions[i][j]) {
                cells.emplace_back(c.lost[i][j] + c.gained[i][j], i, j);
            }
        }
    }
    std::sort(cells.begin(), cells.end(), [&](const auto& x, const auto& y) {
        auto [wx, ix, jx] = x;
        auto [wy, iy, jy] = y;
        return wx != wy ? wx > wy : c.transitions[ix][jx] > c.transitions[iy][jy];
    });
    for (const auto& [w, i, j] : cells) {
        rows.push_back({fmt::format("{} -> {}", analysis::transition_state_name(i),
                                    analysis::transition_state_name(j)),
                        std::to_string(c.transitions[i][j]), std::to_string(c.lost[i][j]),
                        std::to_string(c.gained[i][j])});
    }
    out += render_table(rows, style);
    auto flips = [&](const std::vector<analysis::Flip>& v, const std::string& label) {
        // --flips 0 asks for none: "the first 0 shown" over an empty table
        // said nothing the counts above do not (an audit).
        if (v.empty() || max_flips == 0) {
            return;
        }
        // Say when the table shows fewer questions than the count above it.
        const auto count = v.size() > max_flips
                               ? fmt::format("{}, the first {} shown",
                                             util::counted(v.size(), "question"), max_flips)
                               : util::counted(v.size(), "question");
        out += md ? fmt::format("\n**{}** ({})\n\n", markdown_escape(label), count)
                  : fmt::format("\n{} ({}):\n", label, count);
        std::vector<std::vector<std::string>> fr = {
            {"q", "A %", "B %", "A answered", "B answered"}};
        for (size_t i = 0; i < v.size() && i < max_flips; ++i) {
            fr.push_back({std::to_string(v[i].question_idx), pct(v[i].a), pct(v[i].b),
                          std::string(util::utf8_byte_prefix(v[i].a_excerpt, md ? 120 : 30)),
                          std::string(util::utf8_byte_prefix(v[i].b_excerpt, md ? 120 : 30))});
        }
        out += render_table(fr, style);
    };
    flips(c.a_better, fmt::format("Right more often in {}", c.a.text()));
    flips(c.b_better, fmt::format("Right more often in {}", c.b.text()));
    return out;
}

} // namespace diffeval::reports
