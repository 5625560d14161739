// Tests for harness/analysis/stats.cpp and rng.hpp: the numbers a diff report,
// a noise-floor table and the CI gate print. Reference values were computed
// independently with python3's standard library (exact binomial sums with
// math.comb and fractions.Fraction, statistics.NormalDist, a separate
// re-implementation of the generator) and are written here as literals.
#include <harness/analysis/rng.hpp>
#include <harness/analysis/stats.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace diffeval::analysis {
namespace {

// ---- Rng -------------------------------------------------------------------

TEST(Rng, NextMatchesReferenceSequence) {
    Rng rng(20250101);
    EXPECT_EQ(rng.next(), 0xe97aea3434c2ddfeULL);
    EXPECT_EQ(rng.next(), 0x0d3dfa387d4416c3ULL);
    EXPECT_EQ(rng.next(), 0x5f06ec904bcd9e53ULL);
    EXPECT_EQ(rng.next(), 0x502a2e72ac87ec22ULL);

    Rng zero(0);
    EXPECT_EQ(zero.next(), 0x99ec5f36cb75f2b4ULL);
    EXPECT_EQ(zero.next(), 0xbf6e1f784956452aULL);
}

TEST(Rng, BelowMatchesReferenceSequence) {
    Rng rng(20250101);
    const std::vector<std::uint32_t> expected{1202, 68, 489, 413, 208, 1316, 567, 849};
    std::vector<std::uint32_t> got;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        got.push_back(rng.below(1319));
    }
    EXPECT_EQ(got, expected);
}

