// MultiClient against a scripted loopback server: what a run stores depends
// on each of these (keep-alive reuse, a stale connection replaced, gzip
// decoded and bounded, streamed chunks, timeouts, refused connections, cut
// bodies, interim answers, the headers sent).
#include <harness/http/client.hpp>
#include <harness/http/curl_api.hpp>

#include <gtest/gtest.h>
#include <zlib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace diffeval::http {
namespace {

using namespace std::chrono_literals;

// What the scripted server does with one request.
struct Reply {
    std::string bytes;  // sent as they are
    bool close = false; // then close the connection
    bool hang = false;  // send nothing and keep the connection open
    std::string later;  // sent 20 ms after `bytes`, unasked (a server's bug)
};

// A loopback server answering each request with `script(n, request)`, n
// counting requests from 0 across connections. A thread per connection.
class ScriptedServer {
public:
    using Script = std::function<Reply(int, const std::string&)>;
    explicit ScriptedServer(Script script) : m_script(std::move(script)) {
        m_fd = ::socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(m_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::bind(m_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        ::listen(m_fd, 64);
        socklen_t len = sizeof addr;
        getsockname(m_fd, reinterpret_cast<sockaddr*>(&addr), &len);
        m_port = ntohs(addr.sin_port);
        m_accept = std::thread([this] { accept_loop(); });
    }
    ~ScriptedServer() {
        m_stop = true;
        ::shutdown(m_fd, SHUT_RDWR);
        ::close(m_fd);
        m_accept.join();
        std::lock_guard lock(m_mutex);
        for (int fd : m_open) {
            ::shutdown(fd, SHUT_RDWR);
        }
        for (auto& t : m_threads) {
            t.join();
        }
    }
    std::string url(const std::string& path = "/v1/completions") const {
        return "http://127.0.0.1:" + std::to_string(m_port) + path;
    }
    int connections() const { return m_connections; }
    int requests() const { return m_requests; }
    std::string last_request() const {
        std::lock_guard lock(m_mutex);
        return m_last;
    }

private:
    void accept_loop() {
        while (!m_stop) {
            int c = ::accept(m_fd, nullptr, nullptr);
            if (c < 0) {
                return;
            }
            ++m_connections;
            std::lock_guard lock(m_mutex);
            m_open.push_back(c);
            m_threads.emplace_back([this, c] { serve(c); });
        }
    }
    // One request from `fd` (head and Content-Length body), or "" at EOF.
    static std::string read_request(int fd, std::string& pending) {
        char buf[4096];
        while (true) {
            auto end = pending.find("\r\n\r\n");
            if (end != std::string::npos) {
                size_t length = 0;
                auto cl = pending.find("Content-Length: ");
                if (cl != std::string::npos && cl < end) {
                    length = std::stoul(pending.substr(cl + 16));
                }
                if (pending.size() >= end + 4 + length) {
                    std::string req = pending.substr(0, end + 4 + length);
                    pending.erase(0, end + 4 + length);
                    return req;
                }
            }
            ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) {
                return "";
            }
            pending.append(buf, static_cast<size_t>(n));
        }
    }
    void serve(int fd) {
        std::string pending;
        while (!m_stop) {
            std::string req = read_request(fd, pending);
            if (req.empty()) {
                break;
            }
            const int n = m_requests++;
            {
                std::lock_guard lock(m_mutex);
                m_last = req;
            }
            Reply r = m_script(n, req);
            if (r.hang) {
                while (!m_stop && ::recv(fd, nullptr, 0, 0) >= 0) {
                    std::this_thread::sleep_for(5ms);
                }
                break;
            }
            ::send(fd, r.bytes.data(), r.bytes.size(), MSG_NOSIGNAL);
            if (!r.later.empty()) {
                std::this_thread::sleep_for(20ms);
                ::send(fd, r.later.data(), r.later.size(), MSG_NOSIGNAL);
            }
            if (r.close) {
                break;
            }
        }
        ::close(fd);
    }

    Script m_script;
    int m_fd = -1;
    int m_port = 0;
    std::atomic<bool> m_stop{false};
    std::atomic<int> m_connections{0};
    std::atomic<int> m_requests{0};
    mutable std::mutex m_mutex;
    std::string m_last;
    std::vector<int> m_open;
    std::vector<std::thread> m_threads;
    std::thread m_accept;
};

std::string ok(const std::string& body, const std::string& extra = "") {
    return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + extra +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string gzip(const std::string& in, int level = 9) {
    z_stream z{};
    deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
    std::string out(deflateBound(&z, in.size()) + 64, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

Request post(const std::string& url, uint64_t tag = 0, const std::string& body = "{}") {
    Request r;
    r.tag = tag;
    r.method = "POST";
    r.url = url;
    r.headers = {"Content-Type: application/json"};
    r.body = std::make_shared<const std::string>(body);
    r.timeout = 10s;
    return r;
}

// Poll until `n` responses came back (or 10 s passed).
std::vector<Response> wait_for(MultiClient& c, size_t n) {
    std::vector<Response> got;
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (got.size() < n && std::chrono::steady_clock::now() < until) {
        for (auto& r : c.poll(50ms)) {
            got.push_back(std::move(r));
        }
    }
    return got;
}

TEST(MultiClient, SequentialRequestsShareOneKeepAliveConnection) {
    ScriptedServer server([](int n, const std::string&) { return Reply{ok(std::to_string(n))}; });
    MultiClient client;
    for (int i = 0; i < 5; ++i) {
        const auto sent = std::chrono::steady_clock::now();
        client.submit(post(server.url(), static_cast<uint64_t>(i)));
        auto got = wait_for(client, 1);
        ASSERT_EQ(got.size(), 1u);
        // Its end is stamped when it was read, which a latency is timed by.
        EXPECT_GE(got[0].ended_at, sent);
        EXPECT_LE(got[0].ended_at, std::chrono::steady_clock::now());
        EXPECT_EQ(got[0].transport, Transport::ok) << got[0].transport_error;
        EXPECT_EQ(got[0].status, 200);
        EXPECT_EQ(got[0].tag, static_cast<uint64_t>(i));
        EXPECT_EQ(got[0].body, std::to_string(i));
    }
    EXPECT_EQ(server.connections(), 1);
    EXPECT_EQ(client.in_flight(), 0u);
}

TEST(MultiClient, ConcurrentRequestsStayWithinTheConnectionLimit) {
    ScriptedServer server([](int, const std::string&) { return Reply{ok("{}")}; });
    MultiClient client;
    client.set_max_connections(4);
    for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < 4; ++i) {
            client.submit(post(server.url(), static_cast<uint64_t>(i)));
        }
        EXPECT_EQ(client.in_flight(), 4u);
        auto got = wait_for(client, 4);
        ASSERT_EQ(got.size(), 4u);
        for (const auto& r : got) {
            EXPECT_EQ(r.status, 200) << r.transport_error;
        }
    }
    EXPECT_LE(server.connections(), 4);
    EXPECT_EQ(server.requests(), 12);
}

TEST(MultiClient, AConnectionTheServerClosedWhileIdleIsReplacedAndTheRequestSentOnce) {
    // The first answer says keep-alive, then the server hangs up.
    ScriptedServer server([](int n, const std::string&) {
        return Reply{ok(std::to_string(n)), n == 0};
    });
    MultiClient client;
    client.submit(post(server.url(), 1));
    ASSERT_EQ(wait_for(client, 1).size(), 1u);
    std::this_thread::sleep_for(50ms); // the close reaches the client
    client.submit(post(server.url(), 2));
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::ok) << got[0].transport_error;
    EXPECT_EQ(got[0].body, "1");
    EXPECT_EQ(server.requests(), 2);
    EXPECT_EQ(server.connections(), 2);
}

// A server that read the request and then closed the connection may have
// acted on it: the transfer fails, and the request is not sent again.
TEST(MultiClient, ARequestTheServerReadAndDroppedIsNotSentAgain) {
    ScriptedServer server([](int n, const std::string&) {
        return n == 0 ? Reply{ok("0")} : Reply{"", true};
    });
    MultiClient client;
    client.submit(post(server.url(), 1));
    ASSERT_EQ(wait_for(client, 1).size(), 1u);
    client.submit(post(server.url(), 2));
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::failed);
    EXPECT_EQ(got[0].transport_error, "the server closed the connection without answering");
    EXPECT_EQ(server.requests(), 2);
    EXPECT_TRUE(got[0].connected) << "the server read it";
}

// A port nothing listens on refuses the connection: the request never
// reached a server, which a run counts apart from what it sent (a launched
// server that died was said to have been sent requests it never saw).
TEST(MultiClient, ARefusedConnectionIsNotConnected) {
    std::string url;
    {
        ScriptedServer gone([](int, const std::string&) { return Reply{ok("{}")}; });
        url = gone.url();
    }
    MultiClient client;
    client.submit(post(url, 1));
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::failed);
    EXPECT_FALSE(got[0].connected) << got[0].transport_error;
}

