// The decision-point probe's analysis (docs/probe.md): per comparison of two
// servers on one framing, two measures paired per question on the logit of
// P(open), the probability that the answer opens a think block.
//
//   - direction: the mean shift B - A with a bootstrap interval over
//     questions, an exact or Monte Carlo sign-flip test, and the questions a
//     run needs to detect that shift at 80% power, beside the same figure for
//     the accuracy difference on the same framing;
//   - perturbation: the mean |B - A| against the mean |A - A'| between A's
//     own repeated probes. Prefill at temperature 0 is deterministic on one
//     configuration, so any change beyond that spread means the numerics
//     differ; reported with the number of questions it took.
//
// Pure functions of what load_probes read, like the rest of analysis.
#pragma once

#include <harness/analysis/compare.hpp>
#include <harness/store/store.hpp>
#include <harness/util/result.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace diffeval::analysis {

// The fewest questions with which the direction's two-sided sign-flip test
// (or McNemar's) can reach 0.05 at all: 2 x 2^-6 < 0.05.
inline constexpr int64_t k_probe_min_questions = 6;

// One probe reading of one question (a step-0 response and its chain).
struct ProbeValue {
    double p_open = 0;
    bool bounded = false; // p_open is only an upper bound
};

// Every reading of one probe on one server and framing, by question, then
// repeat (a repeat without a reading is nullopt).
using ProbeSeries = std::map<int, std::vector<std::optional<ProbeValue>>>;

struct ProbeData {
    std::string probe; // "think-open"; empty when the store has no probes
    // (server, framing) -> readings
    std::map<std::pair<std::string, std::string>, ProbeSeries> series;
    // server -> probe responses that carried no log-probabilities
    std::map<std::string, int64_t> without_logprobs;
    // server -> probe requests without a successful response (failed, or
    // never sent)
    std::map<std::string, int64_t> unanswered;
    // (server, framing) -> question -> its dataset and content hash ("" when
    // its row is missing): two servers' readings are paired only where they
    // are of one question.
    std::map<std::pair<std::string, std::string>,
             std::map<int, std::pair<std::string, std::string>>>
        questions;
};

// Read every probe reading stored (schema v8's v_probes).
util::Result<ProbeData> load_probes(store::Store& store);

// One question's point in the scatter: both sides' P(open) (mean over
// repeats) and whether its answer flipped (+1 B gained it, -1 B lost it).
struct ProbePoint {
    int question_idx = 0;
    double p_a = 0;
    double p_b = 0;
    int flipped = 0;
};

struct ProbeDirection {
    int64_t questions = 0; // paired questions with at least one side measured
    double mean_shift = 0; // logits, B - A
    double lo = 0, hi = 0; // 95% percentile bootstrap interval over questions
    double p_value = 1;    // two-sided sign-flip test of the mean shift
    bool exact = false;    // p_value enumerated every sign pattern
    // Monte Carlo, and no resample was as extreme: p_value is 1 / (resamples
    // + 1), the smallest the test can give, not a measured tail.
    bool p_at_floor = false;
    uint32_t resamples = 0; // sign flips drawn when not exact
    double sd = 0;          // standard deviation of the per-question shifts
    // Questions needed to detect this shift at 80% power and alpha 0.05;
    // nullopt when the shift is zero.
    std::optional<int64_t> questions_needed;
};

// "0.5", or at the floor "0.0001 (the floor: none of 10000 sign flips as
// extreme)": the sign-flip p as the probe's lines print it.
std::string probe_p_text(const ProbeDirection& d);

// A logit shift `v` as the probe's lines print it: signed, with three
// decimals or as many more (up to six) as its sign needs to show on a digit
// ("-0.0002", never "-0.000"), and "0.000" when it is 0 at six.
std::string logits_text(double v);

struct ProbePerturbation {
    int64_t questions = 0;                      // questions with A, A' and B readings
    double mean_abs_ab = 0;                     // mean |logit B - logit A|
    double mean_abs_aa = 0;                     // mean |logit A' - logit A| over A's repeats
    double p_value = 1;                         // one-sided sign test: |B - A| exceeds |A' - A|
    bool differ = false;                        // "numerics differ"
    std::optional<int64_t> questions_to_differ; // the first prefix of questions that showed it
    int64_t moved_more = 0; // questions where |B - A| exceeds |A' - A| (beyond ties)
    int64_t moved_less = 0; // ... where it falls below
    // The fewest questions with which the sign test can reach alpha at all
    // (7 at 0.01): with fewer, "numerics differ" cannot be shown, and that
    // it was not says nothing.
    int64_t questions_to_tell = 0;
    double alpha = 0.01; // the test's level
    bool too_few() const { return questions < questions_to_tell; }
};