TEST(Rng, BelowStaysInRangeAndCoversItEvenly) {
    Rng rng(42);
    for (int i = 0; i < 100; ++i) {
        EXPECT_EQ(rng.below(1), 0u);
    }
    std::vector<int> counts(7, 0);
    for (int i = 0; i < 70'000; ++i) {
        const std::uint32_t x = rng.below(7);
        ASSERT_LT(x, 7u);
        ++counts[x];
    }
    // Each count is Binomial(70000, 1/7): mean 10000, sd about 93.
    for (int count : counts) {
        EXPECT_NEAR(count, 10'000, 500);
    }
}

TEST(Rng, UnitIsInHalfOpenInterval) {
    Rng rng(3);
    double lowest = 1.0;
    double highest = 0.0;
    for (int i = 0; i < 10'000; ++i) {
        const double u = rng.unit();
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        lowest = std::min(lowest, u);
        highest = std::max(highest, u);
    }
    EXPECT_LT(lowest, 0.01);
    EXPECT_GT(highest, 0.99);
}

// ---- mcnemar ---------------------------------------------------------------

TEST(McNemar, SmallCaseMatchesHandComputation) {
    // n = 6, k = 1: P(X <= 1) = 7/64, P(X = 1) = 6/64.
    const McNemarResult r = mcnemar(5, 1);
    EXPECT_EQ(r.b, 5u);
    EXPECT_EQ(r.c, 1u);
    EXPECT_EQ(r.n, 6u);
    EXPECT_DOUBLE_EQ(r.p_exact, 14.0 / 64.0);
    EXPECT_DOUBLE_EQ(r.p_mid, 8.0 / 64.0);
}

TEST(McNemar, IsSymmetricInDirection) {
    const McNemarResult ab = mcnemar(40, 20);
    const McNemarResult ba = mcnemar(20, 40);
    EXPECT_NEAR(ab.p_exact, 0.01348929373119186, 1e-15);
    EXPECT_NEAR(ab.p_mid, 0.009853448195259264, 1e-15);
    EXPECT_EQ(ab.p_exact, ba.p_exact);
    EXPECT_EQ(ab.p_mid, ba.p_mid);
}

// The probe's one-sided sign test, P(X >= k) for X ~ Binomial(n, 1/2), against
// exact sums (math.comb and fractions.Fraction): on both sides of the middle,
// at the ends and at the official set's 1,319 questions. 1,159 of 1,319 is the
// official demo's deepgemm/raw perturbation p, which std::lgamma's terms gave
// as 1.5977231634403974e-187 (8e-13 off; this form is within 1e-13).
TEST(BinomialHalfAtLeast, MatchesExactSums) {
    struct Case {
        std::uint64_t k, n;
        double p;
    };
    for (const Case c : {Case{7, 10, 0.171875}, Case{3, 10, 0.9453125},
                         Case{30, 48, 0.055701445530509375}, Case{20, 48, 0.9032936735690313},
                         Case{24, 48, 0.5572832513567434}, Case{60, 100, 0.028443966820490395},
                         Case{700, 1319, 0.01378684812969859}, Case{620, 1319, 0.9862131518703015},
                         Case{10, 10, 0.0009765625}, Case{1159, 1319, 1.5977231634416594e-187}}) {
        SCOPED_TRACE(testing::Message() << c.k << " of " << c.n);
        EXPECT_NEAR(binomial_half_at_least(c.k, c.n), c.p, 1e-13 * c.p);
    }
    EXPECT_EQ(binomial_half_at_least(0, 48), 1.0);
    EXPECT_EQ(binomial_half_at_least(0, 0), 1.0);
    EXPECT_EQ(binomial_half_at_least(49, 48), 0.0);
    EXPECT_EQ(binomial_half_at_least(1, 1), 0.5);
}

TEST(McNemar, BalancedDiscordanceGivesOne) {
    const McNemarResult r = mcnemar(3, 3);
    EXPECT_EQ(r.n, 6u);
    EXPECT_EQ(r.p_exact, 1.0);
    EXPECT_EQ(r.p_mid, 1.0);
}

TEST(McNemar, NoDiscordantPairsGivesOne) {
    const McNemarResult r = mcnemar(0, 0);
    EXPECT_EQ(r.n, 0u);
    EXPECT_EQ(r.p_exact, 1.0);
    EXPECT_EQ(r.p_mid, 1.0);
}

TEST(McNemar, AllDiscordanceOneWay) {
    // k = 0: P(X = 0) = 2^-n.
    const McNemarResult ten = mcnemar(10, 0);
    EXPECT_DOUBLE_EQ(ten.p_exact, 1.0 / 512.0);
    EXPECT_DOUBLE_EQ(ten.p_mid, 1.0 / 1024.0);
    const McNemarResult one = mcnemar(0, 1);
    EXPECT_DOUBLE_EQ(one.p_exact, 1.0);
    EXPECT_DOUBLE_EQ(one.p_mid, 0.5);
}

TEST(McNemar, LargeCountsMatchExactRationalComputation) {
    const McNemarResult r = mcnemar(600, 500);
    EXPECT_NEAR(r.p_exact / 0.0028195449914364275, 1.0, 1e-12);
    EXPECT_NEAR(r.p_mid / 0.002564772797753158, 1.0, 1e-12);

    const McNemarResult big = mcnemar(25'200, 24'800);
    EXPECT_EQ(big.n, 50'000u);
    EXPECT_NEAR(big.p_exact / 0.07436051924948761, 1.0, 1e-12);
    EXPECT_NEAR(big.p_mid / 0.07364009519975227, 1.0, 1e-12);
}

TEST(McNemar, ExtremeCountsUnderflowToZeroNotNaN) {
    const McNemarResult r = mcnemar(50'000, 0);
    EXPECT_EQ(r.p_exact, 0.0);
    EXPECT_EQ(r.p_mid, 0.0);
    const McNemarResult skewed = mcnemar(30'000, 20'000);
    EXPECT_GE(skewed.p_exact, 0.0);
    EXPECT_LT(skewed.p_exact, 1e-100);
    const McNemarResult balanced = mcnemar(500'001, 500'000);
    EXPECT_NEAR(balanced.p_exact, 1.0, 1e-3);
    EXPECT_LE(balanced.p_exact, 1.0);
}

// ---- paired_bootstrap ------------------------------------------------------

// numpy's default ("linear") quantile, written out independently of stats.cpp.
double numpy_linear_quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double h = q * static_cast<double>(v.size() - 1);
    const auto j = static_cast<std::size_t>(h);
    if (j + 1 >= v.size()) {
        return v.back();
    }
    return v[j] + (h - static_cast<double>(j)) * (v[j + 1] - v[j]);
}

TEST(PairedBootstrap, EqualDifferencesCollapseTheInterval) {
    const std::vector<double> a(50, 0.25);
    const std::vector<double> b(50, 0.75);
    const auto r = paired_bootstrap(a, b);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->diff, 0.5);
    EXPECT_EQ(r->lo, 0.5);
    EXPECT_EQ(r->hi, 0.5);
    EXPECT_EQ(r->resamples, k_default_resamples);
    EXPECT_EQ(r->seed, k_default_bootstrap_seed);
}

// Moves that cancel exactly leave a rounding remainder in a double (1 - 2/3
// is 0.33333333333333337, -1/3 is -0.3333333333333333): a resample holding
// one of each was a mean of 1.4e-18, and an A/A pair's lower bound of
// 5.55e-19 printed as "[0.0, +5.7] excludes 0" (an outside audit). No
// bound is such a remainder: it is 0, or a real difference.
TEST(PairedBootstrap, MovesThatCancelLeaveABoundOfExactlyZero) {
    std::vector<double> a(20, 1.0);
    std::vector<double> b(20, 1.0);
    for (size_t q : {0, 1, 2, 3}) {
        a[q] = 2.0 / 3.0; // b = 1: a move of 1 - 2/3 towards b
    }
    b[4] = 0.0;
    a[4] = 1.0 / 3.0; // a move of 1/3 towards a
    size_t zero_bounds = 0;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        BootstrapOptions options;
        options.seed = seed;
        options.resamples = 2000;
        const auto r = paired_bootstrap(a, b, options);
        ASSERT_TRUE(r.ok()) << r.error().message;
        for (double bound : {r->lo, r->hi, r->lo_one_sided, r->hi_one_sided}) {
            EXPECT_TRUE(bound == 0.0 || std::abs(bound) > 1e-9)
                << bound << " (seed " << seed << ")";
            zero_bounds += bound == 0.0 ? 1 : 0;
        }
    }
    // The case is the one that matters: some bounds fall on the resamples
    // whose moves cancel.
    EXPECT_GT(zero_bounds, 0u);
}

