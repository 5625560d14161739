// The lm-eval scorers (scorers/lm-eval-strict.toml, lm-eval-flexible.toml)
// against lm-evaluation-harness's gsm8k task: the regex filters, then
// exact_match with regexes_to_ignore and ignore_case against the full gold
// answer. Expected values were worked out by hand from the upstream code and
// checked with CPython 3.11's re module.
#include <scorers/registry.hpp>
#include <scorers/score_text.hpp>

#include <gtest/gtest.h>

namespace diffeval::scorers {
namespace {

const Scorer& get(std::string_view name) {
    auto scorer = find_scorer(name);
    EXPECT_TRUE(scorer.ok()) << scorer.error().message;
    return **scorer;
}
const Scorer& strict() {
    return get("lm-eval-strict");
}
const Scorer& flexible() {
    return get("lm-eval-flexible");
}

constexpr std::string_view k_gold_36 =
    "Each box holds 12 pens, so 3 boxes hold 3 * 12 = <<3*12=36>>36 pens.\n#### 36";
constexpr std::string_view k_gold_1234 =
    "The bakery baked 617 * 2 = <<617*2=1234>>1,234 rolls.\n#### 1,234";
constexpr std::string_view k_gold_18 = "9 * 2 = <<9*2=18>>18\n#### 18";

TEST(LmEvalGold, IsTheFullAnswerNormalised) {
    EXPECT_EQ(strict().prepare_gold(k_gold_36).value, "36");
    EXPECT_EQ(strict().prepare_gold(k_gold_1234).value, "1234");
    EXPECT_EQ(strict().prepare_gold("She pays 5 * 9 = $<<5*9=45>>45.\n#### $45").value, "45");
    // `(?s).*#### ` is greedy: everything up to the last "#### " goes.
    EXPECT_EQ(flexible().prepare_gold("a #### 1 #### 2").value, "2");
    // Python's `\.$` also matches before a final newline, keeping the newline.
    EXPECT_EQ(strict().prepare_gold("A\n#### 72.\n").value, "72\n");
    EXPECT_EQ(strict().prepare_gold("#### 72.").value, "72");
    // Without "#### " the whole text is compared, lower-cased.
    EXPECT_EQ(strict().prepare_gold("Seventy-Two").value, "seventy-two");
    // exact_match holds each step's result in a numpy array, which drops
    // trailing NULs: lm-eval's gold `#### 18\0` is 18, and `#### 18.\0` is
    // 18 too (the NUL goes before the trailing-dot rule reads the dot).
    using namespace std::string_literals;
    EXPECT_EQ(strict().prepare_gold("9 * 2 = 18\n#### 18\0"s).value, "18");
    EXPECT_EQ(strict().prepare_gold("9 * 2 = 18\n#### 18.\0\0"s).value, "18");
    EXPECT_TRUE(flexible().score("#### 18", "#### 18\0"s).correct);
    // A NUL inside the text stays.
    EXPECT_EQ(strict().prepare_gold("#### 1\08"s).value, "1\08"s);
}

TEST(LmEvalGold, StrictAndFlexibleShareOneGoldAndVllmHasItsOwn) {
    // A question's gold is prepared once for scorers with the same rules.
    EXPECT_TRUE(strict().same_gold_as(flexible()));
    EXPECT_TRUE(flexible().same_gold_as(strict()));
    EXPECT_FALSE(get("vllm").same_gold_as(strict()));
    for (auto gold : {k_gold_36, k_gold_1234, k_gold_18}) {
        const Gold a = strict().prepare_gold(gold);
        const Gold b = flexible().prepare_gold(gold);
        EXPECT_EQ(a.value, b.value);
        EXPECT_EQ(a.valid, b.valid);
        EXPECT_EQ(a.comparable, b.comparable);
    }
    // One normalising rule more is another gold.
    ScorerDefinition more = strict().definition();
    more.name = "strict-keeping-dollars";
    more.normalise.pop_back();
    auto other = Scorer::create(more);
    ASSERT_TRUE(other) << other.error().message;
    EXPECT_FALSE(other->same_gold_as(strict()));
    EXPECT_NE(other->prepare_gold("#### 4.").value, strict().prepare_gold("#### 4.").value);
}

TEST(LmEvalStrict, TakesTheNumberAfterTheFirstMarker) {
    const auto r = strict().score(" The bakery sold 1,234 rolls.\n#### 1,234", k_gold_1234);
    EXPECT_EQ(r.extracted, "1,234");
    EXPECT_TRUE(r.valid);
    EXPECT_TRUE(r.correct);
    EXPECT_TRUE(strict().score(" The bakery sold 1234 rolls.\n#### 1234", k_gold_1234).correct);
}

TEST(LmEvalStrict, FirstOfSeveralMarkersWins) {
    const auto r = strict().score(" #### 5\nWait, that is wrong.\n#### 36", k_gold_36);
    EXPECT_EQ(r.extracted, "5");
    EXPECT_TRUE(r.valid);
    EXPECT_FALSE(r.correct);
}

TEST(LmEvalStrict, NeedsTheMarkerAndADigitRightAfterIt) {
    for (std::string_view text :
         {" The answer is 18.", " I don't know.", " She pays $45.\n#### $45"}) {
        const auto r = strict().score(text, k_gold_18);
        EXPECT_EQ(r.extracted, "[invalid]") << text;
        EXPECT_FALSE(r.valid) << text;
        EXPECT_FALSE(r.correct) << text;
    }
}

TEST(LmEvalStrict, DecimalsCompareAsText) {
    const std::string_view gold = "Half of 25 is 25 / 2 = <<25/2=12.5>>12.5.\n#### 12.5";
    const auto zero = strict().score(" Each costs 12.5 dollars.\n#### 12.50", gold);
    EXPECT_EQ(zero.extracted, "12.50");
    EXPECT_FALSE(zero.correct);
    EXPECT_TRUE(strict().score(" Each costs 12.5 dollars.\n#### 12.5", gold).correct);
    // ".5" is not "0.5".
    EXPECT_FALSE(strict().score(" #### .5", "#### 0.5").correct);
}

TEST(LmEvalStrict, KeepsTheSign) {
    const auto r =
        strict().score(" The balance is 4 - 7 = -3.\n#### -3", "4 - 7 = <<4-7=-3>>-3\n#### -3");
    EXPECT_EQ(r.extracted, "-3");
    EXPECT_TRUE(r.correct);
    EXPECT_FALSE(strict().score(" #### -5", "#### 5").correct);
}

TEST(LmEvalStrict, OneTrailingDotIsIgnored) {
    const auto one = strict().score(" 9 * 2 = 18\n#### 18.", k_gold_18);
    EXPECT_EQ(one.extracted, "18.");
    EXPECT_TRUE(one.correct);
    const auto two = strict().score(" 9 * 2 = 18\n#### 18..", k_gold_18);
    EXPECT_EQ(two.extracted, "18..");
    EXPECT_FALSE(two.correct);
}

TEST(LmEvalStrict, StopsAtTheEndOfTheNumber) {
    const auto r = strict().score(" 3 boxes hold 36 pens.\n#### 36\n\n", k_gold_36);
    EXPECT_EQ(r.extracted, "36");
    EXPECT_TRUE(r.correct);
}

TEST(LmEvalFlexible, TakesTheLastNumberLikeRun) {
    const auto r = flexible().score(" The answer is 18.", k_gold_18);
    EXPECT_EQ(r.extracted, "18.");
    EXPECT_TRUE(r.valid);
    EXPECT_TRUE(r.correct);

    const auto several = flexible().score(" #### 5\nWait, that is wrong.\n#### 36", k_gold_36);
    EXPECT_EQ(several.extracted, "36");
    EXPECT_TRUE(several.correct);
}

TEST(LmEvalFlexible, KeepsCommasAndDollarsUntilTheComparison) {
    const auto dollars =
        flexible().score(" She pays $45.\n#### $45", "She pays 5 * 9 = $<<5*9=45>>45.\n#### 45");
    EXPECT_EQ(dollars.extracted, "$45");
    EXPECT_TRUE(dollars.correct);

    const auto commas = flexible().score(" 5,000", "#### 5000");
    EXPECT_EQ(commas.extracted, "5,000");
    EXPECT_TRUE(commas.correct);
}

TEST(LmEvalFlexible, SingleDigitsComeFromTheSecondGroup) {
    // "-3" is too short for the first alternative; the second one matches.
    const auto r =
        flexible().score(" The balance is 4 - 7 = -3.\n#### -3", "4 - 7 = <<4-7=-3>>-3\n#### -3");
    EXPECT_EQ(r.extracted, "-3");
    EXPECT_TRUE(r.correct);
    EXPECT_EQ(flexible().score(" The answer is 3.", "#### 3").extracted, "3.");
    EXPECT_TRUE(flexible().score(" The answer is 3.", "#### 3").correct);
}

TEST(LmEvalFlexible, KeepsTheSignAndLeadingZeros) {
    const auto negative = flexible().score(" The change is -5.", "#### 5");
    EXPECT_EQ(negative.extracted, "-5.");
    EXPECT_FALSE(negative.correct);

    const auto zeros = flexible().score(" The code is 007", "#### 7");
    EXPECT_EQ(zeros.extracted, "007");
    EXPECT_TRUE(zeros.valid);
    EXPECT_FALSE(zeros.correct);
    EXPECT_FALSE(flexible().score(" The total is 00", "#### 0").correct);
}

TEST(LmEvalFlexible, DecimalsAndDots) {
    const std::string_view gold = "Half of 25 is 25 / 2 = <<25/2=12.5>>12.5.\n#### 12.5";
    EXPECT_EQ(flexible().score(" Each costs 12.5 dollars.\n#### 12.50", gold).extracted, "12.50");
    EXPECT_FALSE(flexible().score(" Each costs 12.5 dollars.\n#### 12.50", gold).correct);
    EXPECT_TRUE(flexible().score(" Each costs 12.5 dollars.\n#### 12.5", gold).correct);
    EXPECT_FALSE(flexible().score(" 9 * 2 = 18\n#### 18..", k_gold_18).correct);
}

TEST(LmEvalFlexible, NoNumberFallsBack) {
    const auto r = flexible().score(" twelve", "#### 12");
    EXPECT_EQ(r.extracted, "[invalid]");
    EXPECT_FALSE(r.valid);
    EXPECT_FALSE(r.correct);
}

TEST(LmEvalFlexible, MatchesAsciiDigitsOnly) {
    // [0-9] in Python's re is ASCII: Arabic-Indic digits are not a number.
    EXPECT_EQ(flexible().score(" 12 apples, or \u0661\u0662", "#### 12").extracted, "12");
}

TEST(LmEvalFlexible, ReadsReasoningUnlessOnlyTheAnswerIsScored) {
    const std::string_view text = "<think>\n3 boxes of 12 is 36.\n</think>\n\nI am not sure.";
    const auto full = flexible().score(select_scored_text(text, ScoreText::full), k_gold_36);
    EXPECT_EQ(full.extracted, "36.");
    EXPECT_TRUE(full.correct);
    EXPECT_FALSE(
        flexible().score(select_scored_text(text, ScoreText::after_think), k_gold_36).valid);
}

TEST(LmEvalFlexible, ArticleResponseCutMidThoughtExtractsOnePointTwo) {
    const std::string_view text =
        "<think>\nThe user wants me to solve a word problem about a merchant choosing between two "
        "investment plans.\n\n**1. Analyze the input:**\n- **Option 1:** Jewelry worth $5,000.\n"
        "- **Option 2:** Electronic gadgets worth $8,000.\n- **Projected Growth (Jewelry):** 2.5% "
        "increase.\n- **Projected Growth (Electronics):** 1.2% increase.\n- **Goal:** Maximize "
        "profit.\n- **";
    EXPECT_EQ(flexible().score(text, "#### 125").extracted, "1.2");
    EXPECT_EQ(strict().score(text, "#### 125").extracted, "[invalid]");
}

} // namespace
} // namespace diffeval::scorers
