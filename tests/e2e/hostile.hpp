// A deliberately misbehaving OpenAI-compatible server for the black-box
// tests: raw sockets on a free loopback port, one thread per connection, each
// answer shaped by a mode (cut streams, wrong types, bombs, redirects,
// echoed secrets, absurd headers and counts). Everything is bounded in time
// and size so a test can never hang on it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace e2e {

enum class Hostile {
    good,             // a correct answer ("The answer is 42.\n#### 42")
    cut_mid_event,    // the body stops in the middle of JSON or of an SSE event
    no_finish,        // stream: content, then the connection ends (no finish_reason, no [DONE])
    content_number,   // chat content / completion text is a number
    content_object,   // ... an object
    content_null,     // ... null, with no reasoning either
    message_empty,    // chat message {} / completion choice {}
    deep_json,        // 100,000 nested arrays
    gzip_bomb,        // Content-Encoding: gzip inflating to 256 MiB
    endless,          // a body that never ends (until the client hangs up)
    redirect_away,    // 307 to Options::redirect_url
    redirect_ftp,     // 307 to ftp://
    redirect_loop,    // 307 to itself
    echo_headers,     // a good answer whose text quotes every request header
    echo_headers_503, // 503 whose error message quotes the Authorization value after 130
                      // characters, so an excerpt of 160 would cut the key
    retry_after_huge, // 429 with Retry-After: 1e308
    retry_after_nan,  // 429 with Retry-After: nan
    bad_tokens,       // a good answer with completion_tokens -5, prompt_tokens 2^64-1
    partial_206,      // a good body with status 206
    huge_header,      // a good body behind a 70,000-byte header field
    huge_trailer,     // a good chunked body, then a 70,000-byte trailer field
    finish_abort,     // a good text with finish_reason "abort"
    done_then_hold, // stream: a whole answer and [DONE] in a chunk, then neither the last chunk nor
                    // a close
    echo_key_split, // the request's API key in the answer, split: stream chat reasoning in 3
                    // events and content in 2 (the second starting with 5 characters as \u00XX),
                    // completion text in 3; not streamed, whole with its first two characters
                    // escaped as \u0073\u006B (no spelling the redactor knows)
    hang,           // reads the request, never answers
    key_after_done, // stream: a good answer ending in the request's API key's first 8
                    // characters, [DONE], then the rest of the key in two more content
                    // events (not streamed: a good answer)
    key_cut,        // the start of an answer quoting the request's API key, cut inside the key
                    // (streamed: 10 characters in a whole event, 6 in an unfinished one), then
                    // nothing until the client gives up
    error_line,     // stream: content, then llama.cpp's `error: {...}` line, then [DONE]
                    // (not streamed: HTTP 500 with that error)
    object_error,   // vLLM's {"object":"error",...}: stream: after content, as a data event;
                    // not streamed: the whole body of a 200
    chat_shaped,    // /v1/completions answered in chat's shape: streamed, delta chunks and a
                    // bare finish_reason, no `text` anywhere; not streamed, a message
    stop_reason_true,     // a good answer whose stop_reason is `true`
    probe_error,          // a probe's request (max_tokens 1) gets a 200 whose body is no answer:
                          // in turn an error object, `[]` and `42`; others a good answer
    gzip_members,         // Content-Encoding: gzip, two members: a good answer, then an error
    close_after_read,     // reads the request (counted) and closes without answering
    oversize_503,         // 503 with Retry-After: 0 and a 200,000-byte body sent with its length
    stray_after,          // a good answer, then at once a second 200 no request asked for
                          // (text "STRAY #### 7") on the same connection
    done_then_drop,       // stream: a whole answer and [DONE] in a chunk, then the connection
                          // closes without the last chunk
    reset_after_read,     // reads the request (counted) and resets the connection (SO_LINGER 0)
    echo_key_other_shape, // a 200 in the other endpoint's shape (chat gets a completion, a
                          // completion a chat message), streamed or not, quoting the request's
                          // API key with its first two characters as \u0073\u006B
};

// The mode's name, as counted by HostileServer::arrivals().
std::string name_of(Hostile mode);

// How GET /v1/models answers (echo_error: HTTP 500 quoting the request
// headers; echo_id: a model whose id is the request's Authorization value),
// or, for the last two, how llama.cpp's GET /props does (nested 300,000
// deep; total_slots 2^32) beside a normal model list; server_bad_utf8: a
// normal list whose Server header holds bytes that are not UTF-8.
enum class ModelsReply {
    normal,
    deep,
    hang,
    echo_error,
    echo_id,
    props_deep,
    props_huge_slots,
    server_bad_utf8,
    loading // HTTP 503 {"error": {"message": "Loading model"}}, as llama-server while it loads
};

class HostileServer {
public:
    struct Options {
        std::vector<Hostile> cycle{Hostile::good}; // POST n gets cycle[n % size]
        ModelsReply models = ModelsReply::normal;
        std::string redirect_url; // for redirect_away
        // Answer the first N arrivals of each request body with the cycle,
        // later ones with `good` (0: always the cycle).
        int hostile_arrivals_per_body = 0;
        // Keep connections open after an answer (no "Connection: close") and
        // read the next request on them.
        bool keep_alive = false;
        // As llama-server does: a good streamed answer is sent chunked with
        // a Keep-Alive header and no "Connection: close", and then the
        // connection is closed unread, 20 ms later.
        bool close_after_stream = false;
        // The same after every good unstreamed answer: sent with its length,
        // no "Connection: close", and the connection closed unread 20 ms
        // later (keep_alive's heads).
        bool close_after_answer = false;
    };
    explicit HostileServer(Options options);
    ~HostileServer();
    HostileServer(const HostileServer&) = delete;
    HostileServer& operator=(const HostileServer&) = delete;

    std::string url() const;
    int port() const { return m_port; }
    // POST arrivals per mode name, and in all.
    std::map<std::string, int> arrivals() const;
    int total_arrivals() const;
    // Connections accepted.
    int connections() const;
    int model_listings() const { return m_models.load(); }
    // The headers of the last POST, as received.
    std::string last_headers() const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
    int m_port = 0;
    std::atomic<int> m_models{0};
};

} // namespace e2e
