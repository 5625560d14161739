// The HTTP layer of the simulator: routing, validation errors, fault
// injection, latency and the statistics endpoint, on cpp-httplib 0.11.
//
// What cpp-httplib needs help with, and how:
//   - its listen backlog is 5, too small for 64 clients connecting at once
//     (dropped SYNs cost a one-second retransmit): listen() is called again
//     with a larger backlog;
//   - it compresses JSON and "text/..." bodies when the client accepts gzip,
//     which vLLM does not do and which would hold back streamed events: the
//     Accept-Encoding header is dropped before routing;
//   - handlers cannot reach their socket, and idle keep-alive connections
//     only notice a stopped server after seconds: see sockets.hpp.
#include <harness/sim/server.hpp>

#include <harness/sim/faults.hpp>
#include <harness/sim/generate.hpp>
#include <harness/sim/question_bank.hpp>
#include <harness/sim/request.hpp>
#include <harness/sim/response.hpp>
#include <harness/sim/sockets.hpp>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <sys/socket.h>
#include <thread>
#include <unordered_map>

namespace diffeval::sim {

namespace {

using ojson = nlohmann::ordered_json;
using namespace std::chrono_literals;

constexpr int k_backlog = 1024;
constexpr size_t k_keep_alive_requests = 1000000;
constexpr const char* k_json_type = "application/json";
constexpr const char* k_sse_type = "text/event-stream; charset=utf-8"; // as vLLM sends it

class HttpServer : public httplib::Server {
public:
    // Let the kernel queue more connections than cpp-httplib's fixed backlog.
    void widen_backlog(int backlog) { ::listen(svr_sock_, backlog); }
};

// How often one request content has arrived and been answered.
struct Seen {
    int arrivals = 0;
    int generations = 0;
};

// Streaming state shared with cpp-httplib's content provider.
struct StreamState {
    std::vector<StreamEvent> events;
    size_t next = 0;
    size_t cut = SIZE_MAX; // close the connection before this event (reset fault)
    bool paced = false;
    bool first_content = true;
};

std::string models_body(const SimConfig& c) {
    ojson perm;
    perm["id"] = "modelperm-" + c.profile.name;
    perm["object"] = "model_permission";
    perm["created"] = c.profile.server.created;
    perm["allow_create_engine"] = false;
    perm["allow_sampling"] = true;
    perm["allow_logprobs"] = true;
    perm["allow_search_indices"] = false;
    perm["allow_view"] = true;
    perm["allow_fine_tuning"] = false;
    perm["organization"] = "*";
    perm["group"] = nullptr;
    perm["is_blocking"] = false;
    ojson card;
    card["id"] = c.model_id;
    card["object"] = "model";
    card["created"] = c.profile.server.created;
    card["owned_by"] = "vllm";
    card["root"] = c.model_id;
    card["parent"] = nullptr;
    card["max_model_len"] = c.profile.server.max_model_len;
    card["permission"] = ojson::array({perm});
    ojson j;
    j["object"] = "list";
    j["data"] = ojson::array({card});
    return j.dump();
}

} // namespace

struct Server::Impl {
    SimConfig config;
    std::unique_ptr<QuestionBank> bank;
    HttpServer http;
    std::thread listener;
    int port = 0;

    std::atomic<bool> stopping{false};
    std::mutex wait_mutex;
    std::condition_variable wake;

    mutable std::mutex stats_mutex;
    Stats counters;
    std::unordered_map<uint64_t, Seen> seen;

    // Wait `ms`; false when the server is stopping (then return at once).
    bool pause(std::chrono::milliseconds ms) {
        if (ms.count() <= 0) {
            return !stopping;
        }
        std::unique_lock lock(wait_mutex);
        return !wake.wait_for(lock, ms, [this] { return stopping.load(); });
    }

    void count_request(const std::string& endpoint) {
        std::lock_guard lock(stats_mutex);
        counters.requests[endpoint]++;
    }
    void count_status(int status) {
        std::lock_guard lock(stats_mutex);
        counters.statuses[status]++;
    }
    void count_fault(std::string_view kind) {
        std::lock_guard lock(stats_mutex);
        counters.faults[std::string(kind)]++;
    }
    int next_arrival(uint64_t hash) {
        std::lock_guard lock(stats_mutex);
        return seen[hash].arrivals++;
    }
    int next_generation(uint64_t hash) {
        std::lock_guard lock(stats_mutex);
        int k = seen[hash].generations++;
        if (k == 0) {
            counters.distinct_requests++;
        } else {
            counters.repeated_sightings++;
        }
        return k;
    }

