// HTTP/1.1 over plain TCP for the run's event loop; see plain_client.hpp.
//
// A transfer takes an idle keep-alive connection to its host, or opens one,
// writes its request head and body in one gather write, and reads with
// Beast's response parser until the message is done. A connection that had
// carried an earlier transfer may have been closed by the server while idle:
// one that shows an end of stream or unasked bytes when taken is closed
// unused, and when writing the request on one fails, the request goes once
// more on a fresh connection. Once the request is written, a close without
// an answer is a failed attempt like any other: the server may have read
// the request and be working on it, and nothing is sent twice but as the
// retry policy decides. A host seen closing connections after streamed
// (chunked) answers, though their heads kept them alive, gets a fresh one
// after each such answer. Timeouts are deadlines checked by
// poll(), not a timer per transfer. Bodies are decoded from gzip or deflate
// (zlib) when the server compressed them, and the body limit counts decoded
// bytes, so a small compressed body cannot expand without bound.
#include <harness/http/inflate.hpp>
#include <harness/http/plain_client.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <strings.h>
#include <sys/socket.h>
#include <unordered_map>
#include <unordered_set>

namespace diffeval::http::detail {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// A response head (or a chunked body's trailer) larger than this is refused.
// Beast stores no field name or value of 65,534 bytes or more (it throws,
// out of the event loop), so the head stays below that; libcurl's cap is
// 100 KiB a line, real servers send well under 1 KiB.
constexpr uint32_t k_header_limit = 65'000;
// Connecting gives up sooner than the transfer when its timeout is longer.
constexpr auto k_connect_timeout_cap = std::chrono::seconds{30};
// A connection's read buffer from the start: an answer of the official set
// is about 1 KiB, a probe's with log-probabilities under 2 KiB.
constexpr size_t k_read_room = size_t{4} << 10;
// The most a connection's buffer holds unparsed: a head (k_header_limit)
// and a read beyond it. Body bytes leave it as they are parsed; what stays
// is a head, a chunk's size line or a trailer section, which Beast parses
// only whole and, but for the head, bounds nowhere: a server that sent one
// endless chunk-extension line grew a run past 3 GB in 15 s (an audit).
constexpr size_t k_unparsed_limit = size_t{2} * k_header_limit;

// Where an http:// URL points.
struct Target {
    std::string key;         // host:port, the connection pool's key
    std::string host;        // without brackets
    std::string port;        // digits
    std::string host_header; // the Host header: the URL's authority
    std::string path;        // from the first '/', with the query
};

// The authority of an http:// `url` (what follows the scheme up to the
// path), or nothing when `url` is not http://.
std::optional<std::string_view> authority_of(std::string_view url) {
    constexpr std::string_view k_scheme = "http://";
    if (url.size() < k_scheme.size() || strncasecmp(url.data(), k_scheme.data(), k_scheme.size())) {
        return std::nullopt;
    }
    url.remove_prefix(k_scheme.size());
    return url.substr(0, url.find_first_of("/?#"));
}

std::optional<Target> parse_target(const std::string& url) {
    auto authority = authority_of(url);
    auto hp = host_port(url);
    if (!authority || !hp) {
        return std::nullopt;
    }
    Target t;
    t.host_header = std::string(*authority);
    t.host = std::move(hp->host);
    t.port = std::move(hp->port);
    t.key = t.host + ":" + t.port;
    std::string_view rest = std::string_view(url).substr(url.find("//") + 2 + authority->size());
    rest = rest.substr(0, rest.find('#'));
    t.path = rest.empty() || rest.front() != '/' ? "/" + std::string(rest) : std::string(rest);
    return t;
}

// Whether `header` ("Name: value") names `name`, case-insensitively.
bool names(std::string_view header, std::string_view name) {
    return header.size() > name.size() && header[name.size()] == ':' &&
           strncasecmp(header.data(), name.data(), name.size()) == 0;
}

struct Connection {
    // Beast reads into the room a buffer has, 512 bytes when it has none:
    // with room for a whole answer it is one recv a response, not three.
    explicit Connection(net::io_context& io) : socket(io) {
        buffer.reserve(k_read_room);
        buffer.max_size(k_unparsed_limit);
    }
    tcp::socket socket;
    beast::flat_buffer buffer;
    // It carried a transfer before, so the server may have closed it while
    // it was idle.
    bool reused = false;
    // Its last answer was chunked (a stream): see closes_after_chunked.
    bool after_chunked = false;
    bool closed = false; // shut: counted out of the open connections
};

// Whether an idle connection may carry the next request: nothing arrived on
// it since its last answer. Bytes there are an answer nobody asked for (a
// server's bug), which the next request would read as its own; an end of
// stream is a server that hung up while it was idle. One non-blocking peek,
// as libcurl checks a connection before reusing it.
enum class Idle { quiet, closed, unasked_bytes };
Idle idle_state(Connection& c) {
    char byte = 0;
    const ssize_t n = ::recv(c.socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) {
        return Idle::unasked_bytes;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? Idle::quiet : Idle::closed;
}

struct Transfer {
    uint64_t serial = 0; // its key in PlainMulti's transfers in flight
    Request request;
    Response response;
    std::shared_ptr<const Target> target;
    std::unique_ptr<Connection> conn;
    // Connections this transfer shut while an operation on them was pending:
    // Beast's read still writes to the buffer when it completes, aborted, so
    // they live as long as the transfer, which its handlers hold.
    std::vector<std::unique_ptr<Connection>> retired;
    std::string head;
    std::optional<bhttp::response_parser<bhttp::string_body>> parser;
    std::unique_ptr<Inflater> inflater;
    Clock::time_point start;
    Clock::time_point deadline;
    size_t seen_body = 0; // body bytes already handed on (on_data, the inflater)
    bool connecting = false;
    bool resent = false; // sent again on a fresh connection once
    // The head's Content-Length passed the body limit: the body's start is
    // being read raw into response.body (`keep_start`), `left` bytes of it
    // still to come, through `scratch`.
    bool keeping = false;
    uint64_t left = 0;
    std::string scratch;
    bool ended = false; // finished, failed or cancelled: late handlers return
};

using TransferPtr = std::shared_ptr<Transfer>;

} // namespace

bool plain_client_can_send(const std::string& url) {
    auto authority = authority_of(url);
    if (!authority || authority->find('@') != std::string_view::npos) {
        return false;
    }
    for (const char* proxy : {"http_proxy", "all_proxy", "ALL_PROXY"}) {
        if (const char* v = std::getenv(proxy); v && *v) {
            return false;
        }
    }
    return true;
}

struct PlainMulti::Impl {
    net::io_context io{1};
    tcp::resolver resolver{io};
    std::unordered_map<uint64_t, TransferPtr> active;
    uint64_t next_serial = 0;
    std::unordered_map<std::string, std::shared_ptr<const Target>> targets;
    std::unordered_map<std::string, tcp::resolver::results_type> resolved;
    std::unordered_map<std::string, std::vector<std::unique_ptr<Connection>>> idle;
    // Hosts seen closing a connection after a chunked answer whose head kept
    // it alive (llama-server closes after every stream): a request written
    // on one before the close arrives is never read, so such a host's
    // connections are not kept after a chunked answer.
    std::unordered_set<std::string> closes_after_chunked;
    // The same for any answer: hosts that closed a reused connection, its
    // last answer not chunked, before the head of an answer to the request
    // written on it. A server that closes after every answer though its
    // head keeps the connection alive failed 23 of 100 requests with
    // --retries 0 (an outside audit); its connections are not kept. (Found
    // closed when taken up is not enough: that is also an idle timeout.)
    std::unordered_set<std::string> closes_after_answers;
    std::map<std::string, size_t> unasked_bytes; // PlainMulti::unasked_bytes
    size_t n_open = 0;                           // connections open, busy and idle
    size_t max_open = 1024;
    std::optional<Clock::time_point> next_deadline;
    std::vector<Response> finished;

