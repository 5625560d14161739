// Golden tests for harness/analysis/verdict.cpp: every branch of the one
// function that decides what a comparison means, with the exact sentence a
// user reads, and the non-inferiority check the gate applies.
#include <harness/analysis/verdict.hpp>

#include <gtest/gtest.h>

namespace diffeval::analysis {
namespace {

// Stats with a difference `diff`, a 95% interval [lo, hi], one-sided bounds
// [lo1, hi1] and a sign-flip mid-p, on 400 questions of which 60 differ.
QuestionStats stats(double diff, double lo, double hi, double lo1, double hi1, double p_mid) {
    QuestionStats s;
    s.questions = 400;
    s.diff = diff;
    s.interval.diff = diff;
    s.interval.lo = lo;
    s.interval.hi = hi;
    s.interval.lo_one_sided = lo1;
    s.interval.hi_one_sided = hi1;
    s.test.p_mid = p_mid;
    s.test.differing = 60;
    s.sd_diff = 0.3;
    s.se = 0.015;
    s.mdd = 0.042;
    return s;
}

TEST(DecideVerdict, Worse) {
    const auto v =
        decide_verdict(stats(-0.05, -0.08, -0.02, -0.075, -0.025, 0.001), "a", "b", 0.001, 1);
    EXPECT_EQ(v.kind, VerdictKind::worse);
    EXPECT_EQ(v.words, "worse");
    EXPECT_EQ(v.sentence,
              "b is worse than a: -5.0 points, 95% CI [-8.0, -2.0], sign-flip mid-p 0.001.");
}

TEST(DecideVerdict, BetterWithHolmAdjustmentShown) {
    const auto v = decide_verdict(stats(0.04, 0.01, 0.07, 0.015, 0.065, 0.004), "a", "b", 0.012, 3);
    EXPECT_EQ(v.kind, VerdictKind::better);
    EXPECT_EQ(v.sentence, "b is better than a: +4.0 points, 95% CI [+1.0, +7.0], sign-flip mid-p "
                          "0.004 (Holm-adjusted 0.012 over 3 comparisons).");
}

TEST(DecideVerdict, NoDetectableDifferenceGivesTheIntervalAndTheDetectableSize) {
    const auto v = decide_verdict(stats(-0.01, -0.04, 0.02, -0.035, 0.015, 0.5), "a", "b", 0.5, 1);
    EXPECT_EQ(v.kind, VerdictKind::no_detectable_difference);
    EXPECT_EQ(v.words, "no detectable difference");
    EXPECT_FALSE(v.borderline);
    EXPECT_EQ(v.sentence,
              "No detectable difference between b and a: -1.0 points, 95% CI [-4.0, +2.0] "
              "includes 0, sign-flip mid-p 0.5; 60 of 400 questions differ, and the run detects "
              "differences of 4.2 points or more at 80% power.");
}

TEST(DecideVerdict, SignificantBeforeAdjustmentButNotAfterIsNoDetectableDifference) {
    const auto v =
        decide_verdict(stats(-0.03, -0.06, -0.001, -0.055, -0.005, 0.03), "a", "b", 0.09, 3);
    EXPECT_EQ(v.kind, VerdictKind::no_detectable_difference);
    // The table's verdict column prints the words beside the interval.
    EXPECT_EQ(v.words, "no detectable difference (CI excludes 0; test does not reject)");
    EXPECT_TRUE(v.borderline);
    EXPECT_EQ(v.sentence,
              "No detectable difference between b and a: -3.0 points, 95% CI [-6.0, -0.1] "
              "excludes 0 but the sign-flip test does not reject at 0.05, sign-flip mid-p 0.03 "
              "(Holm-adjusted 0.09 over 3 comparisons); 60 of 400 questions differ, and the run "
              "detects differences of 4.2 points or more at 80% power.");
}

TEST(DecideVerdict, TestRejectsButIntervalIncludesZeroIsNoDetectableDifference) {
    const auto v =
        decide_verdict(stats(-0.02, -0.041, 0.001, -0.037, -0.003, 0.048), "a", "b", 0.048, 1);
    EXPECT_EQ(v.kind, VerdictKind::no_detectable_difference);
    EXPECT_EQ(v.words, "no detectable difference (test rejects; CI includes 0)");
    EXPECT_TRUE(v.borderline);
    EXPECT_NE(v.sentence.find("[-4.1, +0.1] includes 0 (the test alone would reject: a "
                              "borderline case)"),
              std::string::npos)
        << v.sentence;
}

TEST(DecideVerdict, IdenticalSidesSayTheyAgreeNotThatTheRunIsTooSmall) {
    auto s = stats(0, 0, 0, 0, 0, 1);
    s.mdd.reset();
    s.test.differing = 0;
    const auto v = decide_verdict(s, "a", "b", 1, 1);
    EXPECT_EQ(v.sentence, "No detectable difference between b and a: 0.0 points, 95% CI [0.0, "
                          "0.0] includes 0, sign-flip mid-p 1; the two sides agree on every "
                          "question.");
}

TEST(DecideVerdict, EquivalentWithinTheMarginTakesPrecedence) {
    const auto v =
        decide_verdict(stats(-0.002, -0.012, 0.008, -0.01, 0.006, 0.7), "a", "b", 0.7, 1, 0.02);
    EXPECT_EQ(v.kind, VerdictKind::equivalent);
    EXPECT_EQ(v.words, "equivalent within ±2.0 points");
    EXPECT_EQ(v.sentence, "b is equivalent to a within ±2.0 points: -0.2 points, 90% interval "
                          "[-1.0, +0.6] inside ±2.0 (two one-sided tests at 0.05).");
}

TEST(DecideVerdict, MarginNotShownSaysSo) {
    const auto v =
        decide_verdict(stats(-0.01, -0.04, 0.02, -0.035, 0.015, 0.5), "a", "b", 0.5, 1, 0.02);
    EXPECT_EQ(v.kind, VerdictKind::no_detectable_difference);
    EXPECT_NE(v.sentence.find("Not shown equivalent within ±2.0 points: the 90% interval [-3.5, "
                              "+1.5] reaches past the margin."),
              std::string::npos)
        << v.sentence;
}

TEST(NonInferiority, PassFailAndInconclusive) {
    const auto pass = non_inferiority(stats(-0.005, -0.02, 0.01, -0.018, 0.008, 0.5), 0.02);
    EXPECT_EQ(pass.outcome, MarginOutcome::pass);
    EXPECT_EQ(pass.sentence, "within the 2.0-point margin: the one-sided 95% lower bound -1.8 is "
                             "above -2.0 (-0.5 points)");
    const auto fail = non_inferiority(stats(-0.06, -0.09, -0.03, -0.085, -0.035, 0.001), 0.02);
    EXPECT_EQ(fail.outcome, MarginOutcome::fail);
    EXPECT_EQ(fail.sentence, "worse than the 2.0-point margin: the one-sided 95% upper bound -3.5 "
                             "is below -2.0 (-6.0 points)");
    const auto unsure = non_inferiority(stats(-0.02, -0.05, 0.01, -0.045, 0.005, 0.2), 0.01);
    EXPECT_EQ(unsure.outcome, MarginOutcome::inconclusive);
    EXPECT_EQ(unsure.sentence,
              "inconclusive against the 1.0-point margin: the one-sided 95% bounds "
              "[-4.5, +0.5] straddle -1.0 (-2.0 points); this run detects "
              "differences of 4.2 points or more at 80% power");
}

TEST(NoiseSentence, NamesEachSidesCase) {
    QuestionStats s;
    s.noise_a = {.repeats = 1, .measured = false};
    s.noise_b = {.repeats = 3, .measured = true, .deterministic = true};
    EXPECT_EQ(noise_sentence(s, "a", "b"),
              "Run-to-run noise: a not measured (1 repeat); b none seen: its 3 repeats gave the "
              "same answers on every question (a deterministic server).");
    s.noise_a = {.repeats = 3, .measured = true, .within_variance = 0.01, .rerun_sd = 0.012};
    s.noise_share = 0.25;
    EXPECT_EQ(noise_sentence(s, "a", "b"),
              "Run-to-run noise: a ±1.2 points (1 SD of accuracy on a re-run, from 3 repeats); b "
              "none seen: its 3 repeats gave the same answers on every question (a deterministic "
              "server); repeat noise accounts for 25% of the interval's variance.");
}

TEST(SignedPoints, NeverPrintsMinusZero) {
    EXPECT_EQ(signed_points(-0.0001), "0.0");
    EXPECT_EQ(signed_points(0.0001), "0.0");
    EXPECT_EQ(signed_points(-0.0005001), "-0.1");
    EXPECT_EQ(signed_points(0.123), "+12.3");
}

} // namespace
} // namespace diffeval::analysis
