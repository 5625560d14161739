// select_scored_text: which part of a response the scorers read.
#include <scorers/score_text.hpp>

#include <gtest/gtest.h>

namespace diffeval::scorers {
namespace {

TEST(SelectScoredText, FullIsTheTextAsReturned) {
    const std::string_view text = "<think>\nhmm 4\n</think>\n\n#### 5";
    EXPECT_EQ(select_scored_text(text, ScoreText::full), text);
}

TEST(SelectScoredText, AfterThinkIsWhatFollowsTheLastClose) {
    EXPECT_EQ(select_scored_text("<think>\nhmm 4\n</think>\n\n#### 5", ScoreText::after_think),
              "\n\n#### 5");
    EXPECT_EQ(select_scored_text("<think>a</think>b</think> 7", ScoreText::after_think), " 7");
    // A chat template that opened the block leaves only the close in the text.
    EXPECT_EQ(select_scored_text("reasoning 4\n</think>\n\n5", ScoreText::after_think), "\n\n5");
}

TEST(SelectScoredText, AfterThinkWithoutReasoningIsTheWholeText) {
    EXPECT_EQ(select_scored_text(" Natalia sold 72 clips.\n#### 72", ScoreText::after_think),
              " Natalia sold 72 clips.\n#### 72");
    EXPECT_EQ(select_scored_text("", ScoreText::after_think), "");
}

TEST(SelectScoredText, AfterThinkOfUnclosedReasoningIsEmpty) {
    EXPECT_EQ(select_scored_text("<think>\n2.5% of 5,000 is 125", ScoreText::after_think), "");
    EXPECT_EQ(select_scored_text(" \n<think>\n2.5% of 5,000 is 125", ScoreText::after_think), "");
    // Leading whitespace is what Python's str.isspace() accepts, as
    // docs/classification.md says: an ideographic or no-break space too.
    EXPECT_EQ(
        select_scored_text("\u3000<think>\nThree boxes of 12 pens is 36", ScoreText::after_think),
        "");
    EXPECT_EQ(select_scored_text("\u00a0\x1c<think>\n36", ScoreText::after_think), "");
}

TEST(SelectScoredText, ThinkTagLaterInTheTextDoesNotOpenABlock) {
    const std::string_view text = " The answer is 5. <think>";
    EXPECT_EQ(select_scored_text(text, ScoreText::after_think), text);
}

TEST(ScoreTextName, RoundTrips) {
    for (ScoreText mode : {ScoreText::full, ScoreText::after_think}) {
        auto parsed = parse_score_text(score_text_name(mode));
        ASSERT_TRUE(parsed.ok());
        EXPECT_EQ(*parsed, mode);
    }
    EXPECT_EQ(score_text_name(ScoreText::after_think), "after-think");
}

TEST(ScoreTextName, UnknownNameSaysWhatIsAccepted) {
    auto parsed = parse_score_text("after_think");
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.error().message.find("'after-think'"), std::string::npos);
}

} // namespace
} // namespace diffeval::scorers
