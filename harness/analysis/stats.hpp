// Paired statistics for comparing two server configurations on the same
// questions: McNemar's exact test, a paired bootstrap interval, the run-to-run
// noise floor, the smallest drop a run can detect, and small summaries
// (percentiles, Wilson intervals).
//
// Everything here is a pure function of its arguments: no storage, no global
// state, no threads, and every random draw comes from a seeded `Rng`
// (rng.hpp), so a number printed in a report can be recomputed exactly from
// the stored scores and the seed printed next to it.
//
// Conventions shared by all functions:
//   - "A" is the baseline configuration and "B" the candidate. Differences are
//     B minus A, as proportions in [-1, 1]; callers multiply by 100 for points.
//   - Quantiles use linear interpolation between order statistics, the same
//     rule as numpy's default (method="linear", R's type 7): for sorted values
//     x[0..n-1] and a fraction q, h = q * (n - 1), j = floor(h), and the
//     quantile is x[j] + (h - j) * (x[j + 1] - x[j]).
#pragma once

#include <harness/util/result.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace diffeval::analysis {

// Seed used when the caller gives none; reports print it next to the interval.
inline constexpr std::uint64_t k_default_bootstrap_seed = 20250101;
// Bootstrap resamples used when the caller gives none.
inline constexpr std::uint32_t k_default_resamples = 10'000;

// McNemar's test on the discordant pairs of a paired comparison.
struct McNemarResult {
    std::uint64_t b = 0;  // questions A got right and B got wrong
    std::uint64_t c = 0;  // questions A got wrong and B got right
    std::uint64_t n = 0;  // b + c
    double p_exact = 1.0; // two-sided exact binomial p-value
    double p_mid = 1.0;   // two-sided mid-p-value (less conservative, same test)
};

// Exact two-sided McNemar test for `b` and `c` discordant pairs. With k = min(b, c)
// and X ~ Binomial(b + c, 1/2): p_exact = min(1, 2 P(X <= k)) and
// p_mid = min(1, 2 (P(X <= k) - P(X = k) / 2)). No discordant pairs gives p = 1.
McNemarResult mcnemar(std::uint64_t b, std::uint64_t c);

// How a bootstrap interval is drawn.
struct BootstrapOptions {
    std::uint32_t resamples = k_default_resamples; // at least 1
    std::uint64_t seed = k_default_bootstrap_seed;
    double confidence = 0.95; // in (0, 1); the interval is two-sided and central
};

// A difference of mean accuracy (B - A) with its percentile bootstrap interval.
struct BootstrapInterval {
    double diff = 0.0; // observed mean(B) - mean(A)
    double lo = 0.0;   // lower percentile of the resampled differences
    double hi = 0.0;   // upper percentile of the resampled differences
    std::uint32_t resamples = 0;
    std::uint64_t seed = 0;
};

// Paired percentile bootstrap of mean(`b`) - mean(`a`) over questions.
// `a[i]` and `b[i]` are the two configurations' scores on question i (the
// fraction of repeats answered correctly, in [0, 1]). Fails when the spans are
// empty, differ in length, or hold a value outside [0, 1].
util::Result<BootstrapInterval> paired_bootstrap(std::span<const double> a,
                                                 std::span<const double> b,
                                                 const BootstrapOptions& options = {});

// One repeat of a group compared with another repeat of the same group.
struct RepeatPair {
    std::size_t first = 0;  // repeat index playing "A"
    std::size_t second = 0; // repeat index playing "B", always > first
    double diff = 0.0;      // accuracy(second) - accuracy(first)
    McNemarResult mcnemar;
    BootstrapInterval interval;
};

// How far a configuration disagrees with itself between repeats.
struct NoiseFloor {
    std::vector<RepeatPair> pairs; // every (first, second) with first < second
    double max_abs_diff = 0.0;     // largest |diff| over pairs
    double mean_abs_diff = 0.0;    // mean |diff| over pairs
    double mean_half_width = 0.0;  // mean of (hi - lo) / 2 over pairs
};

// Noise floor of one group from `correct[question][repeat]` (each 0 or 1).
// Every row must have the same number of repeats, at least 2. Each pair's
// interval uses `options` unchanged (the same seed for every pair).
util::Result<NoiseFloor> noise_floor(const std::vector<std::vector<std::uint8_t>>& correct,
                                     const BootstrapOptions& options = {});

// Inverse of the standard normal CDF at `p` (Wichura's AS241, about 1e-16
// relative error). Returns -inf at 0, +inf at 1 and NaN outside [0, 1].
double normal_quantile(double p);

// Which test a minimum detectable drop was computed for.
enum class DropTest {
    mcnemar,  // paired design, from the discordance rate
    unpaired, // two independent proportions; used when no pair is discordant
};

// The smallest accuracy drop a run of a given size would detect.
struct DetectableDrop {
    double drop = 0.0; // as a proportion of questions
    DropTest test = DropTest::mcnemar;
    double discordant_rate = 0.0; // the rate the estimate was computed for
    // False when even the largest drop the design allows (the discordance rate
    // for McNemar, the baseline accuracy unpaired) would not reach the power;
    // `drop` then holds that largest drop.
    bool within_reach = true;
};

// Settings for `minimum_detectable_drop`.
struct DetectableDropOptions {
    double alpha = 0.05; // two-sided significance level, in (0, 0.5]
    double power = 0.8;  // in [0.5, 1)
    // Accuracy of A, used only by the unpaired fallback; 0.5 is the worst case.
    double baseline_accuracy = 0.5;
};

// Smallest drop detectable over `questions` paired questions whose discordant
// pairs make up `discordant_rate` ((b + c) / N, observed or assumed). Solves
// Connor's normal approximation for McNemar's test,
//   N = (z(1 - alpha/2) sqrt(pd) + z(power) sqrt(pd - drop^2))^2 / drop^2,
// for the drop. With `discordant_rate` 0 (the run has no discordant pairs) it
// falls back to the two-proportion formula with N questions per configuration.
util::Result<DetectableDrop> minimum_detectable_drop(std::uint64_t questions,
                                                     double discordant_rate,
                                                     const DetectableDropOptions& options = {});

// The `p`-th percentile (p in [0, 100]) of `values`, interpolated linearly like
// numpy's default. NaN when `values` is empty, holds a NaN, or `p` is out of range.
double percentile(std::vector<double> values, double p);

// A closed interval of proportions.
struct Interval {
    double lo = 0.0;
    double hi = 1.0;
};

// Wilson score interval for `successes` out of `trials` at `confidence`.
// No trials gives [0, 1]; successes > trials or a confidence outside (0, 1)
// gives NaN bounds.
Interval wilson_interval(std::uint64_t successes, std::uint64_t trials, double confidence = 0.95);

} // namespace diffeval::analysis