// A server that sends a second, unasked answer on an idle keep-alive
// connection: that answer must not be taken for the next request's, which
// would store another question's answer as this one's success.
TEST(MultiClient, BytesAnIdleConnectionReceivedUnaskedAreNotTheNextAnswer) {
    ScriptedServer server([](int n, const std::string&) {
        return Reply{ok(std::to_string(n)), false, false, n == 0 ? ok("stale") : ""};
    });
    MultiClient client;
    client.submit(post(server.url(), 1));
    ASSERT_EQ(wait_for(client, 1).size(), 1u);
    std::this_thread::sleep_for(50ms); // the unasked answer reaches the client
    client.submit(post(server.url(), 2));
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::ok) << got[0].transport_error;
    EXPECT_EQ(got[0].body, "1");
    EXPECT_EQ(server.requests(), 2);
    EXPECT_EQ(server.connections(), 2);
}

// An unasked answer on a connection no request takes up again (the last
// of a run) is found when the count is asked, at the end of a phase: a
// server that answered each request twice, late, had every later answer
// read by the next request and the last one seen by nobody (an audit).
TEST(MultiClient, BytesOnAnIdleConnectionAreCountedWhenAsked) {
    ScriptedServer server([](int n, const std::string&) {
        return Reply{ok(std::to_string(n)), false, false, ok("late")};
    });
    MultiClient client;
    client.submit(post(server.url(), 1));
    ASSERT_EQ(wait_for(client, 1).size(), 1u);
    EXPECT_EQ(client.unasked_bytes(server.url()), 0u); // not there yet
    std::this_thread::sleep_for(50ms);                 // the unasked answer arrives
    EXPECT_EQ(client.unasked_bytes(server.url()), 1u);
    EXPECT_EQ(client.unasked_bytes(server.url()), 1u); // counted once: the connection is shut
}

