// Implementation of the paired statistics declared in stats.hpp.
//
// Binomial probabilities use Loader's saddle-point form (Loader 2000, "Fast and
// accurate computation of binomial probabilities"): the probability at one
// point is exp of a Stirling-error difference minus two deviance terms, which
// keeps full double precision for any n instead of losing digits to
// cancellation between lgamma values of size n log n. The lower tail is then
// summed as ratios of neighbouring terms relative to that point. std::lgamma is
// avoided on purpose: glibc's writes the global `signgam`, which races when
// reports compute many comparisons in parallel.
//
// The bootstrap resamples only what moves the mean. A resample draws n
// questions with replacement; the m of them whose paired difference is not
// zero follow Binomial(n, z / n), where z questions differ, and given m they
// are uniform over those z questions. So each resample draws m by inversion
// of that binomial's distribution function (one Rng::unit(), the first k whose
// cumulative probability exceeds it), then m indices with Rng::below(z) into
// the non-zero differences in question order, and averages their sum over n.
// The resampled means have exactly the distribution of the textbook
// n-draw bootstrap, at a fraction of the draws: two GSM8K configurations
// agree on most questions. The order above,
// resample by resample, is part of the contract: it is what makes an interval
// reproducible from its seed. The file is compiled without floating-point
// contraction so the table and sums round the same on every platform.
#include <harness/analysis/rng.hpp>
#include <harness/analysis/stats.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numbers>

namespace diffeval::analysis {
namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_inf = std::numeric_limits<double>::infinity();

// log(n!) - log(sqrt(2 pi n) (n / e)^n) for a whole number n >= 1.
double stirling_error(double n) {
    if (n <= 15.0) {
        // The series below is not yet accurate this low; direct summation
        // of at most 14 logarithms is.
        double log_factorial = 0.0;
        for (double i = 2.0; i <= n; i += 1.0) {
            log_factorial += std::log(i);
        }
        return log_factorial - (n + 0.5) * std::log(n) + n - 0.5 * std::log(2.0 * std::numbers::pi);
    }
    // Asymptotic series 1/(12n) - 1/(360n^3) + 1/(1260n^5) - 1/(1680n^7) + 1/(1188n^9);
    // the next term is below 1e-16 relative for n > 15.
    const double nn = n * n;
    return (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680 - 1.0 / 1188 / nn) / nn) / nn) / nn) /
           n;
}

// The deviance term x log(x / m) + m - x, computed without cancellation when
// x is close to m.
double deviance(double x, double m) {
    if (std::abs(x - m) < 0.1 * (x + m)) {
        // With v = (x - m) / (x + m), the term is (x - m) v + 2x (v^3/3 + v^5/5 + ...).
        const double v = (x - m) / (x + m);
        double sum = (x - m) * v;
        double power = 2.0 * x * v;
        for (int j = 1; j < 1000; ++j) {
            power *= v * v;
            const double next = sum + power / (2 * j + 1);
            if (next == sum) {
                return next;
            }
            sum = next;
        }
        return sum;
    }
    return x * std::log(x / m) + m - x;
}

// P(X = k) for X ~ Binomial(n, 1/2).
double binomial_half_pmf(std::uint64_t k, std::uint64_t n) {
    if (k == 0 || k == n) {
        // 2^-n; beyond the smallest subnormal it is zero.
        return n > 1100 ? 0.0 : std::ldexp(1.0, -static_cast<int>(n));
    }
    const auto nd = static_cast<double>(n);
    const auto kd = static_cast<double>(k);
    const double half = nd / 2.0;
    const double log_core = stirling_error(nd) - stirling_error(kd) - stirling_error(nd - kd) -
                            deviance(kd, half) - deviance(nd - kd, half);
    const double log_spread =
        std::log(2.0 * std::numbers::pi) + std::log(kd) + std::log1p(-kd / nd);
    return std::exp(log_core - 0.5 * log_spread);
}

