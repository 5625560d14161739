// Question-level paired statistics; see questions.hpp.
//
// The exact sign-flip test. Under "no difference" each question's difference
// is as likely to have come out with the other sign, so T = sum of the
// differences has the distribution of sum s_i |d_i| with independent fair
// signs s_i. When every difference is a multiple of 1/L (L the least common
// multiple of the repeat counts), w_i = L |d_i| are whole numbers and
// T = (2U - W) / L, where W = sum w_i and U is the sum of a uniformly random
// subset of the w_i. U's distribution is built by convolution, one question
// at a time, in O(questions x W) (a few million steps for a full GSM8K
// comparison), and the p-value summed from its tails directly, so small
// p-values keep their digits. With one repeat per side every w_i is 1, U is
// Binomial(z, 1/2) and the test is McNemar's exact test, mid-p included.
// Beyond `max_exact_work` the p-value is estimated from seeded random sign
// vectors, (1 + as extreme) / (1 + draws), which never reports 0.
#include <harness/analysis/questions.hpp>

#include <harness/analysis/rng.hpp>

#include <boost/math/distributions/binomial.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

namespace diffeval::analysis {

using util::ErrorKind;
using util::make_error;

namespace {

// Sample variance of a question's 0/1 repeats with `c` right of `k` (k >= 2).
double repeat_variance(double c, double k) {
    return c * (k - c) / (k * (k - 1.0));
}

SignFlipResult exact_sign_flip(const std::vector<std::int64_t>& w, std::int64_t t) {
    std::int64_t total = 0;
    std::vector<double> prob(1, 1.0);
    for (std::int64_t x : w) {
        total += x;
        prob.resize(static_cast<size_t>(total) + 1, 0.0);
        for (std::int64_t u = total; u >= 0; --u) {
            const double with = u >= x ? prob[static_cast<size_t>(u - x)] : 0.0;
            prob[static_cast<size_t>(u)] = 0.5 * (prob[static_cast<size_t>(u)] + with);
        }
    }
    const std::int64_t observed = std::abs(t);
    double beyond = 0.0, at = 0.0;
    for (std::int64_t u = 0; u <= total; ++u) {
        const std::int64_t stat = std::abs(2 * u - total);
        if (stat > observed) {
            beyond += prob[static_cast<size_t>(u)];
        } else if (stat == observed) {
            at += prob[static_cast<size_t>(u)];
        }
    }
    SignFlipResult r;
    r.p = std::min(1.0, beyond + at);
    // A zero sum is the centre of the distribution: both tails are the whole
    // of it, and the doubled one-sided mid-p is 1, as McNemar's.
    r.p_mid = observed == 0 ? 1.0 : std::min(1.0, beyond + 0.5 * at);
    r.method = SignFlipMethod::exact;
    return r;
}

SignFlipResult monte_carlo_sign_flip(const std::vector<double>& moving, double t,
                                     const SignFlipOptions& options) {
    const double observed = std::abs(t);
    const double tolerance = 1e-9 * std::max(1.0, observed);
    Rng rng(options.seed);
    std::uint64_t beyond = 0, at = 0;
    for (std::uint32_t draw = 0; draw < options.draws; ++draw) {
        double sum = 0.0;
        std::uint64_t bits = 0;
        for (size_t i = 0; i < moving.size(); ++i) {
            if (i % 64 == 0) {
                bits = rng.next();
            }
            sum += (bits & 1U) != 0 ? moving[i] : -moving[i];
            bits >>= 1U;
        }
        const double stat = std::abs(sum);
        if (stat > observed + tolerance) {
            ++beyond;
        } else if (stat >= observed - tolerance) {
            ++at;
        }
    }
    const double n = static_cast<double>(options.draws) + 1.0;
    SignFlipResult r;
    r.p = std::min(1.0, (1.0 + static_cast<double>(beyond + at)) / n);
    r.p_mid =
        observed <= tolerance
            ? 1.0
            : std::min(1.0,
                       (0.5 + static_cast<double>(beyond) + 0.5 * static_cast<double>(at)) / n);
    r.method = SignFlipMethod::monte_carlo;
    r.draws = options.draws;
    r.seed = options.seed;
    return r;
}

// The noise from the questions with two or more repeats: a killed run's
// last question, answered once where the rest were answered three times,
// made a side "1 repeat, noise not measured" and left the plan without its
// repeat rows. `repeats` is the count most questions have (the larger on a
// tie); the noise is measured when at least half the questions have 2+.
// Repeats that agree are a measurement only where they were answered: a side
// whose every request failed agreed on every question (all wrong) and was
// called a deterministic server. `answered` counts each question's answered
// repeats (empty: all).
SideNoise side_noise(const CorrectnessMatrix& m, const AnsweredCounts& answered) {
    SideNoise noise;
    std::map<std::uint32_t, size_t> counts;
    for (const auto& row : m) {
        ++counts[static_cast<std::uint32_t>(row.size())];
    }
    size_t most = 0, several = 0;
    for (const auto& [repeats, questions] : counts) {
        if (questions >= most) {
            most = questions;
            noise.repeats = repeats;
        }
        several += repeats >= 2 ? questions : 0;
        if (repeats >= 2 && noise.fewest_of_several == 0) {
            noise.fewest_of_several = repeats;
        }
    }
    if (!counts.empty()) {
        noise.fewest_repeats = counts.begin()->first;
        noise.most_repeats = counts.rbegin()->first;
    }
    noise.several = several;
    noise.measured = several > 0 && 2 * several >= m.size();
    if (!noise.measured) {
        return noise;
    }
    double sum = 0.0;
    size_t compared = 0; // questions with 2+ answered repeats
    for (size_t i = 0; i < m.size(); ++i) {
        const auto& row = m[i];
        if (row.size() >= 2) {
            const double c = std::accumulate(row.begin(), row.end(), 0.0);
            sum += repeat_variance(c, static_cast<double>(row.size()));
        }
        compared += (answered.empty() ? row.size() : answered[i]) >= 2 ? 1 : 0;
    }
    if (sum == 0.0 && 2 * compared < m.size()) {
        noise.measured = false;
        noise.gap = NoiseGap::too_few_answers;
        return noise;
    }
    noise.gap = NoiseGap::none;
    noise.within_variance = sum / static_cast<double>(several);
    noise.deterministic = sum == 0.0;
    // The accuracy printed is the mean over questions of each question's
    // mean over its k_i repeats: on a re-run its variance is
    // sigma_w^2 * sum(1 / k_i) / n^2. It was sigma_w^2 / n, a single
    // repeat's, sqrt(k) times too large (a statistics audit: "±0.2" beside
    // 0.05-0.11 points measured over 8 re-runs of 10 repeats).
    double inverse_repeats = 0.0;
    for (const auto& row : m) {
        inverse_repeats += 1.0 / static_cast<double>(std::max<size_t>(row.size(), 1));
    }
    noise.rerun_sd =
        std::sqrt(noise.within_variance * inverse_repeats) / static_cast<double>(m.size());
    return noise;
}

// Clopper-Pearson one-sided bounds at level `a` on a proportion with `x`
// successes of `n` (Boost.Math, by the inverse incomplete beta function).
double clopper_pearson_upper(std::uint64_t x, std::uint64_t n, double a) {
    return boost::math::binomial_distribution<>::find_upper_bound_on_p(static_cast<double>(n),
                                                                       static_cast<double>(x), a);
}

double clopper_pearson_lower(std::uint64_t x, std::uint64_t n, double a) {
    return boost::math::binomial_distribution<>::find_lower_bound_on_p(static_cast<double>(n),
                                                                       static_cast<double>(x), a);
}

// A lower bound at one-sided level `a` on the mean size of a move, from the
// sizes seen (each in [1 / lattice, 1]). The mean of a size X is
// 1/L + the integral of P(X > t) for t from 1/L to 1; on a grid of
// thresholds t_1 < ... < t_J each slice is at least (t_j - t_{j-1}) times
// P(X >= t_j), which Clopper-Pearson bounds from the moves at least t_j in
// size, each at a / J (a union bound). The grid is the lattice's own steps
// k/L, or twelfths when the lattice is finer.
double mean_size_lower_bound(std::span<const double> moves, std::uint64_t lattice, double a) {
    constexpr std::uint64_t k_grid = 12;
    const double least = 1.0 / static_cast<double>(lattice);
    std::vector<double> grid;
    if (lattice <= k_grid) {
        for (std::uint64_t k = 2; k <= lattice; ++k) {
            grid.push_back(static_cast<double>(k) / static_cast<double>(lattice));
        }
    } else {
        for (std::uint64_t j = 1; j <= k_grid; ++j) {
            const double t = static_cast<double>(j) / static_cast<double>(k_grid);
            if (t > least) {
                grid.push_back(t);
            }
        }
    }
    double size = least;
    double below = least;
    const double level = a / static_cast<double>(grid.size());
    for (double t : grid) {
        // Sizes are fractions of repeats: one within rounding of t reaches it.
        const auto reach = static_cast<std::uint64_t>(
            std::count_if(moves.begin(), moves.end(), [&](double x) { return x >= t - 1e-9; }));
        if (reach > 0) {
            size += (t - below) * clopper_pearson_lower(reach, moves.size(), level);
        }
        below = t;
    }
    return size;
}

// A lower bound at one-sided level `a` on the mean per-question difference
// when `other` questions of `n` went the other way and `moves` (their sizes,
// each at least 1 / `lattice`) went this way: exact, however few moved,
// where a bootstrap resample of a handful of moves bounds nothing (with
// none the other way, every resample lies on one side of 0). With no
// question moved this way, the share of questions that went the other way
// is below its Clopper-Pearson upper bound (1 - a^(1/n) when none did), and
// each moves the mean by at most 1. Otherwise the larger of two bounds, each
// at level a / 2 (a union bound keeps the level a):
//   - the same bound at a / 2;
//   - the mean is P(moved) times the mean move of a question that moved,
//     which is at least pi * size - (1 - pi) with pi the share of moves this
//     way and size the mean size of a move this way: Clopper-Pearson bounds
//     on P(moved) at a / 4 and on pi at a / 4, or, when moves come in
//     several sizes (repeats), on pi at a / 8 and size at a / 8
//     (mean_size_lower_bound).
// The first is the tighter with few moves, the second with many.
double count_lower_bound(std::span<const double> moves, std::uint64_t other, std::uint64_t n,
                         std::uint64_t lattice, double a) {
    const auto questions = static_cast<double>(n);
    // Clopper-Pearson's upper bound at 0 of n is 1 - a^(1/n), in closed form.
    const auto other_share = [&](double level) {
        return other == 0 ? 1.0 - std::pow(level, 1.0 / questions)
                          : clopper_pearson_upper(other, n, level);
    };
    if (moves.empty()) {
        return -other_share(a);
    }
    const double other_way = -other_share(a / 2.0);
    const double quarter = a / 4.0;
    const auto m = static_cast<std::uint64_t>(moves.size());
    const bool sized = lattice > 1;
    const double pi_level = sized ? quarter / 2.0 : quarter;
    const double pi = other == 0 ? std::pow(pi_level, 1.0 / static_cast<double>(m))
                                 : clopper_pearson_lower(m, m + other, pi_level);
    const double size = sized ? mean_size_lower_bound(moves, lattice, quarter / 2.0) : 1.0;
    const double per_move = pi * size - (1.0 - pi);
    const double by_share =
        per_move * (per_move >= 0.0 ? clopper_pearson_lower(m + other, n, quarter)
                                    : clopper_pearson_upper(m + other, n, quarter));
    return std::max(other_way, by_share);
}

util::Result<void> check_matrix(const CorrectnessMatrix& m, char side) {
    for (size_t q = 0; q < m.size(); ++q) {
        if (m[q].empty()) {
            return make_error(ErrorKind::data,
                              fmt::format("question {} has no repeat on side {}", q, side));
        }
        for (auto v : m[q]) {
            if (v > 1) {
                return make_error(ErrorKind::data,
                                  fmt::format("question {} on side {} has correctness {}; "
                                              "expected 0 or 1",
                                              q, side, static_cast<int>(v)));
            }
        }
    }
    return {};
}

} // namespace

util::Result<SignFlipResult> sign_flip_test(std::span<const double> d,
                                            const SignFlipOptions& options) {
    if (d.empty()) {
        return make_error(ErrorKind::data, "the sign-flip test needs at least one question");
    }
    std::vector<double> moving;
    double t = 0.0;
    for (double x : d) {
        if (!(x >= -1.0 && x <= 1.0)) {
            return make_error(
                ErrorKind::data,
                fmt::format("per-question difference {} is not a difference of fractions", x));
        }
        if (x != 0.0) {
            moving.push_back(x);
            t += x;
        }
    }
    SignFlipResult r;
    r.differing = moving.size();
    if (moving.empty()) {
        return r;
    }
    // On the lattice? Then the exact distribution, if affordable.
    if (options.lattice > 0) {
        const auto lattice = static_cast<double>(options.lattice);
        std::vector<std::int64_t> w;
        std::int64_t signed_sum = 0, total = 0;
        bool on_lattice = true;
        for (double x : moving) {
            const double scaled = x * lattice;
            const auto v = static_cast<std::int64_t>(std::llround(scaled));
            if (std::abs(scaled - static_cast<double>(v)) > 1e-6) {
                on_lattice = false;
                break;
            }
            w.push_back(std::abs(v));
            signed_sum += v;
            total += std::abs(v);
        }
        const auto work = static_cast<double>(w.size()) * static_cast<double>(total);
        if (on_lattice && work <= static_cast<double>(options.max_exact_work)) {
            auto exact = exact_sign_flip(w, signed_sum);
            exact.differing = r.differing;
            return exact;
        }
    }
    auto mc = monte_carlo_sign_flip(moving, t, options);
    mc.differing = r.differing;
    return mc;
}

double power_to_detect(double delta, double se, double alpha) {
    if (!(se > 0.0)) {
        return delta != 0.0 ? 1.0 : alpha;
    }
    const double z = normal_quantile(1.0 - alpha / 2.0);
    const double shift = std::abs(delta) / se;
    return normal_cdf(shift - z) + normal_cdf(-shift - z);
}

double minimum_detectable(double se, double alpha, double power) {
    return (normal_quantile(1.0 - alpha / 2.0) + normal_quantile(power)) * se;
}

std::vector<double> holm_adjust(std::span<const double> p) {
    const size_t m = p.size();
    std::vector<size_t> order(m);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return p[x] < p[y]; });
    std::vector<double> out(m, 1.0);
    double running = 0.0;
    for (size_t rank = 0; rank < m; ++rank) {
        const double scaled = std::min(1.0, static_cast<double>(m - rank) * p[order[rank]]);
        running = std::max(running, scaled);
        out[order[rank]] = running;
    }
    return out;
}

