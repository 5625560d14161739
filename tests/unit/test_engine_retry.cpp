// retry.hpp: which finished attempts are tried again and after how long.
#include <harness/engine/retry.hpp>

#include <gtest/gtest.h>

namespace diffeval::engine {
namespace {

using std::chrono::milliseconds;

// A retry test's attempt: the first of up to three retries, 500 ms backoff
// base, no jitter, a 600 s timeout.
struct Attempt {
    std::string body;
    std::optional<std::string> retry_after;
    RetryInput in;

    Attempt(http::Transport transport, long status, std::string b = "") : body(std::move(b)) {
        in.attempt = 1;
        in.max_retries = 3;
        in.transport = transport;
        in.status = status;
        in.timeout = milliseconds{600'000};
        in.backoff_base = milliseconds{500};
        in.jitter = 1.0;
    }
    RetryDecision decide() {
        in.body = &body;
        in.retry_after = &retry_after;
        return retry_policy(in);
    }
};

TEST(RetryPolicy, TransportErrorsAreRetried) {
    for (auto t : {http::Transport::failed, http::Transport::timed_out}) {
        Attempt a(t, 0);
        auto d = a.decide();
        EXPECT_TRUE(d.retry);
        EXPECT_EQ(d.delay, milliseconds{500});
    }
}

TEST(RetryPolicy, BodyOverTheLimitIsNotRetried) {
    Attempt a(http::Transport::too_large, 200, "{\"choices\": [");
    EXPECT_FALSE(a.decide().retry);
}

TEST(RetryPolicy, BusyAndServerErrorStatusesAreRetried) {
    for (long status : {429L, 500L, 502L, 503L, 504L}) {
        Attempt a(http::Transport::ok, status, "{\"error\": {\"message\": \"overloaded\"}}");
        EXPECT_TRUE(a.decide().retry) << status;
    }
}

TEST(RetryPolicy, ClientErrorsAndOtherStatusesAreFinal) {
    for (long status : {200L, 204L, 301L, 400L, 401L, 403L, 404L, 422L, 501L}) {
        Attempt a(http::Transport::ok, status, "{\"error\": {\"message\": \"no\"}}");
        EXPECT_FALSE(a.decide().retry) << status;
    }
}

TEST(RetryPolicy, PermanentErrorsAreFinalEvenOnA5xx) {
    Attempt context(http::Transport::ok, 500,
                    "{\"error\": {\"message\": \"This model's maximum context length is 4096 "
                    "tokens\"}}");
    EXPECT_FALSE(context.decide().retry);
    Attempt missing(http::Transport::ok, 500,
                    "{\"error\": {\"message\": \"x\", \"type\": \"model_not_found\"}}");
    EXPECT_FALSE(missing.decide().retry);
    // Busy answers are worth waiting for whatever they say.
    Attempt busy(http::Transport::ok, 503, "{\"error\": {\"message\": \"model does not exist\"}}");
    EXPECT_TRUE(busy.decide().retry);
}

// The policy passes the server's fits_alone on: the same answer that
// outgrew the context is final for a server some request may not fit, and
// retried for one every request fits alone.
TEST(RetryPolicy, AnAnswerThatOutgrewTheContextIsRetriedWhenEveryRequestFitsAlone) {
    Attempt outgrown(http::Transport::ok, 500,
                     R"({"error":{"code":500,"message":"Context size has been exceeded.",)"
                     R"("type":"server_error"}})");
    EXPECT_FALSE(outgrown.decide().retry);
    outgrown.in.fits_alone = true;
    const auto d = outgrown.decide();
    EXPECT_TRUE(d.retry);
    EXPECT_TRUE(d.crowded) << "the sender lowers the server's in-flight limit on it";
    // Any other retried failure leaves the limit alone.
    Attempt other(http::Transport::ok, 500, R"({"error":{"message":"internal error"}})");
    other.in.fits_alone = true;
    EXPECT_FALSE(other.decide().crowded);
}

TEST(RetryPolicy, StopsWhenTheAttemptsAreExhausted) {
    Attempt a(http::Transport::ok, 503);
    a.in.attempt = 3;
    EXPECT_TRUE(a.decide().retry);
    a.in.attempt = 4;
    EXPECT_FALSE(a.decide().retry);
    Attempt none(http::Transport::failed, 0);
    none.in.max_retries = 0;
    EXPECT_FALSE(none.decide().retry);
}

TEST(RetryPolicy, RetryAfterIsUsedOnATransportOkAnswer) {
    Attempt a(http::Transport::ok, 429);
    a.retry_after = "7";
    auto d = a.decide();
    EXPECT_TRUE(d.retry);
    EXPECT_EQ(d.delay, milliseconds{7'000});
    a.retry_after = "0";
    EXPECT_EQ(a.decide().delay, milliseconds{0});
}

TEST(RetryPolicy, RetryAfterIsIgnoredWithoutATransportOkAnswer) {
    Attempt a(http::Transport::timed_out, 503);
    a.retry_after = "7";
    EXPECT_EQ(a.decide().delay, milliseconds{500});
}

TEST(RetryPolicy, RetryAfterIsBoundedByTheTimeoutAndFiveMinutes) {
    Attempt a(http::Transport::ok, 503);
    a.retry_after = "1000";
    a.in.timeout = milliseconds{10'000};
    EXPECT_EQ(a.decide().delay, milliseconds{10'000});
    a.in.timeout = milliseconds{3'600'000};
    EXPECT_EQ(a.decide().delay, milliseconds{300'000});
    a.retry_after = "999999999999"; // 12 digits: still a number, still capped
    EXPECT_EQ(a.decide().delay, milliseconds{300'000});
    // Any number of digits is whole seconds: 13 or 26 of them waited the
    // 500 ms backoff, hammering a server that asked for a long rest.
    for (const char* v : {"9999999999999", "12345678901234567890123456"}) {
        a.retry_after = v;
        EXPECT_EQ(a.decide().delay, milliseconds{300'000}) << v;
    }
    a.retry_after = "0000000000000007"; // leading zeros say nothing
    EXPECT_EQ(a.decide().delay, milliseconds{7'000});
}

TEST(RetryPolicy, RetryAfterThatIsNotDeltaSecondsFallsBackToTheBackoff) {
    for (const char* v :
         {"nan", "inf", "-1", "1.5", "1e308", " 5", "", "Wed, 21 Oct 2015 07:28:00 GMT"}) {
        Attempt a(http::Transport::ok, 503);
        a.retry_after = v;
        auto d = a.decide();
        EXPECT_TRUE(d.retry) << v;
        EXPECT_EQ(d.delay, milliseconds{500}) << v;
    }
}

TEST(RetryPolicy, BackoffDoublesPerAttemptWithJitterAndIsCapped) {
    Attempt a(http::Transport::failed, 0);
    a.in.max_retries = 100;
    a.in.attempt = 1;
    EXPECT_EQ(a.decide().delay, milliseconds{500});
    a.in.attempt = 2;
    EXPECT_EQ(a.decide().delay, milliseconds{1'000});
    a.in.attempt = 3;
    EXPECT_EQ(a.decide().delay, milliseconds{2'000});
    a.in.jitter = 0.5;
    EXPECT_EQ(a.decide().delay, milliseconds{1'000});
    a.in.jitter = 1.5;
    EXPECT_EQ(a.decide().delay, milliseconds{3'000});
    a.in.attempt = 20;
    EXPECT_EQ(a.decide().delay, milliseconds{60'000});
    a.in.attempt = 100;
    EXPECT_EQ(a.decide().delay, milliseconds{60'000});
    EXPECT_EQ(backoff_delay(milliseconds{3'600'000}, 1, 0.5), milliseconds{60'000});
}

TEST(RetryPolicy, ParseAndStreamErrorsOnA200AreRetriedWithTheBackoff) {
    for (const char* kind : {"parse", "stream"}) {
        Attempt a(http::Transport::ok, 200);
        a.retry_after = "7"; // only a failed status asks to wait
        a.in.parsed_error_kind = kind;
        a.in.attempt = 2;
        auto d = a.decide();
        EXPECT_TRUE(d.retry) << kind;
        EXPECT_EQ(d.delay, milliseconds{1'000}) << kind;
        a.in.attempt = 4;
        EXPECT_FALSE(a.decide().retry) << kind;
    }
    Attempt other(http::Transport::ok, 200);
    other.in.parsed_error_kind = "http";
    EXPECT_FALSE(other.decide().retry);
    Attempt ok(http::Transport::ok, 200);
    EXPECT_FALSE(ok.decide().retry);
}

} // namespace
} // namespace diffeval::engine
