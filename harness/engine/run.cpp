// The run engine; see run.hpp.
//
// One thread drives the network (curl multi), one writes to SQLite. Request
// rows are inserted before anything is sent, so the store always knows what
// was asked even if the process dies; a response row is written only when an
// outcome is final, so a killed run resumes by resending what has none.
#include <harness/engine/run.hpp>

#include <datasets/dataset.hpp>
#include <harness/engine/capacity.hpp>
#include <harness/engine/launcher.hpp>
#include <harness/engine/probe_plan.hpp>
#include <harness/engine/response_parse.hpp>
#include <harness/engine/retry.hpp>
#include <harness/fingerprint/fingerprint.hpp>
#include <harness/framing/framing.hpp>
#include <harness/http/client.hpp>
#include <harness/http/sse.hpp>
#include <harness/store/lock.hpp>
#include <harness/store/store.hpp>
#include <harness/util/file.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/pyjson.hpp>
#include <harness/util/redact.hpp>
#include <harness/util/untrusted_json.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <queue>
#include <sstream>
#include <sys/sysinfo.h>
#include <unistd.h>

namespace diffeval::engine {

using Clock = std::chrono::steady_clock;
using util::ErrorKind;
using util::make_error;

namespace {

// Per-attempt state of a streamed request.
struct StreamState {
    http::SseParser parser;
    StreamAccumulator acc;
    Clock::time_point start;
    StreamState(Endpoint e, Clock::time_point t) : acc(e), start(t) {}
};

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

struct ServerState {
    const ServerSpec* spec = nullptr;
    std::vector<std::string> headers;
    std::deque<Work> queue;
    size_t in_flight = 0;
    size_t limit = 0; // in flight at most (capacity.hpp)
};

struct Retry {
    Clock::time_point when;
    Work work;
    bool operator>(const Retry& o) const { return when > o.when; }
};

// What the preflight learned about one server.
struct ServerInfo {
    std::optional<std::string> served_model;
    nlohmann::json info = nlohmann::json::object();
    ServerLimits limits;
};

std::vector<std::string> request_headers(const ServerSpec& s, const RunConfig& c,
                                         util::Result<void>& status) {
    std::vector<std::string> h = {"Content-Type: application/json", "Accept: application/json"};
    const std::string& env = s.api_key_env.empty() ? c.api_key_env : s.api_key_env;
    if (!env.empty()) {
        const char* key = std::getenv(env.c_str());
        if (!key || !*key) {
            status = make_error(
                ErrorKind::usage,
                fmt::format("server '{}': the API key variable {} is not set", s.name, env));
            return h;
        }
        h.push_back(fmt::format("Authorization: Bearer {}", key));
    }
    for (const auto& extra : s.headers) {
        h.push_back(extra);
    }
    return h;
}

// The API keys a run sends, for redaction from everything it stores or prints.
util::Redactor secrets_of(const RunConfig& c) {
    util::Redactor redactor;
    for (const auto& s : c.servers) {
        const std::string& env = s.api_key_env.empty() ? c.api_key_env : s.api_key_env;
        if (const char* key = env.empty() ? nullptr : std::getenv(env.c_str())) {
            redactor.add(key);
        }
    }
    return redactor;
}

util::Result<ServerInfo> preflight(const ServerSpec& s, const std::vector<std::string>& headers,
                                   const std::optional<std::string>& model,
                                   std::chrono::milliseconds timeout,
                                   const std::atomic<bool>* stop) {
    ServerInfo out;
    http::Request req;
    req.url = s.url + "/v1/models";
    req.headers = headers;
    req.timeout = std::min(timeout, std::chrono::milliseconds{15'000});
    req.cancel = stop;
    auto r = http::fetch(req);
    if (r.transport == http::Transport::cancelled) {
        return make_error(ErrorKind::usage, "interrupted during preflight");
    }
    if (r.transport != http::Transport::ok) {
        return make_error(ErrorKind::usage,
                          fmt::format("server '{}' at {} is unreachable ({}); check the URL, start "
                                      "the server, or pass --no-preflight",
                                      s.name, s.url, r.transport_error));
    }
    if (r.status == 401 || r.status == 403) {
        return make_error(
            ErrorKind::usage,
            fmt::format("server '{}' refused the credentials (HTTP {}); set the API key "
                        "variable named by --api-key-env",
                        s.name, r.status));
    }
    if (r.status != 200) {
        return make_error(ErrorKind::usage,
                          fmt::format("server '{}': GET /v1/models answered HTTP {}: {}; is it an "
                                      "OpenAI-compatible server?",
                                      s.name, r.status, error_message(r.body)));
    }
    auto j = util::parse_untrusted_json(r.body);
    std::vector<std::string> ids;
    if (j.is_object() && j.contains("data") && j["data"].is_array()) {
        for (const auto& m : j["data"]) {
            if (m.is_object() && m.contains("id") && m["id"].is_string()) {
                ids.push_back(m["id"].get<std::string>());
            }
        }
    }
    if (ids.empty()) {
        return make_error(ErrorKind::usage,
                          fmt::format("server '{}': GET /v1/models listed no models; is it an "
                                      "OpenAI-compatible server?",
                                      s.name));
    }
    if (model && std::find(ids.begin(), ids.end(), *model) == ids.end()) {
        return make_error(ErrorKind::usage,
                          fmt::format("server '{}' does not serve model '{}'; it serves: {}",
                                      s.name, *model, fmt::join(ids, ", ")));
    }
    out.served_model = ids.front();
    out.info["models"] = j["data"];
    if (!r.server_header.empty()) {
        out.info["server_header"] = r.server_header;
    }
    // /version is vLLM's; other engines may not have it.
    req.url = s.url + "/version";
    auto v = http::fetch(req);
    if (v.transport == http::Transport::ok && v.status == 200) {
        auto vj = util::parse_untrusted_json(v.body);
        if (!vj.is_discarded()) {
            out.info["version"] = vj;
        }
    }
    // Slots, context and build, where the server publishes them.
    out.limits = read_limits(s.url, headers, j["data"], timeout);
    if (!out.limits.props.is_null()) {
        out.info["props"] = out.limits.props;
    }
    return out;
}

// Refuse a plan that would not fit in memory before building any of it:
// each planned request costs about this much while the run plans and sends.
constexpr int64_t k_bytes_per_planned_request = 1024;

util::Result<void> check_plan_size(const RunConfig& c, size_t n_questions) {
    // Saturating products: the factors come from flags and may be huge.
    long double planned =
        static_cast<long double>(c.servers.size()) * static_cast<long double>(c.framings.size()) *
        static_cast<long double>(c.max_tokens.size()) * static_cast<long double>(c.repeats) *
        static_cast<long double>(n_questions);
    struct sysinfo si {};
    const long double ram = sysinfo(&si) == 0 ? static_cast<long double>(si.totalram) * si.mem_unit
                                              : static_cast<long double>(int64_t{8} << 30);
    const long double need = planned * k_bytes_per_planned_request;
    if (need <= ram / 2) {
        return {};
    }
    return make_error(
        ErrorKind::usage,
        fmt::format("the plan has {:.0f} requests ({} servers x {} framings x {} token limits x "
                    "{} repeats x {} questions), about {:.1f} GiB in memory, more than half of "
                    "this machine's {:.1f} GiB; lower --repeats or --limit, or split the run",
                    static_cast<double>(planned), c.servers.size(), c.framings.size(),
                    c.max_tokens.size(), c.repeats, n_questions,
                    static_cast<double>(need / (1 << 30)), static_cast<double>(ram / (1 << 30))));
}

// What a finished transfer that is not a usable HTTP 200 is stored as, in
// `row` (error and error_kind); false when it is a 200 to parse.
bool classify_failure(const http::Response& resp, store::ResponseRow& row) {
    if (resp.transport == http::Transport::too_large) {
        row.error_kind = "size";
        row.error = resp.transport_error;
    } else if (resp.transport != http::Transport::ok) {
        row.error_kind = resp.transport == http::Transport::timed_out ? "timeout" : "transport";
        row.error = resp.transport_error;
    } else if (resp.status >= 300 && resp.status < 400) {
        row.error_kind = "http";
        row.error = fmt::format("HTTP {}: redirect to {} not followed", resp.status,
                                resp.location.value_or("(no Location header)"));
    } else if (resp.status != 200) {
        // 2xx other than 200 (206 Partial Content, 204 No Content) is no
        // complete answer either.
        row.error_kind = "http";
        row.error = fmt::format("HTTP {}: {}", resp.status, error_message(resp.body));
    } else {
        return false;
    }
    return true;
}

// Cut the run's secrets out of every text field of `row`, flagging it.
void redact_row(const util::Redactor& redactor, store::ResponseRow& row) {
    if (redactor.empty()) {
        return;
    }
    bool hit = redactor.apply(row.response_json);
    hit |= redactor.apply(row.error);
    hit |= redactor.apply(row.notes);
    for (auto* field : {&row.text, &row.reasoning, &row.finish_reason}) {
        if (*field) {
            hit |= redactor.apply(**field);
        }
    }
    if (auto* sr = std::get_if<std::string>(&row.stop_reason)) {
        hit |= redactor.apply(*sr);
    }
    row.redacted = row.redacted || hit;
}

class Progress {
public:
    Progress(ProgressStyle style, std::ostream& log, int64_t total)
        : m_style(style), m_log(log), m_total(total), m_start(Clock::now()), m_last(m_start) {}

    void update(int64_t done, int64_t errors, bool final = false) {
        if (m_style == ProgressStyle::none) {
            return;
        }
        auto now = Clock::now();
        auto since = now - m_last;
        if (!final && !due(since, done)) {
            return;
        }
        m_last = now;
        m_last_done = done;
        double secs = std::chrono::duration<double>(now - m_start).count();
        double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
        std::string eta = rate > 0 && done < m_total
                              ? fmt::format("{:.0f}s", static_cast<double>(m_total - done) / rate)
                              : "-";
        if (m_style == ProgressStyle::bar) {
            constexpr int k_width = 30;
            int filled = m_total > 0 ? static_cast<int>(k_width * done / m_total) : k_width;
            m_log << fmt::format("\r[{}{}] {}/{} {:.0f} req/s, {} errors, ETA {}  ",
                                 std::string(filled, '#'), std::string(k_width - filled, '.'), done,
                                 m_total, rate, errors, eta);
            if (final) {
                m_log << "\n";
            }
        } else {
            m_log << fmt::format("progress: {}/{} done, {:.0f} req/s, {} errors, ETA {}\n", done,
                                 m_total, rate, errors, eta);
        }
        m_log.flush();
    }

private:
    // A bar redraws 10 times a second. Lines (a pipe, a CI log) come at most
    // once a second, and then only when another 5% is done or 30 s have
    // passed: a short run prints a few lines, an hour-long one about 120.
    bool due(Clock::duration since, int64_t done) const {
        if (m_style == ProgressStyle::bar) {
            return since > std::chrono::milliseconds(100);
        }
        if (since < std::chrono::seconds(1)) {
            return false;
        }
        return since >= std::chrono::seconds(30) || (done - m_last_done) * 20 >= m_total;
    }

    ProgressStyle m_style;
    std::ostream& m_log;
    int64_t m_total;
    Clock::time_point m_start;
    Clock::time_point m_last;
    int64_t m_last_done = 0;
};

} // namespace

util::Result<RunSummary> run(const RunConfig& config, const RunOptions& options,
                             std::ostream& log) {
    // 1. Check the configuration and load everything that can be wrong
    //    before anything is sent: dataset, framings, credentials.
    if (auto r = validate(config); !r) {
        return r.error();
    }
    auto dataset = datasets::open_dataset(config.dataset, config.fewshot_from);
    if (!dataset) {
        return dataset.error();
    }
    std::vector<framing::Framing> framings;
    for (const auto& name : config.framings) {
        auto f = framing::load_framing(name);
        if (!f) {
            return f.error();
        }
        framings.push_back(framing::apply_overrides(std::move(*f), config.framing_overrides));
    }
    size_t n_questions = dataset->test.size();
    if (config.limit) {
        n_questions = std::min(n_questions, static_cast<size_t>(*config.limit));
    }
    if (auto r = check_plan_size(config, n_questions); !r) {
        return r.error();
    }
    std::vector<ServerState> servers(config.servers.size());
    for (size_t i = 0; i < servers.size(); ++i) {
        util::Result<void> status;
        servers[i].spec = &config.servers[i];
        servers[i].limit = static_cast<size_t>(config.concurrency_auto ? k_default_concurrency
                                                                       : config.concurrency);
        servers[i].headers = request_headers(config.servers[i], config, status);
        if (!status) {
            return status.error();
        }
    }
    const auto redactor = secrets_of(config);
    const auto stopped = [&] { return options.stop_requested && options.stop_requested->load(); };
    // Ctrl-C before the run row exists: nothing was sent or stored.
    const auto interrupted_early = [] {
        RunSummary s;
        s.interrupted = true;
        return s;
    };
    // Errors may quote a server's answer, which may quote the key.
    const auto redacted = [&](util::Error e) {
        e.message = redactor.redacted(std::move(e.message));
        return e;
    };

    // One run per database: the lock is taken before anything is sent, so
    // a second run sends nothing; runs left `running` by a dead process are
    // marked `killed` once it is ours.
    if (auto r = store::check_db_file(config.db, store::Store::Mode::read_write); !r) {
        return r.error();
    }
    auto lock = store::RunLock::acquire(
        config.db, config.wait_lock ? store::RunLock::Wait::yes : store::RunLock::Wait::no,
        options.stop_requested);
    if (!lock) {
        if (stopped()) {
            return interrupted_early();
        }
        return lock.error();
    }

    // 2. Preflight the servers diffeval does not launch: fail fast. Launched
    //    ones are checked once they are healthy, in their phase. What a
    //    server publishes sets its in-flight limit and is checked against
    //    the longest prompt.
    std::vector<ServerInfo> infos(servers.size());
    auto apply_limits = [&](size_t si) -> util::Result<void> {
        const auto& spec = config.servers[si];
        std::string note;
        servers[si].limit =
            in_flight_limit(config.concurrency, config.concurrency_auto, infos[si].limits, note);
        if (!note.empty()) {
            log << fmt::format("server '{}': {}\n", spec.name, note);
        }
        const size_t n_asked =
            config.limit ? std::min(dataset->test.size(), static_cast<size_t>(*config.limit))
                         : dataset->test.size();
        return check_context(spec.name, spec.url, servers[si].headers, infos[si].limits, framings,
                             *dataset, n_asked,
                             *std::max_element(config.max_tokens.begin(), config.max_tokens.end()),
                             spec.model     ? spec.model
                             : config.model ? config.model
                                            : infos[si].served_model,
                             config.timeout, log);
    };
    std::vector<std::string> attached_logs(servers.size());
    for (size_t i = 0; i < servers.size(); ++i) {
        const auto& spec = config.servers[i];
        if (!spec.attached_log.empty()) {
            auto text = util::read_file(spec.attached_log);
            if (!text) {
                return make_error(ErrorKind::usage,
                                  fmt::format("--server-log: cannot read {}", spec.attached_log));
            }
            attached_logs[i] = std::move(*text);
        }
        if (config.preflight && spec.launch.empty()) {
            auto info = preflight(spec, servers[i].headers, spec.model ? spec.model : config.model,
                                  config.timeout, options.stop_requested);
            if (!info) {
                if (stopped()) {
                    return interrupted_early();
                }
                return redacted(info.error());
            }
            infos[i] = std::move(*info);
            if (auto r = apply_limits(i); !r) {
                return r.error();
            }
        }
    }

    // 3. Open the store and record the run and its questions.
    auto store = store::Store::open(config.db, store::Store::Mode::read_write);
    if (!store) {
        return store.error();
    }
    auto& db = **store;
    if (auto killed = db.mark_stale_runs_killed(); !killed) {
        return killed.error();
    } else if (*killed > 0) {
        log << fmt::format("note: {} earlier run(s) were still marked running though their "
                           "process is gone; marked killed\n",
                           *killed);
    }
    auto run_id = db.begin_run(to_json(config).dump(), dataset->name);
    if (!run_id) {
        return run_id.error();
    }
    {
        std::vector<std::pair<std::string, std::string>> qa;
        qa.reserve(dataset->test.size());
        for (const auto& s : dataset->test) {
            qa.emplace_back(s.question, s.answer);
        }
        if (auto r = db.put_questions(dataset->name, qa); !r) {
            return r.error();
        }
    }
    auto done_keys = db.completed_keys();
    if (!done_keys) {
        return done_keys.error();
    }
    RunSummary summary;
    summary.run_id = *run_id;

    // Plans the probe's requests (probe_plan.hpp) of server `si` under framing
    // `f`, like the measured ones: stored first, queued unless answered.
    auto plan_probes = [&](size_t si, const framing::Framing& f, const framing::Renderer& renderer,
                           const std::optional<std::string>& body_model) -> util::Result<void> {
        const auto& spec = config.servers[si];
        auto target =
            std::make_shared<const ProbeTarget>(ProbeTarget{f.probe_marker, f.probe_chain});
        const auto endpoint = f.kind == framing::Kind::chat ? Endpoint::chat : Endpoint::completion;
        std::vector<store::RequestRow> rows;
        for (auto& p :
             plan_probe_requests(*config.probe, spec.name, renderer, *dataset, n_questions,
                                 config.repeats, body_model, spec.extra_body)) {
            ++summary.planned;
            if (done_keys->count(p.row.key)) {
                ++summary.skipped;
                continue;
            }
            Work w{p.row.key, si, endpoint, spec.url + f.endpoint, p.body, 0, "", nullptr, {}};
            w.probe = target;
            servers[si].queue.push_back(std::move(w));
            rows.push_back(std::move(p.row));
        }
        return db.put_requests(rows);
    };
    // Plans server `si`'s part of the matrix: stores every request before any
    // is sent and queues those without a successful response.
    auto plan = [&](size_t si) -> util::Result<void> {
        const auto& spec = config.servers[si];
        std::optional<std::string> model = spec.model ? spec.model : config.model;
        for (const auto& f : framings) {
            std::optional<std::string> body_model = model;
            if (!body_model && f.model == framing::ModelField::always) {
                body_model = infos[si].served_model;
                if (!body_model) {
                    return make_error(
                        ErrorKind::usage,
                        fmt::format("framing '{}' needs a model name for server '{}': "
                                    "pass --model (preflight is off)",
                                    f.name, spec.name));
                }
            }
            framing::Renderer renderer(f, *dataset);
            auto extra = spec.extra_body;
            if (config.stream) {
                extra["stream"] = true;
                extra["stream_options"] = {{"include_usage", true}};
            }
            const auto endpoint =
                f.kind == framing::Kind::chat ? Endpoint::chat : Endpoint::completion;
            for (int max_tokens : config.max_tokens) {
                std::vector<store::RequestRow> rows;
                for (size_t q = 0; q < n_questions; ++q) {
                    if (config.shard &&
                        static_cast<int>(q % static_cast<size_t>(config.shard->count)) !=
                            config.shard->index) {
                        continue;
                    }
                    auto body = std::make_shared<const std::string>(util::python_json_dumps(
                        renderer.body(dataset->test[q], max_tokens, body_model, extra)));
                    auto body_sha = util::sha256_hex(*body);
                    for (int rep = 0; rep < config.repeats; ++rep) {
                        store::RequestRow row{
                            "",      spec.name,           f.name,        max_tokens,
                            rep,     static_cast<int>(q), dataset->name, *body,
                            body_sha};
                        row.key =
                            util::sha256_hex(fmt::format("{}\n{}\n{}\n{}\n{}\n{}", spec.name,
                                                         f.name, max_tokens, rep, q, body_sha));
                        ++summary.planned;
                        if (done_keys->count(row.key)) {
                            ++summary.skipped;
                            continue;
                        }
                        servers[si].queue.push_back(Work{row.key,
                                                         si,
                                                         endpoint,
                                                         spec.url + f.endpoint,
                                                         body,
                                                         0,
                                                         "",
                                                         nullptr,
                                                         {}});
                        rows.push_back(std::move(row));
                    }
                }
                if (auto r = db.put_requests(rows); !r) {
                    return r.error();
                }
            }
            if (config.probe) {
                if (auto r = plan_probes(si, f, renderer, body_model); !r) {
                    return r;
                }
            }
        }
        return {};
    };
    // Records what the server is, from preflight, and its log with the
    // facts fingerprinting finds in it.
    auto record_server = [&](size_t si, const std::string& log_path, const std::string& log_text) {
        const auto& spec = config.servers[si];
        auto model = spec.model ? spec.model : config.model;
        store::ServerRow row{spec.name, spec.url,
                             model.value_or(infos[si].served_model.value_or("")),
                             redactor.redacted(infos[si].info.dump())};
        if (auto r = db.put_server(row); !r) {
            return r;
        }
        const auto props_facts = limit_facts(infos[si].limits);
        if (log_text.empty() && props_facts.empty()) {
            return util::Result<void>{};
        }
        nlohmann::json facts = nullptr;
        if (auto fp = fingerprint::fingerprint_log(log_text); fp && !fp->facts.empty()) {
            nlohmann::json conflicts = nlohmann::json::array();
            for (const auto& c : fp->conflicts) {
                conflicts.push_back(
                    {{"name", c.name}, {"message", c.message}, {"evidence", c.evidence}});
            }
            facts = {{"engine", fp->engine}, {"facts", fp->facts}, {"conflicts", conflicts}};
            for (const auto& c : fp->conflicts) {
                log << fmt::format("server '{}': CONFLICT {}: {}\n", spec.name, c.name, c.message);
            }
        }
        // What /props said counts like what the log said; the log wins where
        // both speak.
        if (!props_facts.empty()) {
            if (facts.is_null()) {
                facts = {{"engine", infos[si].limits.engine},
                         {"facts", nlohmann::json::object()},
                         {"conflicts", nlohmann::json::array()}};
            }
            for (const auto& [k, v] : props_facts.items()) {
                if (!facts["facts"].contains(k)) {
                    facts["facts"][k] = v;
                }
            }
        }
        return db.put_server_log(spec.name, log_path, redactor.redacted(log_text),
                                 facts.is_null() ? "" : redactor.redacted(facts.dump()));
    };

    // 4. Phases: all servers at once, or one at a time (--sequential-servers).
    std::vector<std::vector<size_t>> phases;
    for (size_t i = 0; i < servers.size(); ++i) {
        if (config.sequential_servers || phases.empty()) {
            phases.emplace_back();
        }
        phases.back().push_back(i);
    }
    store::Writer writer(db);
    http::MultiClient client;
    std::priority_queue<Retry, std::vector<Retry>, std::greater<>> retries;
    std::unordered_map<uint64_t, Work> in_flight;
    uint64_t next_tag = 1;
    const auto start = Clock::now();
    uint64_t jitter_state = util::hash64(fmt::format("{}", *run_id));
    std::vector<std::unique_ptr<LaunchedServer>> launched(servers.size());
    std::vector<bool> dead(servers.size(), false);
    int64_t pushed = 0;        // responses handed to the writer
    bool store_failed = false; // the writer reported an error: stop
    const auto log_dir = std::filesystem::path(config.db).parent_path() /
                         (std::filesystem::path(config.db).stem().string() + "-logs");

    auto submit = [&](Work w) {
        auto& st = servers[w.server];
        if (w.attempts == 0) {
            w.started_at = store::now_iso8601();
        }
        ++w.attempts;
        w.attempt_start = Clock::now();
        http::Request req;
        req.tag = next_tag++;
        req.method = "POST";
        req.url = w.url;
        req.headers = st.headers;
        req.body = w.body;
        req.timeout = config.timeout;
        req.max_body_bytes = static_cast<size_t>(config.max_response_bytes);
        if (config.stream && !w.probe) {
            w.stream = std::make_shared<StreamState>(w.endpoint, w.attempt_start);
            req.on_data = [state = w.stream](std::string_view chunk) {
                for (const auto& event : state->parser.feed(chunk)) {
                    auto at =
                        std::chrono::duration<double, std::milli>(Clock::now() - state->start);
                    state->acc.on_event(event, at.count());
                }
            };
        }
        ++st.in_flight;
        in_flight.emplace(req.tag, std::move(w));
        client.submit(std::move(req));
    };
    auto fill = [&] {
        for (auto& st : servers) {
            while (st.in_flight < st.limit && !st.queue.empty()) {
                Work w = std::move(st.queue.front());
                st.queue.pop_front();
                submit(std::move(w));
            }
        }
    };
    // Asks the retry policy about `w`'s attempt that returned `resp` (and,
    // once parsed, `parsed_error`); the jitter stream advances only when a
    // retry is scheduled.
    auto decide = [&](const Work& w, const http::Response& resp, std::string_view parsed_error) {
        const uint64_t next_jitter = util::hash64("jitter", jitter_state);
        RetryInput in;
        in.attempt = w.attempts;
        in.max_retries = config.retries;
        in.transport = resp.transport;
        in.status = resp.status;
        in.body = &resp.body;
        in.retry_after = &resp.retry_after;
        in.parsed_error_kind = parsed_error;
        in.timeout = config.timeout;
        in.backoff_base = config.retry_backoff;
        in.jitter = 0.5 + util::unit_interval(next_jitter); // 0.5x .. 1.5x
        auto d = retry_policy(in);
        if (d.retry) {
            jitter_state = next_jitter;
        }
        return d;
    };
    // A launched server died: stop sending to it. What it had not answered
    // stays unsent, so the next run sends it.
    auto check_crashes = [&](const std::vector<size_t>& phase) {
        for (size_t si : phase) {
            if (!launched[si] || dead[si] || !launched[si]->exited()) {
                continue;
            }
            dead[si] = true;
            servers[si].queue.clear();
            summary.crashed.push_back(config.servers[si].name);
            log << fmt::format(
                "server '{}' {} during the run; its unanswered requests are kept for the "
                "next run. Last log lines:\n{}\n",
                config.servers[si].name, launched[si]->exit_description(),
                redactor.redacted(launched[si]->log_tail(10)));
        }
    };
    auto stop_launched = [&](const std::vector<size_t>& phase) {
        for (size_t si : phase) {
            if (!launched[si]) {
                continue;
            }
            if (!config.keep_servers) {
                launched[si]->stop();
            }
            (void)record_server(si, launched[si]->log_path().string(), launched[si]->log_text());
        }
    };
    auto fail_run = [&](const std::vector<size_t>& phase,
                        util::Error e) -> util::Result<RunSummary> {
        stop_launched(phase);
        writer.close();
        (void)db.end_run(*run_id, "failed");
        return e;
    };

    for (const auto& phase : phases) {
        if (options.stop_requested && options.stop_requested->load()) {
            summary.interrupted = true;
            break;
        }
        // Launch, wait for health, then check the launched servers.
        for (size_t si : phase) {
            const auto& spec = config.servers[si];
            if (spec.launch.empty()) {
                continue;
            }
            auto path = spec.log_path.empty() ? log_dir / (spec.name + ".log")
                                              : std::filesystem::path(spec.log_path);
            log << fmt::format("starting server '{}' (log: {})\n", spec.name, path.string());
            auto ls = LaunchedServer::start(spec, path);
            if (!ls) {
                return fail_run(phase, ls.error());
            }
            launched[si] = std::move(*ls);
        }
        for (size_t si : phase) {
            if (!launched[si]) {
                continue;
            }
            if (auto r = launched[si]->wait_healthy(options.stop_requested); !r) {
                if (stopped()) {
                    summary.interrupted = true;
                    break;
                }
                return fail_run(phase, redacted(r.error()));
            }
            if (config.preflight) {
                const auto& spec = config.servers[si];
                auto info =
                    preflight(spec, servers[si].headers, spec.model ? spec.model : config.model,
                              config.timeout, options.stop_requested);
                if (!info) {
                    if (stopped()) {
                        summary.interrupted = true;
                        break;
                    }
                    return fail_run(phase, redacted(info.error()));
                }
                infos[si] = std::move(*info);
                if (auto r = apply_limits(si); !r) {
                    return fail_run(phase, r.error());
                }
            }
        }
        if (summary.interrupted) {
            stop_launched(phase);
            break;
        }
        int64_t planned_before = summary.planned, skipped_before = summary.skipped;
        for (size_t si : phase) {
            if (!launched[si]) {
                if (auto r = record_server(si, config.servers[si].attached_log, attached_logs[si]);
                    !r) {
                    return fail_run(phase, r.error());
                }
            }
            if (auto r = plan(si); !r) {
                return fail_run(phase, r.error());
            }
        }
        const int64_t to_send =
            (summary.planned - planned_before) - (summary.skipped - skipped_before);
        std::vector<std::string> names;
        for (size_t si : phase) {
            names.push_back(config.servers[si].name);
        }
        log << fmt::format(
            "diffeval run: {} requests planned, {} already stored (skipped), {} to send{}\n",
            summary.planned - planned_before, summary.skipped - skipped_before, to_send,
            phases.size() > 1 ? fmt::format(" ({})", fmt::join(names, ", ")) : "");
        Progress progress(options.progress, log, to_send);
        size_t phase_connections = 0;
        for (size_t si : phase) {
            phase_connections += servers[si].limit;
        }
        client.set_max_connections(phase_connections);
        const int64_t done_before = summary.succeeded + summary.failed;
        const int64_t failed_before = summary.failed;

        // The event loop.
        while (!in_flight.empty() || !retries.empty() ||
               std::any_of(servers.begin(), servers.end(),
                           [](const auto& s) { return !s.queue.empty(); })) {
            if (options.stop_requested && options.stop_requested->load()) {
                summary.interrupted = true;
                client.cancel_all();
                in_flight.clear();
                break;
            }
            // The store failed (disk full, I/O error): stop sending at once,
            // so no more answers arrive that cannot be kept.
            if (writer.error()) {
                store_failed = true;
                client.cancel_all();
                in_flight.clear();
                break;
            }
            check_crashes(phase);
            // Due retries go back to the front of their server's queue.
            while (!retries.empty() && retries.top().when <= Clock::now()) {
                Work w = retries.top().work;
                retries.pop();
                if (!dead[w.server]) {
                    servers[w.server].queue.push_front(std::move(w));
                }
            }
            fill();
            auto wait = std::chrono::milliseconds(100);
            if (!retries.empty()) {
                auto until = std::chrono::duration_cast<std::chrono::milliseconds>(
                    retries.top().when - Clock::now());
                wait = std::clamp(until, std::chrono::milliseconds(0), wait);
            }
            if (in_flight.empty()) {
                if (wait.count() > 0) {
                    usleep(static_cast<useconds_t>(wait.count() * 1000));
                }
                continue;
            }
            for (auto& resp : client.poll(wait)) {
                auto it = in_flight.find(resp.tag);
                Work w = std::move(it->second);
                in_flight.erase(it);
                --servers[w.server].in_flight;

                const bool transport_ok = resp.transport == http::Transport::ok;
                if (!transport_ok && launched[w.server] &&
                    (dead[w.server] || launched[w.server]->exited())) {
                    continue; // lost with its server: resent by the next run
                }
                if (auto d = decide(w, resp, {}); d.retry) {
                    ++summary.retries;
                    retries.push(Retry{Clock::now() + d.delay, std::move(w)});
                    continue;
                }
                store::ResponseRow row;
                row.key = w.key;
                row.probe = w.probe != nullptr;
                row.run_id = *run_id;
                row.status = static_cast<int>(resp.status);
                row.response_json = resp.body;
                row.attempts = w.attempts;
                row.latency_ms =
                    std::chrono::duration<double, std::milli>(Clock::now() - w.attempt_start)
                        .count();
                row.started_at = w.started_at;
                if (classify_failure(resp, row)) {
                    // stored as the error it is
                } else if (w.probe) {
                    parse_probe_body(resp.body, *w.probe, row);
                } else if (w.stream) {
                    w.stream->acc.finish(row);
                } else {
                    parse_success_body(resp.body, w.endpoint, row);
                }
                // A 200 whose body was cut or carried an error event is the
                // server failing to deliver, like a 5xx: the policy may try again.
                if (!row.ok) {
                    if (auto d = decide(w, resp, row.error_kind); d.retry) {
                        ++summary.retries;
                        retries.push(Retry{Clock::now() + d.delay, std::move(w)});
                        continue;
                    }
                }
                if (row.ok) {
                    ++summary.succeeded;
                } else {
                    ++summary.failed;
                }
                redact_row(redactor, row);
                writer.push(std::move(row));
                ++pushed;
            }
            progress.update(summary.succeeded + summary.failed - done_before,
                            summary.failed - failed_before);
        }
        writer.flush();
        progress.update(summary.succeeded + summary.failed - done_before,
                        summary.failed - failed_before, true);
        stop_launched(phase);
        if (summary.interrupted || store_failed) {
            break;
        }
    }

    // 5. Flush, close the run, and report.
    writer.close();
    summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (auto err = writer.error()) {
        const int64_t lost = pushed - writer.committed();
        const bool marked = db.end_run(*run_id, "failed").ok();
        return make_error(
            ErrorKind::io,
            fmt::format("writing responses to {} failed: {}; stopped sending at once. {} "
                        "response(s) received were not stored; the run is {}. Free space or fix "
                        "the file, then rerun the same command to send what has no response",
                        config.db, *err, lost,
                        marked ? "marked failed"
                               : "still marked running (the next run marks it killed)"));
    }
    (void)db.end_run(*run_id, summary.interrupted                          ? "interrupted"
                              : summary.failed || !summary.crashed.empty() ? "incomplete"
                                                                           : "complete");
    return summary;
}

} // namespace diffeval::engine