namespace {

// The inputs a paired analysis needs: equal, non-empty sides of 0/1 rows and
// a level and power within range.
util::Result<void> check_inputs(const CorrectnessMatrix& a, const CorrectnessMatrix& b,
                                const PairedOptions& options) {
    if (a.size() != b.size()) {
        return make_error(ErrorKind::data,
                          fmt::format("paired analysis needs the same questions on both sides; A "
                                      "has {} and B has {}",
                                      a.size(), b.size()));
    }
    if (a.empty()) {
        return make_error(ErrorKind::data,
                          "paired analysis needs at least one question answered on both sides");
    }
    if (auto ok = check_alpha(options.alpha); !ok) {
        return ok.error();
    }
    if (!(options.power >= 0.5 && options.power < 1.0)) {
        return make_error(ErrorKind::usage,
                          fmt::format("power must be in [0.5, 1), got {}", options.power));
    }
    if (auto ok = check_matrix(a, 'A'); !ok) {
        return ok;
    }
    if (auto ok = check_matrix(b, 'B'); !ok) {
        return ok;
    }
    return {};
}

// Per-question fractions correct and differences, with the accuracies, the
// clustered SE and the within-question variance of the difference.
struct PerQuestion {
    std::vector<double> fa, fb, d;
    std::uint64_t lattice = 1;   // lcm of the repeat counts (capped)
    double within_of_diff = 0.0; // sum over questions of var(mean A) + var(mean B)
};

PerQuestion per_question(const CorrectnessMatrix& a, const CorrectnessMatrix& b,
                         const CorrectnessMatrix* noise_b, QuestionStats& s) {
    PerQuestion p;
    p.fa.resize(a.size());
    p.fb.resize(b.size());
    p.d.resize(a.size());
    for (size_t q = 0; q < a.size(); ++q) {
        const auto ka = static_cast<double>(a[q].size());
        const auto kb = static_cast<double>(b[q].size());
        const double ca = std::accumulate(a[q].begin(), a[q].end(), 0.0);
        const double cb = std::accumulate(b[q].begin(), b[q].end(), 0.0);
        p.fa[q] = ca / ka;
        p.fb[q] = cb / kb;
        p.d[q] = p.fb[q] - p.fa[q];
        s.a_better += p.fa[q] > p.fb[q] ? 1 : 0;
        s.b_better += p.fb[q] > p.fa[q] ? 1 : 0;
        if (p.lattice <= 1'000'000) {
            p.lattice = std::lcm(p.lattice, std::lcm<std::uint64_t>(a[q].size(), b[q].size()));
        }
        if (ka >= 2) {
            p.within_of_diff += repeat_variance(ca, ka) / ka;
        }
        // B's within-question part from the repeats that have a response
        // (noise_b), when some have none: an unsent repeat is no re-run's.
        const auto& nb = noise_b ? (*noise_b)[q] : b[q];
        if (nb.size() >= 2) {
            const auto kn = static_cast<double>(nb.size());
            p.within_of_diff +=
                repeat_variance(std::accumulate(nb.begin(), nb.end(), 0.0), kn) / kn;
        }
    }
    const auto n = static_cast<double>(a.size());
    s.accuracy_a = std::accumulate(p.fa.begin(), p.fa.end(), 0.0) / n;
    s.accuracy_b = std::accumulate(p.fb.begin(), p.fb.end(), 0.0) / n;
    const double mean_d = std::accumulate(p.d.begin(), p.d.end(), 0.0) / n;
    s.diff = mean_d;
    double ss = 0.0;
    for (double x : p.d) {
        ss += (x - mean_d) * (x - mean_d);
    }
    // Questions that all differ by the same amount (one answer in three
    // each) have no spread, though the mean of a third's sums left 1.7e-16,
    // behind which came an MDD, a "100% repeat noise" and a plan (a
    // statistics audit).
    const auto [lowest, highest] = std::minmax_element(p.d.begin(), p.d.end());
    const bool same = *highest - *lowest <= 1e-12;
    s.sd_diff = a.size() > 1 && !same ? std::sqrt(ss / (n - 1.0)) : 0.0;
    s.se = s.sd_diff / std::sqrt(n);
    return p;
}

} // namespace

