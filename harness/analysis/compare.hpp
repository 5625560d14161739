// Paired comparison of two groups on the same questions (`diffeval diff`):
// per-question flips, the outcome transition matrix that says where points
// went, the question-level statistics (questions.hpp: difference, interval,
// sign-flip test, run-to-run noise, minimum detectable difference), the
// verdict (verdict.hpp), and the latency tail difference with the part of it
// that longer outputs explain.
#pragma once

#include <harness/analysis/questions.hpp>
#include <harness/analysis/results.hpp>
#include <harness/analysis/verdict.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace diffeval::analysis {

// "server", "server/framing" or "server/framing/max_tokens".
struct Selector {
    std::string server;
    std::optional<std::string> framing;
    std::optional<int> max_tokens;
    std::string text() const;
};

util::Result<Selector> parse_selector(const std::string& text);

struct Flip {
    int question_idx = 0;
    double a = 0; // fraction of A's repeats correct
    double b = 0;
    int64_t a_response_id = 0; // first repeat's response, for excerpts
    int64_t b_response_id = 0;
    std::string a_excerpt;
    std::string b_excerpt;
};

// How much of B's latency difference follows from B writing more tokens:
// fit latency = intercept + ms_per_token * tokens by least squares over A's
// successful responses, predict every response of both groups from its token
// count with that fit, and take the difference of the predicted p99s. What
// remains of the actual p99 difference is B's own speed per request
// (positive: slower; negative: faster).
struct TokenAttribution {
    double intercept_ms = 0;
    double ms_per_token = 0;
    double a_p99_predicted_ms = 0;
    double b_p99_predicted_ms = 0;
    double explained_ms = 0; // b_p99_predicted_ms - a_p99_predicted_ms
};

// Latency percentiles of both groups' successful responses on the paired
// questions, in ms.
struct TailDifference {
    int64_t a_responses = 0;
    int64_t b_responses = 0;
    double a_p50_ms = 0, a_p99_ms = 0, b_p50_ms = 0, b_p99_ms = 0;
    double p50_diff_ms() const { return b_p50_ms - a_p50_ms; }
    double p99_diff_ms() const { return b_p99_ms - a_p99_ms; }
    // 95% percentile bootstrap interval of the p99 difference, resampling
    // the paired questions (each with all its responses on both sides); it
    // holds which questions were asked, not run-to-run timing noise. Unset
    // when a side has fewer than k_tail_min_responses successful responses or
    // fewer than two questions have one on both sides.
    std::optional<Interval> p99_diff_ci;
    std::uint32_t p99_resamples = 0;
    std::uint64_t p99_seed = 0;
    // Unset when A's responses carry fewer than two distinct token counts,
    // or when their latency does not grow with them (tokens_flat).
    std::optional<TokenAttribution> from_tokens;
    // A's least-squares slope of latency on token count is at or below 0:
    // a fit where longer outputs come back sooner explains nothing (against
    // a server that answers at once the slope is noise around 0), so no part
    // of the p99 difference is put down to output lengths.
    bool tokens_flat = false;
    // B's p99 response is far outside the token counts A's fit was made on
    // (more than k_fit_reach times its longest, or under its shortest over
    // k_fit_reach): the fit would be carried thousands of tokens past its
    // data (an audit's 57-73-token fit "explained" +3,035 ms of a +113 ms
    // difference at 200,000 tokens), so nothing is attributed. The range and
    // B's p99 token count are kept to say so.
    bool tokens_beyond_fit = false;
    int64_t a_fit_tokens_min = 0, a_fit_tokens_max = 0;
    double b_p99_tokens = 0;
    static constexpr double k_fit_reach = 2.0;
    // How much of the p99 difference follows from output lengths:
    // from_tokens's, 0 when tokens_flat, unset when no fit was made.
    std::optional<double> explained_ms() const {
        if (from_tokens) {
            return from_tokens->explained_ms;
        }
        return tokens_flat ? std::optional<double>(0.0) : std::nullopt;
    }
};

// Successful responses a side needs for the p99 difference's interval: 10
// beyond its p99. A p99 of fewer rests on one or two responses, and
// resampling them gives an interval far narrower than the p99's real spread
// (a demo of 144 responses a side printed [-35, -32] ms for one run's
// scheduling stall).
inline constexpr size_t k_tail_min_responses = 1000;