// The same when the unasked answer came in the same write as the asked one
// and the next request goes at once, with answers of sizes around the
// client's read room (4 KiB): a read that filled all the room it had left
// the unasked answer waiting in the socket, where only the check of the
// idle connection sees it.
TEST(MultiClient, AnUnaskedAnswerRightBehindTheAskedOneIsNotTheNextAnswer) {
    // An answer of `total` bytes, head and body (a body of 1,000 to 9,999
    // bytes, so its Content-Length has four digits).
    const auto sized = [](size_t total) {
        const size_t head = ok(std::string(1000, 'a')).size() - 1000;
        return ok(std::string(total - head, 'a'));
    };
    ScriptedServer server([&](int n, const std::string&) {
        if (n % 2 == 1) {
            return Reply{ok(std::to_string(n))};
        }
        return Reply{sized(4090 + static_cast<size_t>(n / 2)) + ok("stale")};
    });
    for (int i = 0; i < 12; ++i) {
        MultiClient client;
        client.submit(post(server.url(), 1));
        auto first = wait_for(client, 1);
        ASSERT_EQ(first.size(), 1u);
        ASSERT_EQ(first[0].transport, Transport::ok) << first[0].transport_error;
        client.submit(post(server.url(), 2));
        auto got = wait_for(client, 1);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].transport, Transport::ok) << got[0].transport_error;
        EXPECT_EQ(got[0].body, std::to_string(2 * i + 1)) << "answer " << 4090 + i << " bytes";
    }
    EXPECT_EQ(server.requests(), 24);
}

TEST(MultiClient, GzipBodiesAreDecodedAndTheLimitCountsDecodedBytes) {
    const std::string text(100'000, 'x');
    const std::string packed = gzip(text);
    ScriptedServer server(
        [&](int, const std::string&) { return Reply{ok(packed, "Content-Encoding: gzip\r\n")}; });
    MultiClient client;
    client.submit(post(server.url(), 1));
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::ok) << got[0].transport_error;
    EXPECT_EQ(got[0].body, text);
    EXPECT_NE(server.last_request().find("Accept-Encoding: gzip, deflate\r\n"), std::string::npos);

    auto small = post(server.url(), 2);
    small.max_body_bytes = 10'000; // far above the compressed size, below the decoded one
    ASSERT_LT(packed.size(), small.max_body_bytes);
    client.submit(small);
    got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::too_large);
    EXPECT_NE(got[0].transport_error.find("limit of 10000 bytes"), std::string::npos);
    EXPECT_LE(got[0].body.size(), 10'000u);
}

