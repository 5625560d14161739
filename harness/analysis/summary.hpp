// Per-group summaries, the shape of the article's two tables: the harness
// verdicts (accuracy per scorer, mean and range over repeats) and where the
// responses went (started reasoning, never finished, finished, finished
// accuracy, tokens), plus latency and output-token percentiles and the
// request rate achieved. A group is server x framing x max_tokens.
#pragma once

#include <harness/analysis/results.hpp>
#include <harness/store/readers.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace diffeval::analysis {

// Counts for one repeat (one run over the questions) of a group.
struct RepeatBreakdown {
    int repeat = 0;
    int64_t responses = 0;
    int64_t started_reasoning = 0;
    int64_t finished = 0;
    int64_t stop_truncated = 0;
    int64_t length_truncated = 0;
    int64_t other = 0;
    int64_t errors = 0;
    int64_t unrecorded = 0;                // imported answers whose finish state no one recorded
    std::vector<int64_t> correct;          // per scorer
    std::vector<int64_t> invalid;          // per scorer
    std::vector<int64_t> finished_correct; // per scorer
    // Over the responses that reported usage.completion_tokens; unset when
    // none did.
    std::optional<double> mean_completion_tokens;
    int64_t never_finished() const { return stop_truncated + length_truncated + other; }
};

// Mean, minimum and maximum of a value over repeats.
struct Spread {
    double mean = 0, min = 0, max = 0;
};

struct ScorerSummary {
    std::vector<double> accuracy; // per repeat
    Spread spread;
    double invalid_rate = 0; // over all repeats
    // Over the repeats with a finished answer; unset when no repeat has one.
    std::optional<Spread> finished_accuracy;
};

// Speed of a group over all its repeats. Latencies and tokens count
// successful responses only (an error's latency is a timeout or a refusal,
// not generation), and latencies only those that were timed (an import's
// were not); percentiles interpolate like numpy. Optional fields are unset
// when nothing was measured (TTFT exists only for --stream runs).
struct LatencySummary {
    int64_t responses = 0;                                 // successful responses timed
    double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0; // meaningless when responses is 0
    std::optional<double> ttft_p50_ms, ttft_p99_ms;
    std::optional<double> tokens_p50, tokens_p99, tokens_mean; // completion tokens
    // All timed responses (errors too) over the time some of them were in
    // flight (the union of their spans); unset when that time is empty.
    std::optional<double> requests_per_s;
};

// A group's name as every table, sentence and error prints it:
// "server/framing/max_tokens".
std::string group_label(const std::string& server, const std::string& framing, int max_tokens);

struct GroupSummary {
    std::string server;
    std::string framing;
    int max_tokens = 0;
    std::string label() const { return group_label(server, framing, max_tokens); }
    int64_t questions = 0; // distinct questions answered or planned
    std::vector<RepeatBreakdown> repeats;
    std::vector<ScorerSummary> scorers; // in Results::scorers order
    // Some question has fewer responses than the group has repeats: its
    // repeats ran different questions (a later run added repeats on a
    // --limit). The unit is the question, so the accuracy mean and the
    // breakdown's means are then taken per question (the share of its
    // repeats) and summed or averaged over the questions, not over repeats
    // of different questions; with every question in every repeat the two
    // are the same.
    bool uneven = false;
    // Means over repeats of the breakdown counts (per question when uneven:
    // each question's share of its responses, summed over the questions).
    double started_reasoning = 0, never_finished = 0, stop_truncated = 0, length_truncated = 0,
           other = 0, finished = 0, errors = 0, unrecorded = 0;
    // The mean over the repeats that have one; unset when none has.
    std::optional<double> mean_completion_tokens;
    LatencySummary latency;
};

struct Summary {
    std::vector<std::string> scorers;
    std::string score_text;
    std::vector<GroupSummary> groups; // servers in stored order, then framing, then max_tokens
};

Summary summarize(const Results& results);

// Whether some group of `summary` holds an answer whose finish state is
// unrecorded (an import): tables and JSON then show that outcome.
bool any_unrecorded(const Summary& summary);

// The latency summary of `rows` (any subset of one group's responses).
// The stretches between `rows`' timed requests when none was in flight
// (sent to answered), in order: the idle time between runs of a database.
std::vector<std::pair<double, double>> idle_gaps(const std::vector<const ResultRow*>& rows);
// One group's latency, tokens and rate; its requests per second leave out
// the `idle` stretches (idle_gaps of the whole database).
LatencySummary summarize_latency(const std::vector<const ResultRow*>& rows,
                                 const std::vector<std::pair<double, double>>& idle = {});

// The documented JSON shape (docs/json.md, "diffeval.summary/2"), with
// each group's `completeness` (store::completeness) when given.
nlohmann::json to_json(const Summary& summary,
                       const std::vector<store::GroupCompleteness>* completeness = nullptr);

// "shard 3/4", "shards 1/2, 3/4": store::GroupCompleteness::missing_shards
// as the messages name them.
std::string shards_text(const std::vector<std::string>& shards);

// What `g` lacks, as a phrase ("2819 planned requests never sent, 12
// requests never planned (the run stopped first), no run of shard 1/2 (24
// requests)"). Empty when it lacks nothing.
std::string gaps_text(const store::GroupCompleteness& g);

// The sentence said under a table whose err column counts planned requests
// without a response (report.md, the gate's step summary; `summary` says it
// per group): "Errors include planned requests without a response (...),
// over all repeats: b/raw/256 69, ..."; empty when no group has one.
std::string unsent_errors_text(const std::vector<store::GroupCompleteness>& groups);

// What to do about places a run asked for and never planned: run again, or,
// when every run that left them failed
// (store::GroupCompleteness::unplanned_by_failed_runs), first mend what
// stopped it, as running it again unchanged fails the same way.
std::string unplanned_advice(bool by_failed_runs);

} // namespace diffeval::analysis
