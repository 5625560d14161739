// Tests for harness/analysis/questions.cpp: the question-level statistics
// every verdict rests on. Reference values come from brute-force enumeration
// written here independently of the convolution, from McNemar's exact test
// (stats.cpp, itself checked against exact rational sums), and from hand
// arithmetic.
#include <harness/analysis/questions.hpp>
#include <harness/analysis/rng.hpp>
#include <harness/analysis/verdict.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace diffeval::analysis {
namespace {

// Brute-force two-sided p and mid-p of the sign-flip test: all 2^z signs.
std::pair<double, double> enumerate_sign_flips(const std::vector<double>& d) {
    std::vector<double> moving;
    double t = 0;
    for (double x : d) {
        if (x != 0) {
            moving.push_back(x);
            t += x;
        }
    }
    const size_t z = moving.size();
    double beyond = 0, at = 0;
    for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << z); ++mask) {
        double sum = 0;
        for (size_t i = 0; i < z; ++i) {
            sum += ((mask >> i) & 1U) != 0 ? moving[i] : -moving[i];
        }
        if (std::abs(sum) > std::abs(t) + 1e-9) {
            beyond += 1;
        } else if (std::abs(sum) >= std::abs(t) - 1e-9) {
            at += 1;
        }
    }
    const double n = std::ldexp(1.0, static_cast<int>(z));
    return {(beyond + at) / n, (beyond + 0.5 * at) / n};
}

// One repeat per side: A right and B wrong on `b` questions, the reverse on
// `c`, both right on `same`.
void one_repeat(std::uint64_t b, std::uint64_t c, std::uint64_t same, CorrectnessMatrix& ma,
                CorrectnessMatrix& mb) {
    for (std::uint64_t i = 0; i < b; ++i) {
        ma.push_back({1});
        mb.push_back({0});
    }
    for (std::uint64_t i = 0; i < c; ++i) {
        ma.push_back({0});
        mb.push_back({1});
    }
    for (std::uint64_t i = 0; i < same; ++i) {
        ma.push_back({1});
        mb.push_back({1});
    }
}

TEST(SignFlipTest, WithOneRepeatEqualsExactMcNemar) {
    for (auto [b, c] : {std::pair<std::uint64_t, std::uint64_t>{6, 0},
                        {12, 4},
                        {11, 3},
                        {40, 22},
                        {150, 90},
                        {5, 5},
                        {0, 1}}) {
        CorrectnessMatrix ma, mb;
        one_repeat(b, c, 30, ma, mb);
        PairedOptions options;
        options.bootstrap.resamples = 200;
        auto s = analyse_questions(ma, mb, options);
        ASSERT_TRUE(s.ok()) << s.error().message;
        const auto m = mcnemar(b, c);
        EXPECT_EQ(s->test.method, SignFlipMethod::exact);
        EXPECT_NEAR(s->test.p, m.p_exact, 1e-12 * std::max(1e-300, m.p_exact)) << b << "/" << c;
        EXPECT_NEAR(s->test.p_mid, m.p_mid, 1e-12 * std::max(1e-300, m.p_mid)) << b << "/" << c;
        EXPECT_EQ(s->test.differing, b + c);
    }
}

TEST(SignFlipTest, ExactConvolutionMatchesBruteForceWithRepeats) {
    // Three repeats a side: differences are multiples of 1/3.
    const std::vector<double> d{-1.0,     -2.0 / 3, -1.0 / 3, 1.0 / 3, -1.0, 0,       0,
                                -2.0 / 3, 2.0 / 3,  -1.0 / 3, 0,       -1.0, 1.0 / 3, -1.0 / 3};
    SignFlipOptions options;
    options.lattice = 3;
    auto r = sign_flip_test(d, options);
    ASSERT_TRUE(r.ok());
    const auto [p, p_mid] = enumerate_sign_flips(d);
    EXPECT_EQ(r->method, SignFlipMethod::exact);
    EXPECT_NEAR(r->p, p, 1e-14);
    EXPECT_NEAR(r->p_mid, p_mid, 1e-14);
    EXPECT_LT(r->p_mid, r->p);
}