    void start(const TransferPtr& t);
    void connect(const TransferPtr& t);
    void on_connected(const TransferPtr& t, const boost::system::error_code& ec);
    void send(const TransferPtr& t);
    void read(const TransferPtr& t);
    void on_read(const TransferPtr& t, boost::system::error_code ec);
    bool on_head(Transfer& t);
    bool take_body(Transfer& t);
    // Send `t` again on a fresh connection when writing it on a reused one
    // failed (the server had closed it); false when that does not apply.
    bool resend(const TransferPtr& t);
    // Read on the start of a body whose Content-Length passed the limit
    // (Beast reads none of it), then fail `t` as too large with it.
    void keep_start(const TransferPtr& t);
    void keep(Transfer& t, std::string_view raw);
    void complete(Transfer& t);
    void fail(Transfer& t, Transport how, std::string why);
    void too_large(Transfer& t, std::string_view kept);
    // Close `c`'s socket (a pending operation ends, aborted); the object
    // stays for that operation to finish with.
    void shut(Connection& c);
    void expire();
    // Run `step` (the io_context), failing the transfer whose read threw.
    template <class Step> void guarded(Step&& step) {
        try {
            step();
        } catch (const std::length_error&) {
            fail_stuck_reads();
        }
    }
    void fail_stuck_reads();
    void drop_idle_elsewhere(const std::string& key);
    // Whether idle connection `c` to `key` may carry a request still
    // (idle_state); one that may not is shut, after what it showed is
    // counted (unasked bytes; a close after a chunked answer).
    bool still_usable(Connection& c, const std::string& key);
};

void PlainMulti::Impl::shut(Connection& c) {
    if (!c.closed) {
        boost::system::error_code ignored;
        c.socket.close(ignored);
        c.closed = true;
        --n_open;
    }
}

// At the connection limit: close an idle connection to another host.
void PlainMulti::Impl::drop_idle_elsewhere(const std::string& key) {
    for (auto& [k, list] : idle) {
        if (k != key && !list.empty()) {
            shut(*list.back()); // idle: nothing pending on it
            list.pop_back();
            return;
        }
    }
}

bool PlainMulti::Impl::still_usable(Connection& c, const std::string& key) {
    const auto state = idle_state(c);
    if (state == Idle::quiet) {
        return true;
    }
    if (c.after_chunked) {
        closes_after_chunked.insert(key);
    }
    // Bytes nobody asked for: a server or proxy that sent a response too
    // many, which a request written a moment earlier would have read as its
    // answer (the run says so at its end).
    if (state == Idle::unasked_bytes) {
        ++unasked_bytes[key];
    }
    shut(c);
    return false;
}

void PlainMulti::Impl::start(const TransferPtr& t) {
    auto& list = idle[t->target->key];
    while (!list.empty()) {
        auto conn = std::move(list.back());
        list.pop_back();
        if (!still_usable(*conn, t->target->key)) {
            continue;
        }
        t->conn = std::move(conn);
        send(t);
        return;
    }
    if (n_open >= max_open) {
        drop_idle_elsewhere(t->target->key);
    }
    t->conn = std::make_unique<Connection>(io);
    ++n_open;
    connect(t);
}

void PlainMulti::Impl::connect(const TransferPtr& t) {
    // The transfer's deadline until connected: sooner when it is long.
    t->connecting = true;
    t->deadline = std::min(t->start + t->request.timeout,
                           t->start + std::chrono::milliseconds(k_connect_timeout_cap));
    next_deadline = next_deadline ? std::min(*next_deadline, t->deadline) : t->deadline;
    const Target& target = *t->target;
    boost::system::error_code ec;
    const auto address = net::ip::make_address(target.host, ec);
    if (!ec) {
        const tcp::endpoint ep(address, static_cast<unsigned short>(std::stoi(target.port)));
        t->conn->socket.async_connect(
            ep, [this, t](const boost::system::error_code& e) { on_connected(t, e); });
        return;
    }
    if (auto it = resolved.find(target.key); it != resolved.end()) {
        net::async_connect(t->conn->socket, it->second,
                           [this, t](const boost::system::error_code& e, const tcp::endpoint&) {
                               on_connected(t, e);
                           });
        return;
    }
    resolver.async_resolve(
        target.host, target.port,
        [this, t](const boost::system::error_code& e, tcp::resolver::results_type results) {
            if (t->ended) {
                return;
            }
            if (e) {
                t->response.connected = false;
                fail(*t, Transport::failed,
                     fmt::format("cannot resolve host '{}': {}", t->target->host, e.message()));
                return;
            }
            resolved[t->target->key] = results;
            net::async_connect(t->conn->socket, results,
                               [this, t](const boost::system::error_code& e2,
                                         const tcp::endpoint&) { on_connected(t, e2); });
        });
}

void PlainMulti::Impl::on_connected(const TransferPtr& t, const boost::system::error_code& ec) {
    if (t->ended) {
        return;
    }
    if (ec) {
        t->response.connected = false;
        fail(*t, Transport::failed,
             fmt::format("cannot connect to {} port {}: {}", t->target->host, t->target->port,
                         ec.message()));
        return;
    }
    boost::system::error_code ignored;
    t->conn->socket.set_option(tcp::no_delay(true), ignored);
    t->connecting = false;
    t->deadline = t->start + t->request.timeout;
    send(t);
}

void PlainMulti::Impl::send(const TransferPtr& t) {
    static const std::string k_empty;
    const std::string& body = t->request.body ? *t->request.body : k_empty;
    std::array<net::const_buffer, 2> bufs{net::buffer(t->head), net::buffer(body)};
    net::async_write(t->conn->socket, bufs, [this, t](const boost::system::error_code& ec, size_t) {
        if (t->ended) {
            return;
        }
        if (ec) {
            if (!resend(t)) {
                fail(*t, Transport::failed,
                     fmt::format("sending the request failed: {}", ec.message()));
            }
            return;
        }
        t->parser.emplace();
        t->parser->header_limit(k_header_limit);
        t->parser->body_limit(wire_limit(t->request.max_body_bytes));
        read(t);
    });
}

void PlainMulti::Impl::read(const TransferPtr& t) {
    bhttp::async_read_some(t->conn->socket, t->conn->buffer, *t->parser,
                           [this, t](boost::system::error_code ec, size_t) { on_read(t, ec); });
}

bool PlainMulti::Impl::resend(const TransferPtr& t) {
    if (!t->conn->reused || t->resent) {
        return false;
    }
    t->resent = true;
    shut(*t->conn);
    t->retired.push_back(std::move(t->conn));
    t->conn = std::make_unique<Connection>(io);
    ++n_open;
    connect(t);
    return true;
}

// The head has arrived: its status and the headers the caller reads. False
// when the transfer failed (an encoding that was not asked for).
bool PlainMulti::Impl::on_head(Transfer& t) {
    const auto& msg = t.parser->get();
    t.response.status = static_cast<long>(msg.result_int());
    if (auto it = msg.find("Retry-After"); it != msg.end()) {
        t.response.retry_after = std::string(it->value());
    }
    if (auto it = msg.find(bhttp::field::location); it != msg.end()) {
        t.response.location = std::string(it->value());
    }
    if (auto it = msg.find(bhttp::field::server); it != msg.end()) {
        t.response.server_header = std::string(it->value());
    }
    if (auto it = msg.find(bhttp::field::content_encoding); it != msg.end()) {
        const std::string_view value(it->value().data(), it->value().size());
        const auto encoding = encoding_of(value);
        if (!encoding) {
            fail(t, Transport::failed, unasked_encoding_error(value));
            return false;
        }
        if (*encoding != Encoding::identity) {
            t.inflater = std::make_unique<Inflater>(*encoding);
        }
    }
    return true;
}

// Hand on the body bytes that arrived since the last call: decoded when
// compressed, to on_data when streaming. False when the transfer failed.
bool PlainMulti::Impl::take_body(Transfer& t) {
    const std::string& raw = t.parser->get().body();
    if (raw.size() == t.seen_body) {
        return true;
    }
    const std::string_view fresh = std::string_view(raw).substr(t.seen_body);
    t.seen_body = raw.size();
    if (!t.inflater) {
        // The wire's limit leaves room for compression's overhead; a body
        // sent as it is counts exactly.
        if (raw.size() > t.request.max_body_bytes) {
            too_large(t, raw);
            return false;
        }
        if (t.request.on_data) {
            t.request.on_data(fresh);
        }
        return true;
    }
    bool over = false;
    const bool ok = t.inflater->feed(fresh, [&](std::string_view piece) {
        if (piece.size() > t.request.max_body_bytes - t.response.body.size()) {
            over = true;
            return false;
        }
        t.response.body.append(piece);
        if (t.request.on_data) {
            t.request.on_data(piece);
        }
        return true;
    });
    if (over) {
        too_large(t, t.response.body);
        return false;
    }
    if (!ok) {
        fail(t, Transport::failed, std::string(t.inflater->feed_error()));
        return false;
    }
    return true;
}

void PlainMulti::Impl::on_read(const TransferPtr& t, boost::system::error_code ec) {
    if (t->ended) {
        return;
    }
    if (ec == bhttp::error::body_limit) {
        // The status and Retry-After decide a retry, as on libcurl's path:
        // read them even when the head itself said the body is too large.
        if (t->parser->is_header_done() && t->response.status == 0 && !on_head(*t)) {
            return;
        }
        if (t->parser->is_header_done() && t->parser->get().body().empty()) {
            if (auto length = t->parser->content_length_remaining()) {
                t->keeping = true;
                t->left = *length;
                keep_start(t);
                return;
            }
        }
        too_large(*t, t->parser->get().body());
        return;
    }
    if (ec) {
        // Not sent again, even on a reused connection: the request was
        // written, and a server that read it may be answering it still.
        // But a host that closed one after a stream without a word of
        // answer closes them so: its next ones are not kept. So does one
        // that closed (not timed out) after another answer.
        if (t->conn->reused && !t->parser->is_header_done()) {
            if (t->conn->after_chunked) {
                closes_after_chunked.insert(t->target->key);
            } else if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
                       ec == net::error::broken_pipe) {
                // A close (its FIN read, or the reset our request drew
                // after it), not a reset alone: a server that resets one
                // connection in twenty (the simulator's fault) lost its
                // keep-alive for the rest of the run, 358 connections for
                // 400 requests where 25 did (an outside regression check).
                closes_after_answers.insert(t->target->key);
            }
        }
        std::string why;
        if (ec == bhttp::error::end_of_stream) {
            why = "the server closed the connection without answering";
        } else if (ec == bhttp::error::partial_message) {
            // libcurl's words, so both engines store the same error.
            const auto left = t->parser->content_length_remaining();
            why = left ? fmt::format("transfer closed with {} bytes remaining to read", *left)
                       : std::string("transfer closed with outstanding read data remaining");
        } else if (ec == bhttp::error::header_limit) {
            why = fmt::format("the response head passed {} bytes", k_header_limit);
        } else if (ec == bhttp::error::buffer_overflow) {
            why = fmt::format("the response's framing (a chunk's size line or its trailer) "
                              "passed {} bytes",
                              k_unparsed_limit);
        } else if (&ec.category() ==
                   &bhttp::make_error_code(bhttp::error::end_of_stream).category()) {
            why = fmt::format("malformed HTTP response: {}", ec.message());
        } else {
            why = fmt::format("receiving the response failed: {}", ec.message());
        }
        fail(*t, Transport::failed, std::move(why));
        return;
    }
    const bool head_done_now = t->parser->is_header_done() && t->response.status == 0;
    if (head_done_now) {
        const auto status = t->parser->get().result_int();
        if (status >= 100 && status < 200 && status != 101) {
            // An interim answer (100 Continue, 103 Early Hints): the real one follows.
            t->parser.emplace();
            t->parser->header_limit(k_header_limit);
            t->parser->body_limit(wire_limit(t->request.max_body_bytes));
            read(t);
            return;
        }
        if (!on_head(*t)) {
            return;
        }
    }
    if (!take_body(*t)) {
        return;
    }
    if (!t->parser->is_done()) {
        read(t);
        return;
    }
    if (t->inflater && t->inflater->cut_short()) {
        fail(*t, Transport::failed, std::string(k_cut_short));
        return;
    }
    complete(*t);
}