// A head whose Content-Length passes the limit: its status, Retry-After and
// the body's first 64 KiB are kept, as libcurl keeps them, so a 503 is
// still retried as one.
TEST(MultiClient, ABodyTooLargeByItsLengthKeepsItsStatusAndStart) {
    std::string body(200'000, 'x');
    for (size_t i = 0; i < body.size(); i += 1000) {
        body[i] = 'y';
    }
    ScriptedServer server([&](int, const std::string&) {
        return Reply{"HTTP/1.1 503 Busy\r\nRetry-After: 7\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body};
    });
    MultiClient client;
    auto r = post(server.url(), 1);
    r.max_body_bytes = 100'000;
    client.submit(r);
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::too_large);
    EXPECT_EQ(got[0].status, 503);
    EXPECT_EQ(got[0].retry_after, std::optional<std::string>("7"));
    EXPECT_EQ(got[0].body, body.substr(0, 64 << 10));
}

// The limit counts decoded bytes (docs/cli.md), also where compression made
// the body longer: an answer of exactly the limit, sent stored (level 0),
// is a few dozen bytes longer on the wire and was refused as too large.
// One byte more than the limit is too large, compressed or not.
TEST(MultiClient, TheLimitCountsDecodedBytesWhenCompressionAddsSome) {
    const std::string text(100'000, 'x');
    for (const auto& sent : {std::pair{gzip(text, 0), std::string("Content-Encoding: gzip\r\n")},
                             std::pair{text, std::string()}}) {
        // Named, not bound: clang does not capture structured bindings.
        const std::string& body = sent.first;
        const std::string& extra = sent.second;
        ASSERT_GE(body.size(), text.size());
        ScriptedServer server([&](int, const std::string&) { return Reply{ok(body, extra)}; });
        MultiClient client;
        auto exact = post(server.url(), 1);
        exact.max_body_bytes = text.size();
        client.submit(exact);
        auto got = wait_for(client, 1);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].transport, Transport::ok) << extra << got[0].transport_error;
        EXPECT_EQ(got[0].body.size(), text.size()) << extra;
        auto under = post(server.url(), 2);
        under.max_body_bytes = text.size() - 1;
        client.submit(under);
        got = wait_for(client, 1);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].transport, Transport::too_large) << extra;
        EXPECT_EQ(got[0].status, 200) << extra;
    }
}

// A gzip body that goes on after its end (a second member) is not cut to
// the first member: the transfer fails, as libcurl fails it.
TEST(MultiClient, GzipDataAfterTheEndIsAFailure) {
    const std::string packed = gzip("{\"a\":1}") + gzip("{\"b\":2}");
    ScriptedServer server(
        [&](int, const std::string&) { return Reply{ok(packed, "Content-Encoding: gzip\r\n")}; });
    MultiClient client;
    client.submit(post(server.url(), 1));
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::failed);
    EXPECT_EQ(got[0].transport_error,
              "the response body goes on after the end of its gzip or deflate data");
}

// A compressed body cut short (its message ended before the stream did)
// is a failure: what decoded may be a part of the answer, and its check
// value, at the stream's end, was never read, so a byte changed on the way
// went unseen ("#### 42" stored as "#### 47"). Whole bodies still decode.
TEST(MultiClient, ACompressedBodyCutShortIsAFailure) {
    const std::string text = "{\"choices\":[{\"text\":\"#### 42\"}]}";
    const std::string packed = gzip(text);
    std::string changed = gzip(text, 0);
    changed.replace(changed.find("42"), 2, "47");
    const std::vector<std::pair<std::string, bool>> bodies = {
        {packed, true},
        {packed.substr(0, packed.size() - 8), false}, // no CRC and length
        {packed.substr(0, packed.size() - 1), false},
        {changed.substr(0, changed.size() - 8), false}, // changed, and its CRC cut off
        {packed.substr(0, packed.size() / 2), false},
    };
    for (const auto& sent : bodies) {
        // Named, not bound: clang does not capture structured bindings.
        const std::string& body = sent.first;
        const bool whole = sent.second;
        ScriptedServer server(
            [&](int, const std::string&) { return Reply{ok(body, "Content-Encoding: gzip\r\n")}; });
        MultiClient client;
        client.submit(post(server.url(), 1));
        auto got = wait_for(client, 1);
        ASSERT_EQ(got.size(), 1u);
        if (whole) {
            EXPECT_EQ(got[0].transport, Transport::ok) << got[0].transport_error;
            EXPECT_EQ(got[0].body, text);
        } else {
            EXPECT_EQ(got[0].transport, Transport::failed) << body.size() << " " << got[0].body;
            EXPECT_EQ(got[0].transport_error,
                      "the response body ends before the end of its gzip or deflate data");
        }
    }
}

TEST(MultiClient, AnEncodingThatWasNotAskedForIsAFailure) {
    ScriptedServer server(
        [](int, const std::string&) { return Reply{ok("abc", "Content-Encoding: br\r\n")}; });
    MultiClient client;
    client.submit(post(server.url()));
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::failed);
    EXPECT_NE(got[0].transport_error.find("'br'"), std::string::npos) << got[0].transport_error;
}