    void reply_json(httplib::Response& res, int status, const std::string& body) {
        res.status = status;
        res.set_content(body, k_json_type);
        count_status(status);
    }
    void reply_error(httplib::Response& res, const ApiError& e) {
        reply_json(res, e.status, error_body(e));
    }

    void install_routes();
    void handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint ep);
    void send_body(httplib::Response& res, std::string body, Fault fault, int tokens);
    void send_stream(httplib::Response& res, std::vector<StreamEvent> events, Fault fault);
    std::string stats_body() const;
};

void Server::Impl::handle_generation(const httplib::Request& req, httplib::Response& res,
                                     Endpoint ep) {
    count_request(ep == Endpoint::chat ? "chat" : "completions");
    auto parsed = parse_request(req.body, ep, config.profile, config.model_id);
    if (auto* err = std::get_if<ApiError>(&parsed)) {
        reply_error(res, *err);
        return;
    }
    const ParsedRequest& r = std::get<ParsedRequest>(parsed);
    const Faults& faults = config.profile.faults;
    const int attempt = next_arrival(r.content_hash);
    Fault fault =
        pick_fault(faults, r.content_hash, attempt, r.stream ? Delivery::stream : Delivery::whole);

    // Faults that replace the response.
    switch (fault) {
    case Fault::http_500:
        count_fault(fault_name(fault));
        reply_error(res, {500, "InternalServerError", "Internal server error", std::nullopt});
        return;
    case Fault::http_503:
        count_fault(fault_name(fault));
        reply_error(res, {503, "ServiceUnavailableError",
                          "The server is temporarily unable to handle the request", std::nullopt});
        return;
    case Fault::http_429:
        count_fault(fault_name(fault));
        res.set_header("Retry-After", std::to_string(faults.retry_after_s));
        reply_error(res, {429, "RateLimitError", "Too many requests", std::nullopt});
        return;
    case Fault::reset_before_body:
        count_fault(fault_name(fault));
        for (int fd : connection_sockets(port, req.remote_port)) {
            end_connection(fd, Ending::reset);
        }
        return;
    case Fault::stall:
        count_fault(fault_name(fault));
        if (!pause(std::chrono::milliseconds(faults.stall_ms))) {
            return;
        }
        fault = Fault::none; // a stall that outlived its client then answers normally
        break;
    default:
        break;
    }

    std::string_view markup = pick_markup(faults, r.content_hash, attempt);
    if (!markup.empty()) {
        count_fault(k_markup_name);
    }
    GenerateOptions options;
    options.sighting = next_generation(r.content_hash);
    options.inject_markup = markup;
    std::vector<Generation> choices;
    int longest = 0;
    for (size_t p = 0; p < r.prompts.size(); ++p) {
        options.prompt_index = p;
        Generation g = generate(config.profile, *bank, r, options);
        longest = std::max(longest, g.completion_tokens);
        // Greedy decoding: all n choices of one prompt are the same.
        for (int i = 1; i < r.n; ++i) {
            choices.push_back(g);
        }
        choices.push_back(std::move(g));
    }
    ResponseMeta meta{response_id(r, options.sighting), config.profile.server.created,
                      config.model_id};
    if (fault != Fault::none) {
        count_fault(fault_name(fault));
    }
    if (r.stream) {
        send_stream(res, response_events(config.profile, r, choices, meta), fault);
    } else {
        send_body(res, response_body(config.profile, r, choices, meta), fault, longest);
    }
}