namespace {

// How much of a too-large body's start `t` keeps.
size_t kept_cap(const Transfer& t) {
    return std::min(k_kept_of_too_large, t.request.max_body_bytes);
}

} // namespace

void PlainMulti::Impl::keep(Transfer& t, std::string_view raw) {
    const size_t cap = kept_cap(t);
    auto& body = t.response.body;
    // Appends what fits under the cap; false once it is reached.
    auto append = [&](std::string_view piece) {
        body.append(piece.substr(0, cap - std::min(cap, body.size())));
        return body.size() < cap;
    };
    if (!t.inflater) {
        append(raw);
        return;
    }
    // Decoded as a body that fits is: a corrupt stream keeps what decoded.
    t.inflater->feed(raw, append);
}

void PlainMulti::Impl::keep_start(const TransferPtr& t) {
    const size_t cap = kept_cap(*t);
    auto& buffer = t->conn->buffer;
    if (buffer.size() > 0) {
        const auto n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), t->left));
        keep(*t, std::string_view(static_cast<const char*>(buffer.data().data()), n));
        buffer.consume(n);
        t->left -= n;
    }
    if (t->response.body.size() >= cap || t->left == 0) {
        too_large(*t, t->response.body);
        return;
    }
    t->scratch.resize(static_cast<size_t>(std::min<uint64_t>(k_inflate_chunk, t->left)));
    t->conn->socket.async_read_some(net::buffer(t->scratch),
                                    [this, t](const boost::system::error_code& ec, size_t n) {
                                        if (t->ended) {
                                            return;
                                        }
                                        keep(*t, std::string_view(t->scratch.data(), n));
                                        t->left -= n;
                                        if (ec) {
                                            too_large(*t, t->response.body);
                                            return;
                                        }
                                        keep_start(t);
                                    });
}

