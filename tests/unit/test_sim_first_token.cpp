// The simulator's first-token log-probabilities agree with its behaviour:
// the probe's P(open) read from them is above one half exactly when the
// measured response opens <think>, and a profile that reasons more shifts
// it up on every question.
#include "test_sim_support.hpp"

#include <harness/probe/reading.hpp>

#include <cmath>

using namespace diffeval;
using namespace diffeval::sim::testing;

namespace {

// The probe's two requests for test question `i`: the raw prompt with
// max_tokens 1 and 20 alternatives, and the same prompt ending in " ".
json probe_body(const datasets::Dataset& ds, size_t i, bool after_space) {
    json b = raw_body(ds, i, 1);
    if (after_space) {
        b["prompt"] = b["prompt"].get<std::string>() + " ";
    }
    b["logprobs"] = 20;
    return b;
}

struct Probed {
    probe::Estimate estimate;
    std::string first_token;
};

Probed probe_question(httplib::Client& c, const datasets::Dataset& ds, size_t i) {
    auto first = post(c, "/v1/completions", probe_body(ds, i, false));
    auto second = post(c, "/v1/completions", probe_body(ds, i, true));
    EXPECT_TRUE(first && second);
    auto p1 = probe::first_position(first->body);
    auto p2 = probe::first_position(second->body);
    EXPECT_TRUE(p1 && p2) << first->body;
    if (!p1 || !p2) {
        return {};
    }
    return {probe::combine(probe::read(*p1, "<think>", " "), probe::read(*p2, "<think>", " ")),
            p1->chosen};
}

} // namespace

TEST(SimFirstToken, ProbeAgreesWithWhatTheMeasuredResponseWrites) {
    auto server = start_server();
    auto c = client_for(*server);
    auto ds = sample_dataset();
    int opened = 0;
    for (size_t i = 0; i < ds.test.size(); ++i) {
        auto probed = probe_question(c, ds, i);
        auto measured = post(c, "/v1/completions", raw_body(ds, i));
        ASSERT_TRUE(measured);
        auto text = json::parse(measured->body)["choices"][0]["text"].get<std::string>();
        const bool opens = text.starts_with(" <think>");
        opened += opens;
        EXPECT_FALSE(probed.estimate.bounded) << i;
        EXPECT_EQ(probed.estimate.p_open > 0.5, opens) << "question " << i << ": " << text;
        EXPECT_EQ(probed.first_token == " ", opens) << i;
    }
    EXPECT_GT(opened, 40); // nearly every raw response opens the block
}

TEST(SimFirstToken, MoreReasoningShiftsTheProbeUpOnEveryQuestion) {
    auto a = start_server(sim::load_profile("default").value());
    auto b = start_server(sim::load_profile("deepgemm").value());
    auto ca = client_for(*a);
    auto cb = client_for(*b);
    auto ds = sample_dataset();
    for (size_t i = 0; i < ds.test.size(); ++i) {
        double la = probe::logit(probe_question(ca, ds, i).estimate.p_open);
        double lb = probe::logit(probe_question(cb, ds, i).estimate.p_open);
        // 4 x (0.232 - 0.11) logits, less twice the largest jitter (4 x 0.02).
        EXPECT_GT(lb - la, 0.3) << i;
    }
}

TEST(SimFirstToken, RepeatsAreDeterministicThenRedrawAShare) {
    auto server = start_server();
    auto c = client_for(*server);
    auto ds = sample_dataset();
    int changed = 0;
    for (size_t i = 0; i < ds.test.size(); ++i) {
        auto body = probe_body(ds, i, false);
        auto first = post(c, "/v1/completions", body);
        auto again = post(c, "/v1/completions", body);
        ASSERT_TRUE(first && again);
        auto lp = [](const std::string& s) {
            return json::parse(s)["choices"][0]["logprobs"]["token_logprobs"][0].get<double>();
        };
        changed += lp(first->body) != lp(again->body);
    }
    // repeat_noise 0.3 redraws the jitter on about 30% of second sightings.
    EXPECT_GT(changed, 3);
    EXPECT_LT(changed, 30);

    // A fresh server gives the first sighting's numbers again.
    auto fresh = start_server();
    auto cf = client_for(*fresh);
    auto body = probe_body(ds, 0, false);
    auto x = post(cf, "/v1/completions", body);
    auto server2 = start_server();
    auto c2 = client_for(*server2);
    auto y = post(c2, "/v1/completions", body);
    ASSERT_TRUE(x && y);
    EXPECT_EQ(x->body, y->body);
}

TEST(SimFirstToken, ChatWithAClosedThinkBlockListsNoMarker) {
    auto server = start_server();
    auto c = client_for(*server);
    auto ds = sample_dataset();
    json body = chat_body(ds, 0, 1);
    body["logprobs"] = true;
    body["top_logprobs"] = 20;
    auto r = post(c, "/v1/chat/completions", body);
    ASSERT_TRUE(r);
    auto p = probe::first_position(r->body);
    ASSERT_TRUE(p) << r->body;
    auto e = probe::combine(probe::read(*p, "<think>", " "), std::nullopt);
    EXPECT_TRUE(e.bounded);
    EXPECT_LT(e.p_open, 0.05);
}
