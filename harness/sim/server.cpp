// The HTTP layer of the simulator: routing, validation errors, fault
// injection, latency and the statistics endpoint, on Boost.Beast over Asio.
//
// One thread runs an Asio event loop that serves every connection, the way
// vLLM's uvicorn serves them from one asyncio loop: a connection costs a
// socket and a few hundred bytes, never a thread, so thousands of idle
// keep-alive connections cannot hold back a busy one, and latency, stalls
// and paced streams are timers rather than sleeping threads. Beast parses
// requests (headers, bodies, pipelining); responses are written as bytes
// because the faults need exact control of them: a reset before any byte, a
// body cut short of its Content-Length, a chunked stream that never ends.
// Responses are never compressed: vLLM does not, and compression would hold
// back streamed events.
#include <harness/sim/server.hpp>

#include <harness/sim/faults.hpp>
#include <harness/sim/generate.hpp>
#include <harness/sim/question_bank.hpp>
#include <harness/sim/request.hpp>
#include <harness/sim/response.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <sys/resource.h>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace diffeval::sim {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using ojson = nlohmann::ordered_json;
using namespace std::chrono_literals;

constexpr int k_backlog = 4096;
// uvicorn's default: an idle keep-alive connection is closed after 5 s.
constexpr auto k_keep_alive_timeout = std::chrono::seconds{5};
constexpr uint64_t k_body_limit = uint64_t{64} << 20; // bytes of one request body
// A connection's read buffer from the start: a 5-shot GSM8K request with its
// head is 3 to 4 KiB.
constexpr size_t k_read_room = size_t{8} << 10;
constexpr auto k_accept_retry = std::chrono::milliseconds{10};
constexpr std::string_view k_json_type = "application/json";
constexpr std::string_view k_sse_type = "text/event-stream; charset=utf-8"; // as vLLM sends it

// How often one request content has arrived and been answered.
struct Seen {
    int arrivals = 0;
    int generations = 0;
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

// A whole response: status, body and the one optional header a fault adds.
struct Reply {
    int status = 200;
    std::string body;
    std::string_view content_type = k_json_type;
    std::string retry_after; // Retry-After value, "" for none
};

// Whether the connection stays open after the response.
enum class KeepAlive { no, yes };

// How a connection ends.
enum class Ending {
    graceful, // the peer reads end-of-file
    reset,    // the peer sees a reset
};

// The status line and headers of a response whose body is `length` bytes
// long, or chunked when `length` is empty.
std::string head(int status, std::string_view content_type, std::optional<size_t> length,
                 KeepAlive keep_alive, std::string_view extra = {}) {
    auto reason = http::obsolete_reason(static_cast<http::status>(status));
    std::string out =
        fmt::format("HTTP/1.1 {} {}\r\n", status, std::string_view(reason.data(), reason.size()));
    if (!content_type.empty()) {
        fmt::format_to(std::back_inserter(out), "Content-Type: {}\r\n", content_type);
    }
    if (length) {
        fmt::format_to(std::back_inserter(out), "Content-Length: {}\r\n", *length);
    } else {
        out += "Transfer-Encoding: chunked\r\n";
    }
    out += extra;
    if (keep_alive == KeepAlive::no) {
        out += "Connection: close\r\n";
    }
    out += "\r\n";
    return out;
}

// Append `data` as one chunk of a chunked body.
void append_chunk(std::string& out, std::string_view data) {
    if (data.empty()) {
        return; // an empty chunk would end the body
    }
    fmt::format_to(std::back_inserter(out), "{:x}\r\n", data.size());
    out += data;
    out += "\r\n";
}

constexpr std::string_view k_last_chunk = "0\r\n\r\n";

// Let the process hold as many sockets as its hard limit allows: the soft
// limit (often 1024) would refuse connections long before the event loop
// is busy.
void raise_descriptor_limit() {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
    }
}

class Session;

} // namespace

struct Server::Impl {
    SimConfig config;
    std::unique_ptr<QuestionBank> bank;
    int port = 0;
    std::atomic<bool> stopping{false};

    mutable std::mutex stats_mutex; // stats() is read from other threads
    Stats counters;
    std::unordered_map<uint64_t, Seen> seen;