void PlainMulti::Impl::complete(Transfer& t) {
    t.ended = true;
    t.response.transport = Transport::ok;
    t.response.ended_at = Clock::now();
    if (!t.inflater) {
        t.response.body = t.parser->release().body();
    }
    // Reused only when the server keeps it open and sent nothing beyond the
    // answer (nothing is pipelined, so extra bytes are the server's error).
    const bool chunked = t.parser->chunked();
    // Bytes read past the answer: a response too many, before it or after
    // (see PlainMulti::unasked_bytes).
    if (t.conn->buffer.size() > 0) {
        ++unasked_bytes[t.target->key];
    }
    // After a 101 (Switching Protocols) the connection speaks another
    // protocol, though Beast calls it kept alive: reused, its next request's
    // answer was the one before's (an audit).
    const bool switched = t.parser->get().result_int() == 101;
    if (t.parser->keep_alive() && !switched && t.conn->buffer.size() == 0 && n_open <= max_open &&
        !(chunked && closes_after_chunked.contains(t.target->key)) &&
        (closes_after_answers.empty() || !closes_after_answers.contains(t.target->key))) {
        t.conn->reused = true;
        t.conn->after_chunked = chunked;
        idle[t.target->key].push_back(std::move(t.conn));
    } else {
        shut(*t.conn);
    }
    finished.push_back(std::move(t.response));
    active.erase(t.serial); // may destroy `t`
}

