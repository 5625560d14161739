// The report tables a reader sees first: the harness verdicts and where the
// responses went, from a summary computed on rows whose every count is known,
// and the table renderer's alignment and escaping in each style.
#include <harness/analysis/summary.hpp>
#include <reports/report.hpp>
#include <reports/tables.hpp>

#include <harness/util/text.hpp>

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

using namespace diffeval;

namespace {

// One group (a/raw/256), 4 questions x 2 repeats, two scorers. Scorer 0
// ("s0") is right on 4 of 4 in repeat 0 and 2 of 4 in repeat 1; scorer 1
// ("s1") on 1 of 4 in both. Repeat 1 has one length cut and one error.
analysis::Results two_repeats() {
    analysis::Results r;
    r.servers = {"a"};
    r.framings = {"raw"};
    r.datasets = {"sample"};
    r.scorers = {"s0", "s1"};
    r.score_text = "full";
    int64_t id = 1;
    for (int rep = 0; rep < 2; ++rep) {
        for (int q = 0; q < 4; ++q) {
            analysis::ResultRow row;
            row.response_id = id++;
            row.max_tokens = 256;
            row.repeat = rep;
            row.question_idx = q;
            row.ok = true;
            row.completion_tokens = 100;
            row.outcome = scorers::Outcome::finished;
            if (rep == 1 && q == 2) {
                row.outcome = scorers::Outcome::length_truncated;
                row.completion_tokens = 256;
            }
            if (rep == 1 && q == 3) {
                row.outcome = scorers::Outcome::error;
                row.ok = false;
                row.completion_tokens.reset();
            }
            row.correct.set(0, rep == 0 || q < 2);
            row.correct.set(1, q == 0);
            row.valid.set(0, true);
            row.valid.set(1, true);
            r.rows.push_back(row);
        }
    }
    return r;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        out.push_back(line);
    }
    return out;
}

} // namespace

// A group whose repeats ran different questions (two questions three times,
// two once) takes every mean of its breakdown per question, the accuracy
// on finished answers and the tokens too: taken over repeats they sat
// beside per-question shares they did not multiply to (a statistics audit:
// 96.6% of 82.4% finished beside a score of 83.8).
TEST(ReportTables, AnUnevenGroupsFinishedAccuracyAndTokensArePerQuestion) {
    analysis::Results r;
    r.servers = {"a"};
    r.framings = {"raw"};
    r.datasets = {"sample"};
    r.scorers = {"s0"};
    r.score_text = "full";
    int64_t id = 1;
    // Questions 0 and 1 have three repeats: q0 finished and right each
    // time in 100 tokens; q1 finished and wrong in 300. Questions 2 and 3
    // have one: q2 finished and right in 100, q3 cut at 256.
    for (int q = 0; q < 4; ++q) {
        for (int rep = 0; rep < (q < 2 ? 3 : 1); ++rep) {
            analysis::ResultRow row;
            row.response_id = id++;
            row.max_tokens = 256;
            row.repeat = rep;
            row.question_idx = q;
            row.ok = true;
            row.outcome = q == 3 ? scorers::Outcome::length_truncated : scorers::Outcome::finished;
            row.completion_tokens = q == 1 ? 300 : q == 3 ? 256 : 100;
            row.correct.set(0, q == 0 || q == 2);
            row.valid.set(0, true);
            r.rows.push_back(row);
        }
    }
    const auto s = analysis::summarize(r);
    ASSERT_EQ(s.groups.size(), 1u);
    const auto& g = s.groups[0];
    ASSERT_TRUE(g.uneven);
    // Per question: 3 of 4 finished, 2 of 4 right, so 2 of 3 finished are.
    EXPECT_DOUBLE_EQ(g.finished, 3.0);
    EXPECT_DOUBLE_EQ(g.scorers[0].spread.mean, 0.5);
    ASSERT_TRUE(g.scorers[0].finished_accuracy.has_value());
    EXPECT_DOUBLE_EQ(g.scorers[0].finished_accuracy->mean, 2.0 / 3.0);
    // Over repeats it was 2/3 (repeat 0) and 1/2 (repeats 1 and 2): 0.556.
    ASSERT_TRUE(g.mean_completion_tokens.has_value());
    EXPECT_DOUBLE_EQ(*g.mean_completion_tokens, (100.0 + 300.0 + 100.0 + 256.0) / 4.0);
}

