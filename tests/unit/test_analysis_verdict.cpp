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
    s.accuracy_a = 0.5;
    s.accuracy_b = 0.5 + diff;
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
    s.answered_a = 400;
    s.answered_b = 400;
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

// A detectable difference past 100 points is none: a 5-question run
// "detected differences of 113.2 points or more" (statistics audit).
TEST(DecideVerdict, AnMddPastAHundredPointsDetectsNothing) {
    auto s = stats(-0.01, -0.04, 0.02, -0.035, 0.015, 0.5);
    s.mdd = 1.132;
    const auto v = decide_verdict(s, "a", "b", 0.5, 1);
    EXPECT_NE(v.sentence.find("and the run detects no difference at 80% power: it would take "
                              "113.2 points, more than there are"),
              std::string::npos)
        << v.sentence;
    EXPECT_EQ(v.sentence.find("113.2 points or more"), std::string::npos) << v.sentence;
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
              "excludes 0 but the sign-flip test does not reject at 0.05 once adjusted for the 3 "
              "comparisons, sign-flip mid-p 0.03 (Holm-adjusted 0.09 over 3 comparisons); 60 of "
              "400 questions differ, and the run detects differences of 4.2 points or more at 80% "
              "power.");
    // Without other comparisons, the unadjusted test is the one that does
    // not reject, and the sentence says only that.
    const auto alone =
        decide_verdict(stats(-0.03, -0.06, -0.001, -0.055, -0.005, 0.07), "a", "b", 0.07, 1);
    EXPECT_NE(alone.sentence.find("does not reject at 0.05, sign-flip mid-p 0.07;"),
              std::string::npos)
        << alone.sentence;
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

// A reader checks a sentence against the numbers printed beside it: the
// difference is that of the two printed accuracies, the interval holds it,
// and no bound rounds onto or across the 0 or margin it is compared with.
TEST(DecideVerdict, PrintedDifferenceIsThatOfThePrintedAccuracies) {
    // 83.33% -> 77.78% prints as 83.3 -> 77.8: -5.5, though -5.56 rounds to -5.6.
    auto s = stats(-0.0555556, -0.139, 0.021, -0.125, 0.01, 0.2);
    s.accuracy_a = 0.833333;
    s.accuracy_b = 0.777778;
    EXPECT_EQ(accuracy_text(s.accuracy_a), "83.3");
    EXPECT_EQ(accuracy_text(s.accuracy_b), "77.8");
    EXPECT_NEAR(shown_diff(s), -0.055, 1e-12);
    const auto v = decide_verdict(s, "a", "b", 0.2, 1);
    EXPECT_NE(v.sentence.find("-5.5 points, 95% CI [-13.9, +2.1] includes 0"), std::string::npos)
        << v.sentence;
    const auto m = non_inferiority(s, 0.01);
    EXPECT_NE(m.sentence.find("straddle -1.0 (-5.5 points)"), std::string::npos) << m.sentence;
}

TEST(DecideVerdict, IntervalBoundsNeverRoundOntoZero) {
    // An upper bound of -0.04 points excludes 0; one decimal would print "0.0".
    const auto v =
        decide_verdict(stats(-0.03, -0.06, -0.0004, -0.055, -0.005, 0.03), "a", "b", 0.09, 3);
    EXPECT_TRUE(v.borderline);
    EXPECT_NE(v.sentence.find("95% CI [-6.0, -0.04] excludes 0"), std::string::npos) << v.sentence;
    // A bound of exactly 0 includes it and keeps one decimal.
    EXPECT_EQ(bound_text(0.0, {0.0}), "0.0");
    EXPECT_EQ(bound_text(-0.00004, {0.0}), "-0.004");
    EXPECT_EQ(bound_text(0.0123, {0.0}), "+1.2");
    // An audit's gate printed "-0.5556 is above -0.5556" for a bound of
    // -0.55556 beside a margin of 0.5556: as many decimals as it takes.
    EXPECT_EQ(bound_text(-0.0055556, {-0.005556}), "-0.55556");
}

// A tiny shown difference beside "worse": accuracies that print alike
// (50.0 -> 50.0) would give "0.0 points"; the exact difference prints with
// its sign instead, and the interval beside it keeps its side of 0.
TEST(DecideVerdict, WorseNeverSaysZeroPoints) {
    auto s = stats(-0.00038, -0.0010, -0.000076, -0.0009, -0.0001, 0.001);
    ASSERT_EQ(signed_points(shown_diff(s)), "0.0");
    const auto v = decide_verdict(s, "x", "y", 0.001, 1);
    EXPECT_EQ(v.kind, VerdictKind::worse);
    EXPECT_EQ(v.sentence,
              "y is worse than x: -0.04 points, 95% CI [-0.1, -0.01], sign-flip mid-p 0.001.");
}