TEST(SignFlipTest, MonteCarloIsCloseToExactAndReproducible) {
    const std::vector<double> d{-1.0, -0.5, -0.5, 0.5,  -1.0, 0,    -0.5, 1.0,
                                -1.0, -0.5, 0.5,  -1.0, -0.5, -0.5, 0.5,  -1.0};
    SignFlipOptions exact_options;
    exact_options.lattice = 2;
    auto exact = sign_flip_test(d, exact_options);
    SignFlipOptions mc_options; // no lattice: Monte Carlo
    mc_options.draws = 40'000;
    mc_options.seed = 11;
    auto mc = sign_flip_test(d, mc_options);
    auto again = sign_flip_test(d, mc_options);
    ASSERT_TRUE(exact.ok() && mc.ok() && again.ok());
    EXPECT_EQ(mc->method, SignFlipMethod::monte_carlo);
    EXPECT_EQ(mc->draws, 40'000u);
    EXPECT_EQ(mc->p, again->p);
    // Binomial sd of an estimate near 0.03 from 40000 draws is about 0.001.
    EXPECT_NEAR(mc->p, exact->p, 0.005);
    EXPECT_NEAR(mc->p_mid, exact->p_mid, 0.005);
}

TEST(SignFlipTest, NoDifferenceAndBadInput) {
    const std::vector<double> zeros(10, 0.0);
    auto r = sign_flip_test(zeros);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->p, 1.0);
    EXPECT_EQ(r->differing, 0u);
    EXPECT_FALSE(sign_flip_test(std::vector<double>{}).ok());
    EXPECT_FALSE(sign_flip_test(std::vector<double>{0.5, 1.5}).ok());
    EXPECT_FALSE(sign_flip_test(std::vector<double>{NAN}).ok());
}

// A realistic GSM8K-like pair of runs: per-question probabilities of being
// right mostly near 0 or 1, three repeats a side, B a little worse.
void simulate(std::uint64_t seed, size_t questions, CorrectnessMatrix& ma, CorrectnessMatrix& mb) {
    Rng rng(seed);
    for (size_t q = 0; q < questions; ++q) {
        const double u = rng.unit();
        const double p = u < 0.7 ? 0.97 : u < 0.85 ? 0.05 : rng.unit();
        const double pb = std::max(0.0, p - 0.03);
        std::vector<std::uint8_t> a, b;
        for (int r = 0; r < 3; ++r) {
            a.push_back(rng.unit() < p ? 1 : 0);
            b.push_back(rng.unit() < pb ? 1 : 0);
        }
        ma.push_back(a);
        mb.push_back(b);
    }
}

TEST(AnalyseQuestions, ClusteredStandardErrorAgreesWithTheBootstrap) {
    CorrectnessMatrix ma, mb;
    simulate(5, 1319, ma, mb);
    auto s = analyse_questions(ma, mb);
    ASSERT_TRUE(s.ok()) << s.error().message;
    const double analytic_half = normal_quantile(0.975) * s->se;
    const double bootstrap_half = (s->interval.hi - s->interval.lo) / 2;
    EXPECT_NEAR(bootstrap_half / analytic_half, 1.0, 0.05);
    EXPECT_NEAR((s->interval.hi + s->interval.lo) / 2, s->diff, 0.1 * analytic_half);
    // One-sided bounds lie inside the two-sided ones.
    EXPECT_GT(s->interval.lo_one_sided, s->interval.lo);
    EXPECT_LT(s->interval.hi_one_sided, s->interval.hi);
    EXPECT_NEAR((s->interval.hi_one_sided - s->interval.lo_one_sided) / 2,
                normal_quantile(0.95) * s->se, 0.1 * s->se);
}

TEST(AnalyseQuestions, AveragesRepeatsPerQuestionAndNeverPairsThem) {
    // Question 0: A right in repeat 0 only, B right in repeat 2 only. Pairing
    // by repeat number would count two flips; per question nothing differs.
    CorrectnessMatrix ma{{1, 0, 0}, {1, 1, 1}, {0, 0, 0}};
    CorrectnessMatrix mb{{0, 0, 1}, {1, 1, 1}, {1, 1, 0}};
    auto s = analyse_questions(ma, mb);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->questions, 3u);
    EXPECT_EQ(s->a_better, 0u);
    EXPECT_EQ(s->b_better, 1u);
    EXPECT_NEAR(s->diff, 2.0 / 9, 1e-15);
    EXPECT_EQ(s->test.differing, 1u);
    EXPECT_NEAR(s->test.p, 1.0, 1e-15); // one differing question: either sign is as extreme
}