TEST(MultiClient, ChunkedBodiesReachOnDataAsTheyArrive) {
    ScriptedServer server([](int, const std::string&) {
        return Reply{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "6\r\ndata: \r\n3\r\nabc\r\n0\r\n\r\n"};
    });
    MultiClient client;
    std::string streamed;
    auto r = post(server.url());
    r.on_data = [&](std::string_view chunk) { streamed.append(chunk); };
    client.submit(r);
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::ok) << got[0].transport_error;
    EXPECT_EQ(got[0].body, "data: abc");
    EXPECT_EQ(streamed, "data: abc");
}

TEST(MultiClient, AServerThatNeverAnswersTimesOut) {
    ScriptedServer server([](int, const std::string&) { return Reply{"", false, true}; });
    MultiClient client;
    auto r = post(server.url());
    r.timeout = 200ms;
    const auto start = std::chrono::steady_clock::now();
    client.submit(r);
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::timed_out);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
    EXPECT_GE(got[0].ended_at - start, 200ms);
    EXPECT_EQ(server.requests(), 1);
}

TEST(MultiClient, ARefusedConnectionNamesTheHostAndPort) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    const int port = ntohs(addr.sin_port);
    ::close(fd); // bound, never listened: nothing accepts there
    MultiClient client;
    client.submit(post("http://127.0.0.1:" + std::to_string(port) + "/v1/completions"));
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::failed);
    EXPECT_NE(got[0].transport_error.find("127.0.0.1 port " + std::to_string(port)),
              std::string::npos)
        << got[0].transport_error;
}

TEST(MultiClient, ABodyCutShortOfItsLengthIsAFailureNotAnAnswer) {
    ScriptedServer server([](int, const std::string&) {
        return Reply{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial\":", true};
    });
    MultiClient client;
    client.submit(post(server.url()));
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::failed);
    EXPECT_EQ(got[0].status, 200);
    EXPECT_EQ(got[0].transport_error, "transfer closed with 89 bytes remaining to read");
    EXPECT_EQ(server.requests(), 1);
}

TEST(MultiClient, InterimAnswersAreSkippedAndHeadersAreRead) {
    ScriptedServer server([](int, const std::string&) {
        return Reply{"HTTP/1.1 100 Continue\r\n\r\n" +
                     ok("{}", "Retry-After: 7\r\nServer: sim\r\nLocation: /x\r\n")};
    });
    MultiClient client;
    client.submit(post(server.url()));
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, 200) << got[0].transport_error;
    EXPECT_EQ(got[0].body, "{}");
    EXPECT_EQ(got[0].retry_after, "7");
    EXPECT_EQ(got[0].location, "/x");
    EXPECT_EQ(got[0].server_header, "sim");
}

// A chunk's size line or a trailer section that never ends fails its own
// transfer once the unparsed bytes pass a bound: Beast bounds neither, and
// an audit's endless chunk extension grew a run past 3 GB in 15 s. (The
// server sends 300 KB and waits: without the bound the transfer waits for
// the rest until its timeout.)
TEST(MultiClient, AnEndlessChunkLineOrTrailerFailsItsTransfer) {
    const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    std::string fields;
    for (int i = 0; fields.size() < 300'000; ++i) {
        fields += "X-T" + std::to_string(i) + ": " + std::string(100, 'v') + "\r\n";
    }
    for (const auto& bytes :
         {head + "5;ext=" + std::string(300'000, 'a'), head + "2\r\n{}\r\n0\r\n" + fields}) {
        ScriptedServer server([&](int, const std::string&) { return Reply{bytes}; });
        MultiClient client;
        auto r = post(server.url());
        r.timeout = 5s;
        const auto start = std::chrono::steady_clock::now();
        client.submit(r);
        auto got = wait_for(client, 1);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].transport, Transport::failed);
        EXPECT_EQ(got[0].transport_error,
                  "the response's framing (a chunk's size line or its trailer) passed 130000 "
                  "bytes");
        EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
    }
}

// After a 101 (Switching Protocols) the connection is no HTTP any more:
// reused, the next request read what the server sent on it next, another
// request's answer, as its own (an audit).
TEST(MultiClient, AConnectionThatSwitchedProtocolsIsNotReused) {
    ScriptedServer server([](int n, const std::string&) {
        if (n == 0) {
            return Reply{"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n", false,
                         false, ok("late")};
        }
        return Reply{ok(std::to_string(n))};
    });
    MultiClient client;
    client.submit(post(server.url(), 1));
    auto first = wait_for(client, 1);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].status, 101);
    client.submit(post(server.url(), 2));
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::ok) << got[0].transport_error;
    EXPECT_EQ(got[0].body, "1");
    EXPECT_EQ(server.connections(), 2);
}

