// Calibration of the verdicts and the gate: figures to read, never a
// pass/fail test. Run with `build/bench_calibration [A/A sims] [A/B sims]`
// (default 2000 and 1000).
//
// Each simulated experiment draws correctness matrices directly and runs
// them through the same functions `diff`, the reports and the gate use
// (analyse_questions, decide_verdict, non_inferiority); no HTTP. A GSM8K-like
// set of 1,319 questions has per-question probabilities of being answered
// right: 70% easy (0.97), 12% hard (0.05), 18% anywhere in (0, 1); each side
// answers every question 3 times (repeat noise).
//   - A/A: both sides share the probabilities. A false alarm is a verdict of
//     worse or better (two-sided, alpha 0.05), and, for the gate, a fail of
//     `--max-drop 0` (the one-sided 95% upper bound below 0). Both should
//     happen in about 5% of experiments.
//   - A/B: the candidate's probabilities are the baseline's scaled down so
//     its expected accuracy is 2 points lower. The share of experiments whose
//     verdict is "worse" is compared with the power the formula predicts,
//     power_to_detect(0.02, se, 0.05), averaged over the experiments' own
//     standard errors (what the tool itself would predict from each run).
//   - Rare losses at the margin: every question right on both sides but for
//     a few, which the candidate loses (and fewer it gains), so the true drop
//     is the gate's margin (or just over it); the gate's PASS rate there is
//     its false pass rate, which should be at most alpha. The percentile
//     bootstrap passed 8-9% of these (a statistics audit); BCa is used since.
#include <harness/analysis/questions.hpp>
#include <harness/analysis/rng.hpp>
#include <harness/analysis/verdict.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

using namespace diffeval::analysis;

namespace {

constexpr size_t k_questions = 1319;
constexpr int k_repeats = 3;
constexpr double k_alpha = 0.05;
constexpr double k_drop = 0.02;

std::vector<double> question_probabilities(Rng& rng) {
    std::vector<double> p(k_questions);
    for (double& x : p) {
        const double u = rng.unit();
        x = u < 0.70 ? 0.97 : u < 0.82 ? 0.05 : rng.unit();
    }
    return p;
}

CorrectnessMatrix answer(const std::vector<double>& p, Rng& rng) {
    CorrectnessMatrix m(p.size());
    for (size_t q = 0; q < p.size(); ++q) {
        for (int r = 0; r < k_repeats; ++r) {
            m[q].push_back(rng.unit() < p[q] ? 1 : 0);
        }
    }
    return m;
}

// Wilson-free binomial standard error of a rate, for the figures' +-.
double rate_se(double rate, double n) {
    return std::sqrt(rate * (1 - rate) / n);
}

// PASS rate of `--max-drop margin` over `sims` experiments of 1,319
// questions at `repeats` a side, where B loses a question (all its repeats
// wrong) with probability `lose` and gains one (A's all wrong) with `gain`.
double sparse_pass_rate(int sims, int repeats, double lose, double gain, double margin) {
    PairedOptions options;
    options.alpha = k_alpha;
    options.bootstrap.resamples = 2000;
    int passed = 0;
    for (int s = 0; s < sims; ++s) {
        Rng rng(900000 + static_cast<std::uint64_t>(s));
        CorrectnessMatrix a(k_questions), b(k_questions);
        for (size_t q = 0; q < k_questions; ++q) {
            const double u = rng.unit();
            const std::uint8_t right_a = u >= lose && u < lose + gain ? 0 : 1;
            const std::uint8_t right_b = u < lose ? 0 : 1;
            a[q].assign(static_cast<size_t>(repeats), right_a);
            b[q].assign(static_cast<size_t>(repeats), right_b);
        }
        options.bootstrap.seed = 31 + static_cast<std::uint64_t>(s);
        auto st = analyse_questions(a, b, options);
        if (!st) {
            fmt::print(stderr, "{}\n", st.error().message);
            std::exit(1);
        }
        passed += non_inferiority(*st, margin).outcome == MarginOutcome::pass ? 1 : 0;
    }
    return passed / static_cast<double>(sims);
}

} // namespace

