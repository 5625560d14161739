// A scorer file is untrusted input (a database made elsewhere carries its
// users' scorers): substitutions that grow the text geometrically must cost
// bounded time and memory. Found by fuzz_scorer_toml.
#include <scorers/scorer.hpp>

#include <gtest/gtest.h>

#include <string>

using namespace diffeval;

namespace {

// A scorer whose `compare.normalise` has `rules` rules that each put "grow"
// between every two characters (the pattern matches the empty string).
std::string growing_scorer(int rules, const char* where) {
    std::string text = R"(version = 1
description = "grows"
[extract]
pattern = '#### (\-?[0-9\.\,]+)'
match = "first"
group = 1
fallback = "[invalid]"
[gold]
from = "full_text"
[compare]
kind = "exact_match"
)";
    for (int i = 0; i < rules; ++i) {
        text += std::string("[[") + where + "]]\npattern = '(?s),*'\nreplace = 'grow'\n";
    }
    return text;
}

} // namespace

TEST(ScorerGrowth, ChainedGrowingNormalisationIsBoundedAndStillDeterministic) {
    // Unbounded, 20 rules would make the 2-byte answer 5^20 x 2 bytes long.
    auto s = scorers::load_scorer(growing_scorer(20, "compare.normalise"), "grows", "grows.toml");
    ASSERT_TRUE(s) << s.error().message;
    // (The gold "42" normalises exactly like the extracted "42".)
    const auto first = s->score("The answer.\n#### 42", "42");
    EXPECT_TRUE(first.valid);
    EXPECT_EQ(first.extracted, "42");
    // Normalising ran past its bound on both sides: no comparison can be
    // trusted, so nothing is correct (cutting both alike would make 41
    // equal 42 once only the inserted text is left).
    EXPECT_FALSE(first.correct);
    EXPECT_FALSE(s->score("#### 41", "42").correct);
    // A scorer whose rules stay within the bound is untouched by it.
    auto two = scorers::load_scorer(growing_scorer(2, "compare.normalise"), "grows", "grows.toml");
    ASSERT_TRUE(two) << two.error().message;
    EXPECT_TRUE(two->score("#### 42", "42").correct);
    EXPECT_FALSE(two->score("#### 41", "42").correct);
}

TEST(ScorerGrowth, ChainedGrowingPreparationOfALongResponseIsBounded) {
    auto s = scorers::load_scorer(growing_scorer(20, "extract.prepare"), "grows", "grows.toml");
    ASSERT_TRUE(s) << s.error().message;
    // Unbounded, the first rule alone makes this 500 kB response 2.5 MB and
    // the twentieth some 10^19 bytes; bounded, it is cut at 16 times its
    // size and the extraction runs (and finds nothing: "grow" now sits
    // between the marks).
    const std::string response(500'000, 'x');
    const auto r = s->score(response + "\n#### 42", "#### 42");
    EXPECT_FALSE(r.valid);
    EXPECT_EQ(r.extracted, "[invalid]");
}