TEST(AnalyseQuestions, NoiseIsTheWithinQuestionVariance) {
    // A: question 0 has 1 of 3 right (sample variance 1/3), the rest agree.
    CorrectnessMatrix ma{{1, 0, 0}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}};
    CorrectnessMatrix mb{{1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}};
    auto s = analyse_questions(ma, mb);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->noise_a.measured);
    EXPECT_FALSE(s->noise_a.deterministic);
    EXPECT_NEAR(s->noise_a.within_variance, (1.0 / 3) / 4, 1e-15);
    // The accuracy is each question's mean over its 3 repeats: on a re-run
    // its SD is sqrt(sigma_w^2 / (n k)) = sqrt((1/12) / 12) = 1/12, not a
    // single repeat's sqrt((1/12) / 4), sqrt(3) times larger (statistics
    // audit: re-runs of 10 repeats spread 3 times less than printed).
    EXPECT_NEAR(s->noise_a.rerun_sd, 1.0 / 12, 1e-15);
    EXPECT_EQ(s->noise_a.repeats, 3u);
    EXPECT_TRUE(s->noise_b.measured);
    EXPECT_TRUE(s->noise_b.deterministic);
    EXPECT_EQ(s->noise_b.rerun_sd, 0.0);
    ASSERT_TRUE(s->noise_share.has_value());
    // var(d) over questions: d = {2/3, 0, 0, 0}, sample variance 1/9, so
    // se^2 = 1/36; repeat noise's part of the difference's variance:
    // (1/3) / 3 / 4^2 = 1/144, a quarter of se^2. But one question of four
    // moved: the interval's ends are exact count bounds, far wider than
    // se, and the share is of the interval the reader sees (an audit read
    // "100% of the interval's variance" beside such an interval).
    const double shown_se = (s->interval.hi - s->interval.lo) / (2 * 1.959963984540054);
    ASSERT_GT(shown_se * shown_se, 1.0 / 36);
    EXPECT_NEAR(*s->noise_share, (1.0 / 144) / (shown_se * shown_se), 1e-9);
    EXPECT_LT(*s->noise_share, 0.25);

    CorrectnessMatrix one_a{{1}, {0}}, one_b{{1}, {1}};
    auto single = analyse_questions(one_a, one_b);
    ASSERT_TRUE(single.ok());
    EXPECT_FALSE(single->noise_a.measured);
    EXPECT_FALSE(single->noise_share.has_value());
}

// Every question losing one answer in three differs by the same amount: no
// spread, so no MDD and no share of repeat noise. The mean of the thirds
// left an sd of 1.7e-16, and with it an MDD of 12.1 points and "repeat
// noise accounts for 100%" (statistics audit).
TEST(AnalyseQuestions, QuestionsThatAllDifferByAThirdHaveNoSpread) {
    CorrectnessMatrix a(48, std::vector<std::uint8_t>{1, 1, 1});
    CorrectnessMatrix b(48, std::vector<std::uint8_t>{1, 1, 0});
    auto s = analyse_questions(a, b);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->sd_diff, 0.0);
    EXPECT_FALSE(s->mdd.has_value());
    EXPECT_FALSE(s->noise_share.has_value());
}

TEST(AnalyseQuestions, IdenticalSidesHaveNoDetectableDifferenceSize) {
    CorrectnessMatrix m{{1, 1}, {0, 0}, {1, 1}};
    auto s = analyse_questions(m, m);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->diff, 0.0);
    EXPECT_EQ(s->test.p, 1.0);
    EXPECT_FALSE(s->mdd.has_value());
    // Every resample is 0; the exact bound stands in: none of 3 questions
    // differs, so the share that does is below 1 - 0.025^(1/3) (two-sided
    // 95%) and 1 - 0.05^(1/3) (one-sided).
    EXPECT_NEAR(s->interval.lo, -(1.0 - std::pow(0.025, 1.0 / 3.0)), 1e-12);
    EXPECT_NEAR(s->interval.hi, 1.0 - std::pow(0.025, 1.0 / 3.0), 1e-12);
    EXPECT_NEAR(s->interval.lo_one_sided, -(1.0 - std::pow(0.05, 1.0 / 3.0)), 1e-12);
    EXPECT_NEAR(s->interval.hi_one_sided, 1.0 - std::pow(0.05, 1.0 / 3.0), 1e-12);
    // Bounds the bootstrap alone would have put at 0.
    EXPECT_TRUE(s->interval.lo < 0.0 && s->interval.hi > 0.0);
}