TEST(MultiClient, TheRequestCarriesItsHeadersAndBodyAsGiven) {
    ScriptedServer server([](int, const std::string&) { return Reply{ok("{}")}; });
    MultiClient client;
    auto r = post(server.url("/v1/chat/completions?x=1"), 0, "{\"a\": 1}");
    r.headers.push_back("Accept: application/json");
    r.headers.push_back("Authorization: Bearer k");
    client.submit(r);
    ASSERT_EQ(wait_for(client, 1).size(), 1u);
    const std::string req = server.last_request();
    EXPECT_EQ(req.rfind("POST /v1/chat/completions?x=1 HTTP/1.1\r\n", 0), 0u) << req;
    EXPECT_NE(req.find("Host: 127.0.0.1:"), std::string::npos);
    EXPECT_NE(req.find("Accept: application/json\r\n"), std::string::npos);
    EXPECT_EQ(req.find("Accept: */*"), std::string::npos);
    EXPECT_NE(req.find("Authorization: Bearer k\r\n"), std::string::npos);
    EXPECT_NE(req.find("Content-Length: 8\r\n\r\n{\"a\": 1}"), std::string::npos);
}

TEST(MultiClient, AHeaderWithALineBreakIsNotSent) {
    ScriptedServer server([](int, const std::string&) { return Reply{ok("{}")}; });
    MultiClient client;
    auto r = post(server.url());
    r.headers.push_back("X-Team: a\r\nX-Injected: b");
    client.submit(r);
    auto got = wait_for(client, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::failed);
    EXPECT_EQ(server.requests(), 0);
}

TEST(MultiClient, CancelAllDropsTransfersInFlight) {
    ScriptedServer server([](int, const std::string&) { return Reply{"", false, true}; });
    MultiClient client;
    client.submit(post(server.url(), 1));
    client.submit(post(server.url(), 2));
    client.poll(20ms);
    EXPECT_EQ(client.in_flight(), 2u);
    client.cancel_all();
    EXPECT_EQ(client.in_flight(), 0u);
    EXPECT_TRUE(client.poll(10ms).empty());
}

// With a proxy in the environment, transfers go through libcurl (loaded
// then), which honours it: the request reaches the proxy in its absolute
// form and its answer comes back, from MultiClient and fetch alike.
// http_proxy set to `url` while it lives, then as it was.
class ProxyEnv {
public:
    explicit ProxyEnv(const std::string& url) {
        const char* before = std::getenv("http_proxy");
        m_saved = before ? std::optional<std::string>(before) : std::nullopt;
        setenv("http_proxy", url.c_str(), 1);
    }
    ~ProxyEnv() {
        if (m_saved) {
            setenv("http_proxy", m_saved->c_str(), 1);
        } else {
            unsetenv("http_proxy");
        }
    }
    ProxyEnv(const ProxyEnv&) = delete;
    ProxyEnv& operator=(const ProxyEnv&) = delete;

private:
    std::optional<std::string> m_saved;
};

TEST(MultiClient, AProxiedTransferGoesThroughLibcurl) {
    ScriptedServer proxy([](int, const std::string&) { return Reply{ok("{\"via\":1}")}; });
    std::vector<Response> got;
    Response fetched;
    {
        ProxyEnv env(proxy.url(""));
        MultiClient client;
        client.submit(post("http://backend.invalid:9/v1/completions", 7));
        got = wait_for(client, 1);
        Request get;
        get.url = "http://backend.invalid:9/v1/models";
        get.timeout = 10s;
        fetched = fetch(get);
    }
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].transport, Transport::ok) << got[0].transport_error;
    EXPECT_EQ(got[0].tag, 7u);
    EXPECT_EQ(got[0].status, 200);
    EXPECT_EQ(got[0].body, "{\"via\":1}");
    EXPECT_EQ(fetched.transport, Transport::ok) << fetched.transport_error;
    EXPECT_EQ(fetched.body, "{\"via\":1}");
    EXPECT_EQ(proxy.requests(), 2);
    EXPECT_EQ(proxy.last_request().rfind("GET http://backend.invalid:9/v1/models HTTP/1.1", 0), 0u)
        << proxy.last_request();
    EXPECT_TRUE(detail::curl_loaded());
}

