// Group summaries; see summary.hpp.
#include <harness/analysis/summary.hpp>

#include <harness/analysis/stats.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace diffeval::analysis {

std::string group_label(const std::string& server, const std::string& framing, int max_tokens) {
    return fmt::format("{}/{}/{}", server, framing, max_tokens);
}

namespace {

Spread spread_of(const std::vector<double>& v) {
    Spread s;
    if (v.empty()) {
        return s;
    }
    s.min = *std::min_element(v.begin(), v.end());
    s.max = *std::max_element(v.begin(), v.end());
    double sum = 0;
    for (double x : v) {
        sum += x;
    }
    s.mean = sum / static_cast<double>(v.size());
    return s;
}

nlohmann::json spread_json(const Spread& s) {
    return {{"mean", s.mean}, {"min", s.min}, {"max", s.max}};
}

nlohmann::json optional_json(const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json latency_json(const LatencySummary& l) {
    // Without a successful response there is no latency to give.
    const auto measured = [&](double v) {
        return l.responses > 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
    };
    return {{"responses", l.responses},
            {"p50_ms", measured(l.p50_ms)},
            {"p90_ms", measured(l.p90_ms)},
            {"p99_ms", measured(l.p99_ms)},
            {"max_ms", measured(l.max_ms)},
            {"ttft_p50_ms", optional_json(l.ttft_p50_ms)},
            {"ttft_p99_ms", optional_json(l.ttft_p99_ms)},
            {"requests_per_s", optional_json(l.requests_per_s)}};
}

nlohmann::json tokens_json(const LatencySummary& l) {
    return {{"p50", optional_json(l.tokens_p50)},
            {"p99", optional_json(l.tokens_p99)},
            {"mean", optional_json(l.tokens_mean)}};
}

} // namespace

bool any_unrecorded(const Summary& summary) {
    return std::any_of(summary.groups.begin(), summary.groups.end(),
                       [](const GroupSummary& g) { return g.unrecorded > 0; });
}

namespace {

// Each timed request of `rows`: when it was sent, and when answered; with
// `first_attempt_only`, only those answered at their first attempt, whose
// span that is (a retried request's last attempt started at a time not
// stored: its first attempt's start plus its last attempt's latency made a
// group that took 0.2 s to answer four requests through retries and backoff
// show 5,400 requests/s; a hostile-server audit).
std::vector<std::pair<double, double>> timed_spans(const std::vector<const ResultRow*>& rows,
                                                   bool first_attempt_only = false) {
    std::vector<std::pair<double, double>> spans;
    for (const auto* r : rows) {
        if (r->started_ms > 0 && r->latency_ms && !(first_attempt_only && r->retried)) {
            spans.emplace_back(r->started_ms, r->started_ms + *r->latency_ms);
        }
    }
    return spans;
}

} // namespace

std::vector<std::pair<double, double>> idle_gaps(const std::vector<const ResultRow*>& rows) {
    auto spans = timed_spans(rows);
    std::sort(spans.begin(), spans.end());
    std::vector<std::pair<double, double>> gaps;
    double open_end = 0;
    for (size_t i = 0; i < spans.size(); ++i) {
        if (i > 0 && spans[i].first > open_end) {
            gaps.emplace_back(open_end, spans[i].first);
        }
        open_end = i == 0 ? spans[i].second : std::max(open_end, spans[i].second);
    }
    return gaps;
}

LatencySummary summarize_latency(const std::vector<const ResultRow*>& rows,
                                 const std::vector<std::pair<double, double>>& idle) {
    LatencySummary out;
    std::vector<double> latency, ttft, tokens;
    // An answer nothing timed (an import) has no span and no latency; a
    // retried one no span the rate can use.
    const auto spans = timed_spans(rows, true);
    for (const auto* r : rows) {
        if (!r->ok) {
            continue;
        }
        if (r->latency_ms) {
            latency.push_back(*r->latency_ms);
        }
        if (r->ttft_ms) {
            ttft.push_back(*r->ttft_ms);
        }
        if (r->completion_tokens) {
            tokens.push_back(static_cast<double>(*r->completion_tokens));
        }
    }
    out.responses = static_cast<int64_t>(latency.size());
    if (!latency.empty()) {
        out.p50_ms = percentile(latency, 50);
        out.p90_ms = percentile(latency, 90);
        out.p99_ms = percentile(latency, 99);
        out.max_ms = *std::max_element(latency.begin(), latency.end());
    }
    if (!ttft.empty()) {
        out.ttft_p50_ms = percentile(ttft, 50);
        out.ttft_p99_ms = percentile(ttft, 99);
    }
    if (!tokens.empty()) {
        out.tokens_p50 = percentile(tokens, 50);
        out.tokens_p99 = percentile(tokens, 99);
        double sum = 0;
        for (double t : tokens) {
            sum += t;
        }
        out.tokens_mean = sum / static_cast<double>(tokens.size());
    }
    // The wall span from the group's first request sent to its last answer,
    // less the stretches when no request of the database was in flight (the
    // hours between a killed run and its resume): groups run side by side
    // each show the rate they got, and an idle gap is not serving time.
    if (!spans.empty()) {
        double first = spans.front().first, last = spans.front().second;
        for (const auto& [sent, done] : spans) {
            first = std::min(first, sent);
            last = std::max(last, done);
        }
        double wall_ms = last - first;
        for (const auto& [from, to] : idle) {
            wall_ms -= std::max(0.0, std::min(to, last) - std::max(from, first));
        }
        if (wall_ms > 0) {
            out.requests_per_s = static_cast<double>(spans.size()) / (wall_ms / 1000.0);
        }
    }
    return out;
}

namespace {

using GroupKey = std::tuple<int, int, int>; // server, framing, max_tokens

// One group's responses counted per repeat and per question (dataset,
// index), and its tokens per repeat.
struct GroupCounts {
    std::map<int, RepeatBreakdown> repeats;
    std::map<std::pair<int, int>, RepeatBreakdown> questions;
    std::map<int, std::pair<double, int64_t>> tokens; // sum, count
    // The same per question, for a group whose repeats ran different ones.
    std::map<std::pair<int, int>, std::pair<double, int64_t>> question_tokens;
    std::vector<const ResultRow*> members;
};

// Add response `r` to the counts `b` (of a repeat or of a question).
void tally(const ResultRow& r, size_t n_scorers, RepeatBreakdown& b) {
    if (b.correct.empty()) {
        b.repeat = r.repeat;
        b.correct.assign(n_scorers, 0);
        b.invalid.assign(n_scorers, 0);
        b.finished_correct.assign(n_scorers, 0);
    }
    ++b.responses;
    b.started_reasoning += r.reasoning_started;
    switch (r.outcome) {
    case scorers::Outcome::finished:
        ++b.finished;
        break;
    case scorers::Outcome::stop_truncated:
        ++b.stop_truncated;
        break;
    case scorers::Outcome::length_truncated:
        ++b.length_truncated;
        break;
    case scorers::Outcome::other:
        ++b.other;
        break;
    case scorers::Outcome::error:
        ++b.errors;
        break;
    case scorers::Outcome::unrecorded:
        ++b.unrecorded;
        break;
    }
    for (size_t k = 0; k < n_scorers; ++k) {
        b.correct[k] += r.correct[k];
        b.invalid[k] += !r.valid[k];
        if (r.outcome == scorers::Outcome::finished) {
            b.finished_correct[k] += r.correct[k];
        }
    }
}

// Add response `r` to its repeat's and its question's counts.
void count_response(const ResultRow& r, size_t n_scorers, GroupCounts& group) {
    group.members.push_back(&r);
    tally(r, n_scorers, group.repeats[r.repeat]);
    tally(r, n_scorers, group.questions[{r.dataset, r.question_idx}]);
    if (r.completion_tokens) {
        for (auto* t :
             {&group.tokens[r.repeat], &group.question_tokens[{r.dataset, r.question_idx}]}) {
            t->first += static_cast<double>(*r.completion_tokens);
            ++t->second;
        }
    }
}

// Add the counts of `b` divided by `n` to the breakdown's means of `g`.
void add_shares(GroupSummary& g, const RepeatBreakdown& b, double n) {
    g.started_reasoning += static_cast<double>(b.started_reasoning) / n;
    g.never_finished += static_cast<double>(b.never_finished()) / n;
    g.stop_truncated += static_cast<double>(b.stop_truncated) / n;
    g.length_truncated += static_cast<double>(b.length_truncated) / n;
    g.other += static_cast<double>(b.other) / n;
    g.finished += static_cast<double>(b.finished) / n;
    g.errors += static_cast<double>(b.errors) / n;
    g.unrecorded += static_cast<double>(b.unrecorded) / n;
}

// The breakdown's means over repeats.
void average_repeats(GroupSummary& g) {
    const double n = static_cast<double>(g.repeats.size());
    for (const auto& b : g.repeats) {
        add_shares(g, b, n);
    }
    // Summed as the counts are, term by term, so a group whose every repeat
    // has counts gives the mean version 1 gave.
    const auto counted = std::count_if(g.repeats.begin(), g.repeats.end(), [](const auto& b) {
        return b.mean_completion_tokens.has_value();
    });
    for (const auto& b : g.repeats) {
        if (b.mean_completion_tokens) {
            g.mean_completion_tokens = g.mean_completion_tokens.value_or(0) +
                                       *b.mean_completion_tokens / static_cast<double>(counted);
        }
    }
}

// A group whose repeats ran different questions: its accuracy means and its
// breakdown's means per question (each question's share of its responses),
// over the questions, so a question with three repeats weighs what one with
// two does. So are the accuracy on finished answers (the per-question share
// of finished answers that are right over that of finished ones, so that
// finished x fin. acc is the part of the score they make) and the mean
// tokens: taken over repeats, they sat beside per-question shares they did
// not multiply to (a statistics audit: 96.6% of 82.4% finished beside 83.8).
void average_questions(const GroupCounts& counts, size_t n_scorers, GroupSummary& g) {
    g.started_reasoning = g.never_finished = g.stop_truncated = g.length_truncated = g.other =
        g.finished = g.errors = g.unrecorded = 0;
    std::vector<double> accuracy(n_scorers, 0.0), finished_right(n_scorers, 0.0);
    for (const auto& [question, b] : counts.questions) {
        const auto n = static_cast<double>(b.responses);
        add_shares(g, b, n);
        for (size_t k = 0; k < n_scorers; ++k) {
            accuracy[k] += static_cast<double>(b.correct[k]) / n;
            finished_right[k] += static_cast<double>(b.finished_correct[k]) / n;
        }
    }
    const auto questions = static_cast<double>(counts.questions.size());
    for (size_t k = 0; k < n_scorers; ++k) {
        g.scorers[k].spread.mean = accuracy[k] / questions;
        if (g.scorers[k].finished_accuracy && g.finished > 0) {
            g.scorers[k].finished_accuracy->mean = finished_right[k] / g.finished;
        }
    }
    if (!counts.question_tokens.empty()) {
        double tokens = 0;
        for (const auto& [question, t] : counts.question_tokens) {
            tokens += t.first / static_cast<double>(t.second);
        }
        g.mean_completion_tokens = tokens / static_cast<double>(counts.question_tokens.size());
    }
}

// One group's summary from its counts: accuracy per repeat and scorer, its
// spread, accuracy on finished answers, the invalid rate and the means.
GroupSummary summarize_group(const Results& results, const GroupKey& key, GroupCounts& counts,
                             const std::vector<std::pair<double, double>>& idle) {
    const size_t n_scorers = results.scorers.size();
    GroupSummary g;
    g.server = results.servers[static_cast<size_t>(std::get<0>(key))];
    g.framing = results.framings[static_cast<size_t>(std::get<1>(key))];
    g.max_tokens = std::get<2>(key);
    g.latency = summarize_latency(counts.members, idle);
    g.scorers.resize(n_scorers);
    std::vector<std::vector<double>> fin_acc(n_scorers);
    int64_t total = 0;
    std::vector<int64_t> invalid(n_scorers, 0);
    for (auto& [rep, b] : counts.repeats) {
        const auto& t = counts.tokens[rep];
        if (t.second > 0) {
            b.mean_completion_tokens = t.first / static_cast<double>(t.second);
        }
        total += b.responses;
        for (size_t k = 0; k < n_scorers; ++k) {
            g.scorers[k].accuracy.push_back(static_cast<double>(b.correct[k]) /
                                            static_cast<double>(b.responses));
            if (b.finished) {
                fin_acc[k].push_back(static_cast<double>(b.finished_correct[k]) /
                                     static_cast<double>(b.finished));
            }
            invalid[k] += b.invalid[k];
        }
        g.repeats.push_back(b);
    }
    average_repeats(g);
    for (size_t k = 0; k < n_scorers; ++k) {
        g.scorers[k].spread = spread_of(g.scorers[k].accuracy);
        if (!fin_acc[k].empty()) {
            g.scorers[k].finished_accuracy = spread_of(fin_acc[k]);
        }
        g.scorers[k].invalid_rate =
            total ? static_cast<double>(invalid[k]) / static_cast<double>(total) : 0;
    }
    // Every question in every repeat: the means over repeats are the means
    // over questions. Otherwise they are taken per question.
    g.questions = static_cast<int64_t>(counts.questions.size());
    g.uneven = total != g.questions * static_cast<int64_t>(g.repeats.size());
    if (g.uneven) {
        average_questions(counts, n_scorers, g);
    }
    return g;
}

} // namespace

Summary summarize(const Results& results) {
    Summary out;
    out.scorers = results.scorers;
    out.score_text = results.score_text;
    std::map<GroupKey, GroupCounts> groups;
    for (const auto& r : results.rows) {
        count_response(r, results.scorers.size(),
                       groups[std::make_tuple(r.server, r.framing, r.max_tokens)]);
    }
    std::vector<const ResultRow*> all;
    all.reserve(results.rows.size());
    for (const auto& r : results.rows) {
        all.push_back(&r);
    }
    const auto idle = idle_gaps(all);
    for (auto& [key, counts] : groups) {
        out.groups.push_back(summarize_group(results, key, counts, idle));
    }
    return out;
}

nlohmann::json to_json(const Summary& s,
                       const std::vector<store::GroupCompleteness>* completeness) {
    // Imported answers (lm-eval samples) record no finish state; the key
    // that counts them is there when some group has one, so a summary of
    // runs alone keeps the shape it had.
    const bool unrecorded = any_unrecorded(s);
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& g : s.groups) {
        nlohmann::json acc = nlohmann::json::object();
        for (size_t k = 0; k < s.scorers.size(); ++k) {
            const auto& sc = g.scorers[k];
            acc[s.scorers[k]] = {{"per_repeat", sc.accuracy},
                                 {"mean", sc.spread.mean},
                                 {"min", sc.spread.min},
                                 {"max", sc.spread.max},
                                 {"invalid_rate", sc.invalid_rate},
                                 {"finished_accuracy", sc.finished_accuracy
                                                           ? spread_json(*sc.finished_accuracy)
                                                           : nlohmann::json(nullptr)}};
        }
        nlohmann::json reps = nlohmann::json::array();
        for (const auto& b : g.repeats) {
            nlohmann::json fc = nlohmann::json::object();
            for (size_t k = 0; k < s.scorers.size(); ++k) {
                fc[s.scorers[k]] = b.finished_correct[k];
            }
            nlohmann::json rep = {
                {"repeat", b.repeat},
                {"responses", b.responses},
                {"started_reasoning", b.started_reasoning},
                {"never_finished", b.never_finished()},
                {"stop_truncated", b.stop_truncated},
                {"length_truncated", b.length_truncated},
                {"other", b.other},
                {"errors", b.errors},
                {"finished", b.finished},
                {"finished_correct", fc},
                {"mean_completion_tokens", optional_json(b.mean_completion_tokens)}};
            if (unrecorded) {
                rep["unrecorded"] = b.unrecorded;
            }
            reps.push_back(std::move(rep));
        }
        nlohmann::json mean = {{"started_reasoning", g.started_reasoning},
                               {"never_finished", g.never_finished},
                               {"stop_truncated", g.stop_truncated},
                               {"length_truncated", g.length_truncated},
                               {"other", g.other},
                               {"errors", g.errors},
                               {"finished", g.finished},
                               {"mean_completion_tokens", optional_json(g.mean_completion_tokens)}};
        if (unrecorded) {
            mean["unrecorded"] = g.unrecorded;
        }
        groups.push_back({{"server", g.server},
                          {"framing", g.framing},
                          {"max_tokens", g.max_tokens},
                          {"questions", g.questions},
                          {"repeats", g.repeats.size()},
                          {"uneven_repeats", g.uneven},
                          {"accuracy", acc},
                          {"breakdown", {{"per_repeat", reps}, {"mean", mean}}},
                          {"latency", latency_json(g.latency)},
                          {"output_tokens", tokens_json(g.latency)}});
    }
    nlohmann::json doc = {{"schema", "diffeval.summary/2"},
                          {"scorers", s.scorers},
                          {"score_text", s.score_text},
                          {"groups", groups}};
    if (completeness) {
        auto& out = doc["completeness"] = nlohmann::json::array();
        for (const auto& g : *completeness) {
            out.push_back({{"server", g.server},
                           {"framing", g.framing},
                           {"max_tokens", g.max_tokens},
                           {"requests", g.requests},
                           {"without_success", g.missing},
                           {"not_sent", g.unsent},
                           {"never_planned", g.unplanned},
                           {"shards_not_run", g.unrun},
                           {"missing_shards", g.missing_shards}});
        }
    }
    return doc;
}