// Five losses and a gain in forty put the bootstrap's upper bound below 0,
// but the exact test cannot tell that from no drop (one-sided mid-p 1/16):
// "worse than the margin" needs both, as "worse" does. (In eight questions
// the BCa bound, unlike the percentile one, already reaches 0.)
TEST(AnalyseQuestions, AMarginIsShownMissedOnlyWhenTheTestShowsADrop) {
    CorrectnessMatrix a(40, std::vector<std::uint8_t>{1});
    CorrectnessMatrix b = a;
    for (size_t q = 0; q < 5; ++q) {
        b[q][0] = 0;
    }
    a[7][0] = 0;
    auto s = analyse_questions(a, b);
    ASSERT_TRUE(s.ok());
    ASSERT_LT(s->interval.hi_one_sided, -0.001);
    EXPECT_NEAR(s->test.p_mid / 2, 1.0 / 16, 1e-12);
    const auto m = non_inferiority(*s, 0.001);
    EXPECT_EQ(m.outcome, MarginOutcome::inconclusive);
    EXPECT_NE(m.sentence.find("the one-sided sign-flip test does not show a drop"),
              std::string::npos)
        << m.sentence;
    // One more loss: the test shows the drop too.
    b[5][0] = 0;
    s = analyse_questions(a, b);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(non_inferiority(*s, 0.001).outcome, MarginOutcome::fail);
}

// A side no question moved towards gets the exact count bound: one question
// that agrees bounds nothing, 1,319 that agree bound a drop to 0.23 points,
// and eight gains with no loss in 1,319 still exclude 0 (the sign-flip test
// rejects too), where the bootstrap alone would too.
TEST(AnalyseQuestions, ASideNoQuestionMovedTowardsHasTheExactCountBound) {
    CorrectnessMatrix one{{1}};
    auto single = analyse_questions(one, one);
    ASSERT_TRUE(single.ok());
    EXPECT_NEAR(single->interval.lo_one_sided, -0.95, 1e-12);
    EXPECT_EQ(non_inferiority(*single, 0.01).outcome, MarginOutcome::inconclusive);

    CorrectnessMatrix same(1319, std::vector<std::uint8_t>{1});
    auto agree = analyse_questions(same, same);
    ASSERT_TRUE(agree.ok());
    EXPECT_NEAR(agree->interval.lo_one_sided, -(1.0 - std::pow(0.05, 1.0 / 1319.0)), 1e-12);
    EXPECT_EQ(non_inferiority(*agree, 0.005).outcome, MarginOutcome::pass);
    EXPECT_EQ(non_inferiority(*agree, 0.002).outcome, MarginOutcome::inconclusive);

    CorrectnessMatrix b = same;
    for (size_t q = 0; q < 8; ++q) {
        same[q][0] = 0;
    }
    auto gains = analyse_questions(same, b);
    ASSERT_TRUE(gains.ok());
    EXPECT_EQ(gains->a_better, 0u);
    EXPECT_EQ(gains->b_better, 8u); // the upper bounds stay the bootstrap's
    // The count bound at the one-sided level sits above the two-sided one.
    EXPECT_GT(gains->interval.lo_one_sided, gains->interval.lo);
    EXPECT_GT(gains->interval.lo, 0.0);
    EXPECT_LT(gains->interval.lo, gains->diff);
    EXPECT_EQ(decide_verdict(*gains, "a", "b", gains->test.p_mid, 1).kind, VerdictKind::better);
    // Its MDD is sized from that interval, which says so (gate's note).
    EXPECT_TRUE(gains->mdd_from_interval);
    ASSERT_TRUE(gains->mdd.has_value());
    EXPECT_GT(*gains->mdd, minimum_detectable(gains->se, 0.05, 0.8));
}