std::uint64_t few_moves(double alpha) {
    std::uint64_t k = 1;
    while (k < 64 && std::ldexp(1.0, -static_cast<int>(k)) >= alpha) {
        ++k;
    }
    return k;
}

util::Result<QuestionStats>
analyse_questions(const CorrectnessMatrix& a, const CorrectnessMatrix& b,
                  const PairedOptions& options, const AnsweredCounts& answered_a,
                  const AnsweredCounts& answered_b, const CorrectnessMatrix* noise_b) {
    if (auto ok = check_inputs(a, b, options); !ok) {
        return ok.error();
    }
    for (const auto* answered : {&answered_a, &answered_b}) {
        if (!answered->empty() && answered->size() != a.size()) {
            return make_error(ErrorKind::internal,
                              fmt::format("answered counts for {} questions, not {}",
                                          answered->size(), a.size()));
        }
    }
    if (noise_b && noise_b->size() != a.size()) {
        return make_error(
            ErrorKind::internal,
            fmt::format("B's noise rows for {} questions, not {}", noise_b->size(), a.size()));
    }
    QuestionStats s;
    s.questions = a.size();
    s.alpha = options.alpha;
    s.power = options.power;
    const auto n = static_cast<double>(a.size());
    const PerQuestion p = per_question(a, b, noise_b, s);

    BootstrapOptions boot = options.bootstrap;
    boot.confidence = 1.0 - options.alpha;
    auto interval = paired_bootstrap(p.fa, p.fb, boot);
    if (!interval) {
        return interval.error();
    }
    s.interval = *interval;
    // The bootstrap's bound on a side no question moved towards is the
    // other side of 0 by construction, and with fewer than few_moves
    // questions differing in all, its bounds are those few questions' own
    // extremes: no bound either way. There the exact count bound stands in
    // where it is the farther.
    auto& iv = s.interval;
    std::vector<double> towards_a, towards_b; // the sizes of the moves each way
    for (double x : p.d) {
        if (x < 0.0) {
            towards_a.push_back(-x);
        } else if (x > 0.0) {
            towards_b.push_back(x);
        }
    }
    const bool few = towards_a.size() + towards_b.size() < few_moves(options.alpha);
    if (towards_a.empty() || few) {
        const auto lower = [&](double level) {
            return count_lower_bound(towards_b, towards_a.size(), s.questions, p.lattice, level);
        };
        iv.lo = std::min(iv.lo, lower(options.alpha / 2.0));
        iv.lo_one_sided = std::min(iv.lo_one_sided, lower(options.alpha));
        s.count_bound_lower = true;
    }
    if (towards_b.empty() || few) {
        const auto upper = [&](double level) {
            return -count_lower_bound(towards_a, towards_b.size(), s.questions, p.lattice, level);
        };
        iv.hi = std::max(iv.hi, upper(options.alpha / 2.0));
        iv.hi_one_sided = std::max(iv.hi_one_sided, upper(options.alpha));
        s.count_bound_upper = true;
    }

    SignFlipOptions flip;
    flip.lattice = p.lattice <= 1'000'000 ? static_cast<std::uint32_t>(p.lattice) : 0;
    flip.draws = options.sign_flip_draws;
    flip.seed = options.bootstrap.seed;
    auto test = sign_flip_test(p.d, flip);
    if (!test) {
        return test.error();
    }
    s.test = *test;

    s.noise_a = side_noise(a, answered_a);
    if (noise_b) {
        // The questions with a repeat that has a response, and those
        // repeats alone: a question unsent in one repeat and right in the
        // other read as run-to-run noise (audits).
        CorrectnessMatrix rows;
        AnsweredCounts answered;
        for (size_t q = 0; q < noise_b->size(); ++q) {
            if (!(*noise_b)[q].empty()) {
                rows.push_back((*noise_b)[q]);
                answered.push_back(answered_b.empty()
                                       ? static_cast<std::uint32_t>((*noise_b)[q].size())
                                       : answered_b[q]);
            }
        }
        s.noise_b = rows.empty() ? side_noise(b, answered_b) : side_noise(rows, answered);
    } else {
        s.noise_b = side_noise(b, answered_b);
    }
    const auto answered_of = [](const CorrectnessMatrix& m, const AnsweredCounts& answered) {
        std::uint64_t total = 0;
        for (size_t q = 0; q < m.size(); ++q) {
            total += answered.empty() ? m[q].size() : answered[q];
        }
        return total;
    };
    s.answered_a = answered_of(a, answered_a);
    s.answered_b = answered_of(b, answered_b);
    // The standard error the printed interval's width implies. Where an end
    // is an exact count bound (few questions moved) the clustered standard
    // error understates the uncertainty the interval shows, and what is
    // said of the interval is said of the larger.
    const double interval_se = (iv.hi - iv.lo) / (2.0 * normal_quantile(1.0 - options.alpha / 2.0));
    const double shown_se = std::max(s.se, interval_se);
    if (s.noise_a.measured && s.noise_b.measured && s.sd_diff > 0.0) {
        // Repeat noise's variance of the difference, (within / n) / n, over
        // the interval's: beside a count bound 5.7 points wide, 0.17 points
        // of noise a side is 3% of it, not the 100% it is of se^2 (audit).
        s.noise_share = std::min(1.0, (p.within_of_diff / n / n) / (shown_se * shown_se));
    }
    // A side with no successful response: its differences are failures,
    // and no run size would detect anything of the model (no_spread_text
    // says so where the MDD would be).
    if (s.sd_diff > 0.0 && s.answered_a > 0 && s.answered_b > 0) {
        s.mdd = minimum_detectable(shown_se, options.alpha, options.power);
        s.mdd_from_interval = interval_se > s.se;
    }
    // With n questions the test's mid-p is at least 2^-n: every question
    // differing, all the same way, leaves two of the 2^n sign patterns as
    // extreme, counted half. At alpha or above, nothing can be detected.
    const double smallest =
        std::ldexp(1.0, -static_cast<int>(std::min<std::uint64_t>(s.questions, 2000)));
    if (smallest >= options.alpha) {
        s.smallest_p = smallest;
        s.mdd.reset();
    }
    return s;
}