// Through libcurl too, an interim answer's headers are not the final
// one's: a 103's Retry-After held each retry of the 503 after it for the
// whole --timeout (an audit).
TEST(MultiClient, AnInterimAnswersHeadersAreNotTheFinalOnesThroughLibcurl) {
    ScriptedServer proxy([](int, const std::string&) {
        return Reply{"HTTP/1.1 103 Early Hints\r\nRetry-After: 100\r\nLocation: /early\r\n"
                     "Server: early\r\n\r\n"
                     "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\n{}"};
    });
    std::vector<Response> got;
    {
        ProxyEnv env(proxy.url(""));
        MultiClient client;
        client.submit(post("http://backend.invalid:9/v1/completions", 7));
        got = wait_for(client, 1);
    }
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, 503) << got[0].transport_error;
    EXPECT_FALSE(got[0].retry_after.has_value());
    EXPECT_FALSE(got[0].location.has_value());
    EXPECT_EQ(got[0].server_header, "");
}

// A transfer libcurl carries (https://, a proxy) is decoded by diffeval
// too: libcurl's own decoder took a gzip body cut short for a whole one.
// Whole bodies decode, and an encoding not asked for is refused, as on the
// Beast client's path.
TEST(MultiClient, ACompressedBodyCutShortIsAFailureThroughLibcurlToo) {
    const std::string text = "{\"choices\":[{\"text\":\"#### 42\"}]}";
    const std::string packed = gzip(text);
    struct Case {
        std::string body, encoding, error;
    };
    const std::vector<Case> cases = {
        {packed, "gzip", ""},
        {packed.substr(0, packed.size() - 8), "gzip",
         "the response body ends before the end of its gzip or deflate data"},
        {packed.substr(0, packed.size() / 2), "gzip",
         "the response body ends before the end of its gzip or deflate data"},
        {packed + packed, "gzip",
         "the response body goes on after the end of its gzip or deflate data"},
        {text, "br",
         "the response's Content-Encoding 'br' was not asked for (diffeval accepts "
         "gzip and deflate)"},
    };
    for (const auto& c : cases) {
        ScriptedServer proxy([&](int, const std::string&) {
            return Reply{ok(c.body, "Content-Encoding: " + c.encoding + "\r\n")};
        });
        std::vector<Response> got;
        {
            ProxyEnv env(proxy.url(""));
            MultiClient client;
            client.submit(post("http://backend.invalid:9/v1/completions", 7));
            got = wait_for(client, 1);
        }
        ASSERT_EQ(got.size(), 1u);
        EXPECT_NE(proxy.last_request().find("Accept-Encoding: gzip, deflate\r\n"),
                  std::string::npos)
            << proxy.last_request();
        if (c.error.empty()) {
            EXPECT_EQ(got[0].transport, Transport::ok) << got[0].transport_error;
            EXPECT_EQ(got[0].body, text);
        } else {
            EXPECT_EQ(got[0].transport, Transport::failed) << c.body.size() << " " << got[0].body;
            EXPECT_EQ(got[0].transport_error, c.error);
        }
    }
}

TEST(ServerUrl, AUrlAConnectionCannotBeMadeToSaysWhatIsWrongWithIt) {
    EXPECT_EQ(http_url_problem("http://localhost:8000"), std::nullopt);
    EXPECT_EQ(http_url_problem("https://api.example.com/v1"), std::nullopt);
    EXPECT_EQ(http_url_problem("http://[::1]:8000/x?y#z"), std::nullopt);
    EXPECT_EQ(http_url_problem("http://user:pass@localhost:8000"), std::nullopt);
    EXPECT_EQ(http_url_problem("localhost:8000"), "is not an http:// or https:// URL");
    EXPECT_EQ(http_url_problem("ftp://localhost"), "is not an http:// or https:// URL");
    // Each once passed as a URL: preflight then said the server was
    // unreachable, and to start it.
    EXPECT_EQ(http_url_problem("http://127.0.0.1:99999"),
              "is not a valid URL: Port number was not a decimal number between 0 and 65535");
    EXPECT_EQ(http_url_problem("http://[::1:8000"), "is not a valid URL: Bad IPv6 address");
    EXPECT_EQ(http_url_problem("http://127.0.0.1:0"),
              "is not a valid URL: port 0 cannot be connected to");
    EXPECT_EQ(http_url_problem("http://exa mple.com"), "is not a valid URL: Bad hostname");
    EXPECT_EQ(http_url_problem("http://:80"), "is not a valid URL: No host part in the URL");
    EXPECT_EQ(http_url_problem("http://localhost:"),
              "is not a valid URL: give http://HOST:PORT, e.g. http://localhost:8000");
}