// With repeats a move can be a third of a question, but the moves seen can
// be whole ones: a side no question moved towards is bounded by the sizes
// seen, not by the smallest possible. An audit's runs at 3 repeats: every
// answer lost on 15 questions, and 17 of 150 questions lost whole with no
// gain, were "no detectable difference" beside a sign-flip mid-p of 3e-5
// and 8e-6.
TEST(AnalyseQuestions, WholeQuestionsLostAtThreeRepeatsExcludeZero) {
    const std::vector<std::uint8_t> right{1, 1, 1}, wrong{0, 0, 0};
    CorrectnessMatrix a(15, right), b(15, wrong);
    auto all = analyse_questions(a, b);
    ASSERT_TRUE(all.ok());
    EXPECT_LT(all->interval.hi, 0.0);
    EXPECT_EQ(decide_verdict(*all, "a", "b", all->test.p_mid, 1).kind, VerdictKind::worse);

    CorrectnessMatrix a2(150, right), b2(150, right);
    for (size_t q = 0; q < 17; ++q) {
        b2[q] = wrong;
    }
    auto some = analyse_questions(a2, b2);
    ASSERT_TRUE(some.ok());
    EXPECT_EQ(some->b_better, 0u);
    EXPECT_LT(some->interval.hi, 0.0);
    EXPECT_GT(some->interval.hi, some->diff);
    EXPECT_EQ(decide_verdict(*some, "a", "b", some->test.p_mid, 1).kind, VerdictKind::worse);

    // Moves of a third each bound no more than the lattice's step allows:
    // the same 17 questions losing one answer in three stay undecided.
    for (size_t q = 0; q < 17; ++q) {
        b2[q] = {1, 1, 0};
    }
    auto thirds = analyse_questions(a2, b2);
    ASSERT_TRUE(thirds.ok());
    EXPECT_GT(thirds->interval.hi, 0.0);
}

// With fewer than five questions differing, the bootstrap's bounds are
// those questions' own extremes: an audit's 48 questions, one losing and
// one gaining an answer in three, got the one-sided bound -1.4 and passed a
// 1.5-point gate (and were "equivalent within 1.5") where the same 48 with
// no question differing get -6.1. Both ends now take the exact count bound:
// seeing a loss bounds a drop no tighter than seeing none.
TEST(AnalyseQuestions, AFewQuestionsDifferingBothWaysBoundNoTighterThanNone) {
    EXPECT_EQ(few_moves(0.05), 5u);
    EXPECT_EQ(few_moves(0.01), 7u);
    const std::vector<std::uint8_t> right{1, 1, 1};
    CorrectnessMatrix a(48, right), b = a;
    auto none = analyse_questions(a, b);
    ASSERT_TRUE(none.ok());
    b[0] = {1, 1, 0};
    a[1] = {1, 1, 0};
    auto two = analyse_questions(a, b);
    ASSERT_TRUE(two.ok());
    EXPECT_EQ(two->a_better, 1u);
    EXPECT_EQ(two->b_better, 1u);
    EXPECT_LT(two->interval.lo_one_sided, none->interval.lo_one_sided);
    EXPECT_GT(two->interval.hi_one_sided, none->interval.hi_one_sided);
    EXPECT_NE(non_inferiority(*two, 0.015).outcome, MarginOutcome::pass);
    EXPECT_NE(decide_verdict(*two, "a", "b", two->test.p_mid, 1, 0.015).kind,
              VerdictKind::equivalent);

    // Five differing: the bootstrap decides again, and a clear run passes.
    CorrectnessMatrix big_a(1319, right), big_b = big_a;
    for (size_t q = 0; q < 3; ++q) {
        big_b[q] = {1, 1, 0};
        big_a[10 + q] = {1, 1, 0};
    }
    auto six = analyse_questions(big_a, big_b);
    ASSERT_TRUE(six.ok());
    EXPECT_EQ(non_inferiority(*six, 0.015).outcome, MarginOutcome::pass);
}