int main(int argc, char** argv) {
    const int aa_sims = argc > 1 ? std::atoi(argv[1]) : 2000;
    const int ab_sims = argc > 2 ? std::atoi(argv[2]) : 1000;
    Rng world(20251130);
    const auto p = question_probabilities(world);
    double mean_p = 0;
    for (double x : p) {
        mean_p += x;
    }
    mean_p /= static_cast<double>(p.size());
    PairedOptions options;
    options.alpha = k_alpha;
    options.bootstrap.resamples = 2000;

    int aa_verdict = 0, aa_gate_fail = 0, aa_worse = 0, aa_exact = 0;
    for (int s = 0; s < aa_sims; ++s) {
        Rng rng(1000 + static_cast<std::uint64_t>(s));
        const auto a = answer(p, rng);
        const auto b = answer(p, rng);
        options.bootstrap.seed = 77 + static_cast<std::uint64_t>(s);
        auto st = analyse_questions(a, b, options);
        if (!st) {
            fmt::print(stderr, "{}\n", st.error().message);
            return 1;
        }
        const auto v = decide_verdict(*st, "A", "A'", st->test.p_mid, 1);
        aa_verdict += v.kind == VerdictKind::worse || v.kind == VerdictKind::better ? 1 : 0;
        aa_worse += v.kind == VerdictKind::worse ? 1 : 0;
        aa_gate_fail += non_inferiority(*st, 0.0).outcome == MarginOutcome::fail ? 1 : 0;
        aa_exact += st->test.method == SignFlipMethod::exact ? 1 : 0;
    }

    const double aa = aa_sims, ab = ab_sims;
    fmt::print("calibration: {} questions x {} repeats a side, alpha {}, bootstrap {} resamples\n",
               k_questions, k_repeats, k_alpha, options.bootstrap.resamples);
    fmt::print("A/A, {} experiments ({} with the exact sign-flip test):\n", aa_sims, aa_exact);
    fmt::print("  verdict worse or better (false alarm): {:.3f} +- {:.3f} (worse alone {:.3f})\n",
               aa_verdict / aa, rate_se(aa_verdict / aa, aa), aa_worse / aa);
    fmt::print("  gate --max-drop 0 fails (false alarm): {:.3f} +- {:.3f}\n", aa_gate_fail / aa,
               rate_se(aa_gate_fail / aa, aa));
    // The 2-point drop, and a 1-point drop where power is near one
    // half, so the formula is checked where it is not near 1.
    for (const double drop : {k_drop, k_drop / 2}) {
        std::vector<double> q(p.size());
        for (size_t i = 0; i < p.size(); ++i) {
            q[i] = p[i] * (1 - drop / mean_p);
        }
        int ab_detected = 0, ab_gate_fail = 0;
        double predicted = 0, predicted_one_sided = 0, mean_mdd = 0;
        for (int s = 0; s < ab_sims; ++s) {
            Rng rng(500000 + static_cast<std::uint64_t>(s));
            const auto a = answer(p, rng);
            const auto b = answer(q, rng);
            options.bootstrap.seed = 99 + static_cast<std::uint64_t>(s);
            auto st = analyse_questions(a, b, options);
            if (!st) {
                fmt::print(stderr, "{}\n", st.error().message);
                return 1;
            }
            const auto v = decide_verdict(*st, "A", "B", st->test.p_mid, 1);
            ab_detected += v.kind == VerdictKind::worse ? 1 : 0;
            ab_gate_fail += non_inferiority(*st, 0.0).outcome == MarginOutcome::fail ? 1 : 0;
            predicted += power_to_detect(drop, st->se, k_alpha);
            // The gate's one-sided test at alpha is the two-sided formula at 2 alpha.
            predicted_one_sided += power_to_detect(drop, st->se, 2 * k_alpha);
            mean_mdd += st->mdd.value_or(0);
        }
        fmt::print("A/B, true drop {:.1f} points, {} experiments:\n", 100 * drop, ab_sims);
        fmt::print("  verdict worse (detected):              {:.3f} +- {:.3f}; formula predicts "
                   "{:.3f}\n",
                   ab_detected / ab, rate_se(ab_detected / ab, ab), predicted / ab);
        fmt::print("  gate --max-drop 0 fails:               {:.3f} +- {:.3f}; formula predicts "
                   "{:.3f}\n",
                   ab_gate_fail / ab, rate_se(ab_gate_fail / ab, ab), predicted_one_sided / ab);
        fmt::print("  mean minimum detectable difference:    {:.2f} points at 80% power\n",
                   100 * mean_mdd / ab);
    }
    // Rare losses whose true drop is the margin (1 point) or over it.
    struct Sparse {
        int repeats;
        double lose, gain, margin;
    };
    fmt::print("rare losses at the margin, {} experiments each (gate PASS = false pass):\n",
               ab_sims);
    for (const auto& c : {Sparse{1, 0.010, 0.0, 0.010}, Sparse{1, 0.011, 0.001, 0.010},
                          Sparse{1, 0.0115, 0.001, 0.010}, Sparse{3, 0.010, 0.0, 0.010}}) {
        const double rate = sparse_pass_rate(ab_sims, c.repeats, c.lose, c.gain, c.margin);
        fmt::print("  {} repeat{}, {:.2f}% lost, {:.2f}% gained (true drop {:.2f}), --max-drop "
                   "{:.0f}: PASS {:.3f} +- {:.3f}\n",
                   c.repeats, c.repeats == 1 ? "" : "s", 100 * c.lose, 100 * c.gain,
                   100 * (c.lose - c.gain), 100 * c.margin, rate, rate_se(rate, ab));
    }
    return 0;
}