TEST(ReportTables, VerdictTableShowsMeanAndRangeOverRepeats) {
    const auto summary = analysis::summarize(two_repeats());
    const auto lines = lines_of(reports::verdict_table(summary, reports::Style::text));
    ASSERT_EQ(lines.size(), 3u); // header, rule, one group
    EXPECT_NE(lines[0].find("group"), std::string::npos);
    EXPECT_NE(lines[0].find("s0"), std::string::npos);
    // s0: 100% and 50% -> 75.0 (50.0-100.0); s1: 25% both times -> 25.0.
    EXPECT_NE(lines[2].find("a/raw/256"), std::string::npos) << lines[2];
    EXPECT_NE(lines[2].find("75.0 (50.0-100.0)"), std::string::npos) << lines[2];
    EXPECT_NE(lines[2].find("25.0"), std::string::npos) << lines[2];
    EXPECT_EQ(lines[2].find("25.0 ("), std::string::npos) << "no range when repeats agree";
}

TEST(ReportTables, BreakdownCountsAreMeansPerRepeat) {
    const auto summary = analysis::summarize(two_repeats());
    ASSERT_EQ(summary.groups.size(), 1u);
    const auto& g = summary.groups[0];
    EXPECT_DOUBLE_EQ(g.length_truncated, 0.5); // one cut in two repeats
    EXPECT_DOUBLE_EQ(g.errors, 0.5);
    EXPECT_DOUBLE_EQ(g.finished, 3.0); // (4 + 2) / 2
    const auto md = reports::breakdown_table(summary, "s0", reports::Style::markdown);
    const auto lines = lines_of(md);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[1].substr(0, 5), "| ---");
    // finished accuracy by s0: repeat 0 4/4, repeat 1 2/2 -> 100.0; score 75.0.
    EXPECT_NE(lines[2].find("| 100.0 | 75.0 |"), std::string::npos) << lines[2];
    // Half a response cut and half an error per run, 3 finished, of 4: the
    // printed outcomes add up to the 4 responses and never finished is the
    // sum of its parts. Rounding each alone printed 0, 0 and 3.
    EXPECT_NE(lines[2].find("| 1 | 0 | 1 | 0 | 0 | 3 |"), std::string::npos) << lines[2];
    // An unknown scorer shows "-" rather than another scorer's numbers.
    EXPECT_NE(reports::breakdown_table(summary, "nope", reports::Style::text).find(" - "),
              std::string::npos);
}

// A name or a model's text renders in Markdown as the text it is: an entity
// in it stays those characters (a server "b&amp;" showed as "b&" in every
// table while the headline showed it whole), and a line end or a terminal
// escape cannot break the row.
TEST(ReportTables, MarkdownCellsKeepEntitiesAndControlCharactersAsText) {
    const std::vector<std::vector<std::string>> rows = {{"name"}, {"b&amp;\nc\x1b[2J"}};
    const auto md = reports::render_table(rows, reports::Style::markdown);
    EXPECT_NE(md.find("| b&amp;amp; c \\[2J |"), std::string::npos) << md;
    EXPECT_EQ(reports::markdown_escape("a&b <c>"), "a&amp;b \\<c\\>");
}

// "What actually ran" is text whatever its cells look like: an audit's
// imported group, which reported no fact ("-" all down), was right-aligned
// beside its left-aligned neighbours, and so was the empty "differs".
TEST(ReportTables, ATableOfTextAlignsEveryColumnLeft) {
    const std::vector<std::vector<std::string>> rows = {{"fact", "a", "imported", "differs"},
                                                        {"version", "0.28.0", "-", ""},
                                                        {"context", "4096", "-", ""}};
    EXPECT_NE(
        reports::render_table(rows, reports::Style::markdown).find("| --- | ---: | ---: | ---: |"),
        std::string::npos);
    EXPECT_NE(reports::render_table(rows, reports::Style::markdown, reports::Columns::text)
                  .find("| --- | --- | --- | --- |"),
              std::string::npos);
}