std::string shards_text(const std::vector<std::string>& shards) {
    return fmt::format("{} {}", shards.size() == 1 ? "shard" : "shards", fmt::join(shards, ", "));
}

std::string unplanned_advice(bool by_failed_runs) {
    return by_failed_runs ? "the run that asked for them failed, and its error said why (a "
                            "server it launched refused as another, a write that failed): mend "
                            "that, then run it again"
                          : "run the command that asked for them again";
}

std::string unsent_errors_text(const std::vector<store::GroupCompleteness>& groups) {
    std::vector<std::string> parts;
    for (const auto& g : groups) {
        if (g.unsent > 0) {
            parts.push_back(
                fmt::format("{} {}", group_label(g.server, g.framing, g.max_tokens), g.unsent));
        }
    }
    if (parts.empty()) {
        return {};
    }
    return fmt::format("Errors include planned requests without a response (never sent, or in "
                       "flight when a run stopped), over all repeats: {}.",
                       fmt::join(parts, ", "));
}

std::string gaps_text(const store::GroupCompleteness& g) {
    std::vector<std::string> parts;
    if (g.unsent > 0) {
        // "Never sent" was said of requests in flight when a run was killed,
        // which a server may have read (reliability audit).
        parts.push_back(fmt::format("{} without a response (never sent, or in flight when a run "
                                    "stopped)",
                                    util::counted(g.unsent, "planned request")));
    }
    if (g.unplanned > 0) {
        parts.push_back(fmt::format("{} never planned (the run stopped first)",
                                    util::counted(g.unplanned, "request")));
    }
    if (!g.missing_shards.empty()) {
        parts.push_back(fmt::format("no run of {} ({})", shards_text(g.missing_shards),
                                    util::counted(g.unrun, "request")));
    } else if (g.unrun > 0) {
        parts.push_back(fmt::format("{} of its sharded run that no shard planned",
                                    util::counted(g.unrun, "request")));
    }
    return fmt::format("{}", fmt::join(parts, ", "));
}

} // namespace diffeval::analysis
