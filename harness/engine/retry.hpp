// The retry policy: whether a finished attempt is tried again, and after how
// long. One pure function of what the attempt returned, so the event loop
// only moves bytes and asks it, and every rule is unit-tested.
#pragma once

#include <harness/http/client.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace diffeval::engine {

// What one finished attempt returned, and the run's retry settings.
struct RetryInput {
    int attempt = 1;     // attempts made so far, this one included
    int max_retries = 0; // the run's --retries: attempts <= this are retried
    http::Transport transport = http::Transport::ok;
    long status = 0;
    const std::string* body = nullptr;                       // the answer, for permanent errors
    const std::optional<std::string>* retry_after = nullptr; // the Retry-After header
    // The parsed row's error kind when parsing a 200 failed ("parse",
    // "stream"); empty before parsing or when the row is ok.
    std::string_view parsed_error_kind;
    std::chrono::milliseconds timeout{600'000}; // the run's, bounds Retry-After
    std::chrono::milliseconds backoff_base{500};
    double jitter = 1.0; // 0.5 .. 1.5, drawn by the caller
    // Every request fits the server's context alone (permanent_error).
    bool fits_alone = false;
};

struct RetryDecision {
    bool retry = false;
    std::chrono::milliseconds delay{0}; // meaningful when `retry`
    // The answer outgrew a context requests share (ErrorAnswer::crowded):
    // fewer in flight would let the retry through.
    bool crowded = false;
};

// Retried while attempts remain: transport errors (except a body over the
// limit, which would be over it again), HTTP 429/500/502/503/504 unless the
// body says no retry can help (`permanent_error`), and a 200 whose body was
// cut or carried an error event. The delay is Retry-After when a transport-ok
// answer sent one (bounded by the timeout), else `backoff_delay`.
RetryDecision retry_policy(const RetryInput& in);

// Exponential backoff: `base` * 2^(`attempt`-1) * `jitter`, at most 60 s.
std::chrono::milliseconds backoff_delay(std::chrono::milliseconds base, int attempt, double jitter);

// The wait a Retry-After value `v` asks for: delta-seconds only, capped at
// `cap` and at 300 s; nullopt for anything else.
std::optional<std::chrono::milliseconds> parse_retry_after(const std::optional<std::string>& v,
                                                           std::chrono::milliseconds cap);

// HTTP statuses worth another attempt: busy or a server-side failure.
bool retryable_status(long status);

} // namespace diffeval::engine