void Server::Impl::send_body(httplib::Response& res, std::string body, Fault fault, int tokens) {
    const Latency& lat = config.profile.latency;
    if (!pause(std::chrono::milliseconds(lat.ttft_ms + int64_t{lat.per_token_ms} * tokens))) {
        return;
    }
    if (fault == Fault::malformed_json) {
        body.resize(body.size() / 2);
    }
    if (fault == Fault::reset_during_body) {
        // Content-Length promises the whole body; half of it is sent, then
        // the provider fails and cpp-httplib closes the connection.
        auto shared = std::make_shared<std::string>(std::move(body));
        res.status = 200;
        res.set_content_provider(shared->size(), k_json_type,
                                 [shared](size_t offset, size_t, httplib::DataSink& sink) {
                                     size_t half = shared->size() / 2;
                                     if (offset < half) {
                                         sink.write(shared->data() + offset, half - offset);
                                     }
                                     return false;
                                 });
        count_status(200);
        return;
    }
    reply_json(res, 200, body);
}

void Server::Impl::send_stream(httplib::Response& res, std::vector<StreamEvent> events,
                               Fault fault) {
    auto st = std::make_shared<StreamState>();
    size_t mid = events.size() > 2 ? events.size() / 2 : 0;
    if (fault == Fault::malformed_json && mid > 0) {
        std::string& data = events[mid].data;
        data = data.substr(0, data.size() / 2) + "\n\n";
    } else if (fault == Fault::stream_error) {
        // vLLM reports an engine failure inside the stream, then ends it.
        events.resize(mid);
        ApiError e{500, "InternalServerError", "Internal server error", std::nullopt};
        events.push_back({"data: " + error_body(e) + "\n\n", 0});
        events.push_back({"data: [DONE]\n\n", 0});
    } else if (fault == Fault::reset_during_body) {
        st->cut = mid;
    }
    st->events = std::move(events);
    st->paced = config.profile.latency.ttft_ms > 0 || config.profile.latency.per_token_ms > 0;
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(k_sse_type, [this, st](size_t, httplib::DataSink& sink) {
        if (!st->paced) {
            std::string all;
            size_t end = std::min(st->cut, st->events.size());
            for (; st->next < end; ++st->next) {
                all += st->events[st->next].data;
            }
            if (!all.empty() && !sink.write(all.data(), all.size())) {
                return false;
            }
            if (st->next < st->events.size()) {
                return false;
            }
            sink.done();
            return true;
        }
        if (st->next >= st->cut) {
            return false;
        }
        const StreamEvent& ev = st->events[st->next];
        const Latency& lat = config.profile.latency;
        int64_t wait = int64_t{lat.per_token_ms} * ev.tokens;
        if (ev.tokens > 0 && st->first_content) {
            wait += lat.ttft_ms - lat.per_token_ms;
            st->first_content = false;
        }
        if (!pause(std::chrono::milliseconds(std::max<int64_t>(wait, 0)))) {
            return false;
        }
        if (!sink.write(ev.data.data(), ev.data.size())) {
            return false;
        }
        if (++st->next == st->events.size()) {
            sink.done();
        }
        return true;
    });
    count_status(200);
}

std::string Server::Impl::stats_body() const {
    Stats s;
    {
        std::lock_guard lock(stats_mutex);
        s = counters;
    }
    ojson j;
    j["profile"] = config.profile.name;
    j["requests"] = ojson::object();
    for (const auto& [k, v] : s.requests) {
        j["requests"][k] = v;
    }
    j["responses"] = ojson::object();
    for (const auto& [k, v] : s.statuses) {
        j["responses"][std::to_string(k)] = v;
    }
    j["faults"] = ojson::object();
    for (Fault kind : k_fault_kinds) {
        std::string name(fault_name(kind));
        j["faults"][name] = s.faults.count(name) ? s.faults.at(name) : 0;
    }
    std::string markup(k_markup_name);
    j["faults"][markup] = s.faults.count(markup) ? s.faults.at(markup) : 0;
    j["sightings"]["distinct"] = s.distinct_requests;
    j["sightings"]["repeats"] = s.repeated_sightings;
    return j.dump();
}