namespace {

// Questions needed at per-question variance `var` to detect `drop` with
// z = z(1 - alpha/2) + z(power), raised to k_min_differing over the pilot's
// share of differing questions (`raised` says so: also when every question
// moved alike, `var` 0); 0 when `drop` is 0 or no question differed.
std::uint64_t needed(const QuestionStats& stats, double var, double drop, double z, bool& raised) {
    raised = false;
    if (drop <= 0.0) {
        return 0;
    }
    // Held at k_questions_cap: a tiny drop's count passes what an integer
    // holds (--drop 1e-8 gave 0, raised to 67 below).
    const double exact = var > 0.0 ? std::ceil(z * z * var / (drop * drop)) : 0.0;
    std::uint64_t questions = exact >= static_cast<double>(k_questions_cap)
                                  ? k_questions_cap
                                  : static_cast<std::uint64_t>(exact);
    // The share is the pilot's, at its own repeats: rows with fewer
    // repeats would see fewer questions differ (their floor is low), rows
    // with more would see more (their floor is high).
    if (stats.test.differing > 0) {
        const double share =
            static_cast<double>(stats.test.differing) / static_cast<double>(stats.questions);
        const auto floor = static_cast<std::uint64_t>(std::ceil(k_min_differing / share));
        if (questions < floor) {
            questions = floor;
            raised = true;
        }
    }
    return questions;
}

} // namespace