TEST(DecideVerdict, PrintedIntervalHoldsThePrintedDifference) {
    // Exact difference -5.502 points with a lower bound at it (a degenerate
    // bootstrap): the accuracies print 83.4 -> 77.8, -5.6, below the bound's
    // "-5.5"; the bound is printed as the difference.
    auto s = stats(-0.05502, -0.05502, 0.01, -0.05502, 0.005, 0.2);
    s.accuracy_a = 0.83351;
    s.accuracy_b = 0.77849;
    EXPECT_EQ(interval_text(s.interval.lo, s.interval.hi, shown_diff(s), {0.0}), "[-5.6, +1.0]");
    EXPECT_EQ(interval_text(-0.02, 0.01, -0.001, {0.0}), "[-2.0, +1.0]");
}

// The shown difference never carries a bound across the threshold it is
// judged against: a lower bound of -0.068 points printed "-0.1" beside a
// PASS on "-0.07 is above -0.08", and an upper bound of -0.015 printed "0.0"
// beside "worse" (statistics audit).
TEST(DecideVerdict, APrintedBoundStaysOnItsSideOfTheThreshold) {
    EXPECT_EQ(interval_text(-0.00068, 0.003, -0.001, {-0.0008}), "[-0.07, +0.3]");
    EXPECT_EQ(interval_text(-0.00099, -0.00016, 0.0, {0.0}), "[-0.1, -0.02]");
}

TEST(NonInferiority, BoundsBesideTheMarginKeepTheirSide) {
    // -0.97 points is above a 1-point margin; one decimal would print "-1.0 is above -1.0".
    const auto pass = non_inferiority(stats(-0.002, -0.012, 0.008, -0.0097, 0.006, 0.5), 0.01);
    EXPECT_EQ(pass.outcome, MarginOutcome::pass);
    EXPECT_EQ(pass.sentence, "within the 1.0-point margin: the one-sided 95% lower bound -0.97 is "
                             "above -1.0 (-0.2 points)");
    // A margin of a quarter point is printed as given, and a bound on its
    // side at one decimal keeps one.
    const auto quarter = non_inferiority(stats(-0.002, -0.012, 0.008, -0.0024, 0.006, 0.5), 0.0025);
    EXPECT_EQ(quarter.outcome, MarginOutcome::pass);
    EXPECT_EQ(quarter.sentence, "within the 0.25-point margin: the one-sided 95% lower bound "
                                "-0.2 is above -0.25 (-0.2 points)");
    const auto fail = non_inferiority(stats(-0.03, -0.05, -0.01, -0.045, -0.0154, 0.01), 0.015);
    EXPECT_EQ(fail.outcome, MarginOutcome::fail);
    EXPECT_NE(fail.sentence.find("upper bound -1.54 is below -1.5"), std::string::npos)
        << fail.sentence;
    EXPECT_EQ(margin_text(0.01), "1.0");
    EXPECT_EQ(margin_text(0.0025), "0.25");
    EXPECT_EQ(margin_text(7.166666666666667 / 100), "7.16666666667");
    EXPECT_EQ(margin_text(0.123456 / 100), "0.123456");
}

TEST(NoiseSentence, NamesEachSidesCase) {
    QuestionStats s;
    s.noise_a = {.repeats = 1, .measured = false};
    s.noise_b = {.repeats = 3, .measured = true, .deterministic = true};
    EXPECT_EQ(noise_sentence(s, "a", "b"),
              "Run-to-run noise: a not measured (1 repeat); b none seen: its 3 repeats were right "
              "or wrong alike on every question (their texts may still differ).");
    s.noise_a = {.repeats = 3, .measured = true, .within_variance = 0.01, .rerun_sd = 0.012};
    s.noise_share = 0.25;
    EXPECT_EQ(noise_sentence(s, "a", "b"),
              "Run-to-run noise: a ±1.2 points (1 SD of accuracy on a re-run, from 3 repeats); b "
              "none seen: its 3 repeats were right or wrong alike on every question (their texts "
              "may still differ); repeat noise accounts for 25% of the interval's variance.");
    // Uneven repeats on fewer than half the questions: not "(1 repeat)"
    // beside "1 to 3 repeats each" (an outside audit).
    QuestionStats u;
    u.questions = 30;
    u.noise_a = {.repeats = 1,
                 .fewest_repeats = 1,
                 .most_repeats = 3,
                 .several = 10,
                 .fewest_of_several = 3,
                 .measured = false};
    u.noise_b = u.noise_a;
    EXPECT_EQ(noise_sentence(u, "a", "b"),
              "Run-to-run noise: a not measured: 10 of 30 questions have two repeats or more, "
              "fewer than half; b not measured: 10 of 30 questions have two repeats or more, "
              "fewer than half.");
}

TEST(SignedPoints, NeverPrintsMinusZero) {
    EXPECT_EQ(signed_points(-0.0001), "0.0");
    EXPECT_EQ(signed_points(0.0001), "0.0");
    EXPECT_EQ(signed_points(-0.0005001), "-0.1");
    EXPECT_EQ(signed_points(0.123), "+12.3");
}

