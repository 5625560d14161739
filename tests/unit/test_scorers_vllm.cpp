// The `vllm` scorer (scorers/vllm.toml) against vLLM's GSM8K script:
// commas removed, the last digit run read by ast.literal_eval. Every expected
// value was worked out by hand from the script and checked with CPython 3.11.
#include <scorers/python.hpp>
#include <scorers/registry.hpp>
#include <scorers/score_text.hpp>

#include <gtest/gtest.h>

#include <string>

namespace diffeval::scorers {
namespace {

const Scorer& vllm() {
    auto scorer = find_scorer("vllm");
    EXPECT_TRUE(scorer.ok()) << scorer.error().message;
    return **scorer;
}

constexpr std::string_view k_gold_36 =
    "Each box holds 12 pens, so 3 boxes hold 3 * 12 = <<3*12=36>>36 pens.\n#### 36";

TEST(VllmScorer, TakesTheLastNumberWithCommasRemoved) {
    const auto r =
        vllm().score(" The bakery sold 1,234 rolls.\n#### 1,234",
                     "The bakery baked 617 * 2 = <<617*2=1234>>1,234 rolls.\n#### 1,234");
    EXPECT_EQ(r.extracted, "1234");
    EXPECT_TRUE(r.valid);
    EXPECT_TRUE(r.correct);
}

TEST(VllmScorer, JoinsDigitGroupsOfLargeNumbers) {
    const auto r = vllm().score(" #### 1,000,000", "#### 1000000");
    EXPECT_EQ(r.extracted, "1000000");
    EXPECT_TRUE(r.correct);
}

TEST(VllmScorer, IgnoresDollarSigns) {
    const auto r =
        vllm().score(" She pays $45.\n#### $45", "She pays 5 * 9 = $<<5*9=45>>45.\n#### 45");
    EXPECT_EQ(r.extracted, "45");
    EXPECT_TRUE(r.correct);
}

TEST(VllmScorer, ReadsOnlyTheDigitsAfterADecimalPoint) {
    const std::string_view gold = "Half of 25 is 25 / 2 = <<25/2=12.5>>12.5.\n#### 12.5";
    // The gold label itself is 5, the last digit run of "12.5".
    EXPECT_EQ(vllm().prepare_gold(gold).value, "5");

    const auto trailing_zero = vllm().score(" Each costs 12.5 dollars.\n#### 12.50", gold);
    EXPECT_EQ(trailing_zero.extracted, "50");
    EXPECT_FALSE(trailing_zero.correct);

    const auto same = vllm().score(" Each costs 12.5 dollars.\n#### 12.5", gold);
    EXPECT_EQ(same.extracted, "5");
    EXPECT_TRUE(same.correct);
}

TEST(VllmScorer, DropsTheSign) {
    EXPECT_TRUE(vllm()
                    .score(" The balance is 4 - 7 = -3.\n#### -3", "4 - 7 = <<4-7=-3>>-3\n#### -3")
                    .correct);
    // A negative answer to a positive gold still counts.
    const auto r = vllm().score(" The change is -5.", "#### 5");
    EXPECT_EQ(r.extracted, "5");
    EXPECT_TRUE(r.correct);
}

TEST(VllmScorer, TrailingDotDoesNotMatter) {
    const auto r = vllm().score(" The answer is 18.", "9 * 2 = <<9*2=18>>18\n#### 18");
    EXPECT_EQ(r.extracted, "18");
    EXPECT_TRUE(r.correct);
}

TEST(VllmScorer, LeadingZerosAreASyntaxErrorButZeroRunsAreZero) {
    const auto leading = vllm().score(" The code is 007", "#### 7");
    EXPECT_EQ(leading.extracted, "[invalid]");
    EXPECT_FALSE(leading.valid);
    EXPECT_FALSE(leading.correct);

    const auto zeros = vllm().score(" The total is 00", "#### 0");
    EXPECT_EQ(zeros.extracted, "0");
    EXPECT_TRUE(zeros.valid);
    EXPECT_TRUE(zeros.correct);
}

TEST(VllmScorer, NoNumberIsInvalid) {
    for (std::string_view text : {" I don't know.", " twelve", ""}) {
        const auto r = vllm().score(text, k_gold_36);
        EXPECT_EQ(r.extracted, "[invalid]") << text;
        EXPECT_FALSE(r.valid) << text;
        EXPECT_FALSE(r.correct) << text;
    }
}

TEST(VllmScorer, LastOfSeveralAnswersWins) {
    const auto r = vllm().score(" #### 5\nWait, that is wrong.\n#### 36", k_gold_36);
    EXPECT_EQ(r.extracted, "36");
    EXPECT_TRUE(r.correct);
}

TEST(VllmScorer, NonAsciiDigitsMatchButDoNotParse) {
    // \d in the script matches Arabic-Indic digits; ast.literal_eval then
    // rejects them, so a trailing "١٢" makes the answer invalid ...
    const auto trailing = vllm().score(" 12 apples, or \u0661\u0662", "#### 12");
    EXPECT_EQ(trailing.extracted, "[invalid]");
    EXPECT_FALSE(trailing.correct);
    // ... while earlier ones are simply not the last match.
    EXPECT_TRUE(vllm().score(" \u0661\u0662 apples, or 12", "#### 12").correct);
    // Digits Unicode 16 and 17 added (Ol Onal U+1E5F1, Garay U+10D40,
    // outlined U+1CCF0), which the regex module knows and an older libre2
    // does not, are digits too: the script's answer is invalid (audit).
    for (const std::string digit : {"\U0001E5F1", "\U00010D40", "\U0001CCF0", "\U000116E3"}) {
        const auto r = vllm().score("The answer is 36 " + digit, k_gold_36);
        EXPECT_EQ(r.extracted, "[invalid]") << digit;
        EXPECT_FALSE(r.correct) << digit;
    }
}

TEST(VllmScorer, NumbersInsideReasoningCountUnlessOnlyTheAnswerIsScored) {
    const std::string_view text = "<think>\n3 boxes of 12 is 36.\n</think>\n\nI am not sure.";
    EXPECT_TRUE(vllm().score(select_scored_text(text, ScoreText::full), k_gold_36).correct);
    const auto after = vllm().score(select_scored_text(text, ScoreText::after_think), k_gold_36);
    EXPECT_EQ(after.extracted, "[invalid]");
    EXPECT_FALSE(after.correct);

    const std::string_view answered = "<think>\nMaybe 40 pens.\n</think>\n\nThe answer is 36.";
    EXPECT_EQ(
        vllm().score(select_scored_text(answered, ScoreText::after_think), k_gold_36).extracted,
        "36");
}

TEST(VllmScorer, ArticleResponseCutMidThoughtScoresTheTwoOfOnePointTwoPercent) {
    const std::string_view text =
        "<think>\nThe user wants me to solve a word problem about a merchant choosing between two "
        "investment plans.\n\n**1. Analyze the input:**\n- **Option 1:** Jewelry worth $5,000.\n"
        "- **Option 2:** Electronic gadgets worth $8,000.\n- **Projected Growth (Jewelry):** 2.5% "
        "increase.\n- **Projected Growth (Electronics):** 1.2% increase.\n- **Goal:** Maximize "
        "profit.\n- **";
    const auto r = vllm().score(text, "#### 125");
    EXPECT_EQ(r.extracted, "2");
    EXPECT_TRUE(r.valid);
    EXPECT_FALSE(r.correct);
    EXPECT_EQ(vllm().score(select_scored_text(text, ScoreText::after_think), "#### 125").extracted,
              "[invalid]");
}

TEST(VllmScorer, PreparedGoldGivesTheSameScore) {
    const Gold gold = vllm().prepare_gold(k_gold_36);
    EXPECT_TRUE(gold.valid);
    EXPECT_EQ(gold.value, "36");
    EXPECT_TRUE(vllm().score(" 36", gold).correct);
    EXPECT_FALSE(vllm().score(" 35", gold).correct);
}

TEST(VllmScorer, InvalidGoldNeverMatches) {
    EXPECT_FALSE(vllm().prepare_gold("no number").valid);
    EXPECT_FALSE(vllm().score(" [invalid]", "no number").correct);
}

TEST(PythonIntLiteral, FollowsAstLiteralEval) {
    EXPECT_EQ(python_int_literal("0"), "0");
    EXPECT_EQ(python_int_literal("00"), "0");
    EXPECT_EQ(python_int_literal("000"), "0");
    EXPECT_EQ(python_int_literal("72"), "72");
    EXPECT_EQ(python_int_literal("007"), std::nullopt);
    EXPECT_EQ(python_int_literal("0100"), std::nullopt);
    EXPECT_EQ(python_int_literal(""), std::nullopt);
    EXPECT_EQ(python_int_literal("\u0661\u0662"), std::nullopt);
    EXPECT_EQ(python_int_literal("12\u0661"), std::nullopt);
}

TEST(PythonIntLiteral, HugeValuesStayExactUpToPythonsDigitLimit) {
    const std::string longest(k_python_int_max_digits, '9');
    EXPECT_EQ(python_int_literal(longest), longest);
    EXPECT_EQ(python_int_literal(longest + "9"), std::nullopt);
    // Zero is exempt from the limit (CPython reads "000...0" as 0).
    EXPECT_EQ(python_int_literal(std::string(5000, '0')), "0");
}

TEST(VllmScorer, NumbersBeyondInt64CompareExactly) {
    const auto r =
        vllm().score(" 123456789012345678901234567890", "#### 123456789012345678901234567890");
    EXPECT_TRUE(r.correct);
    EXPECT_FALSE(
        vllm()
            .score(" 123456789012345678901234567891", "#### 123456789012345678901234567890")
            .correct);
}

} // namespace
} // namespace diffeval::scorers
