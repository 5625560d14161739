// The run's event loop for plain http:// servers: HTTP/1.1 keep-alive
// connections on Boost.Beast over Asio, driven from MultiClient::poll. Internal
// to harness/http: MultiClient routes here what it may (plain_client_can_send)
// and everything else (https, a proxy in the environment) to libcurl.
//
// Why not libcurl for these too: per transfer, libcurl resets and configures
// an easy handle, looks its connection up in a shared cache that it walks, and
// keeps 80 KiB of buffers per handle; against a local server that was most of
// the client's CPU per response, and grew with the number of connections
// (bench/goals.sh). Here a connection is a socket and a flat buffer, parsing is
// Beast's, and a finished transfer's connection goes back to its host's list.
#pragma once

#include <harness/http/client.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace diffeval::http::detail {

// What is kept of a body that passed its limit, for inspection.
inline constexpr size_t k_kept_of_too_large = size_t{64} << 10;

// Whether PlainMulti sends to `url`: http:// with no proxy variable
// (http_proxy, all_proxy, ALL_PROXY) set, which libcurl would honour.
bool plain_client_can_send(const std::string& url);

class PlainMulti {
public:
    PlainMulti();
    ~PlainMulti();
    PlainMulti(const PlainMulti&) = delete;
    PlainMulti& operator=(const PlainMulti&) = delete;

    // Start `request` (its url passed plain_client_can_send).
    void submit(Request request);
    // Run transfers for at most `max_wait`, returning sooner once one has
    // finished; finished ones are appended to `done`.
    void poll(std::chrono::milliseconds max_wait, std::vector<Response>& done);
    // Abort every transfer in flight (their responses are dropped).
    void cancel_all();
    // Keep at most `n` connections open, busy and idle together.
    void set_max_connections(size_t n);
    size_t in_flight() const;
    // The connections to `url`'s host and port found holding bytes no
    // request asked for: read past an answer, or waiting on an idle
    // kept-alive connection, when it is taken up or when this is asked
    // (each then shut, not reused).
    size_t unasked_bytes(const std::string& url);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace diffeval::http::detail