// One question answered once among questions answered three times (a run
// killed on its last question) leaves the noise measured at 3 repeats: an
// audit's diff said "3 and 1 repeats", "not measured", and the plan lost
// its repeat rows.
TEST(AnalyseQuestions, OneQuestionShortOfRepeatsKeepsTheNoiseMeasured) {
    CorrectnessMatrix a(20, std::vector<std::uint8_t>{1, 1, 0}), b = a;
    b.back() = {1};
    auto s = analyse_questions(a, b);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->noise_b.measured);
    EXPECT_EQ(s->noise_b.repeats, 3u);
    EXPECT_NEAR(s->noise_b.within_variance, s->noise_a.within_variance, 1e-12);
    // Most questions once: not measured.
    CorrectnessMatrix c(20, std::vector<std::uint8_t>{1});
    c.front() = {1, 0};
    auto t = analyse_questions(a, c);
    ASSERT_TRUE(t.ok());
    EXPECT_FALSE(t->noise_b.measured);
    EXPECT_EQ(t->noise_b.repeats, 1u);
    // Most questions once, but half of them more (later runs added repeats
    // on fewer questions): measured from those, and said so, not "from 1
    // repeats" under "1 repeat each" (stats audit).
    CorrectnessMatrix u(20, std::vector<std::uint8_t>{1});
    for (size_t q = 0; q < 6; ++q) {
        u[q] = {1, 1, 0};
        u[q + 6] = {1, 0, 1, 1, 1};
    }
    auto uneven = analyse_questions(u, u);
    ASSERT_TRUE(uneven.ok());
    EXPECT_TRUE(uneven->noise_b.measured);
    EXPECT_EQ(uneven->noise_b.repeats, 1u);
    EXPECT_EQ(repeats_text(uneven->noise_a, uneven->noise_b), "1 to 5 repeats each");
    EXPECT_EQ(repeats_text(uneven->noise_a, s->noise_a), "1 to 5 and 3 repeats");
    EXPECT_NE(noise_sentence(*uneven, "a", "b")
                  .find("(1 SD of accuracy on a re-run, from 3 to 5 "
                        "repeats on 12 of 20 questions)"),
              std::string::npos)
        << noise_sentence(*uneven, "a", "b");
}

// Repeats that agree because they failed (every error counts as wrong)
// compare no answers: a side whose every request failed was "a
// deterministic server". Failed repeats that disagree with an answer are
// still noise in its accuracy.
TEST(AnalyseQuestions, RepeatsThatFailedMeasureNoNoise) {
    const CorrectnessMatrix good{{1, 1, 1}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}};
    const CorrectnessMatrix failed(4, std::vector<std::uint8_t>{0, 0, 0});
    auto s = analyse_questions(good, failed, {}, {3, 3, 3, 3}, {0, 0, 0, 0});
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->noise_a.measured);
    EXPECT_TRUE(s->noise_a.deterministic);
    EXPECT_EQ(s->noise_a.gap, NoiseGap::none);
    EXPECT_FALSE(s->noise_b.measured);
    EXPECT_FALSE(s->noise_b.deterministic);
    EXPECT_EQ(s->noise_b.gap, NoiseGap::too_few_answers);
    EXPECT_EQ(s->noise_b.repeats, 3u);
    EXPECT_FALSE(s->noise_share.has_value());
    EXPECT_EQ(
        noise_sentence(*s, "a", "b"),
        "Run-to-run noise: a none seen: its 3 repeats were right or wrong alike on every "
        "question (their texts may still differ); b not measured: fewer than half its questions "
        "have two successful repeats to compare (see its errors).");
    // One answer a question, the other repeats failed: nothing compared.
    s = analyse_questions(good, failed, {}, {}, {1, 1, 1, 1});
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->noise_b.gap, NoiseGap::too_few_answers);
    // Half the questions with two answers that agree: measured, none seen.
    s = analyse_questions(good, failed, {}, {}, {2, 3, 1, 0});
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->noise_b.deterministic);
    // A failure beside a right answer is accuracy noise, measured.
    const CorrectnessMatrix flaky{{1, 0, 1}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
    s = analyse_questions(good, flaky, {}, {}, {2, 0, 0, 0});
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->noise_b.measured);
    EXPECT_FALSE(s->noise_b.deterministic);
    EXPECT_GT(s->noise_b.rerun_sd, 0.0);
    // Counts that do not match the matrix are refused.
    EXPECT_FALSE(analyse_questions(good, failed, {}, {3}, {}).ok());
}

