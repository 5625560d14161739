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
#include <harness/framing/body_template.hpp>
#include <harness/framing/framing.hpp>
#include <harness/http/client.hpp>
#include <harness/http/sse.hpp>
#include <harness/store/store.hpp>
#include <harness/util/hash.hpp>
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
#include <tuple>
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

// One request to send, with what its attempts so far left behind: its
// row is stored already (request_id), and the planner holds what it shares
// with others (its URL, its part's settings). A queue holds thousands.
struct Work {
    size_t server = 0;
    Endpoint endpoint = Endpoint::completion;
    // Rendered when first sent (Planner::body), from the framing's part, the
    // question and the token limit or probe step: the queue holds no bodies,
    // so the plan's read-ahead (thousands of requests of a few KiB each)
    // costs no memory, and fresh memory is what a run paid for most.
    std::shared_ptr<const std::string> body;
    size_t part = 0;
    int max_tokens = 0;
    int probe_step = -1;
    int attempts = 0;
    // Why the attempts before this one failed ("attempt 1: http: HTTP 503:
    // ..."; the first three), stored in the final row's notes: a retried
    // row said nothing of why (engine audit).
    std::string earlier_failures;
    // An attempt connected to its server, which may have read it: a request
    // whose every attempt was refused at connect was never sent.
    bool reached = false;
    std::string started_at;
    std::shared_ptr<StreamState> stream;      // set per attempt when streaming
    Clock::time_point attempt_start;          // latency and time to first token share this clock
    std::shared_ptr<const ProbeTarget> probe; // set for a probe request (never streamed)
    int question = -1;                        // the test question's index
    int64_t request_id = 0;                   // its row in the store (Store::Planned)
};

class Planner;

