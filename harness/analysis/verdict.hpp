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
//     interval and the minimum detectable difference;
//   - no evidence, before all of these: a side has no successful response
//     on the compared questions (every request failed or has no response stored), so
//     its accuracy, all wrong answers, says nothing of the model.
// With at most four questions no sign-flip test reaches p < 0.05, and the
// percentile bootstrap's bound on a side some question moved towards is the
// most extreme question itself: such a bound decides neither equivalence nor
// a margin's pass (the exact count bound, used where no question moved, does).
// The gate's margin check is a non-inferiority test at one-sided alpha:
// pass when the one-sided lower bound is above -X, fail when the one-sided
// upper bound is below -X, inconclusive otherwise; no evidence fails it.
#pragma once

#include <harness/analysis/questions.hpp>

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>

namespace diffeval::analysis {

enum class VerdictKind { worse, better, no_detectable_difference, equivalent, no_evidence };

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
    // What `sentence` ends with after its numbers (set by assign_verdicts):
    // how many requests of each side have no answer, and that the groups
    // were paired on fewer questions than each ran; "" or sentences each
    // led by a space. A report's own wording of the verdict ends with it too.
    std::string caveats;
};

// The verdict of `stats` comparing `b` (candidate) with `a` (baseline), with
// its mid-p adjusted to `p_adjusted` over `comparisons` comparisons.
Verdict decide_verdict(const QuestionStats& stats, const std::string& a, const std::string& b,
                       double p_adjusted, std::size_t comparisons,
                       std::optional<double> margin = {});

// The word of `kind` ("worse", "better", "no detectable difference", "equivalent",
// "no evidence").
const char* verdict_name(VerdictKind kind);

// Outcome of a non-inferiority test against a largest tolerated drop.
enum class MarginOutcome { pass, fail, inconclusive, no_evidence };

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
// repeat)", not measured for too few successful repeats (failed requests
// agree as wrong answers, which no server's determinism shows), "none seen:
// ... right or wrong alike on every question" or the standard deviation of
// accuracy a re-run would show; then the share of the interval's variance
// that repeat noise accounts for, when both were measured.
std::string noise_sentence(const QuestionStats& stats, const std::string& a, const std::string& b);

// The two sides' repeats per question: "1 repeat each", "3 and 1 repeats",
// and with uneven repeats their range, "1 to 5 repeats each".
std::string repeats_text(const SideNoise& a, const SideNoise& b);

// Why a comparison has no minimum detectable difference: the sides agree on
// every question, too few questions for the test to reach alpha at all
// (QuestionStats::smallest_p), or every question differs by the same amount
// (no spread in the per-question differences).
std::string no_spread_text(const QuestionStats& s);

// What `s`'s minimum detectable difference (set) says of `run` ("the run",
// "this run"), its points with `decimals` decimals: "the run detects
// differences of 2.3 points or more at 80% power", or past 100 points "the
// run detects no difference at 80% power: it would take 113.2 points, more
// than there are" (a 5-question run "detected differences of 113.2 points or
// more": a statistics audit). The verdicts, the margin and the gate's note
// say it so.
std::string detects_text(const QuestionStats& s, std::string_view run, int decimals = 1);

// Whether a side of `s` has no successful response on the compared
// questions: the verdict is then "no evidence", and the margin check fails.
bool has_no_evidence(const QuestionStats& s);

// "-5.5 points, 95% CI [-13.9, +2.1]": the difference and its two-sided
// interval as every sentence of a comparison with verdict `kind` prints them.
// A worse or better whose accuracies print alike gives the exact difference
// and bounds with as many decimals as show their sign, never "0.0 points".
std::string difference_text(const QuestionStats& s, VerdictKind kind);

// A difference in points with its sign and one decimal, never "-0.0": "+1.2",
// "-3.0", "0.0".
std::string signed_points(double proportion);

// An accuracy (a proportion) as every table and sentence prints it: percent
// with one decimal, "83.3".
std::string accuracy_text(double proportion);

// The difference B - A (a proportion) that a reader gets by subtracting the
// two accuracies as printed (accuracy_text). Sentences and tables print this
// one, so "83.3% -> 77.8%" is followed by "-5.5 points", never by the
// rounded exact difference "-5.6"; it lies within 0.1 point of the exact
// difference, which JSON keeps.
double shown_diff(double accuracy_a, double accuracy_b);
double shown_diff(const QuestionStats& stats);

// A bound of an interval (a proportion) in points with its sign: one
// decimal, or as many more (up to eight) as it takes to leave it on the same
// side of each of `thresholds` as its exact value, so a bound of -0.04
// points beside "excludes 0" reads "-0.04", not "0.0".
std::string bound_text(double proportion, std::initializer_list<double> thresholds);

// An interval as printed beside the shown difference `shown` (shown_diff):
// "[lo, hi]", each bound by bound_text; a bound that one decimal would put
// on the inner side of the shown difference is printed as that difference
// (rounded outward), so the printed interval always holds it.
std::string interval_text(double lo, double hi, double shown,
                          std::initializer_list<double> thresholds);

// A margin or tolerated drop (a proportion) in points as the user gave it:
// one decimal, or more when one would change it ("1.0", "0.25").
std::string margin_text(double proportion);

} // namespace diffeval::analysis