// The tail difference of `b` against `a` (each a group's responses); unset
// when either has no successful response.
std::optional<TailDifference> tail_difference(const std::vector<const ResultRow*>& a,
                                              const std::vector<const ResultRow*>& b);

// The states a comparison's transition tables count: each scorers::Outcome
// (its value), then k_unsent_state: a planned request with no response
// stored (a run stopped before it had one), which counts as a wrong answer
// where it is paired and is no server's error.
inline constexpr int k_unsent_state = scorers::k_outcome_count;
inline constexpr int k_transition_states = scorers::k_outcome_count + 1;

// The outcome's name (scorers::outcome_name), or "unsent".
std::string_view transition_state_name(int state);

// A result row's state: k_unsent_state for a planned request with no
// response row, else its outcome's value.
int transition_state(const ResultRow& row);

struct Comparison {
    std::string scorer;
    Selector a; // fully resolved
    Selector b;
    std::string dataset_a; // the dataset each side's questions came from
    std::string dataset_b;
    int64_t questions = 0; // paired: answered in both groups
    // Questions each group holds: A's with a successful response (all of
    // A's when it answered none), B's with any request; more than
    // `questions` when the groups ran different subsets (a --limit, a shard,
    // a stopped run), and the verdict sentence then says so.
    int64_t questions_a = 0, questions_b = 0;
    // A's (the baseline's) planned requests never sent (a run stopped
    // first), left out of the pairing and of questions_a; 0 when A answered
    // nothing, whose requests then count as failed (no evidence).
    // B's (the candidate's) count as wrong answers (behaviour_b.unsent): an
    // incomplete candidate can look worse, never better.
    int64_t unsent_a = 0;
    // A's requests that failed (no successful response), left out the same
    // way; 0 when A answered nothing.
    int64_t failed_a = 0;
    // B's requests with no response stored on the paired questions, left
    // out of the pairing (CompareOptions::leave_out_unsent_b; 0 otherwise).
    int64_t unsent_b_left_out = 0;
    // Response pairs counted in the transitions: every repeat of A with
    // every repeat of B on the same question (repeat numbers are only
    // identifiers, so none is paired with "its" counterpart).
    int64_t paired_responses = 0;
    double accuracy_a = 0;
    double accuracy_b = 0;
    QuestionStats stats;        // question-level statistics, B - A
    Verdict verdict;            // set by assign_verdicts
    std::vector<Flip> a_better; // sorted by a - b, largest first
    std::vector<Flip> b_better;
    // transitions[i][j]: response pairs with A's state i and B's state j
    // (transition_state_name: the outcomes, then unsent); lost/gained: of
    // those, A right and B wrong, and the reverse.
    int64_t transitions[k_transition_states][k_transition_states] = {};
    int64_t lost[k_transition_states][k_transition_states] = {};
    int64_t gained[k_transition_states][k_transition_states] = {};
    std::optional<TailDifference> latency; // unset when a side has no successful response
    // Each side's responses on the paired questions: the gate's behaviour
    // checks compare rates among those answered, over the questions where
    // both sides answered, so neither a side's own extra questions nor its
    // failed requests move them.
    // `finish_recorded`: those answered whose finish state is known (not an
    // import's; a side with none has no never-finished rate). `token_counted`:
    // those answered that report usage.completion_tokens.
    //
    // The rates are per question, as summary's breakdown counts: each
    // question's share of its answered (for never finished: recorded)
    // responses, summed over the questions where both sides have such a
    // response, so a question asked in more repeats weighs no more than
    // another; where the questions' numbers of responses differ (uneven),
    // the rates are not those of the responses pooled.
    struct Rate {
        double shares = 0;
        int64_t questions = 0; // the same on both sides
        int64_t responses = 0; // the responses the shares are of
        int64_t fewest = 0, most = 0;
        // One question's `share` of its `n` responses.
        void add(int64_t n, double share) {
            fewest = questions == 0 ? n : std::min(fewest, n);
            most = questions == 0 ? n : std::max(most, n);
            shares += share;
            responses += n;
            ++questions;
        }
        bool uneven() const { return fewest != most; }
        double value() const {
            return questions > 0 ? shares / static_cast<double>(questions) : 0.0;
        }
    };
    struct Behaviour {
        int64_t responses = 0, answered = 0, finish_recorded = 0, token_counted = 0;
        // Of `responses`, planned requests never sent (no response row),
        // which count as wrong answers: B's always, A's only when A answered
        // nothing (compare() leaves A's out otherwise).
        int64_t unsent = 0;
        Rate started_reasoning; // among the answered responses
        Rate never_finished;    // among those whose finish was recorded
    };
    Behaviour behaviour_a, behaviour_b;
    // Where B has requests with no response stored (behaviour_b.unsent), the
    // difference over the paired questions none of whose B requests is
    // unsent: what the answers say apart from the run's stop. Unset when B
    // has none unsent.
    struct WithoutUnsent {
        int64_t questions = 0;
        double diff = 0; // mean of B - A over those questions (0 when none)
        int64_t a_better = 0, b_better = 0;
    };
    std::optional<WithoutUnsent> without_unsent;
    // Mean completion tokens of each side over the paired questions where
    // both have an answer that reports usage.completion_tokens (per question
    // the mean of its counted answers, then the mean over those questions):
    // the gate's token check compares these, so a side that failed on its
    // longest questions, or ran other questions, does not look cheaper.
    // Both 0 when `token_questions` is 0.
    int64_t token_questions = 0;
    double tokens_a = 0, tokens_b = 0;
};