// Binomial(n, p) probabilities summed exactly from math-style terms, written
// independently of stats.cpp's ratio recurrence (fine for small n).
std::vector<double> reference_binomial_cdf(std::uint32_t n, double p) {
    std::vector<double> cdf;
    double total = 0.0;
    for (std::uint32_t k = 0; k <= n; ++k) {
        double choose = 1.0;
        for (std::uint32_t i = 1; i <= k; ++i) {
            choose = choose * static_cast<double>(n - k + i) / static_cast<double>(i);
        }
        total += choose * std::pow(p, k) * std::pow(1.0 - p, n - k);
        cdf.push_back(total);
    }
    return cdf;
}

TEST(PairedBootstrap, FollowsTheDocumentedDrawOrder) {
    // Differences that are not on a common lattice, so two different draw
    // orders would give different quantiles.
    const std::vector<double> a{0.5, 0.25, 0.9, 0.125, 0.5, 0.3, 0.5, 0.7, 0.4, 0.05, 0.5, 0.5};
    const std::vector<double> b{0.5, 0.75, 0.1, 0.625, 0.5, 0.8, 0.5, 0.2, 0.45, 0.9, 0.5, 0.5};
    const BootstrapOptions options{.resamples = 500, .seed = 7, .confidence = 0.95};
    const auto r = paired_bootstrap(a, b, options);
    ASSERT_TRUE(r.ok()) << r.error().message;

    // Per resample: m ~ Binomial(n, z/n) by inversion of one Rng::unit(),
    // then m indices with Rng::below(z) into the non-zero differences.
    std::vector<double> moving;
    double observed = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        observed += b[i] - a[i];
        if (b[i] != a[i]) {
            moving.push_back(b[i] - a[i]);
        }
    }
    const auto n = static_cast<std::uint32_t>(a.size());
    const auto z = static_cast<std::uint32_t>(moving.size());
    const auto cdf = reference_binomial_cdf(n, static_cast<double>(z) / n);
    Rng rng(7);
    std::vector<double> means;
    for (int s = 0; s < 500; ++s) {
        const double u = rng.unit();
        std::uint32_t m = 0;
        while (m < n && cdf[m] / cdf.back() <= u) {
            ++m;
        }
        double sum = 0.0;
        for (std::uint32_t i = 0; i < m; ++i) {
            sum += moving[rng.below(z)];
        }
        means.push_back(sum / n);
    }
    EXPECT_DOUBLE_EQ(r->diff, observed / n);
    // BCa (Efron 1987): the levels move by z0, the normal quantile of the
    // share of resamples below the estimate (ties count half), and by the
    // acceleration, the differences' third central moment over six times
    // their second's 3/2 power (every question, the still ones at 0).
    const double mean = observed / n;
    double below = 0.0;
    for (double m : means) {
        below += std::abs(m - mean) <= 1e-9 ? 0.5 : (m < mean ? 1.0 : 0.0);
    }
    const double z0 = normal_quantile(below / 500.0);
    double m2 = 0.0, m3 = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double x = b[i] - a[i] - mean;
        m2 += x * x;
        m3 += x * x * x;
    }
    const double acc = m3 / (6.0 * std::pow(m2, 1.5));
    const auto level = [&](double q) {
        const double zq = z0 + normal_quantile(q);
        return 0.5 * std::erfc(-(z0 + zq / (1.0 - acc * zq)) / std::sqrt(2.0));
    };
    EXPECT_NEAR(r->lo, numpy_linear_quantile(means, level(0.025)), 1e-12);
    EXPECT_NEAR(r->hi, numpy_linear_quantile(means, level(0.975)), 1e-12);
    EXPECT_NEAR(r->lo_one_sided, numpy_linear_quantile(means, level(0.05)), 1e-12);
    // Skewed differences move the levels: here the plain percentiles differ.
    EXPECT_NE(r->lo, numpy_linear_quantile(means, 0.025));
    EXPECT_LT(r->lo, r->diff);
    EXPECT_GT(r->hi, r->diff);
}

