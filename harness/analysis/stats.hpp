// Building blocks of the paired statistics: McNemar's exact test, a paired
// bootstrap interval, the inverse normal, and small summaries (percentiles,
// Wilson intervals). The question-level analysis a verdict is drawn from
// (questions.hpp) is built on these.
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
// At most this many: a comparison keeps every resample's mean (8 bytes
// each), and 4,000,000,000 grew to 23 GB before the kernel killed it.
inline constexpr std::uint32_t k_max_resamples = 10'000'000;

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

// P(X >= k) for X ~ Binomial(n, 1/2): the one-sided sign test's p-value for k
// positive signs of n. Safe to call from several threads (std::lgamma is not:
// glibc's writes the global `signgam`).
double binomial_half_at_least(std::uint64_t k, std::uint64_t n);

// How a bootstrap interval is drawn.
struct BootstrapOptions {
    std::uint32_t resamples = k_default_resamples; // at least 1
    std::uint64_t seed = k_default_bootstrap_seed;
    double confidence = 0.95; // in (0, 1); the interval is two-sided and central
};

// `options` unless it draws no resample or its confidence is outside (0, 1):
// a usage error naming --resamples.
util::Result<void> check_options(const BootstrapOptions& options);

// `alpha`, the level of a paired test, unless outside (0, 0.5]: a usage
// error naming --alpha. Commands check it before they read any data.
util::Result<void> check_alpha(double alpha);

// A difference of mean accuracy (B - A) with its percentile bootstrap interval.
struct BootstrapInterval {
    double diff = 0.0; // observed mean(B) - mean(A)
    double lo = 0.0;   // lower percentile of the resampled differences
    double hi = 0.0;   // upper percentile of the resampled differences
    // One-sided bounds at the same confidence: the (1 - confidence) and
    // `confidence` percentiles of the same resamples (at 0.95, the 5th and
    // 95th). A one-sided test at level 1 - confidence (non-inferiority, the
    // two one-sided tests of equivalence) compares a margin with these.
    double lo_one_sided = 0.0;
    double hi_one_sided = 0.0;
    std::uint32_t resamples = 0;
    std::uint64_t seed = 0;
};

// Paired BCa bootstrap (bias-corrected and accelerated percentiles, Efron 1987)
// of mean(`b`) - mean(`a`) over questions.
// `a[i]` and `b[i]` are the two configurations' scores on question i (the
// fraction of repeats answered correctly, in [0, 1]). Fails when the spans are
// empty, differ in length, or hold a value outside [0, 1].
util::Result<BootstrapInterval> paired_bootstrap(std::span<const double> a,
                                                 std::span<const double> b,
                                                 const BootstrapOptions& options = {});

// Inverse of the standard normal CDF at `p` (Wichura's AS241, about 1e-16
// relative error). Returns -inf at 0, +inf at 1 and NaN outside [0, 1].
double normal_quantile(double p);

// The standard normal CDF at `x`, by std::erfc.
double normal_cdf(double x);

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
