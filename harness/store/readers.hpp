// Typed readers for what analysis and reports need beyond the results load:
// the SQL stays in the store, and callers get rows with names.
#pragma once

#include <harness/store/store.hpp>
#include <harness/util/result.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace diffeval::store {

// Per group (server, framing, max_tokens) with at least one unknown stop
// cause, in that order: how many of its responses with a stop cause have an
// unknown one (llama.cpp's OpenAI endpoints name none). `summary` shows them
// under the breakdown, so a count of finished or stop-truncated answers is
// read knowing which part of it rests on the text alone.
struct StopCauseCounts {
    std::string server;
    std::string framing;
    int max_tokens = 0;
    int64_t unknown = 0;
    int64_t stopped = 0;
};
util::Result<std::vector<StopCauseCounts>> unknown_stop_causes(Store& store);

// What the servers table says of one server; `found` is false when the
// table has no row for it.
struct ServerRecord {
    bool found = false;
    std::string model;
    std::string info_json;
    std::optional<std::string> facts_json;
};
util::Result<std::vector<ServerRecord>> server_records(Store& store,
                                                       const std::vector<std::string>& names);

// The names a server's successful responses gave of one kind, with how
// many gave each, most first. The first k_listed are listed; the rest are
// counted.
struct NameCounts {
    static constexpr size_t k_listed = 10;
    std::vector<std::pair<std::string, int64_t>> listed;
    int64_t more_names = 0;     // given but not listed
    int64_t more_responses = 0; // the responses that gave them
    size_t names() const { return listed.size() + static_cast<size_t>(more_names); }
    int64_t responses() const {
        int64_t n = more_responses;
        for (const auto& [name, count] : listed) {
            n += count;
        }
        return n;
    }
};

// What each of a server's successful responses said it was (its body, or a
// stream's first event): the `model` it answered as and the
// `system_fingerprint` (OpenAI's name for the backend configuration that
// served it; llama-server gives its build, "b11669-Debian"). One backend
// answers under one of each, so two mean a proxy mixed backends or the
// backend changed mid-run. A response that gives none of a kind, or not as
// non-empty text, is left out of that kind's counts.
struct AnsweredAs {
    NameCounts models;
    NameCounts system_fingerprints;
};
// One per name, in order.
util::Result<std::vector<AnsweredAs>> answered_as(Store& store,
                                                  const std::vector<std::string>& names);

// Every server the database file at `path` names (its servers and its
// requests), read without migrating or writing it, so a file of any
// diffeval's schema can be asked before it is replaced. An error when it is
// no diffeval database.
util::Result<std::vector<std::string>> servers_named_in(const std::string& path);

// Per group, in the order first planned: requests planned, how many have no
// successful response, how many places a run asked of the group have no
// request at all (the run stopped while still planning: killed or failed),
// and how many places of the whole a shard's run (--shard i/N) is part of
// no run asked at all (`unrun`: a shard not merged, or shards run with
// another --limit or --repeats), with the shards ("i/N") no run of the
// group is of (`missing_shards`; after ten, "K more"). `unsent`: those of
// `missing` no response was stored for (the run stopped first, or still
// runs). A group a run asked but never reached comes last, with no
// requests.
struct GroupCompleteness {
    std::string server;
    std::string framing;
    int max_tokens = 0;
    int64_t requests = 0;
    int64_t missing = 0;
    int64_t unplanned = 0;
    int64_t unrun = 0;
    std::vector<std::string> missing_shards;
    int64_t unsent = 0;
    // Every run that left places of `unplanned` ended `failed` (refused a
    // server it launched, or a write failed): running it again as it was
    // fails again until that is mended.
    bool unplanned_by_failed_runs = false;
};
util::Result<std::vector<GroupCompleteness>> completeness(Store& store);

// Requests without a successful response by error kind ("not sent" when
// none was stored), most frequent first.
util::Result<std::vector<std::pair<std::string, int64_t>>> failure_kinds(Store& store);

// The runs the database still marks `running`. In a database no process
// writes, each was merged in while its run still wrote its own database,
// or its process died.
util::Result<int64_t> runs_marked_running(Store& store);

// The runs (ids, in order) whose stored configuration is not one a run or
// an import writes (not JSON; no list of servers, framings or token limits;
// repeats, limit or shard of another type): what such a run asked cannot be
// counted, so completeness() leaves it out, and the gate's completeness
// check cannot pass on it (a hostile-file audit: `{}` made a file missing
// 80 of its 480 requests "complete").
util::Result<std::vector<int64_t>> unreadable_run_configs(Store& store);

// Whether a run other than `run_id` stopped before sending all it planned
// (interrupted, killed, failed, or still marked running): only such a run
// leaves planned requests no run sent. A query of the runs table alone.
util::Result<bool> other_run_stopped_early(Store& store, int64_t run_id);

// How many questions the database stores of dataset `dataset` (a run stores
// every question of its dataset file): what a plan can ask for at most.
util::Result<int64_t> dataset_questions(Store& store, const std::string& dataset);

// The shards ("60/100") of the database's complete runs, for the words of a
// database holding no responses (its runs were of shards that held none of
// their questions); empty when there are none.
util::Result<std::vector<std::string>> empty_shard_runs(Store& store);

// The probe's readings (v_probes rows with a P(open)), by server, framing,
// question and repeat; a data error when the store has no probe tables.
struct ProbeReading {
    std::string probe;
    std::string server;
    std::string framing;
    int repeat = 0;
    int question_idx = 0;
    double p_open = 0;
    bool bounded = false;
    std::string dataset;
    std::string question_sha256; // "" when the question's row is missing
};
util::Result<std::vector<ProbeReading>> probe_readings(Store& store);

// Per server: probe responses that carried no log-probabilities.
util::Result<std::vector<std::pair<std::string, int64_t>>> probes_without_logprobs(Store& store);

// Per server: probe requests without a successful response (the one that
// counts failed, or none was stored: never sent).
util::Result<std::vector<std::pair<std::string, int64_t>>> probes_unanswered(Store& store);

// Every question some counted response answered, by index, with its gold
// answer; the views are valid during the call only.
using QuestionVisitor =
    std::function<void(int64_t question_idx, std::string_view question, std::string_view answer)>;
util::Result<void> for_each_asked_question(Store& store, const QuestionVisitor& visit);

} // namespace diffeval::store