// The numerics' clause of the probe's line: "numerics differ after 7
// questions (...)", "numerics within the A/A spread over ..." (no question
// moved more than A's own repeats), "numerics not shown to differ ..." or,
// on too few questions, that they cannot be told apart.
std::string numerics_text(const ProbePerturbation& p);

// The accuracy side of the comparison, for "questions needed" beside it.
struct ProbeAccuracy {
    std::string scorer;
    int max_tokens = 0;
    double diff = 0;                         // accuracy B - A
    double shown_diff = 0;                   // as printed (analysis::shown_diff)
    double discordant_rate = 0;              // questions whose accuracy differs / questions
    std::optional<int64_t> questions_needed; // analysis::questions_needed; nullopt at zero
};

struct ProbeComparison {
    std::string probe;
    std::string a; // servers
    std::string b;
    std::string framing;
    int64_t both_bounded = 0; // questions left out: neither side measured the marker
    // Questions left out: one side only bounded, its bound at or above the
    // other side's reading, which says nothing of the direction.
    int64_t bound_above = 0;
    // Questions entered at one side's bound, below the other side's
    // reading: the shift there is at least as large as entered, so the mean
    // and its interval are nearer 0 than the shift may be.
    int64_t bound_entered = 0;
    ProbeDirection direction;
    // Unset when no question has two measured repeats of A and a measured
    // first repeat of B; `a_repeats` says whether A had the two.
    std::optional<ProbePerturbation> perturbation;
    bool a_repeats = false;
    // A had two repeats of a question, bounds or readings.
    bool a_bounded_repeats = false;
    std::optional<ProbeAccuracy> accuracy;
    std::vector<ProbePoint> points;
};

// Settings of compare_probes.
struct ProbeOptions {
    std::uint32_t resamples = 10'000;
    std::uint64_t seed = 20250101;
    double alpha = 0.01; // for "numerics differ" (one-sided) and the report's verdict
};

// Compare server `b` with `a` on `framing`; an error when either has no
// readings there, or when they read different questions under one index
// (different datasets, or a dataset file that changed), as compare refuses
// to pair their answers.
util::Result<ProbeComparison> compare_probes(const ProbeData& data, const std::string& a,
                                             const std::string& b, const std::string& framing,
                                             const ProbeOptions& options = {});

// Attach the accuracy comparison of the same servers and framing: its
// questions needed and the flips that colour the scatter.
void attach_accuracy(ProbeComparison& probe, const Comparison& accuracy);

// `b` against `a` on every framing (or only `framing`, when set) that both
// have probe readings for, each with the first of `accuracy` on the same
// servers and framing attached; the first comparison's error, if any.
util::Result<std::vector<ProbeComparison>>
probe_comparisons(const ProbeData& data, const std::string& a, const std::string& b,
                  const std::optional<std::string>& framing,
                  const std::vector<Comparison>& accuracy, const ProbeOptions& options = {});

// Servers A and B of one probe comparison.
using ServerPair = std::pair<std::string, std::string>;

// The same for every pair, in their order: one call shares the comparisons
// of them all between the machine's two cores.
util::Result<std::vector<ProbeComparison>>
probe_comparisons(const ProbeData& data, const std::vector<ServerPair>& pairs,
                  const std::optional<std::string>& framing,
                  const std::vector<Comparison>& accuracy, const ProbeOptions& options = {});

// attach_accuracy for each of `probes`: the first of `accuracy` on the same
// servers and framing, if any.
void attach_accuracies(std::vector<ProbeComparison>& probes,
                       const std::vector<Comparison>& accuracy);

// "3 probe requests have no successful response (...); run the same command
// again to send them": what ProbeData::unanswered counts, in words.
std::string unanswered_words(int64_t n);

// Whether `server` has a probe reading on some framing.
bool has_readings(const ProbeData& data, const std::string& server);

// One line per server among `servers` whose engine answered probes without
// log-probabilities (the probe is skipped for it, or those readings left
// out), and one per server with probe requests left without a successful
// response.
std::vector<std::string> probe_skipped_notes(const ProbeData& data,
                                             const std::vector<std::string>& servers);

// One line for a report or `diffeval diff`.
std::string probe_line(const ProbeComparison& c);

// The questions `c` left out, in words: "2 questions list no marker on either
// side; 1 question has only a bound on one side at or above the other's
// reading, which tells no direction".
std::string left_out_text(const ProbeComparison& c);

// " (3 of 30 questions enter at one side's bound ...)", or "" when none did.
std::string at_bound_text(const ProbeComparison& c);

// Why `c` has no perturbation: "A has one probe reading per question", or
// B's readings of the questions A read twice are bounds or missing.
std::string no_spread_reason(const ProbeComparison& c);

// The documented JSON shape (docs/json.md, "probes").
nlohmann::json to_json(const ProbeComparison& c);

} // namespace diffeval::analysis
