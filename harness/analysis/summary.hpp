// Per-group summaries, the shape of the article's two tables: the harness
// verdicts (accuracy per scorer, mean and range over repeats) and where the
// responses went (started reasoning, never finished, finished, finished
// accuracy, tokens). A group is server x framing x max_tokens.
#pragma once

#include <harness/analysis/results.hpp>

#include <nlohmann/json.hpp>

#include <string>
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
    std::vector<int64_t> correct;          // per scorer
    std::vector<int64_t> invalid;          // per scorer
    std::vector<int64_t> finished_correct; // per scorer
    double mean_completion_tokens = 0;
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
    Spread finished_accuracy;
};

struct GroupSummary {
    std::string server;
    std::string framing;
    int max_tokens = 0;
    int64_t questions = 0;
    std::vector<RepeatBreakdown> repeats;
    std::vector<ScorerSummary> scorers; // in Results::scorers order
    // Means over repeats of the breakdown counts.
    double started_reasoning = 0, never_finished = 0, stop_truncated = 0, length_truncated = 0,
           other = 0, finished = 0, errors = 0, mean_completion_tokens = 0;
};

struct Summary {
    std::vector<std::string> scorers;
    std::string score_text;
    std::vector<GroupSummary> groups; // servers in stored order, then framing, then max_tokens
};

Summary summarize(const Results& results);

// The documented JSON shape (docs/json.md, "diffeval.summary/1").
nlohmann::json to_json(const Summary& summary);

} // namespace diffeval::analysis