TEST(PairedBootstrap, AgreesWithTheTextbookBootstrapThatDrawsEveryQuestion) {
    // 1,000 questions, 120 of which differ (a typical GSM8K comparison): the
    // shortcut must give the interval of drawing all n questions per resample.
    std::vector<double> a(1000, 1.0);
    std::vector<double> b(1000, 1.0);
    for (std::size_t i = 0; i < 120; ++i) {
        (i % 3 == 0 ? a : b)[i * 7] = i % 5 == 0 ? 1.0 / 3 : 0.0;
    }
    const auto r = paired_bootstrap(a, b, {.resamples = 20'000, .seed = 3});
    ASSERT_TRUE(r.ok()) << r.error().message;
    Rng rng(99);
    std::vector<double> means;
    for (int s = 0; s < 20'000; ++s) {
        double sum = 0.0;
        for (std::uint32_t i = 0; i < 1000; ++i) {
            const std::uint32_t k = rng.below(1000);
            sum += b[k] - a[k];
        }
        means.push_back(sum / 1000);
    }
    // Both are 20,000-resample estimates of the same percentiles; their
    // Monte Carlo error is about 0.001 here.
    EXPECT_NEAR(r->lo, numpy_linear_quantile(means, 0.025), 0.004);
    EXPECT_NEAR(r->hi, numpy_linear_quantile(means, 0.975), 0.004);
    EXPECT_GT(r->hi - r->lo, 0.02); // not collapsed
}

// Scores of A and B on `n` questions where A is right with probability 0.80 and
// B with 0.75, correlated through a shared per-question draw as real servers
// are: the true difference is -0.05.
void simulate_pair(Rng& rng, std::size_t n, std::vector<double>& a, std::vector<double>& b) {
    a.assign(n, 0.0);
    b.assign(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
        const double u = rng.unit();
        const double v = rng.unit() < 0.8 ? u : rng.unit();
        a[i] = u < 0.80 ? 1.0 : 0.0;
        b[i] = v < 0.75 ? 1.0 : 0.0;
    }
}

TEST(PairedBootstrap, IntervalCoversTheTrueDifferenceAtAboutItsLevel) {
    constexpr double true_diff = -0.05;
    constexpr int datasets = 40;
    Rng data_rng(2024);
    std::vector<double> a;
    std::vector<double> b;
    int covered = 0;
    for (int k = 0; k < datasets; ++k) {
        simulate_pair(data_rng, 500, a, b);
        const BootstrapOptions options{.resamples = 500, .seed = 100 + static_cast<unsigned>(k)};
        const auto r = paired_bootstrap(a, b, options);
        ASSERT_TRUE(r.ok()) << r.error().message;
        covered += (r->lo <= true_diff && true_diff <= r->hi) ? 1 : 0;
    }
    // Expected 38 of 40; 33 or fewer has probability under 1% for a 95% interval.
    EXPECT_GE(covered, 34);
    EXPECT_LE(covered, 40);
}

TEST(PairedBootstrap, IntervalExcludesZeroForAClearDrop) {
    Rng data_rng(5);
    std::vector<double> a;
    std::vector<double> b;
    simulate_pair(data_rng, 1319, a, b);
    for (std::size_t i = 0; i < b.size(); i += 10) {
        b[i] = 0.0; // a further drop of several points
    }
    const auto r = paired_bootstrap(a, b, {.resamples = 2000});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_LT(r->hi, 0.0);
}

TEST(PairedBootstrap, SameSeedIsIdenticalAndAnotherSeedIsClose) {
    Rng data_rng(11);
    std::vector<double> a;
    std::vector<double> b;
    simulate_pair(data_rng, 300, a, b);
    const auto first = paired_bootstrap(a, b, {.resamples = 2000, .seed = 1});
    const auto again = paired_bootstrap(a, b, {.resamples = 2000, .seed = 1});
    const auto other = paired_bootstrap(a, b, {.resamples = 2000, .seed = 2});
    ASSERT_TRUE(first.ok() && again.ok() && other.ok());
    EXPECT_EQ(first->lo, again->lo);
    EXPECT_EQ(first->hi, again->hi);
    EXPECT_EQ(first->diff, other->diff);
    EXPECT_NE(std::pair(first->lo, first->hi), std::pair(other->lo, other->hi));
    EXPECT_NEAR(first->lo, other->lo, 0.01);
    EXPECT_NEAR(first->hi, other->hi, 0.01);
}

TEST(PairedBootstrap, RejectsInputsThatAreNotPairedFractions) {
    const std::vector<double> three{0, 1, 0.5};
    const std::vector<double> two{0, 1};
    const std::vector<double> empty;
    const std::vector<double> too_big{0, 1.5, 1};
    const std::vector<double> not_a_number{0, std::nan(""), 1};

    const auto mismatch = paired_bootstrap(three, two);
    ASSERT_FALSE(mismatch.ok());
    EXPECT_NE(mismatch.error().message.find("A has 3 scores and B has 2"), std::string::npos);
    EXPECT_FALSE(paired_bootstrap(empty, empty).ok());
    EXPECT_FALSE(paired_bootstrap(three, too_big).ok());
    EXPECT_FALSE(paired_bootstrap(not_a_number, three).ok());
    EXPECT_FALSE(paired_bootstrap(three, three, {.resamples = 0}).ok());
    EXPECT_FALSE(paired_bootstrap(three, three, {.confidence = 1.0}).ok());
}

// ---- normal_quantile -------------------------------------------------------

TEST(NormalQuantile, MatchesKnownCriticalValues) {
    EXPECT_NEAR(normal_quantile(0.975), 1.959963985, 1e-9);
    EXPECT_NEAR(normal_quantile(0.8), 0.841621234, 1e-9);
    EXPECT_NEAR(normal_quantile(0.025), -1.959963985, 1e-9);
    EXPECT_EQ(normal_quantile(0.5), 0.0);
    EXPECT_NEAR(normal_quantile(0.3), -0.5244005127080407, 1e-15);
    EXPECT_NEAR(normal_quantile(1e-10), -6.361340902404056, 1e-13);
}

TEST(NormalQuantile, InvertsTheNormalCdf) {
    for (double p : {1e-300, 1e-20, 1e-5, 0.01, 0.07, 0.2, 0.425, 0.6, 0.9, 0.99, 0.999999}) {
        const double z = normal_quantile(p);
        const double back = 0.5 * std::erfc(-z / std::numbers::sqrt2);
        EXPECT_NEAR(back / p, 1.0, 1e-12) << "p=" << p;
    }
}

TEST(NormalQuantile, HandlesTheEnds) {
    EXPECT_EQ(normal_quantile(0.0), -std::numeric_limits<double>::infinity());
    EXPECT_EQ(normal_quantile(1.0), std::numeric_limits<double>::infinity());
    EXPECT_TRUE(std::isnan(normal_quantile(-0.1)));
    EXPECT_TRUE(std::isnan(normal_quantile(1.5)));
    EXPECT_TRUE(std::isnan(normal_quantile(std::nan(""))));
}

// ---- percentile ------------------------------------------------------------

TEST(Percentile, InterpolatesLikeNumpy) {
    const std::vector<double> v{4, 1, 3, 2};
    EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
    EXPECT_DOUBLE_EQ(percentile(v, 25), 1.75);
    EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);
    EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
    EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
    EXPECT_DOUBLE_EQ(percentile({5.0}, 99), 5.0);
    // numpy.percentile([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 95) == 95.5
    EXPECT_DOUBLE_EQ(percentile({10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, 95), 95.5);
}

TEST(Percentile, ReturnsNaNWhenUndefined) {
    EXPECT_TRUE(std::isnan(percentile({}, 50)));
    EXPECT_TRUE(std::isnan(percentile({1, 2}, 101)));
    EXPECT_TRUE(std::isnan(percentile({1, 2}, -1)));
    EXPECT_TRUE(std::isnan(percentile({1, std::nan(""), 3}, 50)));
}

// ---- wilson_interval -------------------------------------------------------

TEST(WilsonInterval, MatchesReferenceValues) {
    const Interval eight = wilson_interval(8, 10);
    EXPECT_NEAR(eight.lo, 0.49016247153664183, 1e-12);
    EXPECT_NEAR(eight.hi, 0.9433178485456247, 1e-12);
    const Interval gsm = wilson_interval(1200, 1319);
    EXPECT_NEAR(gsm.lo, 0.8931055667480481, 1e-12);
    EXPECT_NEAR(gsm.hi, 0.9240747482412519, 1e-12);
}

TEST(WilsonInterval, ClampsAtTheEnds) {
    const Interval none = wilson_interval(0, 10);
    EXPECT_EQ(none.lo, 0.0);
    EXPECT_NEAR(none.hi, 0.27753279986288915, 1e-12);
    const Interval all = wilson_interval(10, 10);
    EXPECT_EQ(all.hi, 1.0);
    EXPECT_NEAR(all.lo, 1.0 - 0.27753279986288915, 1e-12);
    const Interval empty = wilson_interval(0, 0);
    EXPECT_EQ(empty.lo, 0.0);
    EXPECT_EQ(empty.hi, 1.0);
    EXPECT_TRUE(std::isnan(wilson_interval(11, 10).lo));
}

} // namespace
} // namespace diffeval::analysis