void PlainMulti::Impl::fail(Transfer& t, Transport how, std::string why) {
    t.ended = true;
    if (t.conn) {
        shut(*t.conn);
    }
    t.response.transport = how;
    t.response.transport_error = std::move(why);
    t.response.ended_at = Clock::now();
    // What arrived of the body is kept (a cut-off stream's events, a
    // timed-out answer): bounded by the body limit, and stored with the error.
    if (t.parser && !t.inflater && t.response.body.empty()) {
        t.response.body = std::move(t.parser->get().body());
    }
    finished.push_back(std::move(t.response));
    active.erase(t.serial); // may destroy `t`
}

void PlainMulti::Impl::too_large(Transfer& t, std::string_view kept) {
    std::string body(kept.substr(0, std::min(kept.size(), k_kept_of_too_large)));
    const auto limit = t.request.max_body_bytes;
    fail(t, Transport::too_large,
         fmt::format("the response body passed the limit of {} bytes (--max-response-bytes)",
                     limit));
    finished.back().body = std::move(body);
}

// End the transfers whose deadline has passed, as timed out.
void PlainMulti::Impl::expire() {
    const auto now = Clock::now();
    if (!next_deadline || now < *next_deadline) {
        return;
    }
    next_deadline.reset();
    std::vector<TransferPtr> due;
    for (const auto& [serial, t] : active) {
        if (t->deadline <= now) {
            due.push_back(t);
        } else {
            next_deadline = next_deadline ? std::min(*next_deadline, t->deadline) : t->deadline;
        }
    }
    for (const auto& t : due) {
        {
            const auto after =
                std::chrono::duration_cast<std::chrono::milliseconds>(now - t->start);
            if (t->keeping) {
                // Already too large: what arrived of its start is kept.
                too_large(*t, t->response.body);
            } else if (t->connecting) {
                t->response.connected = false;
                fail(*t, Transport::timed_out,
                     fmt::format("timed out after {} ms connecting to {} port {}", after.count(),
                                 t->target->host, t->target->port));
            } else {
                fail(*t, Transport::timed_out,
                     fmt::format("timed out after {} ms with {} body bytes received", after.count(),
                                 t->parser ? t->parser->get().body().size() : size_t{0}));
            }
        }
    }
}

