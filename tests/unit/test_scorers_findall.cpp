// match = "last" takes the last match in Python's re.findall() order. The
// scorer finds it by asking RE2 for match ends alone (up to eight matches in
// one pass when no match can be empty) and for one start; these
// tests hold it to the plain loop (every match found whole, start and end, an
// empty match stepped past by one character) on patterns that can match the
// empty string, with anchors, word boundaries, alternations and multi-byte
// text, where a shortcut would most easily go wrong.
#include <scorers/scorer.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <re2/re2.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

namespace diffeval::scorers {
namespace {

// The last match findall() yields, whole, or nullopt without one: the
// reference, written the slow and obvious way.
std::optional<std::string> last_by_plain_loop(const std::string& pattern, const std::string& text) {
    const re2::RE2 re(pattern);
    const re2::StringPiece input(text);
    re2::StringPiece whole;
    std::optional<std::string> last;
    size_t pos = 0;
    while (pos <= text.size() &&
           re.Match(input, pos, text.size(), re2::RE2::UNANCHORED, &whole, 1)) {
        last = std::string(whole.data(), whole.size());
        const size_t end = static_cast<size_t>(whole.data() - text.data()) + whole.size();
        if (!whole.empty()) {
            pos = end;
            continue;
        }
        if (end >= text.size()) {
            break;
        }
        // One UTF-8 character on, as Python steps past an empty match.
        pos = end + 1;
        while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) {
            ++pos;
        }
    }
    return last;
}

// A scorer taking the whole last match (no strip, no fallback text that a
// match could equal).
Scorer last_match_scorer(const std::string& pattern) {
    const std::string toml = fmt::format(R"(version = 1
[extract]
pattern = '{}'
match = "last"
group = 0
strip = false
fallback = "<none>"

[gold]
from = "full_text"

[compare]
kind = "exact_match"
)",
                                         pattern);
    auto scorer = load_scorer(toml, "last", "test");
    EXPECT_TRUE(scorer) << pattern << ": " << (scorer ? "" : scorer.error().message);
    return std::move(*scorer);
}

std::string extracted(const Scorer& scorer, const std::string& text) {
    return scorer.score(text, "#### 0").extracted;
}

std::string expected(const std::string& pattern, const std::string& text) {
    return last_by_plain_loop(pattern, text).value_or("<none>");
}

const std::vector<std::string> k_patterns = {
    R"(\p{Nd}+)", R"((-?[$0-9.,]{2,})|(-?[0-9]+))",
    R"(x*)",      R"(x*|b)",
    R"(b|x*)",    R"(\b)",
    R"(a|\b)",    R"(\bx+\b)",
    R"(^x*)",     R"(x*$)",
    R"((?m)^x)",  R"((?m)x$)",
    R"(xx|x)",    R"(x(?:yx)*)",
    R"((?:))",    R"(é+|x)",
    R"(.)",       R"([^x]*)",
};

TEST(FindallLast, KnownCasesAgreeWithThePlainLoop) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"(\p{Nd}+)", "It costs 1,250 and 3 more: 1253"},
        {R"((-?[$0-9.,]{2,})|(-?[0-9]+))", "total $1,234.50 then 7"},
        {R"(x*)", "axxbx"},  // ..., "x", "" at the end
        {R"(x*|b)", "axxb"}, // "b" is never reached: x* matches empty first
        {R"(a|\b)", " a b"}, // an empty match right after a non-empty one
        {R"(x(?:yx)*)", "xyxyx zxy"},
        {R"(é+|x)", "ééxé"},
        {R"(x*$)", "xxaxx\n"},
    };
    for (const auto& [pattern, text] : cases) {
        EXPECT_EQ(extracted(last_match_scorer(pattern), text), expected(pattern, text))
            << pattern << " on '" << text << "'";
    }
    // Spelled out for two of them, so the reference is checked as well.
    EXPECT_EQ(extracted(last_match_scorer(R"(\p{Nd}+)"), "It costs 1,250 and 3 more: 1253"),
              "1253");
    EXPECT_EQ(extracted(last_match_scorer(R"(x(?:yx)*)"), "xyxyx zxy"), "x");
}

// `rounds` random texts of up to `longest` characters for each of
// `patterns`, over a small alphabet, so every pattern matches often, at word
// edges, line ends and next to two-byte characters: the scorer's last match
// must be the plain loop's.
void expect_agreement(const std::vector<std::string>& patterns, unsigned seed, int longest,
                      int rounds) {
    const std::vector<std::string> alphabet = {"x", "x", "y", "b", "a", " ", "\n", "1", ",", "é"};
    std::mt19937 rng(seed);
    std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
    std::uniform_int_distribution<int> length(0, longest);
    for (const auto& pattern : patterns) {
        const Scorer scorer = last_match_scorer(pattern);
        for (int round = 0; round < rounds; ++round) {
            std::string text;
            for (int n = length(rng); n > 0; --n) {
                text += alphabet[pick(rng)];
            }
            ASSERT_EQ(extracted(scorer, text), expected(pattern, text))
                << pattern << " on '" << text << "'";
        }
    }
}

TEST(FindallLast, RandomTextsAgreeWithThePlainLoop) {
    expect_agreement(k_patterns, 20251202, 24, 300);
}

TEST(FindallLast, LongTextsWithManyMatchesAgreeWithThePlainLoop) {
    // A pattern that never matches empty text is stepped through up to
    // eight matches at a time, then match by match: texts long enough for
    // dozens of matches, so the last may fall anywhere within a step.
    std::vector<std::string> patterns = k_patterns;
    for (const char* p : {R"(x+)", R"(\bx)", R"(x\b)", R"(1[,1]*)", R"((?m)x$|y)", R"([^ ]+)"}) {
        patterns.emplace_back(p);
    }
    expect_agreement(patterns, 20261203, 320, 150);
}

TEST(FindallLast, QuotedPatternsStillWork) {
    // \Q...\E quoting: wrapping such a pattern would change its meaning.
    const Scorer scorer = last_match_scorer(R"(\Q1+\E|7)");
    EXPECT_EQ(extracted(scorer, "1+ and 7 and 1+"), "1+");
    EXPECT_EQ(extracted(last_match_scorer(R"(\Q(x)\E)"), "(x) (x)"), "(x)");
}

} // namespace
} // namespace diffeval::scorers
