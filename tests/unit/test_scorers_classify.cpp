// classify(): how each response ended, on responses shaped like the ones
// vLLM returns for the raw and chat framings.
#include <scorers/classify.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace diffeval::scorers {
namespace {

util::StopReason stop_string(std::string text) {
    return util::StopReason{std::move(text)};
}

util::StopReason stop_token(int64_t id) {
    return util::StopReason{id};
}

ClassifyInput response(std::string_view text, std::string_view finish_reason,
                       util::StopReason stop = {}) {
    ClassifyInput in;
    in.text = text;
    in.finish_reason = finish_reason;
    in.stop_reason = std::move(stop);
    in.stop_field = "stop_reason"; // vLLM names the stop in stop_reason, null for EOS
    return in;
}

constexpr std::string_view k_article_text =
    "<think>\nThe user wants me to solve a word problem about a merchant choosing between two "
    "investment plans.\n\n**1. Analyze the input:**\n- **Option 1:** Jewelry worth $5,000.\n"
    "- **Option 2:** Electronic gadgets worth $8,000.\n- **Projected Growth (Jewelry):** 2.5% "
    "increase.\n- **Projected Growth (Electronics):** 1.2% increase.\n- **Goal:** Maximize "
    "profit.\n- **";

TEST(Classify, PlainAnswerStoppedAtTheNextQuestionIsFinished) {
    const auto c = classify(response(" The shop sold 3 * 12 = <<3*12=36>>36 pens.\n#### 36\n\n",
                                     "stop", stop_string("Question")));
    EXPECT_EQ(c.outcome, Outcome::finished);
    EXPECT_FALSE(c.opened);
    EXPECT_FALSE(c.closed);
    EXPECT_FALSE(c.reasoning_started);
}

TEST(Classify, EmptyThinkBlockThenAnswerIsFinishedWithoutReasoning) {
    const auto c =
        classify(response("<think>\n\n</think>\n\n3 boxes of 12 pens is 36 pens.\n#### 36\n\n",
                          "stop", stop_string("Question")));
    EXPECT_EQ(c.outcome, Outcome::finished);
    EXPECT_TRUE(c.opened);
    EXPECT_TRUE(c.closed);
    EXPECT_FALSE(c.reasoning_started);
}

TEST(Classify, ReasoningThenAnswerEndedByEosIsFinished) {
    const auto c = classify(
        response("<think>\nThree boxes of twelve pens: 36.\n</think>\n\nThe answer is 36.\n#### 36",
                 "stop"));
    EXPECT_EQ(c.outcome, Outcome::finished);
    EXPECT_TRUE(c.opened);
    EXPECT_TRUE(c.closed);
    EXPECT_TRUE(c.reasoning_started);
}

TEST(Classify, ArticleResponseCutMidThoughtByQuestionIsStopTruncated) {
    const auto c = classify(response(k_article_text, "stop", stop_string("Question")));
    EXPECT_EQ(c.outcome, Outcome::stop_truncated);
    EXPECT_TRUE(c.opened);
    EXPECT_FALSE(c.closed);
    EXPECT_TRUE(c.reasoning_started);
    EXPECT_TRUE(never_finished(c.outcome));
}

// An unclosed block opened after Unicode whitespace (audit: classified
// finished, so a response cut mid-reasoning read as a finished answer).
TEST(Classify, ABlockOpenedAfterUnicodeWhitespaceIsReasoning) {
    const auto c = classify(response("\u3000<think>\nThe user wants 3 boxes of 12. So 36", "stop",
                                     stop_string("Question")));
    EXPECT_TRUE(c.opened);
    EXPECT_TRUE(c.reasoning_started);
    EXPECT_EQ(c.outcome, Outcome::stop_truncated);
}

TEST(Classify, EosInsideAnUnclosedBlockIsStopTruncated) {
    EXPECT_EQ(classify(response("<think>\nLet me think about the pens", "stop")).outcome,
              Outcome::stop_truncated);
}

TEST(Classify, StopStringRightAfterTheBlockIsStopTruncated) {
    const auto c = classify(
        response("<think>\nThe total is 36.\n</think>\n\n", "stop", stop_string("Question")));
    EXPECT_EQ(c.outcome, Outcome::stop_truncated);
    EXPECT_TRUE(c.closed);
    EXPECT_TRUE(c.reasoning_started);
}

TEST(Classify, StopStringBeforeAnyTextIsStopTruncated) {
    EXPECT_EQ(classify(response("", "stop", stop_string("Question"))).outcome,
              Outcome::stop_truncated);
    EXPECT_EQ(classify(response(" \n", "stop", stop_string("Assistant:"))).outcome,
              Outcome::stop_truncated);
}

TEST(Classify, StopTokenOrEosAfterAClosedBlockIsFinished) {
    // Only a stop *string* marks an answer cut before it began; a stop token
    // or EOS is the model ending its turn.
    EXPECT_EQ(classify(response("<think>\n\n</think>\n\n", "stop", stop_token(151645))).outcome,
              Outcome::finished);
    EXPECT_EQ(classify(response("<think>\n\n</think>\n\n", "stop")).outcome, Outcome::finished);
}

TEST(Classify, LengthLimitIsLengthTruncatedWithOrWithoutReasoning) {
    const auto reasoning = classify(response("<think>\nFirst, 12 pens per box. Then", "length"));
    EXPECT_EQ(reasoning.outcome, Outcome::length_truncated);
    EXPECT_TRUE(reasoning.reasoning_started);
    EXPECT_FALSE(reasoning.closed);

    const auto plain = classify(response(" The shop has 3 boxes. Each box has", "length"));
    EXPECT_EQ(plain.outcome, Outcome::length_truncated);
    EXPECT_FALSE(plain.opened);
    EXPECT_TRUE(never_finished(plain.outcome));
}

TEST(Classify, FailuresAreErrorsWhateverTheBodySays) {
    ClassifyInput failed = response("", "stop");
    failed.failed = true;
    EXPECT_EQ(classify(failed).outcome, Outcome::error);
    EXPECT_EQ(classify(response("<think>\npartial", "abort")).outcome, Outcome::error);
    EXPECT_EQ(classify(response("", "error")).outcome, Outcome::error);
    EXPECT_FALSE(never_finished(Outcome::error));
}

TEST(Classify, OtherFinishReasonsAndMissingOnesAreOther) {
    EXPECT_EQ(classify(response(" 36 36 36 36", "repetition")).outcome, Outcome::other);
    EXPECT_EQ(classify(response(" #### 36", "content_filter")).outcome, Outcome::other);
    EXPECT_EQ(classify(response(" #### 36", "")).outcome, Outcome::other);
    EXPECT_TRUE(never_finished(Outcome::other));
}

// An answer imported from lm-eval samples keeps its text but not how it
// ended: it is neither finished nor never finished.
TEST(Classify, AnImportWithoutFinishReasonIsUnrecorded) {
    auto imported = response(" #### 36", "");
    imported.stop_field = "";
    imported.finish_unrecorded = true;
    const auto c = classify(imported);
    EXPECT_EQ(c.outcome, Outcome::unrecorded);
    EXPECT_EQ(c.stop_cause, StopCause::none);
    EXPECT_FALSE(never_finished(Outcome::unrecorded));
    // What a response does say still decides.
    imported.finish_reason = "length";
    EXPECT_EQ(classify(imported).outcome, Outcome::length_truncated);
    imported.finish_reason = "";
    imported.failed = true;
    EXPECT_EQ(classify(imported).outcome, Outcome::error);
}

TEST(Classify, LeadingWhitespaceBeforeTheTagStillOpens) {
    const auto c = classify(response("\n <think>\nPens.\n</think>\n#### 36", "stop"));
    EXPECT_TRUE(c.opened);
    EXPECT_TRUE(c.closed);
    EXPECT_EQ(c.outcome, Outcome::finished);
}

TEST(Classify, TagAfterOtherTextDoesNotOpen) {
    const auto c =
        classify(response(" The answer is 36. <think>", "stop", stop_string("Question")));
    EXPECT_FALSE(c.opened);
    EXPECT_EQ(c.outcome, Outcome::finished);
}

TEST(Classify, ServerSeparatedReasoning) {
    ClassifyInput answered = response("#### 36", "stop");
    answered.reasoning = "Three boxes of twelve is 36.";
    const auto c = classify(answered);
    EXPECT_TRUE(c.opened);
    EXPECT_TRUE(c.closed);
    EXPECT_TRUE(c.reasoning_started);
    EXPECT_EQ(c.outcome, Outcome::finished);

    ClassifyInput cut = response("", "stop", stop_string("Question"));
    cut.reasoning = "Three boxes of twelve is";
    const auto d = classify(cut);
    EXPECT_TRUE(d.opened);
    EXPECT_FALSE(d.closed);
    EXPECT_EQ(d.outcome, Outcome::stop_truncated);

    ClassifyInput blank = response("#### 36", "stop");
    blank.reasoning = "\n\n";
    EXPECT_FALSE(classify(blank).reasoning_started);
    EXPECT_TRUE(classify(blank).opened);
}

TEST(Classify, PromptThatOpenedTheBlock) {
    ClassifyInput closed = response("Twelve pens times 3.\n</think>\n\n#### 36", "stop");
    closed.prompt_opened_think = true;
    const auto c = classify(closed);
    EXPECT_TRUE(c.opened);
    EXPECT_TRUE(c.closed);
    EXPECT_TRUE(c.reasoning_started);
    EXPECT_EQ(c.outcome, Outcome::finished);

    ClassifyInput cut = response("Twelve pens times 3 is", "stop", stop_string("Question"));
    cut.prompt_opened_think = true;
    EXPECT_EQ(classify(cut).outcome, Outcome::stop_truncated);
    EXPECT_FALSE(classify(cut).closed);
}

TEST(OutcomeName, RoundTripsEveryOutcome) {
    for (Outcome o : {Outcome::finished, Outcome::stop_truncated, Outcome::length_truncated,
                      Outcome::other, Outcome::error, Outcome::unrecorded}) {
        EXPECT_EQ(outcome_from_name(outcome_name(o)), o);
    }
    EXPECT_EQ(outcome_name(Outcome::stop_truncated), "stop_truncated");
    EXPECT_EQ(outcome_from_name("truncated"), std::nullopt);
}

// Engines that name the stop elsewhere, or not at all.

TEST(Classify, LlamaCppEmptyAnswerWithNoStopFieldIsNeverFinished) {
    auto in = response("", "stop");
    in.stop_field = ""; // llama.cpp's OpenAI endpoints send no stop_reason
    const auto c = classify(in);
    EXPECT_EQ(c.outcome, Outcome::stop_truncated);
    EXPECT_EQ(c.stop_cause, StopCause::unknown);
    EXPECT_EQ(stop_cause_name(c.stop_cause), "unknown");
}

TEST(Classify, LlamaCppAnswerWithNoStopFieldIsFinishedWithTheCauseUnknown) {
    auto in = response(" 2 + 2 = 4\n#### 4", "stop");
    in.stop_field = "";
    const auto c = classify(in);
    EXPECT_EQ(c.outcome, Outcome::finished);
    EXPECT_EQ(c.stop_cause, StopCause::unknown);
}

TEST(Classify, StopStringLeftInTheTextNamesTheCauseWhenNoFieldDoes) {
    const std::vector<std::string> stops = {"Question", "Assistant:"};
    auto in = response(" #### 4\n\nQuestion", "stop");
    in.stop_field = "";
    in.stop_strings = stops;
    EXPECT_EQ(classify(in).stop_cause, StopCause::stop_string);
    auto empty = response("Question", "stop");
    empty.stop_field = "";
    empty.stop_strings = stops;
    // The answer is the stop string alone: nothing before it.
    EXPECT_EQ(classify(empty).stop_cause, StopCause::stop_string);
}

TEST(Classify, SglangMatchedStopStringOrTokenIsRead) {
    auto str = response("", "stop", stop_string("Question:"));
    str.stop_field = "matched_stop";
    EXPECT_EQ(classify(str).outcome, Outcome::stop_truncated);
    EXPECT_EQ(classify(str).stop_cause, StopCause::stop_string);
    auto tok = response("<think>\n\n</think>\n\n", "stop", stop_token(151645));
    tok.stop_field = "matched_stop";
    EXPECT_EQ(classify(tok).outcome, Outcome::finished);
    EXPECT_EQ(classify(tok).stop_cause, StopCause::stop_token);
}

TEST(Classify, OldTgiFinishReasonsAreStopsNotOther) {
    auto eos = response(" #### 36", "eos_token");
    eos.stop_field = "finish_reason";
    EXPECT_EQ(classify(eos).outcome, Outcome::finished);
    EXPECT_EQ(classify(eos).stop_cause, StopCause::eos);
    auto seq = response("", "stop_sequence");
    seq.stop_field = "finish_reason";
    EXPECT_EQ(classify(seq).outcome, Outcome::stop_truncated);
    EXPECT_EQ(classify(seq).stop_cause, StopCause::stop_string);
    // Without the field that says TGI sent it, eos_token stays unknown: other.
    auto bare = response(" #### 36", "eos_token");
    bare.stop_field = "";
    EXPECT_EQ(classify(bare).outcome, Outcome::other);
}

TEST(Classify, VllmNullStopReasonIsEos) {
    const auto c = classify(response("<think>\n\n</think>\n\n", "stop"));
    EXPECT_EQ(c.outcome, Outcome::finished);
    EXPECT_EQ(c.stop_cause, StopCause::eos);
    EXPECT_EQ(classify(response(" x", "length")).stop_cause, StopCause::none);
}

} // namespace
} // namespace diffeval::scorers