PlainMulti::PlainMulti() : m_impl(std::make_unique<Impl>()) {}

PlainMulti::~PlainMulti() {
    cancel_all();
    for (auto& [key, list] : m_impl->idle) {
        for (auto& c : list) {
            m_impl->shut(*c);
        }
    }
}

void PlainMulti::submit(Request request) {
    auto t = std::make_shared<Transfer>();
    t->start = Clock::now();
    t->response.tag = request.tag;
    t->request = std::move(request);
    auto& target = m_impl->targets[t->request.url];
    if (!target) {
        if (auto parsed = parse_target(t->request.url)) {
            target = std::make_shared<const Target>(std::move(*parsed));
        }
    }
    t->serial = m_impl->next_serial++;
    t->deadline = t->start + t->request.timeout;
    m_impl->next_deadline =
        m_impl->next_deadline ? std::min(*m_impl->next_deadline, t->deadline) : t->deadline;
    m_impl->active.emplace(t->serial, t);
    if (!target) {
        m_impl->targets.erase(t->request.url);
        m_impl->fail(*t, Transport::failed, fmt::format("not an http:// URL: {}", t->request.url));
        return;
    }
    t->target = target;
    // The head: what libcurl would send, the caller's headers replacing the
    // defaults they name ("Name:" with no value removes one).
    auto& head = t->head;
    const auto& headers = t->request.headers;
    const auto given = [&](std::string_view name) {
        return std::any_of(headers.begin(), headers.end(),
                           [&](const std::string& h) { return names(h, name); });
    };
    head.reserve(256);
    head.append(t->request.method).append(" ").append(target->path).append(" HTTP/1.1\r\n");
    head.append("Host: ").append(target->host_header).append("\r\n");
    if (!given("Accept")) {
        head.append("Accept: */*\r\n");
    }
    if (!given("Accept-Encoding")) {
        head.append("Accept-Encoding: gzip, deflate\r\n");
    }
    for (const auto& h : headers) {
        if (h.find_first_of("\r\n") != std::string::npos) {
            m_impl->fail(*t, Transport::failed, "a request header holds a line break");
            return;
        }
        const auto colon = h.find(':');
        if (colon == std::string::npos ||
            h.find_first_not_of(" \t", colon + 1) == std::string::npos) {
            continue;
        }
        head.append(h).append("\r\n");
    }
    if (t->request.method != "GET") {
        head.append(
            fmt::format("Content-Length: {}\r\n", t->request.body ? t->request.body->size() : 0));
    }
    head.append("\r\n");
    m_impl->start(t);
}