// One differing question takes the singular, with its verb: "1 of 400
// questions differ" read as a count of several.
TEST(NonInferiority, OneDifferingQuestionIsSingular) {
    auto s = stats(-0.0025, -0.0075, 0.0, -0.005, -0.0026, 0.5);
    s.test.differing = 1;
    s.mdd = 0.01;
    const auto m = non_inferiority(s, 0.001);
    EXPECT_EQ(m.outcome, MarginOutcome::inconclusive) << m.sentence;
    EXPECT_NE(m.sentence.find("1 of 400 questions differs)"), std::string::npos) << m.sentence;
    auto v = decide_verdict(s, "a", "b", 0.5, 1);
    EXPECT_NE(v.sentence.find("1 of 400 questions differs,"), std::string::npos) << v.sentence;
}

// A side with no successful response: its accuracy is its failures, so no
// verdict and no margin check rests on it. Two dead servers "agreed on every
// question" at 0% and were called equivalent, and the gate passed them.
TEST(DecideVerdict, ASideWithoutAnAnswerIsNoEvidence) {
    auto s = stats(0.0, -0.036, 0.036, -0.03, 0.03, 1.0);
    s.accuracy_a = s.accuracy_b = 0.0;
    s.test.differing = 0;
    s.answered_a = 0;
    s.answered_b = 0;
    const auto v = decide_verdict(s, "a", "b", 1.0, 1, 0.05);
    EXPECT_EQ(v.kind, VerdictKind::no_evidence);
    EXPECT_EQ(v.sentence,
              "No evidence either way: neither a nor b has a successful response on "
              "these 400 questions (each request failed or has no response stored), and such "
              "a request counts as a wrong answer, so the 0.0 points between them say "
              "nothing of the model.");
    const auto m = non_inferiority(s, 0.05);
    EXPECT_EQ(m.outcome, MarginOutcome::no_evidence) << m.sentence;
    EXPECT_EQ(no_spread_text(s), "no successful response on a side to size a difference from");

    // A dead baseline does not make the candidate better, nor pass it.
    auto dead_a = stats(0.8, 0.75, 0.85, 0.76, 0.84, 0.0001);
    dead_a.answered_a = 0;
    EXPECT_EQ(decide_verdict(dead_a, "a", "b", 0.0001, 1).kind, VerdictKind::no_evidence);
    EXPECT_EQ(non_inferiority(dead_a, 0.01).outcome, MarginOutcome::no_evidence);
    auto dead_b = stats(-0.8, -0.85, -0.75, -0.84, -0.76, 0.0001);
    dead_b.answered_b = 0;
    const auto vb = decide_verdict(dead_b, "a", "b", 0.0001, 1);
    EXPECT_EQ(vb.kind, VerdictKind::no_evidence);
    EXPECT_NE(vb.sentence.find("b has no successful response on these 400 questions"),
              std::string::npos)
        << vb.sentence;
}

// With two questions no test can reject, and the bootstrap's lower bound on
// the side a question moved towards is that question: d = {0, -0.5} passed a
// 55-point margin. Neither a margin's pass nor equivalence rests on it; the
// exact count bound, on a side no question moved towards, still decides.
TEST(NonInferiority, FourQuestionsOrFewerNeverPassOnABootstrapBound) {
    auto s = stats(-0.25, -0.5, 0.0, -0.5, 0.0, 0.5);
    s.questions = 2;
    s.test.differing = 1;
    s.a_better = 1;
    s.b_better = 0;
    s.smallest_p = 0.25;
    s.mdd.reset();
    const auto m = non_inferiority(s, 0.55);
    EXPECT_EQ(m.outcome, MarginOutcome::inconclusive) << m.sentence;
    EXPECT_NE(m.sentence.find("with 2 questions no test can reach p < 0.05"), std::string::npos)
        << m.sentence;
    const auto v = decide_verdict(s, "a", "b", 0.5, 1, 0.6);
    EXPECT_NE(v.kind, VerdictKind::equivalent) << v.sentence;
    EXPECT_NE(v.sentence.find("lies inside it, but with 2 questions"), std::string::npos)
        << v.sentence;

    // No question moved towards A: the lower bound is the exact count bound.
    s.a_better = 0;
    s.b_better = 1;
    s.interval.lo_one_sided = -0.3;
    EXPECT_EQ(non_inferiority(s, 0.55).outcome, MarginOutcome::pass);

    // A question moved each way, and the exact count bound stands in at the
    // lower end (as analyse_questions puts it there with so few): it
    // decides. The gate said "a bootstrap bound over so few" of the count
    // bound at four questions, and would not pass on it (an outside audit).
    s.a_better = 1;
    s.count_bound_lower = true;
    EXPECT_EQ(non_inferiority(s, 0.55).outcome, MarginOutcome::pass);
}

} // namespace
} // namespace diffeval::analysis