TEST(AnalyseQuestions, RejectsWhatItCannotPair) {
    CorrectnessMatrix a{{1}}, b{{1}, {0}}, empty_row{{}}, two{{2}};
    EXPECT_FALSE(analyse_questions(a, b).ok());
    EXPECT_FALSE(analyse_questions({}, {}).ok());
    EXPECT_FALSE(analyse_questions(empty_row, a).ok());
    EXPECT_FALSE(analyse_questions(two, a).ok());
    PairedOptions bad;
    bad.alpha = NAN;
    EXPECT_FALSE(analyse_questions(a, a, bad).ok());
}

TEST(Power, MinimumDetectableDifferenceHasThePowerAskedFor) {
    const double se = 0.0123;
    const double mdd = minimum_detectable(se, 0.05, 0.8);
    EXPECT_NEAR(mdd, (1.959963984540054 + 0.8416212335729143) * se, 1e-12);
    // The far tail adds a negligible amount at this distance.
    EXPECT_NEAR(power_to_detect(mdd, se, 0.05), 0.8, 1e-6);
    EXPECT_NEAR(power_to_detect(0, se, 0.05), 0.05, 1e-12);
    EXPECT_GT(power_to_detect(2 * mdd, se, 0.05), 0.99);
}

TEST(Holm, AdjustsStepDownAndKeepsOrder) {
    const std::vector<double> p{0.01, 0.04, 0.03, 0.005};
    const auto adj = holm_adjust(p);
    ASSERT_EQ(adj.size(), 4u);
    EXPECT_NEAR(adj[3], 0.02, 1e-15); // smallest x 4
    EXPECT_NEAR(adj[0], 0.03, 1e-15); // x 3
    EXPECT_NEAR(adj[2], 0.06, 1e-15); // x 2
    EXPECT_NEAR(adj[1], 0.06, 1e-15); // x 1 = 0.04, raised to keep the order
    EXPECT_EQ(holm_adjust(std::vector<double>{0.7, 0.9}), (std::vector<double>{1.0, 1.0}));
    EXPECT_TRUE(holm_adjust(std::vector<double>{}).empty());
}

TEST(PlanRun, MoreRepeatsNeedFewerQuestionsOnlyThroughTheNoise) {
    CorrectnessMatrix ma, mb;
    simulate(9, 600, ma, mb);
    auto s = analyse_questions(ma, mb);
    ASSERT_TRUE(s.ok());
    const auto plan = plan_run(*s, 0.02, 0.05, 0.8);
    ASSERT_EQ(plan.rows.size(), 5u);
    EXPECT_EQ(plan.rows[2].repeats, 3u);
    // At the pilot's own repeats the plan reproduces the pilot's sd.
    EXPECT_NEAR(plan.rows[2].sd_diff, s->sd_diff, 1e-9);
    for (size_t i = 1; i < plan.rows.size(); ++i) {
        EXPECT_LT(plan.rows[i].questions, plan.rows[i - 1].questions);
    }
    // And the questions it asks for give the pilot's MDD back at that size.
    const double z = normal_quantile(0.975) + normal_quantile(0.8);
    EXPECT_NEAR(z * plan.rows[2].sd_diff / std::sqrt(double(plan.rows[2].questions)), 0.02, 0.0005);
}

// A pilot where 2 of 200 questions differ, each by a whole point: the normal
// approximation asks for a few dozen questions to see a 5-point drop, where
// fewer than one would differ; the plan asks for enough that ten do.
TEST(PlanRun, NeverAsksForFewerQuestionsThanTheExactTestNeedsDiffering) {
    CorrectnessMatrix a(200, std::vector<std::uint8_t>{1});
    CorrectnessMatrix b = a;
    b[0][0] = b[1][0] = 0;
    auto s = analyse_questions(a, b);
    ASSERT_TRUE(s.ok());
    const auto plan = plan_run(*s, 0.05, 0.05, 0.8);
    const double z = normal_quantile(0.975) + normal_quantile(0.8);
    ASSERT_LT(z * z * s->sd_diff * s->sd_diff / (0.05 * 0.05), 1000.0);
    for (const auto& row : plan.rows) {
        EXPECT_TRUE(row.raised);
        EXPECT_EQ(row.questions, 1000u); // 10 / (2 / 200)
    }
}