    // Touched only by the event loop's thread, or after it has been joined.
    // Declared before `io` so that sessions destroyed with the loop's
    // pending handlers can still remove themselves.
    std::unordered_set<Session*> sessions;
    net::io_context io{1};
    tcp::acceptor acceptor{io};
    net::steady_timer accept_pause{io};
    std::thread loop;

    void count_request(std::string_view endpoint) {
        std::lock_guard lock(stats_mutex);
        counters.requests[std::string(endpoint)]++;
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

    void accept_next();
    std::string stats_body() const;
};

namespace {

// A generation request from when it is read until its answer is written in
// full or its connection ends: what a client has in flight on this server.
class InFlight {
public:
    explicit InFlight(Server::Impl& server) : m_server(server) {
        std::lock_guard lock(m_server.stats_mutex);
        auto& c = m_server.counters;
        c.in_flight_peak = std::max(c.in_flight_peak, ++c.in_flight);
    }
    ~InFlight() {
        std::lock_guard lock(m_server.stats_mutex);
        --m_server.counters.in_flight;
    }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

private:
    Server::Impl& m_server;
};

// One client connection: read a request, answer it (perhaps after timers),
// then read the next one while the connection is kept alive.
class Session : public std::enable_shared_from_this<Session> {
public:
    Session(Server::Impl& server, tcp::socket socket)
        : m_server(server), m_stream(std::move(socket)), m_timer(m_stream.get_executor()) {
        m_server.sessions.insert(this);
        // Beast reads into the room the buffer has (512 bytes when it has
        // none): room for a whole request is one recv, not five or six.
        m_buffer.reserve(k_read_room);
    }
    ~Session() { m_server.sessions.erase(this); }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    void start() { read_next(); }

    // End the connection now (the server is stopping).
    void end(Ending how) {
        beast::error_code ec;
        auto& s = m_stream.socket();
        if (how == Ending::reset) {
            s.set_option(net::socket_base::linger(true, 0), ec);
        } else {
            s.shutdown(tcp::socket::shutdown_both, ec);
        }
        s.close(ec);
    }

private:
    void read_next();
    void on_read(beast::error_code ec);
    void route();
    void handle_generation(Endpoint ep);
    void answer(const ParsedRequest& r, Fault fault, int attempt);
    void send_body(std::string body, Fault fault, int tokens);
    void send_stream(std::vector<StreamEvent> events, Fault fault);
    void send_next_event();

    // Write `reply` and go on with the connection.
    void reply(Reply r);
    void reply_error(const ApiError& e) { reply({e.status, error_body(e)}); }
    // Write `bytes`; then read the next request, or end the connection
    // when `then_end` says so.
    void write(std::string bytes, std::optional<Ending> then_end);
    // Run `then` after `ms` unless the server stops first.
    template <typename F> void after(std::chrono::milliseconds ms, F then) {
        if (ms.count() <= 0) {
            then();
            return;
        }
        m_timer.expires_after(ms);
        m_timer.async_wait(
            [self = shared_from_this(), then = std::move(then)](beast::error_code ec) mutable {
                if (!ec && !self->m_server.stopping) {
                    then();
                }
            });
    }

    KeepAlive keep_alive() const { return m_keep_alive ? KeepAlive::yes : KeepAlive::no; }
    std::optional<Ending> after_response() const {
        return m_keep_alive ? std::nullopt : std::optional(Ending::graceful);
    }

    Server::Impl& m_server;
    beast::tcp_stream m_stream;
    beast::flat_buffer m_buffer;
    std::optional<http::request_parser<http::string_body>> m_parser;
    net::steady_timer m_timer;
    std::string m_out; // the bytes being written
    bool m_keep_alive = true;
    std::optional<InFlight> m_in_flight; // the generation being answered

