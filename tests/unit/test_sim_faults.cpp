// Every injected fault is observable by a client the way a real failure
// would be, is counted in the stats, and is drawn per attempt so that a
// retry of the same request can succeed. stop() ends stalls at once.
#include "test_sim_support.hpp"

#include <harness/sim/faults.hpp>

#include <thread>

namespace diffeval::sim {
namespace {

using namespace testing;

// A server where every generation request gets the fault set by `set`.
template <typename Set> std::unique_ptr<Server> faulty(Set set) {
    Profile p = default_profile();
    set(p.faults);
    return start_server(std::move(p));
}

int64_t injected(const Server& s, std::string_view kind) {
    return s.stats().faults.at(std::string(kind));
}

class SimFaults : public ::testing::Test {
protected:
    datasets::Dataset ds = sample_dataset();
};

TEST_F(SimFaults, HttpErrorsHaveErrorBodies) {
    struct Case {
        double Faults::*share;
        int status;
        std::string_view kind;
    };
    for (Case k :
         {Case{&Faults::http_500, 500, "http_500"}, Case{&Faults::http_503, 503, "http_503"},
          Case{&Faults::http_429, 429, "http_429"}}) {
        auto s = faulty([&](Faults& f) {
            f.*k.share = 1.0;
            f.retry_after_s = 0;
        });
        auto c = client_for(*s);
        auto res = post(c, "/v1/completions", raw_body(ds, 0));
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, k.status);
        json e = json::parse(res->body)["error"];
        EXPECT_EQ(e["code"], k.status);
        if (k.status == 429) {
            EXPECT_EQ(res->get_header_value("Retry-After"), "0");
        }
        EXPECT_EQ(injected(*s, k.kind), 1);
        EXPECT_EQ(s->stats().statuses.at(k.status), 1);
    }
}

TEST_F(SimFaults, ResetBeforeBodyGivesNoResponse) {
    auto s = faulty([](Faults& f) { f.reset_before_body = 1.0; });
    auto c = client_for(*s);
    auto res = post(c, "/v1/completions", raw_body(ds, 0));
    EXPECT_FALSE(res);
    EXPECT_NE(res.error(), httplib::Error::Success);
    EXPECT_EQ(injected(*s, "reset_before_body"), 1);
    // The server is still serving.
    EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST_F(SimFaults, ResetDuringBodyTruncatesTheTransfer) {
    auto s = faulty([](Faults& f) { f.reset_during_body = 1.0; });
    auto c = client_for(*s);
    EXPECT_FALSE(post(c, "/v1/completions", raw_body(ds, 0)));
    json body = raw_body(ds, 1);
    body["stream"] = true;
    EXPECT_FALSE(post(c, "/v1/completions", body));
    EXPECT_EQ(injected(*s, "reset_during_body"), 2);
}

TEST_F(SimFaults, MalformedJsonIsTruncated) {
    auto s = faulty([](Faults& f) { f.malformed_json = 1.0; });
    auto c = client_for(*s);
    auto res = post(c, "/v1/completions", raw_body(ds, 0));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_TRUE(json::parse(res->body, nullptr, false).is_discarded());
    json body = raw_body(ds, 1);
    body["stream"] = true;
    auto streamed = post(c, "/v1/completions", body);
    bool broken = false;
    for (const auto& e : sse_events(streamed->body)) {
        broken = broken || e.is_discarded();
    }
    EXPECT_TRUE(broken);
    EXPECT_EQ(injected(*s, "malformed_json"), 2);
}

TEST_F(SimFaults, StreamErrorIsAnErrorEventThenDone) {
    auto s = faulty([](Faults& f) { f.stream_error = 1.0; });
    auto c = client_for(*s);
    json body = raw_body(ds, 0);
    body["stream"] = true;
    auto events = sse_events(post(c, "/v1/completions", body)->body);
    ASSERT_GE(events.size(), 2u);
    EXPECT_EQ(events.back(), "[DONE]");
    const json& err = events[events.size() - 2];
    ASSERT_TRUE(err.contains("error"));
    EXPECT_EQ(err["error"]["code"], 500);
    // Not a streaming request: nothing to inject.
    auto plain = post(c, "/v1/completions", raw_body(ds, 1));
    EXPECT_EQ(plain->status, 200);
    EXPECT_EQ(injected(*s, "stream_error"), 1);
}

TEST_F(SimFaults, MarkupAppearsInTheText) {
    auto s = faulty([](Faults& f) { f.markup = 1.0; });
    auto c = client_for(*s);
    std::string text =
        json::parse(post(c, "/v1/completions", raw_body(ds, 0))->body)["choices"][0]["text"];
    bool found = false;
    for (const char* m : {"<script>", "</td>", "onerror=", "javascript:"}) {
        found = found || text.find(m) != std::string::npos;
    }
    EXPECT_TRUE(found) << text;
    EXPECT_EQ(injected(*s, "markup"), 1);
}

TEST_F(SimFaults, StallEndsWhenTheClientGivesUpAndOnStop) {
    auto s = faulty([](Faults& f) {
        f.stall = 1.0;
        f.stall_ms = 600000;
    });
    httplib::Client c("127.0.0.1", s->port());
    c.set_read_timeout(0, 200000);
    auto res = post(c, "/v1/completions", raw_body(ds, 0));
    EXPECT_FALSE(res);
    EXPECT_EQ(res.error(), httplib::Error::Read);
    EXPECT_EQ(injected(*s, "stall"), 1);
    s->stop(); // must not wait out the 10-minute stall
}

TEST_F(SimFaults, ARetryCanSucceed) {
    auto s = faulty([](Faults& f) { f.http_500 = 0.5; });
    auto c = client_for(*s);
    json body = raw_body(ds, 0);
    int attempts = 0;
    int status = 0;
    while (status != 200 && attempts < 20) {
        status = post(c, "/v1/completions", body)->status;
        ++attempts;
    }
    EXPECT_EQ(status, 200);
    EXPECT_EQ(injected(*s, "http_500"), attempts - 1);
}

TEST_F(SimFaults, FaultSharesAreExclusiveAndExact) {
    Faults f;
    f.http_500 = 0.2;
    f.stall = 0.3;
    int n500 = 0;
    int nstall = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
        Fault k = pick_fault(f, static_cast<uint64_t>(i) * 7919u, 0, Delivery::whole);
        n500 += k == Fault::http_500;
        nstall += k == Fault::stall;
    }
    EXPECT_NEAR(n500 / double(n), 0.2, 0.02);
    EXPECT_NEAR(nstall / double(n), 0.3, 0.02);
}

TEST_F(SimFaults, StopEndsIdleKeepAliveConnections) {
    auto s = start_server();
    auto c = client_for(*s);
    c.set_keep_alive(true);
    ASSERT_EQ(c.Get("/health")->status, 200);
    s->stop(); // the keep-alive connection is idle; stop must not wait for it to time out
    EXPECT_FALSE(c.Get("/health"));
}

} // namespace
} // namespace diffeval::sim
