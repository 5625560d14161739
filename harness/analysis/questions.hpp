// Question-level paired statistics: everything a verdict about "B against A"
// is drawn from, with the question as the unit of analysis.
//
// Each side may answer a question several times (repeats). A repeat number is
// only an identifier: which of several identical requests became "repeat 0"
// depends on arrival order, so repeats are never paired with each other.
// Instead each side's repeats of a question are averaged, and the paired
// difference of those means is the per-question observation. From those:
//   - the accuracy difference (their mean), a paired bootstrap interval over
//     questions and, beside it, the analytic clustered standard error (Miller
//     2024, "Adding Error Bars to Evals", paired form);
//   - a sign-flip permutation test of "no difference" (exact by a lattice
//     convolution when it is small enough, seeded Monte Carlo otherwise); with
//     one repeat per side it is McNemar's exact test;
//   - the run-to-run noise: the within-question variance between repeats,
//     as the standard deviation of accuracy a re-run would show;
//   - the minimum detectable difference and power at the run's alpha;
//   - Holm's adjustment of several p-values, and a plan for a larger run.
// All are pure functions; the only randomness is seeded (rng.hpp).
#pragma once

#include <harness/analysis/stats.hpp>
#include <harness/util/result.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace diffeval::analysis {

// Correctness of one side: `[question][repeat]`, each 0 or 1. Questions may
// have different numbers of repeats (a missing response), at least one each.
using CorrectnessMatrix = std::vector<std::vector<std::uint8_t>>;

// How the sign-flip test's p-value was computed.
enum class SignFlipMethod {
    exact,       // the whole permutation distribution, by convolution on a lattice
    monte_carlo, // seeded random sign vectors
};

struct SignFlipOptions {
    // The per-question differences are multiples of 1 / `lattice` (the
    // least common multiple of the repeat counts); 0 when unknown, which
    // forces Monte Carlo.
    std::uint32_t lattice = 0;
    // Largest (differing questions) x (lattice sum) the exact convolution
    // may cost; beyond it Monte Carlo is used.
    std::uint64_t max_exact_work = 200'000'000;
    std::uint32_t draws = 20'000; // Monte Carlo sign vectors
    std::uint64_t seed = k_default_bootstrap_seed;
};

// Two-sided sign-flip permutation test of "the per-question differences are
// symmetric about zero", with statistic T = their sum.
struct SignFlipResult {
    double p = 1.0; // P(|T| >= |t|) under random signs
    // P(|T| > |t|) + P(|T| = |t|) / 2, and 1 when t = 0 (the doubled
    // one-sided mid-p, as McNemar's): the mid-p the reports show.
    double p_mid = 1.0;
    std::uint64_t differing = 0; // questions whose difference is not zero
    SignFlipMethod method = SignFlipMethod::exact;
    std::uint32_t draws = 0; // Monte Carlo only
    std::uint64_t seed = 0;  // Monte Carlo only
};

// The sign-flip test on `d` (per-question differences in [-1, 1]). No
// differing question gives p = 1. Fails on an empty span or a value outside
// [-1, 1].
util::Result<SignFlipResult> sign_flip_test(std::span<const double> d,
                                            const SignFlipOptions& options = {});

// Why a side's run-to-run noise is not measured.
enum class NoiseGap {
    none,            // measured
    one_repeat,      // fewer than half the questions have 2+ repeats
    too_few_answers, // repeats agree, but fewer than half the questions have
                     // 2+ answered ones (the rest failed): nothing was compared
};

// Run-to-run noise of one side.
struct SideNoise {
    std::uint32_t repeats = 0; // the repeats most questions have
    // Uneven repeats (a later run added repeats on fewer questions): the
    // fewest and most any question has, and how many questions have 2+,
    // whose repeats the noise is measured from.
    std::uint32_t fewest_repeats = 0;
    std::uint32_t most_repeats = 0;
    std::uint64_t several = 0;
    std::uint32_t fewest_of_several = 0; // the fewest repeats among those `several`
    bool uneven() const { return fewest_repeats != most_repeats; }
    // At least half the questions have 2+ repeats, and when no question's
    // repeats disagree, at least half have 2+ answered ones: failed requests
    // that agree because they all count as wrong measure no server.
    bool measured = false;
    NoiseGap gap = NoiseGap::one_repeat; // why not `measured`
    bool deterministic = false;          // measured, and every question's repeats agree
    double within_variance = 0;          // mean over questions of the repeats' sample variance
    // Standard deviation of this side's accuracy (each question's mean over
    // its k_i repeats, averaged) over one re-run of the same questions and
    // repeats: sqrt(within_variance * sum(1 / k_i)) / questions, as a
    // proportion.
    double rerun_sd = 0;
};

// Settings for `analyse_questions`.
struct PairedOptions {
    BootstrapOptions bootstrap; // its confidence is 1 - alpha
    double alpha = 0.05;        // two-sided level, in (0, 0.5]
    double power = 0.8;         // for the minimum detectable difference, in [0.5, 1)
    std::uint32_t sign_flip_draws = 20'000;
};