// An audit's model text "The answer is \u202E 21 \u202C" read "12" in the
// reports and on the terminal, and a zero-width space inside "1\u200B2"
// hid why it scored wrong: each format character now shows as what it is.
TEST(ReportTables, DirectionOverridesAndZeroWidthCharactersShowAsWhatTheyAre) {
    const std::string text = "is \u202E 21 \u202C, 1\u200B2, \u2067x\u2069\u061C\uFEFF";
    EXPECT_EQ(util::format_chars_shown(text),
              "is <U+202E> 21 <U+202C>, 1<U+200B>2, <U+2067>x<U+2069><U+061C><U+FEFF>");
    EXPECT_EQ(util::one_line(text, 100),
              "is <U+202E> 21 <U+202C>, 1<U+200B>2, <U+2067>x<U+2069><U+061C><U+FEFF>");
    EXPECT_EQ(reports::markdown_escape("1\u200B2 \u202Eab"), "1\\<U+200B\\>2 \\<U+202E\\>ab");
    EXPECT_EQ(reports::markdown_code("a\u202Eb"), "`a<U+202E>b`");
    // Visible spaces and letters next to them stay as they are.
    EXPECT_EQ(util::format_chars_shown("a\u2009b \u00A0c \u05D0"), "a\u2009b \u00A0c \u05D0");
}

// Reports audit #5, #6: model output struck text through (~~), became a
// link (https://, www.), pinged a user (@name) or linked an issue (#12) in a
// PR comment, and C1 controls (CSI, OSC: C2 9B, C2 9D in UTF-8) passed to
// the cell and to the terminal.
TEST(ReportTables, MarkdownCellsMakeNoStrikeLinkMentionOrC1Control) {
    const std::string zws = "\u200b";
    EXPECT_EQ(reports::markdown_escape("~~struck~~ cc @octocat see #12 at https://evil.example "
                                       "or www.evil.example"),
              "\\~\\~struck\\~\\~ cc @" + zws + "octocat see #" + zws + "12 at https:" + zws +
                  "//evil.example or w" + zws + "ww.evil.example");
    EXPECT_EQ(reports::markdown_escape("a # b"), "a # b");
    EXPECT_EQ(reports::markdown_escape("x\xc2\x9b"
                                       "2J\xc2\x9dosc\xc2\x9c y \xc2\xa0z"),
              "x 2J osc  y \xc2\xa0z")
        << "C1 controls become spaces; a no-break space is no control";
    EXPECT_EQ(util::one_line("err \xc2\x9bJ \xc2\x9dosc\xc2\x9c x", 100), "err J osc x");
    EXPECT_EQ(util::controls_as_spaces("a\xc2\x9b"
                                       "b"),
              "a  b");
    EXPECT_TRUE(util::has_control_character("name\xc2\x85"));
    EXPECT_FALSE(util::has_control_character("caf\xc3\xa9 \xc2\xa0"));
}

// Inside a code span nothing is escaped, so the fence outgrows the name's
// own backticks rather than let one of them end the span.
TEST(ReportTables, MarkdownCodeSpansHoldAnyName) {
    EXPECT_EQ(reports::markdown_code("default"), "`default`");
    EXPECT_EQ(reports::markdown_code("a&b<c>"), "`a&b<c>`");
    EXPECT_EQ(reports::markdown_code("x`y``z"), "```x`y``z```");
    EXPECT_EQ(reports::markdown_code("`x"), "`` `x ``");
    EXPECT_EQ(reports::markdown_code("a\nb"), "`a b`");
}

TEST(ReportTables, CellsAreEscapedForEachStyle) {
    const std::vector<std::vector<std::string>> rows = {{"name", "value"}, {"a|b <x>", "`1`"}};
    const auto md = reports::render_table(rows, reports::Style::markdown);
    EXPECT_NE(md.find("a\\|b \\<x\\>"), std::string::npos) << md;
    EXPECT_NE(md.find("\\`1\\`"), std::string::npos) << md;
    const auto html = reports::render_table(rows, reports::Style::html);
    EXPECT_NE(html.find("a|b &lt;x&gt;"), std::string::npos) << html;
    EXPECT_EQ(html.find("<x>"), std::string::npos) << html;
    const auto text = lines_of(reports::render_table(rows, reports::Style::text));
    ASSERT_EQ(text.size(), 3u);
    // Columns line up: "value" starts where "`1`" does.
    EXPECT_EQ(text[0].find("value"), text[2].find("`1`")) << text[0] << "\n" << text[2];
}