// Beast's fields threw out of a read (a chunked body's trailer field of
// 65,534 bytes or more; heads are capped below that): that read is abandoned
// and its transfer failed. It is the one whose buffer still holds the
// trailer it could not store.
void PlainMulti::Impl::fail_stuck_reads() {
    std::vector<TransferPtr> stuck;
    for (auto& [serial, t] : active) {
        if (!t->ended && t->conn && t->parser && t->parser->is_header_done() &&
            !t->parser->is_done() && t->conn->buffer.size() >= k_header_limit) {
            stuck.push_back(t);
        }
    }
    for (auto& t : stuck) {
        fail(*t, Transport::failed,
             fmt::format("the response's trailer passed {} bytes", k_header_limit));
    }
}

void PlainMulti::poll(std::chrono::milliseconds max_wait, std::vector<Response>& done) {
    auto& impl = *m_impl;
    const auto until = Clock::now() + max_wait;
    if (impl.io.stopped()) {
        impl.io.restart();
    }
    impl.guarded([&] { impl.io.poll(); });
    impl.expire();
    while (impl.finished.empty() && !impl.active.empty()) {
        auto wake = impl.next_deadline ? std::min(until, *impl.next_deadline) : until;
        if (Clock::now() >= until) {
            break;
        }
        if (impl.io.stopped()) {
            impl.io.restart();
        }
        impl.guarded([&] {
            impl.io.run_one_until(wake);
            impl.io.poll();
        });
        impl.expire();
    }
    std::move(impl.finished.begin(), impl.finished.end(), std::back_inserter(done));
    impl.finished.clear();
}