// sum_{i=0..k} P(X = i) / P(X = k) for X ~ Binomial(n, 1/2) and k <= n / 2.
// The ratios shrink monotonically going down, so the sum can stop once a term
// no longer changes it.
double lower_tail_over_point(std::uint64_t k, std::uint64_t n) {
    double sum = 1.0;
    double term = 1.0;
    for (std::uint64_t i = k; i >= 1; --i) {
        term *= static_cast<double>(i) / static_cast<double>(n - i + 1);
        const double next = sum + term;
        if (next == sum) {
            break;
        }
        sum = next;
    }
    return sum;
}

// Linearly interpolated quantile at fraction `q` of non-empty `values`
// (numpy's default), found by selection rather than a full sort: `values` is
// reordered so only the two order statistics needed are in place.
double select_quantile(std::vector<double>& values, double q) {
    const double h = q * static_cast<double>(values.size() - 1);
    const double floor_h = std::floor(h);
    const auto j = static_cast<std::size_t>(floor_h);
    const auto nth = values.begin() + static_cast<std::ptrdiff_t>(j);
    std::nth_element(values.begin(), nth, values.end());
    if (j + 1 >= values.size()) {
        return *nth;
    }
    const double next = *std::min_element(nth + 1, values.end());
    return *nth + (h - floor_h) * (next - *nth);
}

// Cumulative probabilities of Binomial(n, p) for 0 < p < 1, scaled by a
// common factor: the terms are built from the mode outwards by their ratios,
// so nothing underflows near the mode whatever n is, and tails too small
// to matter become zero.
std::vector<double> binomial_cdf(std::uint32_t n, double p) {
    std::vector<double> w(std::size_t{n} + 1, 0.0);
    const auto mode = static_cast<std::uint32_t>(
        std::min<double>(n, std::floor((static_cast<double>(n) + 1.0) * p)));
    const double odds = p / (1.0 - p);
    w[mode] = 1.0;
    for (std::uint32_t k = mode; k < n && w[k] > 0.0; ++k) {
        w[k + 1] = w[k] * (static_cast<double>(n - k) / static_cast<double>(k + 1)) * odds;
    }
    for (std::uint32_t k = mode; k > 0 && w[k] > 0.0; --k) {
        w[k - 1] = w[k] * (static_cast<double>(k) / static_cast<double>(n - k + 1)) / odds;
    }
    double total = 0.0;
    for (double& x : w) {
        total += x;
        x = total;
    }
    return w;
}

// Two resample means closer than this are one value (a difference of
// accuracies, whose exact values are fractions far coarser than this).
constexpr double k_tie = 1e-9;