// A terminal shows a Chinese character or an emoji two columns wide: the
// cells after such a name start where the others' do on screen, not a
// column later for each such character.
TEST(ReportTables, TextColumnsLineUpOnScreenForWideCharacters) {
    const std::vector<std::vector<std::string>> rows = {
        {"server", "value"},
        {"\u6a21\u578b-a", "1"},
        {"\U0001f680x", "2"},
        {"abcdefg", "3"},
        // A heart drawn as an emoji (U+FE0F), a thumb with a skin tone and an
        // emoji newer than glibc's tables: each two columns, as terminals draw
        // them.
        {"\u2764\ufe0f\U0001f44d\U0001f3fb\U0001fae8x", "4"}};
    const auto text = lines_of(reports::render_table(rows, reports::Style::text));
    ASSERT_EQ(text.size(), 6u);
    EXPECT_EQ(text[5], "\u2764\ufe0f\U0001f44d\U0001f3fb\U0001fae8x" + std::string(6, ' ') + "4")
        << text[5];
    // "模型-a" is 6 columns wide and "🚀x" 3, so each is padded to "abcdefg"'s 7,
    // then two spaces part the columns: "value" starts at column 9 on screen,
    // and each number ends under its last letter (numbers are right-aligned).
    EXPECT_EQ(text[0].find("value"), 9u) << text[0];
    EXPECT_EQ(text[2], "\u6a21\u578b-a" + std::string(7, ' ') + "1") << text[2];
    EXPECT_EQ(text[3], "\U0001f680x" + std::string(10, ' ') + "2") << text[3];
    EXPECT_EQ(text[4], "abcdefg" + std::string(6, ' ') + "3") << text[4];
}

// The words of the tail sentence follow the sign of its number: a B that is
// faster per request is never called slower; a nonzero rest is never given
// as B's speed alone, since no test separates it from noise.
TEST(ReportTables, TailSentenceSaysFasterWhenTheRestIsNegative) {
    analysis::TailDifference t;
    t.a_responses = t.b_responses = 144;
    t.a_p99_ms = 53;
    t.b_p99_ms = 50;
    t.from_tokens = analysis::TokenAttribution{28, -0.004, 40, 40, 0};
    const auto faster = reports::tail_sentence(t);
    EXPECT_NE(faster.find("-3 ms is left over:\nB faster per request, or noise"), std::string::npos)
        << faster;
    EXPECT_EQ(faster.find("slower"), std::string::npos) << faster;
    EXPECT_EQ(faster.find("+ -"), std::string::npos) << faster;
    t.b_p99_ms = 60;
    const auto slower = reports::tail_sentence(t);
    EXPECT_NE(slower.find("+7 ms is left over:\nB slower per request, or noise"), std::string::npos)
        << slower;
    t.b_p99_ms = 53;
    const auto same = reports::tail_sentence(t);
    EXPECT_NE(same.find("0 ms is left over:\nnothing to put down to B's own speed."),
              std::string::npos)
        << same;
    // Equal p99s are no evidence that B is as fast (an audit's three
    // responses a side were called "no slower or faster").
    EXPECT_EQ(same.find("no slower"), std::string::npos) << same;
    EXPECT_EQ(same.find("noise"), std::string::npos) << same;
}

// Every difference the tail prints is the difference of the numbers printed
// beside it, and its interval, rounded outward, holds it: 62.4 -> 39.6 ms
// reads "62 -> 40 ms (-22)", not the exact -22.8's "-23".
TEST(ReportTables, TailDifferencesAreThoseOfThePrintedValues) {
    analysis::TailDifference t;
    t.a_responses = t.b_responses = 2000;
    t.a_p50_ms = 5.4;
    t.b_p50_ms = 6.6;
    t.a_p99_ms = 62.4;
    t.b_p99_ms = 39.6;
    t.p99_diff_ci = analysis::Interval{-22.8, -21.2};
    t.from_tokens = analysis::TokenAttribution{9, 0.03, 40, 40, 0.6};
    const auto text = reports::tail_sentence(t);
    EXPECT_NE(text.find("p50 5 -> 7 ms (+2), p99 62 -> 40 ms (-22)"), std::string::npos) << text;
    EXPECT_NE(text.find("[-23, -21] ms"), std::string::npos) << text;
    EXPECT_NE(text.find("Of the -22 ms p99 difference, about +1 ms follows"), std::string::npos)
        << text;
    EXPECT_NE(text.find("and -23 ms is left over"), std::string::npos) << text;
    const auto s = reports::shown_tail(t);
    EXPECT_EQ(s.p99_diff, s.b_p99 - s.a_p99);
    ASSERT_TRUE(s.explained.has_value());
    EXPECT_EQ(s.rest, s.p99_diff - *s.explained);
    ASSERT_TRUE(s.p99_diff_ci.has_value());
    EXPECT_LE(s.p99_diff_ci->lo, s.p99_diff);
    EXPECT_GE(s.p99_diff_ci->hi, s.p99_diff);
}