// Everything drawn from two sides' correctness on the same questions.
struct QuestionStats {
    std::uint64_t questions = 0;
    double accuracy_a = 0, accuracy_b = 0; // means of per-question means
    double diff = 0;                       // accuracy_b - accuracy_a
    std::uint64_t a_better = 0;            // questions whose mean is higher in A
    std::uint64_t b_better = 0;
    // B - A, at confidence 1 - alpha. With no question better in A (in B),
    // or fewer than few_moves(alpha) differing in all, the lower (upper)
    // bounds are at most (at least) the exact count bounds
    // (docs/statistics.md), not the bootstrap's alone.
    BootstrapInterval interval;
    double sd_diff = 0; // sample sd of the per-question differences
    double se = 0;      // clustered standard error of `diff`: sd_diff / sqrt(questions)
    SignFlipResult test;
    SideNoise noise_a, noise_b;
    // Share of the variance of `diff` (se^2) that within-question repeat
    // noise accounts for, in [0, 1]; unset unless both sides' noise is measured.
    std::optional<double> noise_share;
    double alpha = 0.05;
    double power = 0.8;
    // Smallest true difference detected with `power` at `alpha`; unset when
    // the sides agree on every question (no variance to size it from), when
    // a side has no successful response (its differences are failures), or
    // when `smallest_p` is set.
    std::optional<double> mdd;
    // The MDD comes from the printed interval's width (an exact count bound
    // at an end), not from the sd of the per-question differences.
    bool mdd_from_interval = false;
    // The sign-flip test's smallest attainable mid-p with these questions
    // (every one differing, all the same way: 2^-questions), set when it is
    // not below `alpha`: then no difference, however large, is detectable.
    std::optional<double> smallest_p;
    // The exact count bound stands in at the interval's lower (upper) end:
    // no question moved that way, or too few moved at all for the
    // bootstrap's bound to be one. Such an end is a valid bound however few
    // the questions, and decides (verdict.cpp).
    bool count_bound_lower = false;
    bool count_bound_upper = false;
    // Successful responses on these questions per side (from the answered
    // counts; every repeat when none were given). A side with none has no
    // answer to compare: its every response failed or has no response stored, and
    // counts as wrong, so its accuracy says nothing of the model.
    std::uint64_t answered_a = 0, answered_b = 0;
};

// The fewest questions, all moved the same way, in which the sign-flip test
// can find a difference at two-sided `alpha` (5 at 0.05: mid-p 2^-5). With
// fewer differing, both ends of the interval are at least as wide as the
// exact count bounds (docs/statistics.md).
std::uint64_t few_moves(double alpha);

// Answered (successful) repeats per question, in a matrix's order.
using AnsweredCounts = std::vector<std::uint32_t>;

// Analyse `a` and `b` (the same questions in the same order); `answered_a`
// and `answered_b` count each question's answered repeats for the noise
// (empty: every repeat answered). `noise_b`, when given, is each question's
// B repeats that have a response stored (a stopped run's unsent ones, which
// `b` counts as wrong, left out; a row may be empty): B's run-to-run noise,
// and its part of the noise share, are measured on those alone. Fails when
// they differ in length, are empty, a question has no repeat, or a value is
// not 0/1.
util::Result<QuestionStats> analyse_questions(const CorrectnessMatrix& a,
                                              const CorrectnessMatrix& b,
                                              const PairedOptions& options = {},
                                              const AnsweredCounts& answered_a = {},
                                              const AnsweredCounts& answered_b = {},
                                              const CorrectnessMatrix* noise_b = nullptr);

// Power of the two-sided test at `alpha` to detect a true difference `delta`
// when the estimate has standard error `se` (normal approximation).
double power_to_detect(double delta, double se, double alpha);

// Smallest difference detected with `power` at two-sided `alpha` for standard
// error `se`: (z(1 - alpha/2) + z(power)) * se.
double minimum_detectable(double se, double alpha, double power);

// Holm's step-down adjustment of `p` (same order out), each capped at 1.
std::vector<double> holm_adjust(std::span<const double> p);

// The most questions a plan asks for: a smaller drop needs more, and a
// count past this (no dataset has it) is printed as more than it.
inline constexpr std::uint64_t k_questions_cap = 1'000'000'000'000'000;

// A plan for a run that would detect `drop` (a proportion) at `alpha` with
// `power`, from a pilot's per-question variance split into what repeats
// average away (within-question noise) and what they do not.
struct PlanRow {
    std::uint32_t repeats = 1;   // per side
    std::uint64_t questions = 0; // needed; 0 when no question of the pilot differed
    double sd_diff = 0;          // expected sd of per-question differences at these repeats
    // Raised to k_min_differing / (the pilot's share of differing questions):
    // the normal approximation asked for fewer questions than the exact
    // test needs differing to have the power it promises.
    bool raised = false;
};
// Questions expected to differ that the plan asks for at least: the normal
// approximation of a sign test is fair from about ten (Agresti, Categorical
// Data Analysis, 3rd ed., 2013, §1.4); with fewer the exact test's discrete
// steps leave far less power than the formula says.
inline constexpr double k_min_differing = 10.0;
struct Plan {
    double between_variance = 0; // variance of the true per-question effect
    double within_a = 0, within_b = 0;
    std::vector<PlanRow> rows; // for 1, 2, 3, 5 and 10 repeats
};

// Questions needed to detect `drop` (a proportion) at two-sided `alpha` with
// `power` in a run like the pilot's, at its own repeats per side: the
// pilot's variance of per-question differences as measured, raised as a
// PlanRow is. 0 when `drop` is 0 or no question differed. The verdict's smallest
// detectable difference (minimum_detectable) and `plan` agree with it.
std::uint64_t questions_needed(const QuestionStats& stats, double drop, double alpha, double power);

// The plan from a pilot's `stats` (both sides' noise measured, else the
// within variance is taken as 0 and every row shows the pilot's sd).
Plan plan_run(const QuestionStats& stats, double drop, double alpha, double power);

} // namespace diffeval::analysis