void Server::Impl::install_routes() {
    http.set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
        // See the file comment: never compress. The request object is not
        // const in cpp-httplib; only the handler's view of it is.
        const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
        return httplib::Server::HandlerResponse::Unhandled;
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
        handle_generation(req, res, Endpoint::completions);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
        handle_generation(req, res, Endpoint::chat);
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        count_request("models");
        reply_json(res, 200, models_body(config));
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        count_request("health");
        res.status = 200;
        count_status(200);
    });
    http.Get("/version", [this](const httplib::Request&, httplib::Response& res) {
        count_request("version");
        reply_json(res, 200, ojson{{"version", config.profile.server.vllm_version}}.dump());
    });
    http.Get("/stats", [this](const httplib::Request&, httplib::Response& res) {
        res.status = 200;
        res.set_content(stats_body(), k_json_type);
    });
    auto not_allowed = [this](const httplib::Request&, httplib::Response& res) {
        count_request("other");
        reply_json(res, 405, R"({"detail":"Method Not Allowed"})");
    };
    http.Get("/v1/completions", not_allowed);
    http.Get("/v1/chat/completions", not_allowed);
    http.Post("/v1/models", not_allowed);
    http.Post("/health", not_allowed);
    http.Post("/version", not_allowed);
    http.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request&, httplib::Response& res) {
            if (res.status == 404 && res.body.empty()) {
                count_request("other");
                res.set_content(R"({"detail":"Not Found"})", k_json_type);
                count_status(404);
                return httplib::Server::HandlerResponse::Handled;
            }
            return httplib::Server::HandlerResponse::Unhandled;
        }));
    http.set_exception_handler(
        [this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
            std::string what = "Internal server error";
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
            }
            reply_error(res, {500, "InternalServerError", what, std::nullopt});
        });
}

Server::Server(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Server::~Server() {
    stop();
}

util::Result<std::unique_ptr<Server>> Server::start(SimConfig config) {
    // A client that goes away mid-response must not kill the process:
    // cpp-httplib writes with plain send(), which raises SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    auto impl = std::make_unique<Impl>();
    impl->bank = std::make_unique<QuestionBank>(std::move(config.dataset));
    impl->config = std::move(config);
    const int threads = std::max(1, impl->config.threads);
    impl->http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    impl->http.set_keep_alive_max_count(k_keep_alive_requests);
    impl->http.set_tcp_nodelay(true);
    impl->http.set_socket_options([](socket_t sock) {
        // Only SO_REUSEADDR: SO_REUSEPORT would let two servers share a port.
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    impl->install_routes();
    const auto& host = impl->config.host;
    if (impl->config.port == 0) {
        impl->port = impl->http.bind_to_any_port(host);
    } else if (impl->http.bind_to_port(host, impl->config.port)) {
        impl->port = impl->config.port;
    } else {
        impl->port = -1;
    }
    if (impl->port <= 0) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("cannot listen on {}:{} (address in use or not "
                                            "available)",
                                            host, impl->config.port));
    }
    impl->http.widen_backlog(k_backlog);
    Impl* raw = impl.get();
    impl->listener = std::thread([raw] { raw->http.listen_after_bind(); });
    // cpp-httplib's stop() is a no-op until its accept loop has started.
    while (!impl->http.is_running()) {
        std::this_thread::sleep_for(100us);
    }
    return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::port() const {
    return m_impl->port;
}

std::string Server::base_url() const {
    const auto& host = m_impl->config.host;
    bool v6 = host.find(':') != std::string::npos;
    return fmt::format("http://{}{}{}:{}", v6 ? "[" : "", host, v6 ? "]" : "", m_impl->port);
}

void Server::stop() {
    if (!m_impl || m_impl->stopping.exchange(true)) {
        return;
    }
    { std::lock_guard lock(m_impl->wait_mutex); }
    m_impl->wake.notify_all();
    m_impl->http.stop();
    // Wake worker threads parked on idle keep-alive connections until the
    // listener has joined them all.
    while (m_impl->listener.joinable()) {
        for (int fd : connection_sockets(m_impl->port, -1)) {
            end_connection(fd, Ending::graceful);
        }
        if (!m_impl->http.is_running()) {
            m_impl->listener.join();
            break;
        }
        std::this_thread::sleep_for(1ms);
    }
}

Stats Server::stats() const {
    std::lock_guard lock(m_impl->stats_mutex);
    Stats s = m_impl->counters;
    for (Fault kind : k_fault_kinds) {
        s.faults.emplace(std::string(fault_name(kind)), 0);
    }
    s.faults.emplace(std::string(k_markup_name), 0);
    return s;
}

} // namespace diffeval::sim