// A regression's headline names what lost it the most points net, not what
// moved the most pairs: 137 lost and 169 gained between two truncations is
// a net gain, beside 40 lost and none gained from finished to truncated.
TEST(CarryingTransitions, ARegressionIsCarriedByItsLargestNetLoss) {
    analysis::Comparison c;
    const int finished = static_cast<int>(scorers::Outcome::finished);
    const int length = static_cast<int>(scorers::Outcome::length_truncated);
    c.lost[length][length] = 137;
    c.gained[length][length] = 169;
    c.lost[finished][length] = 40;
    c.stats.test.differing = 50;
    EXPECT_EQ(reports::carrying_transitions(c, 1, -1),
              "finished -> length_truncated (-40/+0 response pairs)");
    EXPECT_EQ(reports::carrying_transitions(c, 1, +1),
              "length_truncated -> length_truncated (-137/+169 response pairs)");
    EXPECT_EQ(reports::carrying_transitions(c, 1),
              "length_truncated -> length_truncated (-137/+169 response pairs)");
    EXPECT_EQ(reports::carrying_transitions(analysis::Comparison{}, 2), "none");
    // Sides that agree on every question carry nothing, though their
    // repeats, paired across, moved both ways (an audit's A/A pair).
    c.stats.test.differing = 0;
    EXPECT_EQ(reports::carrying_transitions(c, 2), "none");
}

// A group whose every request failed in one repeat and whose server reports
// no token counts: what nothing measured reads "-" in the tables and null in
// the JSON, never 0 (a repeat without counts does not pull the mean of the
// others down, and no finished answer is not 0% right).
TEST(ReportTables, WhatNothingMeasuredIsBlankNotZero) {
    auto results = two_repeats();
    for (auto& row : results.rows) {
        row.completion_tokens.reset(); // a server that sends no usage
        if (row.repeat == 1) {
            row.outcome = scorers::Outcome::error;
            row.ok = false;
            row.correct.set(0, false);
            row.correct.set(1, false);
        }
    }
    auto with_tokens = two_repeats();
    for (auto& row : with_tokens.rows) {
        if (row.repeat == 1) {
            row.completion_tokens.reset();
        }
    }
    const auto summary = analysis::summarize(results);
    ASSERT_EQ(summary.groups.size(), 1u);
    const auto j = analysis::to_json(summary);
    EXPECT_EQ(j["schema"], "diffeval.summary/2");
    const auto& g = j["groups"][0];
    EXPECT_TRUE(g["breakdown"]["mean"]["mean_completion_tokens"].is_null());
    EXPECT_TRUE(g["breakdown"]["per_repeat"][1]["mean_completion_tokens"].is_null());
    // Repeat 0 finished 4 of 4, repeat 1 nothing: the finished accuracy is
    // repeat 0's alone.
    EXPECT_EQ(g["accuracy"]["s0"]["finished_accuracy"]["mean"], 1.0);
    const auto lines = lines_of(reports::breakdown_table(summary, "s0", reports::Style::markdown));
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_TRUE(lines[2].ends_with("| 100.0 | 50.0 | - |")) << lines[2];

    // Only the repeat with counts makes the mean: 100 tokens, not 50.
    const auto counted = analysis::to_json(analysis::summarize(with_tokens));
    EXPECT_EQ(counted["groups"][0]["breakdown"]["mean"]["mean_completion_tokens"], 100.0);

    // Nothing finished and no success at all.
    for (auto& row : results.rows) {
        row.outcome = scorers::Outcome::error;
        row.ok = false;
        row.correct.set(0, false);
        row.correct.set(1, false);
    }
    const auto none = analysis::summarize(results);
    const auto jn = analysis::to_json(none);
    EXPECT_TRUE(jn["groups"][0]["accuracy"]["s0"]["finished_accuracy"].is_null());
    EXPECT_EQ(jn["groups"][0]["latency"]["responses"], 0);
    for (const char* k : {"p50_ms", "p90_ms", "p99_ms", "max_ms"}) {
        EXPECT_TRUE(jn["groups"][0]["latency"][k].is_null()) << k;
    }
    const auto row = lines_of(reports::breakdown_table(none, "s0", reports::Style::markdown))[2];
    EXPECT_TRUE(row.ends_with("| 4 | 0 | - | 0.0 | - |")) << row;
}