// One server's request headers, planner, queue and in-flight count.
struct ServerState {
    const ServerSpec* spec = nullptr;
    std::vector<std::string> headers;
    std::unique_ptr<Planner> planner; // set while its phase runs
    std::deque<Work> queue;
    size_t in_flight = 0;
    size_t limit = 0; // in flight at most (capacity.hpp)
    int64_t sent = 0; // attempts this run sent it
    // Every request fits the server's context alone (check_context): an
    // answer that outgrew it met others in a shared cache and is retried,
    // and `limit` lowered by one, once for the attempts sent before then.
    bool fits_alone = false;
    Clock::time_point limit_lowered{};
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

// The servers launched in a phase, which of them died, and the scripts each
// launch command named with their sha256, read before it started (what it
// ran, whatever is edited while it runs).
struct Launched {
    std::vector<std::unique_ptr<LaunchedServer>> servers;
    std::vector<bool> dead;
    std::vector<nlohmann::json> scripts;
};

// run.cpp, pass 1: check `config` and load everything that can be wrong
// before anything is sent (dataset, framings, the plan's size).
util::Result<Inputs> load_inputs(const RunConfig& config);

// preflight.cpp: each server's state with its request headers (the API key
// from the environment variable `config` names); an error when it is unset.
util::Result<std::vector<ServerState>> server_states(const RunConfig& config);

// preflight.cpp: the API keys `config` sends, and the passwords in its
// servers' URLs, for redaction.
util::Redactor secrets_of(const RunConfig& config);

// preflight.cpp: the variables whose API key `config` sends but is too short
// to redact (util::Redactor::k_min_secret), each once, and "the URL of
// server 'NAME'" for such a password in a URL.
std::vector<std::string> unredactable_keys(const RunConfig& config);

// preflight.cpp: ask server `s` (with `headers`) what it serves (it must
// serve `model` when set), its version and its published limits.
util::Result<ServerInfo> preflight(const ServerSpec& s, const std::vector<std::string>& headers,
                                   const std::optional<std::string>& model,
                                   std::chrono::milliseconds timeout,
                                   const std::atomic<bool>* stop);

// plan.cpp: server `si`'s part of the matrix, read one question at a time
// in a fixed order (framing; each token limit, then the probe; question;
// repeat), so neither memory nor the time before the first request grows
// with the plan. The rows of each part read are stored before any of them
// is queued; those with a successful response stored are counted skipped
// and not queued.
class Planner {
public:
    // An error (usage) when a framing needs a model name nobody gives:
    // `info` names the served one when no configured one does.
    static util::Result<std::unique_ptr<Planner>> create(const RunContext& ctx, size_t si,
                                                         const ServerInfo& info);
    // An error (usage) when a group of the plan that `db` holds requests of
    // was stored with other bodies than this run sends: its first stored
    // place is of another dataset, or its request, rendered by this run, has
    // another key, or, when the database holds a run of another dataset (a
    // group an earlier diffeval filled from two files), so has that of any
    // place this run plans. Asked before anything is sent, so a run whose
    // places do not meet the stored ones (another shard, more questions)
    // cannot add requests of another framing, sampling setting, model or
    // dataset to the group (the same file edited in place is refused
    // earlier, by put_questions). So is a place whose body is this run's but
    // whose question is not (the same text with another gold answer,
    // questions.question_sha256): its responses answer the stored question.
    // The probe's places likewise (check_stored_probes).
    util::Result<void> check_stored_groups(store::Store& db) const;
    // Requests in the whole plan.
    int64_t total() const { return m_total; }
    // Nothing more to read: every request was, or the plan was abandoned.
    bool finished() const { return m_abandoned || read_all(); }
    // Some of the plan was read.
    bool started() const { return m_part > 0 || m_stage > 0 || m_question > 0; }
    // Every request of the plan was read.
    bool read_all() const { return m_question >= m_ctx.inputs.n_questions; }
    // Read no more (the server died): what is unread is sent by the next run.
    void abandon() { m_abandoned = true; }
    // Read on until `server.queue` holds `want` requests or the plan ends,
    // storing the rows read in `db`; `summary` counts planned and skipped.
    util::Result<void> fill(ServerState& server, store::Store& db, RunSummary& summary,
                            size_t want);
    // The body `w` sends, the bytes its row stored: rendered again, or the
    // last one rendered when `w` is its repeat.
    std::shared_ptr<const std::string> body(const Work& w);
    // The URL `w` is sent to.
    const std::string& url(const Work& w) const { return m_parts[w.part].url; }

private:
    // One framing's settings.
    struct Part {
        framing::Renderer renderer;
        std::optional<std::string> body_model;
        nlohmann::ordered_json extra;         // the measured requests' extra fields
        nlohmann::ordered_json probe_options; // the probe's
        Endpoint endpoint;
        std::string url;
        std::shared_ptr<const ProbeTarget> probe_target;
        // The bodies pasted together where the framing allows it
        // (body_template.hpp): the measured requests' and each probe step's.
        std::optional<framing::BodyTemplate> measured;
        std::vector<std::optional<framing::BodyTemplate>> probe_steps;
        // The measured bodies' sha256 from the state after their common
        // leading text (the few-shot block), when there is a template.
        std::optional<util::Sha256Prefix> measured_hash;
    };
    // One request read from the plan, not yet checked against the store;
    // the first row of each body carries it.
    struct Read {
        store::RequestRow row;
        size_t part = 0;
    };
    // The body of the current question for `part` with `max_tokens`, and of
    // its probe steps.
    std::string measured_body(const Part& part, const datasets::Sample& sample,
                              int max_tokens) const;
    std::vector<std::string> probe_bodies(const Part& part, const datasets::Sample& sample) const;
    // A measured body's sha256 hex, from the state after its leading text
    // when `part` has one: its request key's last field.
    static std::string body_hash(const Part& part, const std::string& body);
    // check_stored_groups for the probe's stored places of `part`: a changed
    // probe_chain leaves the measured bodies as they were. `every_place`: not
    // only the first.
    util::Result<void> check_stored_probes(store::Store& db, const Part& part,
                                           bool every_place) const;

    Planner(const RunContext& ctx, size_t si) : m_ctx(ctx), m_si(si) {}
    // Read the current question of the current stage into `out`, then move on.
    void read_question(std::vector<Read>& out);

    const RunContext& m_ctx;
    size_t m_si;
    std::vector<Part> m_parts;
    size_t m_stages = 0; // per part: the token limits, then the probe
    int64_t m_total = 0;
    // The cursor: question, part, stage.
    size_t m_part = 0, m_stage = 0, m_question = 0;
    bool m_abandoned = false;
    // The last body rendered for sending, and what it was rendered from
    // (part, question, token limit, probe step): repeats follow each other.
    std::shared_ptr<const std::string> m_last_body;
    std::tuple<size_t, int, int, int> m_last_recipe{};
};

// send.cpp: the event loop, one phase at a time: sends what the servers
// queue, asks the retry policy about each finished attempt and hands final
// rows to the writer. Stops on Ctrl-C (summary.interrupted) or when the
// writer fails. One client, tag counter and jitter stream serve every phase.
class Sender {
public:
    Sender(const RunContext& ctx, int64_t run_id);
    // Send `phase`'s work until none is left to plan or send; its servers
    // plan as they send (their planners are set; `planned` requests in all).
    // False when the store failed, an error when planning did.
    util::Result<bool> send_phase(const std::vector<size_t>& phase,
                                  std::vector<ServerState>& servers, Launched& launched,
                                  store::Store& db, store::Writer& writer, RunSummary& summary,
                                  int64_t planned);
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