// The quick check that spares loading libcurl vouches only for URLs
// libcurl's parser takes: were it to pass one libcurl refuses, a mistyped
// server would be tried instead of named.
TEST(ServerUrl, TheQuickCheckPassesOnlyWhatLibcurlTakes) {
    const std::vector<std::string> passed = {
        "http://localhost:8000",  "http://localhost",        "https://api.example.com/v1",
        "http://127.0.0.1:8000/", "http://10.0.0.255:65535", "http://a-b.c9.example:1/x_y/z~.w",
        "http://0.0.0.0:1",
    };
    const std::vector<std::string> left_to_libcurl = {
        "http://127.0.0.1:99999", "http://127.0.0.1:0",   "http://127.0.0.1:00080",
        "http://[::1]:8000",      "http://exa mple.com",  "http://:80",
        "http://localhost:",      "http://user:p@host:1", "http://host/p?q=1",
        "http://host/p#f",        "http://host/%41",      "http://1.2.3:80",
        "http://256.1.1.1:80",    "http://01.1.1.1:80",   "http://0x7f.1:80",
        "http://-host:80",        "http://host-:80",      "http://ho..st:80",
        "http://host.:80",        "http://1host:80",      "http://h\xc3\xa9.example:80",
        "http://host:80:81",      "http://host:+80",      "https://h/a b",
        "HTTP://x.y:80",
    };
    for (const auto& url : passed) {
        EXPECT_TRUE(detail::plainly_valid_url(url)) << url;
        EXPECT_EQ(detail::curl_url_problem(url), std::nullopt) << url;
    }
    for (const auto& url : left_to_libcurl) {
        EXPECT_FALSE(detail::plainly_valid_url(url)) << url;
    }
}

// A run against plain http:// servers never needs libcurl: checking their
// URLs and the preflight's one-off requests leave it unloaded (loading it
// cost every command ~8.5 ms before main()), and the answer is the same.
TEST(ServerUrl, PlainHttpLeavesLibcurlUnloaded) {
    if (detail::curl_loaded()) {
        GTEST_SKIP() << "an earlier test in this process loaded libcurl (ctest runs each alone)";
    }
    ScriptedServer server([](int, const std::string&) { return Reply{ok("{\"data\":[]}")}; });
    EXPECT_EQ(http_url_problem(server.url("/v1/models")), std::nullopt);
    Request get;
    get.url = server.url("/v1/models");
    get.timeout = 10s;
    const Response r = fetch(get);
    EXPECT_EQ(r.transport, Transport::ok) << r.transport_error;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "{\"data\":[]}");
    EXPECT_FALSE(detail::curl_loaded());
    EXPECT_EQ(http_url_problem("http://[::1]:8000"), std::nullopt);
    EXPECT_TRUE(detail::curl_loaded());
}

// A blocking fetch over plain http:// ends when the caller cancels it, as
// Ctrl-C during preflight ends the wait for a server that never answers.
TEST(ServerUrl, APlainFetchEndsWhenCancelled) {
    ScriptedServer server([](int, const std::string&) { return Reply{"", false, true}; });
    std::atomic<bool> cancel{false};
    Request get;
    get.url = server.url("/v1/models");
    get.timeout = 10s;
    get.cancel = &cancel;
    std::thread stopper([&] {
        std::this_thread::sleep_for(50ms);
        cancel = true;
    });
    const auto start = std::chrono::steady_clock::now();
    const Response r = fetch(get);
    stopper.join();
    EXPECT_EQ(r.transport, Transport::cancelled);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(ServerUrl, APasswordInTheUrlIsMaskedHoweverShort) {
    EXPECT_EQ(url_secret("http://user:hunter2@host:1/p"), "hunter2");
    EXPECT_EQ(url_secret("http://token@host"), "token");
    EXPECT_EQ(url_secret("http://host/p@q"), "");
    EXPECT_EQ(url_without_secret("http://user:pw@host:1/p"), "http://user:[REDACTED]@host:1/p");
    EXPECT_EQ(url_without_secret("http://t@[::1"), "http://[REDACTED]@[::1");
    EXPECT_EQ(url_without_secret("http://host:1"), "http://host:1");
}

// What a server echoing its Authorization header shows is the Basic
// credential: base64 of the decoded "user:password" (python3's
// base64.b64encode), or of "token:" for a user alone.
TEST(ServerUrl, ThePasswordIsRedactedInEverySpellingItIsSentIn) {
    EXPECT_EQ(url_secret_spellings("http://host:1/p"), std::vector<std::string>{});
    EXPECT_EQ(url_secret_spellings("http://user:hunter2@host:1/p"),
              (std::vector<std::string>{"hunter2", "dXNlcjpodW50ZXIy"}));
    EXPECT_EQ(url_secret_spellings("http://me:a%40b%zz@host"),
              (std::vector<std::string>{"a%40b%zz", "a@b%zz", "bWU6YUBiJXp6"}));
    EXPECT_EQ(url_secret_spellings("http://tok%2Fen@host"),
              (std::vector<std::string>{"tok%2Fen", "tok/en", "dG9rL2VuOg=="}));
}

} // namespace
} // namespace diffeval::http