namespace {

// Two servers named `a` and `b` answering 6 questions, `b` wrong on the first:
// their comparison.
analysis::Comparison one_flip(const std::string& a, const std::string& b) {
    analysis::Results r;
    r.servers = {a, b};
    r.framings = {"raw"};
    r.datasets = {"sample"};
    r.scorers = {"s0"};
    r.score_text = "full";
    int64_t id = 1;
    for (int server = 0; server < 2; ++server) {
        for (int q = 0; q < 6; ++q) {
            analysis::ResultRow row;
            row.response_id = id++;
            row.server = server;
            row.max_tokens = 256;
            row.question_idx = q;
            row.ok = true;
            row.outcome = scorers::Outcome::finished;
            row.correct.set(0, !(server == 1 && q == 0));
            row.valid.set(0, true);
            r.rows.push_back(row);
        }
    }
    auto cmp = analysis::compare(r, {a, {}, {}}, {b, {}, {}}, 0);
    if (!cmp.ok()) {
        throw std::runtime_error(cmp.error().message); // the test fails with it
    }
    analysis::assign_verdicts(*cmp);
    return cmp->front();
}

} // namespace

// A count of one takes the singular: a comparison whose one flipped question
// printed "A better (1 questions)" and "1 questions right more often in A".
TEST(ReportTables, ACountOfOneIsSingular) {
    const auto text = reports::comparison_text(one_flip("a", "b"), reports::Style::text, 10);
    EXPECT_NE(text.find("Right more often in a/raw/256 (1 question):"), std::string::npos) << text;
    EXPECT_NE(text.find("1 question right more often in A, 0 in B"), std::string::npos) << text;
    EXPECT_NE(text.find("6 questions (1 repeat each)"), std::string::npos) << text;
    EXPECT_EQ(text.find("1 questions"), std::string::npos) << text;
}

// A name in the flipped questions' label is escaped as it is in the title
// (an audit: "ok<details><summary>ALL_GREEN" folded the rest of a diff's
// Markdown under a toggle), and model text's '$' opens no math.
TEST(ReportTables, TheFlipsLabelEscapesItsNamesInMarkdown) {
    const std::string name = "ok<details><summary>ALL_GREEN";
    const auto md = reports::comparison_text(one_flip(name, "b"), reports::Style::markdown, 10);
    EXPECT_NE(md.find("**Right more often in ok\\<details\\>\\<summary\\>ALL\\_GREEN/raw/256** (1 "
                      "question)"),
              std::string::npos)
        << md;
    EXPECT_EQ(md.find("<details>"), std::string::npos) << md;
    // The accuracy line's interval is text too, as the verdict's is.
    EXPECT_NE(md.find("95% CI \\["), std::string::npos) << md;
    EXPECT_EQ(md.find("CI ["), std::string::npos) << md;
    // --flips 0 shows no flipped questions, not "the first 0 shown".
    const auto none = reports::comparison_text(one_flip("a", "b"), reports::Style::text, 0);
    EXPECT_EQ(none.find("Right more often in"), std::string::npos) << none;
    EXPECT_NE(none.find("1 question right more often in A"), std::string::npos) << none;
    EXPECT_EQ(reports::markdown_escape("costs $x^{2}$ or $$y$$"),
              "costs \\$x^{2}\\$ or \\$\\$y\\$\\$");
}

// The rule under a comparison's title is as wide as the title on screen: a
// name in Chinese made it longer by a column a character (bytes counted).
TEST(ReportTables, TitleRuleIsAsWideAsTheTitleOnScreen) {
    const auto text = lines_of(
        reports::comparison_text(one_flip("\u6a21\u578b", "\U0001f680"), reports::Style::text, 10));
    ASSERT_GE(text.size(), 2u);
    // "🚀/raw/256 vs 模型/raw/256 (s0 scorer)": 10 + 4 + 12 + 12 = 38 columns
    // (the rocket and each character are two), in 44 bytes.
    EXPECT_EQ(text[1], std::string(38, '=')) << text[0];
}