void PlainMulti::cancel_all() {
    auto& impl = *m_impl;
    for (auto& [serial, t] : impl.active) {
        t->ended = true;
        if (t->conn) {
            impl.shut(*t->conn);
        }
    }
    impl.active.clear();
    impl.finished.clear();
    // Aborted handlers hold their transfers until they run and return.
    if (impl.io.stopped()) {
        impl.io.restart();
    }
    impl.io.poll();
}

void PlainMulti::set_max_connections(size_t n) {
    m_impl->max_open = std::max<size_t>(n, 1);
}

size_t PlainMulti::in_flight() const {
    return m_impl->active.size();
}

size_t PlainMulti::unasked_bytes(const std::string& url) {
    const auto t = parse_target(url);
    if (!t) {
        return 0;
    }
    auto& impl = *m_impl;
    // The idle connections are looked at now, not only when taken up: a
    // server that answered one request twice, late, had each later answer
    // on that connection read by the request after, and the last, left
    // unread when the run ended, was seen by nobody (an audit).
    if (auto idle = impl.idle.find(t->key); idle != impl.idle.end()) {
        std::erase_if(idle->second,
                      [&](const auto& conn) { return !impl.still_usable(*conn, t->key); });
    }
    const auto it = impl.unasked_bytes.find(t->key);
    return it == impl.unasked_bytes.end() ? 0 : it->second;
}

} // namespace diffeval::http::detail