// BCa bootstrap of the mean of `d`; `d` is non-empty and checked.
BootstrapInterval bootstrap_mean(std::span<const double> d, const BootstrapOptions& options) {
    const auto n = static_cast<std::uint32_t>(d.size());
    const auto nd = static_cast<double>(n);
    double total = 0.0;
    std::vector<double> moving; // the non-zero differences, in question order
    for (double x : d) {
        total += x;
        if (x != 0.0) {
            moving.push_back(x);
        }
    }
    const auto z = static_cast<std::uint32_t>(moving.size());
    // How many of a resample's n draws land on a non-zero difference.
    std::vector<double> cdf;
    if (z > 0 && z < n) {
        cdf = binomial_cdf(n, static_cast<double>(z) / nd);
    }
    Rng rng(options.seed);
    auto draw_moving = [&]() -> std::uint32_t {
        if (z == 0 || z == n) {
            return z == 0 ? 0 : n;
        }
        const double u = rng.unit() * cdf.back();
        const auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
        return it == cdf.end() ? n : static_cast<std::uint32_t>(it - cdf.begin());
    };
    std::vector<double> means(options.resamples);
    for (double& mean : means) {
        const std::uint32_t m = draw_moving();
        double sum = 0.0;
        for (std::uint32_t i = 0; i < m; ++i) {
            sum += moving[rng.below(z)];
        }
        mean = sum / nd;
        // A resample whose moves cancel is 0, not what rounding leaves of
        // it (1 - 2/3 - 1/3 is 5.55e-17): a bound of 5.55e-19 printed as
        // "[0.0, +5.7] excludes 0" for an A/A pair (an outside audit). Ties
        // with the estimate below are told apart at the same 1e-9.
        if (std::abs(mean) <= k_tie) {
            mean = 0.0;
        }
    }
    const double diff = total / nd;
    const double tail = (1.0 - options.confidence) / 2.0;
    // Bias-corrected and accelerated (BCa, Efron 1987): each end is the
    // resamples' quantile at a level moved by how far their median is from
    // the estimate (z0) and by the skew of the differences (the jackknife's
    // acceleration, for a mean the differences' third moment). The plain
    // percentile bound of a few dozen losses and no gains is a Wald bound on
    // a count: it covered 91% where 95% was asked, and the gate passed a drop
    // at its margin 8% of the time at alpha 0.05 (statistics audit).
    double below = 0.0;
    for (double m : means) {
        below += m < diff - k_tie ? 1.0 : (m <= diff + k_tie ? 0.5 : 0.0);
    }
    const double resamples = static_cast<double>(means.size());
    const double share = std::clamp(below / resamples, 0.5 / resamples, 1.0 - 0.5 / resamples);
    const double z0 = normal_quantile(share);
    double m2 = 0.0;
    double m3 = 0.0;
    for (double x : moving) {
        m2 += (x - diff) * (x - diff);
        m3 += (x - diff) * (x - diff) * (x - diff);
    }
    // The questions that did not move, each at 0.
    const double still = nd - static_cast<double>(z);
    m2 += still * diff * diff;
    m3 -= still * diff * diff * diff;
    const double accel = m2 > 0.0 ? m3 / (6.0 * std::pow(m2, 1.5)) : 0.0;
    const auto level = [&](double q) {
        if (z == 0) {
            return q; // every resample is 0
        }
        const double zq = z0 + normal_quantile(q);
        const double denom = 1.0 - accel * zq;
        if (denom <= 0.0) {
            return q < 0.5 ? 0.0 : 1.0;
        }
        return normal_cdf(z0 + zq / denom);
    };
    return BootstrapInterval{
        .diff = diff,
        .lo = select_quantile(means, level(tail)),
        .hi = select_quantile(means, level(1.0 - tail)),
        .lo_one_sided = select_quantile(means, level(2.0 * tail)),
        .hi_one_sided = select_quantile(means, level(1.0 - 2.0 * tail)),
        .resamples = options.resamples,
        .seed = options.seed,
    };
}

// Questions are indexed with 32-bit draws.
constexpr std::size_t k_max_questions = std::numeric_limits<std::uint32_t>::max();

// AS241 coefficient tables (Wichura 1988), highest power first.
constexpr std::array<double, 8> k_centre_num{2.5090809287301226727e+3, 3.3430575583588128105e+4,
                                             6.7265770927008700853e+4, 4.5921953931549871457e+4,
                                             1.3731693765509461125e+4, 1.9715909503065514427e+3,
                                             1.3314166789178437745e+2, 3.3871328727963666080e+0};
constexpr std::array<double, 8> k_centre_den{5.2264952788528545610e+3, 2.8729085735721942674e+4,
                                             3.9307895800092710610e+4, 2.1213794301586595867e+4,
                                             5.3941960214247511077e+3, 6.8718700749205790830e+2,
                                             4.2313330701600911252e+1, 1.0};
constexpr std::array<double, 8> k_near_num{7.7454501427834140764e-4,  2.27238449892691845833e-2,
                                           2.41780725177450611770e-1, 1.27045825245236838258e+0,
                                           3.64784832476320460504e+0, 5.76949722146069140550e+0,
                                           4.63033784615654529590e+0, 1.42343711074968357734e+0};