    // A paced stream in progress.
    std::vector<StreamEvent> m_events;
    size_t m_next = 0;
    size_t m_cut = SIZE_MAX; // end the connection before this event (reset fault)
    bool m_first_content = true;
};

void Session::read_next() {
    m_in_flight.reset();
    m_parser.emplace();
    m_parser->body_limit(k_body_limit);
    m_stream.expires_after(k_keep_alive_timeout);
    http::async_read(
        m_stream, m_buffer, *m_parser,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
}

void Session::on_read(beast::error_code ec) {
    if (m_server.stopping) {
        return;
    }
    if (ec == http::error::body_limit) {
        m_keep_alive = false;
        reply_error({413, "BadRequestError", "Request body too large", std::nullopt});
        return;
    }
    if (ec && ec.category() != http::make_error_code(http::error::bad_target).category()) {
        end(Ending::graceful); // the peer went idle, or the socket failed
        return;
    }
    if (ec == http::error::end_of_stream || ec == http::error::partial_message) {
        end(Ending::graceful); // the peer left
        return;
    }
    if (ec) {
        m_keep_alive = false;
        reply({400, R"({"detail":"Bad Request"})"});
        return;
    }
    m_stream.expires_never();
    m_keep_alive = m_parser->get().keep_alive();
    try {
        route();
    } catch (const std::exception& e) {
        m_server.count_status(500);
        reply_error({500, "InternalServerError", e.what(), std::nullopt});
    }
}

void Session::route() {
    const auto& req = m_parser->get();
    std::string_view path(req.target().data(), req.target().size());
    path = path.substr(0, path.find('?'));
    const bool get = req.method() == http::verb::get;
    const bool post = req.method() == http::verb::post;
    const SimConfig& config = m_server.config;
    auto not_allowed = [&] {
        m_server.count_request("other");
        m_server.count_status(405);
        reply({405, R"({"detail":"Method Not Allowed"})"});
    };
    if (path == "/v1/completions" || path == "/v1/chat/completions") {
        if (!post) {
            return not_allowed();
        }
        return handle_generation(path == "/v1/chat/completions" ? Endpoint::chat
                                                                : Endpoint::completions);
    }
    if (path == "/v1/models" || path == "/health" || path == "/version") {
        if (!get) {
            return not_allowed();
        }
        std::string_view name = path == "/v1/models" ? "models" : path.substr(1);
        m_server.count_request(name);
        m_server.count_status(200);
        if (path == "/health") {
            return reply({200, "", ""});
        }
        // /version names the simulator beside the version it imitates, so
        // that a report on its answers says no engine produced them.
        return reply({200, path == "/version"
                               ? ojson{{"version", config.profile.server.vllm_version},
                                       {"diffeval_simulator", config.profile.name}}
                                     .dump()
                               : models_body(config)});
    }
    if (path == "/stats" && get) {
        return reply({200, m_server.stats_body()});
    }
    m_server.count_request("other");
    m_server.count_status(404);
    reply({404, R"({"detail":"Not Found"})"});
}

void Session::handle_generation(Endpoint ep) {
    m_server.count_request(ep == Endpoint::chat ? "chat" : "completions");
    m_in_flight.emplace(m_server);
    const SimConfig& config = m_server.config;
    auto parsed = parse_request(m_parser->get().body(), ep, config.profile, config.model_id);
    if (auto* err = std::get_if<ApiError>(&parsed)) {
        m_server.count_status(err->status);
        return reply_error(*err);
    }
    auto r = std::make_shared<ParsedRequest>(std::move(std::get<ParsedRequest>(parsed)));
    const Faults& faults = config.profile.faults;
    const int attempt = m_server.next_arrival(r->content_hash);
    Fault fault = pick_fault(faults, r->content_hash, attempt,
                             r->stream ? Delivery::stream : Delivery::whole);

    // Faults that replace the response.
    auto fail = [&](int status, const char* type, const char* message) {
        m_server.count_fault(fault_name(fault));
        m_server.count_status(status);
        Reply reply{status, error_body({status, type, message, std::nullopt})};
        if (status == 429) {
            reply.retry_after = std::to_string(faults.retry_after_s);
        }
        this->reply(std::move(reply));
    };
    switch (fault) {
    case Fault::http_500:
        return fail(500, "InternalServerError", "Internal server error");
    case Fault::http_503:
        return fail(503, "ServiceUnavailableError",
                    "The server is temporarily unable to handle the request");
    case Fault::http_429:
        return fail(429, "RateLimitError", "Too many requests");
    case Fault::reset_before_body:
        m_server.count_fault(fault_name(fault));
        return end(Ending::reset);
    case Fault::stall:
        // A stall that outlived its client then answers normally.
        m_server.count_fault(fault_name(fault));
        return after(std::chrono::milliseconds(faults.stall_ms),
                     [this, r, attempt] { answer(*r, Fault::none, attempt); });
    default:
        return answer(*r, fault, attempt);
    }
}

// Generate the choices of `r` and send them, spoiled by `fault`; markup is
// drawn for the same `attempt` as the fault was.
void Session::answer(const ParsedRequest& r, Fault fault, int attempt) {
    const SimConfig& config = m_server.config;
    std::string_view markup = pick_markup(config.profile.faults, r.content_hash, attempt);
    if (!markup.empty()) {
        m_server.count_fault(k_markup_name);
    }
    GenerateOptions options;
    options.sighting = m_server.next_generation(r.content_hash);
    options.inject_markup = markup;
    std::vector<Generation> choices;
    int longest = 0;
    for (size_t p = 0; p < r.prompts.size(); ++p) {
        options.prompt_index = p;
        Generation g = generate(config.profile, *m_server.bank, r, options);
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
        m_server.count_fault(fault_name(fault));
    }
    if (r.stream) {
        send_stream(response_events(config.profile, r, choices, meta), fault);
    } else {
        send_body(response_body(config.profile, r, choices, meta), fault, longest);
    }
}

void Session::send_body(std::string body, Fault fault, int tokens) {
    const Latency& lat = m_server.config.profile.latency;
    auto ms = std::chrono::milliseconds(lat.ttft_ms + int64_t{lat.per_token_ms} * tokens);
    after(ms, [this, body = std::move(body), fault]() mutable {
        m_server.count_status(200);
        if (fault == Fault::malformed_json) {
            body.resize(body.size() / 2);
        }
        if (fault == Fault::reset_during_body) {
            // Content-Length promises the whole body; half of it is sent,
            // then the connection closes.
            std::string out = head(200, k_json_type, body.size(), keep_alive());
            out.append(body, 0, body.size() / 2);
            return write(std::move(out), Ending::graceful);
        }
        reply({200, std::move(body)});
    });
}

void Session::send_stream(std::vector<StreamEvent> events, Fault fault) {
    m_cut = SIZE_MAX;
    m_next = 0;
    m_first_content = true;
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
        m_cut = mid;
    }
    m_server.count_status(200);
    std::string out =
        head(200, k_sse_type, std::nullopt, keep_alive(), "Cache-Control: no-cache\r\n");
    const Latency& lat = m_server.config.profile.latency;
    if (lat.ttft_ms > 0 || lat.per_token_ms > 0) {
        m_events = std::move(events);
        m_out = std::move(out);
        net::async_write(m_stream, net::buffer(m_out),
                         [self = shared_from_this()](beast::error_code ec, size_t) {
                             if (!ec && !self->m_server.stopping) {
                                 self->send_next_event();
                             }
                         });
        return;
    }
    // Unpaced: every event at once, as one chunk.
    std::string all;
    const size_t end = std::min(m_cut, events.size());
    for (size_t i = 0; i < end; ++i) {
        all += events[i].data;
    }
    append_chunk(out, all);
    if (end < events.size()) {
        return write(std::move(out), Ending::graceful);
    }
    out += k_last_chunk;
    write(std::move(out), after_response());
}

// Write the next event of a paced stream once its tokens are due.
void Session::send_next_event() {
    if (m_next >= m_cut) {
        return end(Ending::graceful);
    }
    const StreamEvent& ev = m_events[m_next];
    const Latency& lat = m_server.config.profile.latency;
    int64_t wait = int64_t{lat.per_token_ms} * ev.tokens;
    if (ev.tokens > 0 && m_first_content) {
        wait += lat.ttft_ms - lat.per_token_ms;
        m_first_content = false;
    }
    after(std::chrono::milliseconds(std::max<int64_t>(wait, 0)), [this] {
        std::string out;
        append_chunk(out, m_events[m_next].data);
        if (++m_next < m_events.size()) {
            m_out = std::move(out);
            net::async_write(m_stream, net::buffer(m_out),
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                                 if (!ec && !self->m_server.stopping) {
                                     self->send_next_event();
                                 }
                             });
            return;
        }
        out += k_last_chunk;
        m_events.clear();
        write(std::move(out), after_response());
    });
}

void Session::reply(Reply r) {
    std::string extra;
    if (!r.retry_after.empty()) {
        extra = "Retry-After: " + r.retry_after + "\r\n";
    }
    std::string out = head(r.status, r.content_type, r.body.size(), keep_alive(), extra);
    out += r.body;
    write(std::move(out), after_response());
}

void Session::write(std::string bytes, std::optional<Ending> then_end) {
    m_out = std::move(bytes);
    net::async_write(m_stream, net::buffer(m_out),
                     [self = shared_from_this(), then_end](beast::error_code ec, size_t) {
                         if (ec || self->m_server.stopping) {
                             return;
                         }
                         if (then_end) {
                             self->end(*then_end);
                         } else {
                             self->read_next();
                         }
                     });
}

} // namespace