std::uint64_t questions_needed(const QuestionStats& stats, double drop, double alpha,
                               double power) {
    const double z = normal_quantile(1.0 - alpha / 2.0) + normal_quantile(power);
    bool raised = false;
    return needed(stats, stats.sd_diff * stats.sd_diff, drop, z, raised);
}

Plan plan_run(const QuestionStats& stats, double drop, double alpha, double power) {
    Plan plan;
    const double total = stats.sd_diff * stats.sd_diff;
    const bool measured = stats.noise_a.measured && stats.noise_b.measured;
    plan.within_a = measured ? stats.noise_a.within_variance : 0.0;
    plan.within_b = measured ? stats.noise_b.within_variance : 0.0;
    // The pilot's per-question variance is the between part plus each side's
    // within variance over its repeats.
    const double pilot_within =
        measured ? plan.within_a / stats.noise_a.repeats + plan.within_b / stats.noise_b.repeats
                 : 0.0;
    plan.between_variance = std::max(0.0, total - pilot_within);
    const double z = normal_quantile(1.0 - alpha / 2.0) + normal_quantile(power);
    for (std::uint32_t k : {1U, 2U, 3U, 5U, 10U}) {
        PlanRow row;
        row.repeats = k;
        const double var = plan.between_variance + (plan.within_a + plan.within_b) / k;
        row.sd_diff = std::sqrt(var);
        row.questions = needed(stats, var, drop, z, row.raised);
        plan.rows.push_back(row);
    }
    return plan;
}

} // namespace diffeval::analysis