struct CompareOptions {
    PairedOptions paired; // bootstrap, alpha, power
    // Leave B's requests with no response stored out of the pairing too, as
    // A's are (behaviour_b.unsent then 0): `plan` sizes a run from the
    // model's variance, which a stopped pilot's unsent requests, counted as
    // wrong, are not (an audit: 4,827 questions asked for from a killed A/A
    // pilot whose answered questions all agreed).
    bool leave_out_unsent_b = false;
};

// Compare every group matching `a` with its counterpart under `b` (dimensions
// `b` leaves open are matched to A's). No matching pair is a usage error of
// kind no_match (a report passes over it) that lists the groups present. A pure function of
// `results` (flips come without excerpts; see fill_excerpts), so comparisons can run on several
// threads.
util::Result<std::vector<Comparison>> compare(const Results& results, const Selector& a,
                                              const Selector& b, size_t scorer,
                                              const CompareOptions& options = {});

// Each group matching `a` whose counterpart under `b` holds no row (a
// framing or token limit the other side never ran), as (A's group, the B
// group it would pair with); compare() passes over them.
std::vector<std::pair<Selector, Selector>> unmatched_groups(const Results& results,
                                                            const Selector& a, const Selector& b);

// How many paired requests of each side of `c` failed (no successful
// response, a response stored; unsent ones are unsent_text's), each
// counted as a wrong answer:
// "10 of flaky/raw/256's 30 requests", A's first, "; "-joined; empty when
// every request answered. The verdict's sentence and `plan` end with it.
std::string unanswered_text(const Comparison& c);

// The sentences on A's requests without a successful response (left out of
// the pairing) and B's never sent (counted as wrong answers), each starting
// with a space; empty when none.
std::string unsent_text(const Comparison& c);

// Decide every comparison's verdict (verdict.hpp) with their p-values
// Holm-adjusted together; `margin` (a proportion) asks for equivalence.
void assign_verdicts(std::vector<Comparison>& comparisons, std::optional<double> margin = {});

// Read from `store` what the comparison's scorer extracted (answer_excerpt,
// cut to `chars`) for the first `max_flips` flips each way of every comparison.
void fill_excerpts(std::vector<Comparison>& comparisons, store::Store& store, size_t max_flips,
                   size_t chars = 100);

// The interval of `s` times `scale` under JSON's "ci95" names: null at an
// --alpha other than 0.05, where it is not the 95% interval (diff's `ci`,
// the gate's `ci_points` hold it at its confidence).
nlohmann::json ci95_json(const QuestionStats& s, double scale);

// The documented JSON shape ("diffeval.diff/1").
nlohmann::json to_json(const std::vector<Comparison>& comparisons);

// unmatched_groups' pairs as the JSON outputs list them under
// "not_compared": [{"a": "a/chat/256", "b": "b/chat/256"}].
nlohmann::json not_compared_json(const std::vector<std::pair<Selector, Selector>>& unmatched);

} // namespace diffeval::analysis