constexpr std::array<double, 8> k_near_den{1.05075007164441684324e-9, 5.47593808499534494600e-4,
                                           1.51986665636164571966e-2, 1.48103976427480074590e-1,
                                           6.89767334985100004550e-1, 1.67638483018380384940e+0,
                                           2.05319162663775882187e+0, 1.0};
constexpr std::array<double, 8> k_far_num{2.01033439929228813265e-7, 2.71155556874348757815e-5,
                                          1.24266094738807843860e-3, 2.65321895265761230930e-2,
                                          2.96560571828504891230e-1, 1.78482653991729133580e+0,
                                          5.46378491116411436990e+0, 6.65790464350110377720e+0};
constexpr std::array<double, 8> k_far_den{2.04426310338993978564e-15, 1.42151175831644588870e-7,
                                          1.84631831751005468180e-5,  7.86869131145613259100e-4,
                                          1.48753612908506148525e-2,  1.36929880922735805310e-1,
                                          5.99832206555887937690e-1,  1.0};

// The polynomial with `coefficients` (highest power first) at `x`.
double horner(const std::array<double, 8>& coefficients, double x) {
    double value = 0.0;
    for (double c : coefficients) {
        value = value * x + c;
    }
    return value;
}

} // namespace

util::Result<void> check_options(const BootstrapOptions& options) {
    if (options.resamples == 0 || options.resamples > k_max_resamples) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("--resamples {}: must be between 1 and {} (default {})",
                                            options.resamples, k_max_resamples,
                                            k_default_resamples));
    }
    if (!(options.confidence > 0.0 && options.confidence < 1.0)) {
        return util::make_error(
            util::ErrorKind::usage,
            fmt::format("bootstrap confidence must be in (0, 1), got {}", options.confidence));
    }
    return {};
}

util::Result<void> check_alpha(double alpha) {
    if (!(alpha > 0.0 && alpha <= 0.5)) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("--alpha {}: must be in (0, 0.5] (e.g. 0.05)", alpha));
    }
    // Its confidence, 1 - alpha, would be 1 (plan said "bootstrap
    // confidence must be in (0, 1), got 1", naming no flag).
    if (1.0 - alpha == 1.0) {
        return util::make_error(
            util::ErrorKind::usage,
            fmt::format("--alpha {:g}: too small to leave a confidence below 1 (1 - alpha rounds "
                        "to 1); pass 1e-15 or more",
                        alpha));
    }
    return {};
}

McNemarResult mcnemar(std::uint64_t b, std::uint64_t c) {
    McNemarResult result{.b = b, .c = c, .n = b + c};
    if (result.n == 0 || b == c) {
        // Balanced discordance: P(X <= k) - P(X = k) / 2 is exactly 1/2 by
        // symmetry, so both p-values are 1; set it rather than round to it.
        return result;
    }
    const std::uint64_t k = std::min(b, c);
    const double point = binomial_half_pmf(k, result.n);
    const double tail_ratio = lower_tail_over_point(k, result.n);
    result.p_exact = std::min(1.0, 2.0 * point * tail_ratio);
    result.p_mid = std::min(1.0, 2.0 * point * (tail_ratio - 0.5));
    return result;
}

double binomial_half_at_least(std::uint64_t k, std::uint64_t n) {
    if (k == 0) {
        return 1.0;
    }
    if (k > n) {
        return 0.0;
    }
    // By symmetry P(X >= k) = P(X <= n - k): a lower tail summed from its
    // point when n - k is at most the middle, else one minus the lower tail
    // below k, which then is.
    if (const std::uint64_t j = n - k; 2 * j <= n) {
        return std::min(1.0, binomial_half_pmf(j, n) * lower_tail_over_point(j, n));
    }
    return 1.0 - binomial_half_pmf(k - 1, n) * lower_tail_over_point(k - 1, n);
}

