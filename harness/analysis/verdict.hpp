// The one place that decides what a paired comparison means. `diffeval diff`,
// summary.json, report.md, report.html and the gate print the words and
// numbers of these verdicts and nothing else, so no sentence anywhere can
// contradict a number printed beside it.
//
// The verdicts (differences are candidate B minus baseline A):
//   - worse / better: the sign-flip test rejects "no difference" at alpha
//     after Holm's adjustment over the comparisons shown together, and the
//     (1 - alpha) bootstrap interval excludes 0 on the same side;
//   - equivalent within +-m (only when a margin m is given, and it takes
//     precedence): the two one-sided tests at alpha both reject, i.e. the
//     (1 - 2 alpha) interval lies inside (-m, +m);
//   - no detectable difference: anything else; the sentence gives the
//     interval and the minimum detectable difference.
// The gate's margin check is a non-inferiority test at one-sided alpha:
// pass when the one-sided lower bound is above -X, fail when the one-sided
// upper bound is below -X, inconclusive otherwise.
#pragma once

#include <harness/analysis/questions.hpp>

#include <cstddef>
#include <optional>
#include <string>

namespace diffeval::analysis {

enum class VerdictKind { worse, better, no_detectable_difference, equivalent };

struct Verdict {
    VerdictKind kind = VerdictKind::no_detectable_difference;
    double p_adjusted = 1.0;      // Holm-adjusted sign-flip mid-p
    std::size_t comparisons = 1;  // how many p-values were adjusted together
    std::optional<double> margin; // proportion, when equivalence was asked for
    // No detectable difference where the interval and the test disagree
    // (one excludes 0, the other does not); its words say which.
    bool borderline = false;
    std::string words;    // "worse", "no detectable difference", "equivalent within +-1.0 points"
    std::string sentence; // one sentence with the numbers it rests on
};

// The verdict of `stats` comparing `b` (candidate) with `a` (baseline), with
// its mid-p adjusted to `p_adjusted` over `comparisons` comparisons.
Verdict decide_verdict(const QuestionStats& stats, const std::string& a, const std::string& b,
                       double p_adjusted, std::size_t comparisons,
                       std::optional<double> margin = {});

// The word of `kind` ("worse", "better", "no detectable difference", "equivalent").
const char* verdict_name(VerdictKind kind);

// Outcome of a non-inferiority test against a largest tolerated drop.
enum class MarginOutcome { pass, fail, inconclusive };

struct MarginCheck {
    MarginOutcome outcome = MarginOutcome::inconclusive;
    double max_drop = 0; // proportion
    std::string sentence;
};

// Non-inferiority of `stats` at one-sided alpha for a largest tolerated drop
// `max_drop` (a proportion, >= 0); the sentence names the bounds compared
// and, when inconclusive, the minimum detectable difference.
MarginCheck non_inferiority(const QuestionStats& stats, double max_drop);

// Run-to-run noise of both sides in one sentence: per side "not measured (1
// repeat)", "none: ... a deterministic server" or the standard deviation of
// accuracy a re-run would show; then the share of the interval's variance
// that repeat noise accounts for, when both were measured.
std::string noise_sentence(const QuestionStats& stats, const std::string& a, const std::string& b);

// A difference in points with its sign and one decimal, never "-0.0": "+1.2",
// "-3.0", "0.0".
std::string signed_points(double proportion);

} // namespace diffeval::analysis
