// The pieces `engine::run` is made of, shared by run.cpp (the passes in
// order), preflight.cpp (asking servers what they are), plan.cpp (turning the
// matrix into stored request rows and queued work) and send.cpp (the event
// loop). Internal to the engine: nothing outside harness/engine/ includes it
// but the engine's unit tests (tests/unit/test_engine_plan.cpp).
#pragma once

#include <datasets/dataset.hpp>
#include <harness/engine/capacity.hpp>
#include <harness/engine/config.hpp>
#include <harness/engine/launcher.hpp>
#include <harness/engine/probe_plan.hpp>
#include <harness/engine/response_parse.hpp>
#include <harness/engine/run.hpp>
#include <harness/framing/framing.hpp>
#include <harness/http/client.hpp>
#include <harness/http/sse.hpp>
#include <harness/store/store.hpp>
#include <harness/util/redact.hpp>
#include <harness/util/result.hpp>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_set>
#include <vector>

namespace diffeval::engine {

using Clock = std::chrono::steady_clock;

// Per-attempt state of a streamed request.
struct StreamState {
    http::SseParser parser;
    StreamAccumulator acc;
    Clock::time_point start;
    StreamState(Endpoint e, Clock::time_point t) : acc(e), start(t) {}
};

// One request to send, with what its attempts so far left behind.
struct Work {
    std::string key;
    size_t server = 0;
    Endpoint endpoint = Endpoint::completion;
    std::string url;
    std::shared_ptr<const std::string> body;
    int attempts = 0;
    std::string started_at;
    std::shared_ptr<StreamState> stream;      // set per attempt when streaming
    Clock::time_point attempt_start;          // latency and time to first token share this clock
    std::shared_ptr<const ProbeTarget> probe; // set for a probe request (never streamed)
};

// One server's request headers, queue and in-flight count.
struct ServerState {
    const ServerSpec* spec = nullptr;
    std::vector<std::string> headers;
    std::deque<Work> queue;
    size_t in_flight = 0;
    size_t limit = 0; // in flight at most (capacity.hpp)
};

// What the preflight learned about one server.
struct ServerInfo {
    std::optional<std::string> served_model;
    nlohmann::json info = nlohmann::json::object();
    ServerLimits limits;
};

// Everything a run reads before it sends: the dataset, the framings with
// their overrides, how many questions are asked, the secrets to redact.
struct Inputs {
    datasets::Dataset dataset;
    std::vector<framing::Framing> framings;
    size_t n_questions = 0;
    util::Redactor redactor;
};

// What several passes read: the configuration, the options, the log and
// the loaded inputs. Passes change only what their parameters hand them.
struct RunContext {
    const RunConfig& config;
    const RunOptions& options;
    std::ostream& log;
    const Inputs& inputs;
    // Ctrl-C was pressed.
    bool stopped() const { return options.stop_requested && options.stop_requested->load(); }
    // The model named for server `si`: its own, else the run's (none: the
    // server's served model, where one is needed).
    std::optional<std::string> configured_model(size_t si) const {
        return config.servers[si].model ? config.servers[si].model : config.model;
    }
    // `e` with the run's secrets cut out (errors may quote a server's answer).
    util::Error redacted(util::Error e) const {
        e.message = inputs.redactor.redacted(std::move(e.message));
        return e;
    }
};

// The servers launched in a phase and which of them died.
struct Launched {
    std::vector<std::unique_ptr<LaunchedServer>> servers;
    std::vector<bool> dead;
};

// run.cpp, pass 1: check `config` and load everything that can be wrong
// before anything is sent (dataset, framings, the plan's size).
util::Result<Inputs> load_inputs(const RunConfig& config);

// preflight.cpp: each server's state with its request headers (the API key
// from the environment variable `config` names); an error when it is unset.
util::Result<std::vector<ServerState>> server_states(const RunConfig& config);

// preflight.cpp: the API keys `config` sends, for redaction.
util::Redactor secrets_of(const RunConfig& config);

// preflight.cpp: ask server `s` (with `headers`) what it serves (it must
// serve `model` when set), its version and its published limits.
util::Result<ServerInfo> preflight(const ServerSpec& s, const std::vector<std::string>& headers,
                                   const std::optional<std::string>& model,
                                   std::chrono::milliseconds timeout,
                                   const std::atomic<bool>* stop);

// plan.cpp: server `si`'s part of the matrix: every request row stored in
// `db` before any is sent, those not in `done_keys` queued on `server`;
// `summary` counts planned and skipped. `info` names the model when no
// configured one does.
util::Result<void> plan_server(const RunContext& ctx, size_t si, const ServerInfo& info,
                               const std::unordered_set<std::string>& done_keys,
                               ServerState& server, store::Store& db, RunSummary& summary);

// send.cpp: the event loop, one phase at a time: sends what the servers
// queue, asks the retry policy about each finished attempt and hands final
// rows to the writer. Stops on Ctrl-C (summary.interrupted) or when the
// writer fails. One client, tag counter and jitter stream serve every phase.
class Sender {
public:
    Sender(const RunContext& ctx, int64_t run_id);
    // Send `phase`'s queued work (`to_send` requests, for the progress)
    // until none is left; false when the store failed.
    bool send_phase(const std::vector<size_t>& phase, std::vector<ServerState>& servers,
                    Launched& launched, store::Writer& writer, RunSummary& summary,
                    int64_t to_send);
    // Responses handed to the writer so far.
    int64_t pushed() const { return m_pushed; }

private:
    struct Retry {
        Clock::time_point when;
        Work work;
        bool operator>(const Retry& o) const { return when > o.when; }
    };
    struct Loop; // one phase's loop, in send.cpp

    const RunContext& m_ctx;
    int64_t m_run_id;
    http::MultiClient m_client;
    uint64_t m_next_tag = 1;
    uint64_t m_jitter_state;
    int64_t m_pushed = 0;
};

} // namespace diffeval::engine
