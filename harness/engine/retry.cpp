// The retry policy; see retry.hpp. Two moments ask it: as soon as a transfer
// ends (transport and status), and after a 200 was parsed (a cut body or an
// error event is the server failing to deliver, like a 5xx).
#include <harness/engine/retry.hpp>

#include <harness/engine/capacity.hpp>

#include <algorithm>
#include <cmath>
#include <string_view>

namespace diffeval::engine {

namespace {

constexpr auto k_max_backoff = std::chrono::milliseconds{60'000};
constexpr auto k_max_retry_after = std::chrono::milliseconds{300'000};

// A failed transfer or an error status worth another attempt; `crowded`
// when the answer said requests crowd a shared context.
bool transfer_retryable(const RetryInput& in, bool& crowded) {
    if (in.transport != http::Transport::ok && in.transport != http::Transport::too_large) {
        return true;
    }
    // A body over the limit is not retried as such, but a status that asks
    // for a retry still is (the status line arrived before the body was cut).
    if (!retryable_status(in.status)) {
        return false;
    }
    static const std::string k_empty;
    const auto answer = error_answer(in.status, in.body ? *in.body : k_empty, in.fits_alone);
    crowded = answer == ErrorAnswer::crowded;
    return answer != ErrorAnswer::permanent;
}

// A 200 whose body could not be used as delivered.
bool delivery_retryable(const RetryInput& in) {
    return in.parsed_error_kind == "parse" || in.parsed_error_kind == "stream" ||
           in.parsed_error_kind == "finish";
}

} // namespace

RetryDecision retry_policy(const RetryInput& in) {
    if (in.attempt > in.max_retries) {
        return {};
    }
    if (bool crowded = false; transfer_retryable(in, crowded)) {
        auto delay = backoff_delay(in.backoff_base, in.attempt, in.jitter);
        if (in.transport == http::Transport::ok && in.retry_after) {
            if (auto ra = parse_retry_after(*in.retry_after, in.timeout)) {
                delay = *ra;
            }
        }
        return {true, delay, crowded};
    }
    if (delivery_retryable(in)) {
        return {true, backoff_delay(in.backoff_base, in.attempt, in.jitter)};
    }
    return {};
}

std::chrono::milliseconds backoff_delay(std::chrono::milliseconds base, int attempt,
                                        double jitter) {
    double ms = static_cast<double>(base.count()) * std::pow(2.0, attempt - 1) * jitter;
    return std::chrono::milliseconds(
        static_cast<int64_t>(std::min(ms, static_cast<double>(k_max_backoff.count()))));
}

// Delta-seconds only (digits; HTTP dates and anything else such as "nan" or
// "1e308" fall back to the backoff), capped so a hostile server cannot park
// the run. However many digits: "wait a very long time" waits the cap (13
// or more digits fell back to the 50 ms backoff; a hostile-server audit).
std::optional<std::chrono::milliseconds> parse_retry_after(const std::optional<std::string>& v,
                                                           std::chrono::milliseconds cap) {
    if (!v || v->empty() ||
        !std::all_of(v->begin(), v->end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return std::nullopt;
    }
    const auto limit = std::min(cap, k_max_retry_after);
    // Leading zeros say nothing; past 12 digits the value is past any cap.
    const auto digits = std::string_view(*v).substr(std::min(v->find_first_not_of('0'), v->size()));
    if (digits.size() > 12) {
        return limit;
    }
    return std::min(
        std::chrono::milliseconds(digits.empty() ? 0 : std::stoll(std::string(digits)) * 1000),
        limit);
}

bool retryable_status(long status) {
    return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

} // namespace diffeval::engine