util::Result<BootstrapInterval> paired_bootstrap(std::span<const double> a,
                                                 std::span<const double> b,
                                                 const BootstrapOptions& options) {
    if (auto ok = check_options(options); !ok) {
        return ok.error();
    }
    if (a.size() != b.size()) {
        return util::make_error(
            util::ErrorKind::data,
            fmt::format("paired bootstrap needs the same questions on both sides; A has {} "
                        "scores and B has {}",
                        a.size(), b.size()));
    }
    if (a.empty()) {
        return util::make_error(
            util::ErrorKind::data,
            "paired bootstrap needs at least one question scored on both sides");
    }
    if (a.size() > k_max_questions) {
        return util::make_error(
            util::ErrorKind::data,
            fmt::format("paired bootstrap supports at most {} questions, got {}", k_max_questions,
                        a.size()));
    }
    std::vector<double> d(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        const bool in_range = a[i] >= 0.0 && a[i] <= 1.0 && b[i] >= 0.0 && b[i] <= 1.0;
        if (!in_range) {
            return util::make_error(
                util::ErrorKind::data,
                fmt::format("question {} has scores A={} B={}; scores must be fractions in [0, 1]",
                            i, a[i], b[i]));
        }
        d[i] = b[i] - a[i];
    }
    return bootstrap_mean(d, options);
}

double normal_cdf(double x) {
    return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

double normal_quantile(double p) {
    if (std::isnan(p) || p < 0.0 || p > 1.0) {
        return k_nan;
    }
    if (p == 0.0) {
        return -k_inf;
    }
    if (p == 1.0) {
        return k_inf;
    }
    // Wichura (1988), algorithm AS241 PPND16: a rational approximation in
    // three regions, the centre and two tails transformed by sqrt(-log(tail)).
    // Coefficients are listed from the highest power down.
    const double q = p - 0.5;
    if (std::abs(q) <= 0.425) {
        const double r = 0.180625 - q * q;
        return q * horner(k_centre_num, r) / horner(k_centre_den, r);
    }
    const double r = std::sqrt(-std::log(q < 0.0 ? p : 1.0 - p));
    const double x = r <= 5.0 ? horner(k_near_num, r - 1.6) / horner(k_near_den, r - 1.6)
                              : horner(k_far_num, r - 5.0) / horner(k_far_den, r - 5.0);
    return q < 0.0 ? -x : x;
}

double percentile(std::vector<double> values, double p) {
    if (values.empty() || !(p >= 0.0 && p <= 100.0)) {
        return k_nan;
    }
    if (std::any_of(values.begin(), values.end(), [](double v) { return std::isnan(v); })) {
        return k_nan;
    }
    return select_quantile(values, p / 100.0);
}

Interval wilson_interval(std::uint64_t successes, std::uint64_t trials, double confidence) {
    if (successes > trials || !(confidence > 0.0 && confidence < 1.0)) {
        return Interval{k_nan, k_nan};
    }
    if (trials == 0) {
        return Interval{0.0, 1.0};
    }
    const double z = normal_quantile(1.0 - (1.0 - confidence) / 2.0);
    const auto n = static_cast<double>(trials);
    const double phat = static_cast<double>(successes) / n;
    const double z2 = z * z;
    const double denom = 1.0 + z2 / n;
    const double centre = (phat + z2 / (2.0 * n)) / denom;
    const double half = z * std::sqrt(phat * (1.0 - phat) / n + z2 / (4.0 * n * n)) / denom;
    // At 0 or all successes the bound is exactly 0 or 1; arithmetic would leave
    // a rounding error either side of it.
    return Interval{
        .lo = successes == 0 ? 0.0 : std::max(0.0, centre - half),
        .hi = successes == trials ? 1.0 : std::min(1.0, centre + half),
    };
}

} // namespace diffeval::analysis