void Server::Impl::accept_next() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
        if (stopping || ec == net::error::operation_aborted) {
            return;
        }
        if (ec) {
            // Out of descriptors, most likely: wait for connections to end
            // instead of spinning on accept.
            accept_pause.expires_after(k_accept_retry);
            accept_pause.async_wait([this](beast::error_code e) {
                if (!e && !stopping) {
                    accept_next();
                }
            });
            return;
        }
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<Session>(*this, std::move(socket))->start();
        accept_next();
    });
}

std::string Server::Impl::stats_body() const {
    Stats s;
    {
        std::lock_guard lock(stats_mutex);
        s = counters;
    }
    ojson j;
    j["profile"] = config.profile.name;
    // Every endpoint listed, 0 until it counts, as every fault kind is: a
    // script reads requests.other without knowing what arrived.
    j["requests"] = ojson::object();
    for (const char* k : {"completions", "chat", "models", "health", "version", "other"}) {
        j["requests"][k] = s.requests.count(k) ? s.requests.at(k) : 0;
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
    j["in_flight"]["now"] = s.in_flight;
    j["in_flight"]["peak"] = s.in_flight_peak;
    return j.dump();
}

Server::Server(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Server::~Server() {
    stop();
}

util::Result<std::unique_ptr<Server>> Server::start(SimConfig config) {
    // Whoever built the profile (a file, flags over it, the demo's).
    if (auto r = check_fault_shares(config.profile.faults); !r) {
        return r.error();
    }
    raise_descriptor_limit();
    auto impl = std::make_unique<Impl>();
    impl->bank = std::make_unique<QuestionBank>(std::move(config.dataset));
    impl->config = std::move(config);
    const auto& host = impl->config.host;
    auto cannot_listen = [&] {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("cannot listen on {}:{} (address in use or not "
                                            "available)",
                                            host, impl->config.port));
    };
    beast::error_code ec;
    tcp::resolver resolver(impl->io);
    auto found = resolver.resolve(host, std::to_string(impl->config.port),
                                  tcp::resolver::numeric_service | tcp::resolver::passive, ec);
    if (ec || found.empty()) {
        return cannot_listen();
    }
    const tcp::endpoint endpoint = found.begin()->endpoint();
    auto& acceptor = impl->acceptor;
    acceptor.open(endpoint.protocol(), ec);
    // Only SO_REUSEADDR: SO_REUSEPORT would let two servers share a port.
    if (!ec) {
        acceptor.set_option(net::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
        acceptor.bind(endpoint, ec);
    }
    if (!ec) {
        acceptor.listen(k_backlog, ec);
    }
    if (ec) {
        return cannot_listen();
    }
    impl->port = acceptor.local_endpoint().port();
    impl->accept_next();
    Impl* raw = impl.get();
    impl->loop = std::thread([raw] { raw->io.run(); });
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
    // Stop the loop where it is: stalled and paced responses are timers
    // that simply never fire. Then close every socket from this thread.
    m_impl->io.stop();
    if (m_impl->loop.joinable()) {
        m_impl->loop.join();
    }
    beast::error_code ec;
    m_impl->acceptor.close(ec);
    for (Session* s : m_impl->sessions) {
        s->end(Ending::graceful);
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