// With n questions the sign-flip test's mid-p is at least 2^-n: at four
// questions (1/16) nothing can be declared at alpha 0.05, so no minimum
// detectable difference is given and the sentence says why; at five (1/32),
// with every question differing the same way, the test does reach it.
TEST(AnalyseQuestions, TooFewQuestionsForTheTestToReachAlphaHaveNoDetectableDifference) {
    for (std::uint64_t n : {2u, 4u, 5u}) {
        CorrectnessMatrix ma, mb;
        for (std::uint64_t q = 0; q < n; ++q) {
            // Two repeats; B right in both on every question, A in one on
            // the first and in none on the rest: a spread to size a test.
            ma.push_back({static_cast<unsigned char>(q == 0 ? 1 : 0), 0});
            mb.push_back({1, 1});
        }
        auto s = analyse_questions(ma, mb);
        ASSERT_TRUE(s.ok()) << s.error().message;
        EXPECT_EQ(s->test.differing, n);
        if (n <= 4) {
            ASSERT_TRUE(s->smallest_p.has_value()) << n;
            EXPECT_DOUBLE_EQ(*s->smallest_p, std::ldexp(1.0, -static_cast<int>(n)));
            EXPECT_FALSE(s->mdd.has_value()) << n;
            EXPECT_GE(s->test.p_mid, *s->smallest_p) << n;
            EXPECT_EQ(no_spread_text(*s),
                      fmt::format("with {} questions no difference can reach p < 0.05: the "
                                  "sign-flip test's mid-p is at least {:.3g}",
                                  n, std::ldexp(1.0, -static_cast<int>(n))));
        } else {
            EXPECT_FALSE(s->smallest_p.has_value());
            EXPECT_TRUE(s->mdd.has_value());
            EXPECT_LT(s->test.p_mid, 0.05) << "all five the same way reaches alpha";
        }
    }
    // Agreement on so few is no evidence either: said so, not "agree" alone
    // (an audit's --limit 1 read as the sides agreeing).
    auto one = analyse_questions({{1}}, {{1}});
    ASSERT_TRUE(one.ok()) << one.error().message;
    EXPECT_EQ(no_spread_text(*one),
              "the two sides agree on every question, but with 1 question no difference could "
              "reach p < 0.05 (the sign-flip test's mid-p is at least 0.5)");
}

// A repeat a stopped run never sent counts as a wrong answer in the
// difference, but is no re-run: B's noise comes from the repeats that have
// a response (`noise_b`). Counted, a question unsent in one repeat and right
// in the other read as "±0.8 points" of noise on one group and "not
// measured" on its sibling (two audits).
TEST(AnalyseQuestions, AnUnsentRepeatIsNoRunToRunNoise) {
    const CorrectnessMatrix a{{1, 1}, {1, 1}, {0, 0}, {1, 1}};
    const CorrectnessMatrix b{{0, 1}, {1, 1}, {0, 0}, {1, 1}}; // b[0][0] unsent
    const CorrectnessMatrix sent{{1}, {1, 1}, {0, 0}, {1, 1}};
    auto counted = analyse_questions(a, b, {}, {}, {1, 2, 2, 2});
    ASSERT_TRUE(counted.ok());
    EXPECT_TRUE(counted->noise_b.measured);
    EXPECT_FALSE(counted->noise_b.deterministic);
    auto s = analyse_questions(a, b, {}, {}, {1, 2, 2, 2}, &sent);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->noise_b.measured);
    EXPECT_TRUE(s->noise_b.deterministic);
    // The difference still counts the unsent repeat as wrong.
    EXPECT_DOUBLE_EQ(s->diff, counted->diff);
    EXPECT_DOUBLE_EQ(s->diff, -0.125);
    // A question with no repeat sent at all is left out of the noise.
    const CorrectnessMatrix none{{}, {1, 1}, {0, 0}, {1, 1}};
    s = analyse_questions(a, CorrectnessMatrix{{0, 0}, {1, 1}, {0, 0}, {1, 1}}, {}, {},
                          {0, 2, 2, 2}, &none);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->noise_b.deterministic);
}

} // namespace
} // namespace diffeval::analysis
