// HTTP for the run's many concurrent requests (keep-alive, connection reuse,
// no thread per request: plain http:// on Boost.Beast, https and proxies on
// libcurl's multi interface), and a blocking helper for the few one-off calls
// (preflight, downloads) on the same two. libcurl is loaded only when an
// https:// or proxied transfer first needs it (curl_api.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::http {

// How the transfer itself ended, kept apart from the HTTP status:
// `too_large` when the body passed Request::max_body_bytes, `cancelled` when
// Request::cancel was set during a blocking fetch().
enum class Transport { ok, failed, timed_out, too_large, cancelled };

// The default body limit: far above any answer (a 32k-token completion is a
// few hundred KiB), far below what would exhaust memory at full concurrency.
inline constexpr size_t k_default_max_body_bytes = size_t{32} << 20;

struct Request {
    uint64_t tag = 0; // the caller's id, returned in the Response
    std::string method = "GET";
    std::string url;
    std::vector<std::string> headers; // "Name: value"
    // Shared, not copied: a run sends the same body once per attempt.
    std::shared_ptr<const std::string> body;
    std::chrono::milliseconds timeout{600'000};
    // Called with each received chunk as it arrives (streaming); optional.
    std::function<void(std::string_view)> on_data;
    // The most body bytes accepted, counted after decompression; beyond it
    // the transfer ends with Transport::too_large.
    size_t max_body_bytes = k_default_max_body_bytes;
    // fetch() only: checked every few milliseconds; when set, the transfer
    // is abandoned with Transport::cancelled (Ctrl-C during preflight).
    const std::atomic<bool>* cancel = nullptr;
};

struct Response {
    uint64_t tag = 0;
    Transport transport = Transport::ok;
    std::string transport_error;            // what went wrong when transport != ok
    long status = 0;                        // 0 when no response arrived
    std::string body;                       // cut to its first 64 KiB when too_large
    std::optional<std::string> retry_after; // the Retry-After header
    std::optional<std::string> location;    // the Location header (redirects are not followed)
    std::string server_header;              // the Server header
    // False when the transfer never connected (refused, unresolvable):
    // nothing of the request reached a server.
    bool connected = true;
    // When the transfer ended: its last byte read, or its failure; set on
    // every response poll() returns. A caller that handles many answers read
    // at once times each by this, not by when it got to it.
    std::chrono::steady_clock::time_point ended_at{};
};

// Many concurrent transfers driven from one thread.
class MultiClient {
public:
    MultiClient();
    ~MultiClient();
    MultiClient(const MultiClient&) = delete;
    MultiClient& operator=(const MultiClient&) = delete;

    // Start `request`; its Response comes out of a later poll().
    void submit(Request request);
    // Drive transfers for at most `max_wait`; return those that finished.
    std::vector<Response> poll(std::chrono::milliseconds max_wait);
    // Abort every transfer in flight (their responses are dropped).
    void cancel_all();
    // Keep at most `n` connections open, busy and idle together: a finished
    // transfer's connection beyond that is closed instead of kept alive, so an
    // idle connection never holds a thread-per-connection server's thread.
    void set_max_connections(size_t n);
    size_t in_flight() const;
    // The connections to `url`'s host and port found holding bytes no
    // request asked for (past an answer, or on an idle kept-alive
    // connection): a server or proxy that sent a response too many. Plain
    // http:// only (libcurl checks its own connections and says nothing).
    size_t unasked_bytes(const std::string& url);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// One blocking request (preflight checks, dataset downloads), sent as
// MultiClient would send it. Redirects are never followed, here or in
// MultiClient: a 3xx comes back as it is.
Response fetch(const Request& request);

// The secret in a URL's user information (`http://user:PASSWORD@host`, or
// `http://TOKEN@host`), as typed: libcurl sends it as Basic authentication,
// and the URL is printed and stored. Empty when there is none.
std::string_view url_secret(std::string_view url);

// Every spelling in which a server may send url_secret() back: as typed,
// percent-decoded (as libcurl sends it), and inside the Basic credential
// libcurl sends, base64("user:password") of the decoded user information,
// which is what a server echoing its Authorization header shows. Empty when
// the URL has no secret.
std::vector<std::string> url_secret_spellings(std::string_view url);

// `url` with url_secret() replaced by "[REDACTED]", however short it is: for
// a message about the URL itself.
std::string url_without_secret(std::string_view url);

// What is wrong with `url` as a server's address, in words that follow the
// URL in a message ("is not an http:// or https:// URL", "is not a valid
// URL: Port number was not a decimal number between 0 and 65535"); nothing
// when it is an http(s)://host[:port][/path] URL that libcurl parses.
std::optional<std::string> http_url_problem(const std::string& url);

// The host (without IPv6 brackets) and the port (digits) of an http:// or
// https:// `url`, the port defaulting to the scheme's; nothing when `url`
// has no such authority (no scheme, user info, an empty host or port).
struct HostPort {
    std::string host;
    std::string port;
};
std::optional<HostPort> host_port(std::string_view url);

} // namespace diffeval::http
