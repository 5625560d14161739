// Streaming and logprobs in vLLM's shapes: SSE chunks whose deltas add up to
// the non-streaming text, the usage chunk, and logprobs for completions and
// chat, including the think-or-answer choice after "<think>\n".
#include "test_sim_support.hpp"

#include <harness/sim/generate.hpp>
#include <harness/sim/question_bank.hpp>
#include <harness/sim/tokenizer.hpp>

#include <cmath>

namespace diffeval::sim {
namespace {

using namespace testing;

// Streamed and whole responses are compared on the same server, so the
// second is a repeat: repeat noise is off to keep both the same.
Profile without_repeat_noise() {
    Profile p = default_profile();
    p.behaviour.repeat_noise = 0;
    return p;
}

class SimStream : public ::testing::Test {
protected:
    void SetUp() override {
        server = start_server(without_repeat_noise());
        ASSERT_NE(server, nullptr);
    }
    std::unique_ptr<Server> server;
    datasets::Dataset ds = sample_dataset();
};

enum class Choice { answers, reasons };

// Sample questions whose raw response opens <think> and then makes `choice`.
std::vector<size_t> questions_that(const datasets::Dataset& ds, Choice choice) {
    QuestionBank bank(ds);
    Profile p = default_profile();
    std::vector<size_t> out;
    for (size_t i = 0; i < ds.test.size(); ++i) {
        Generation g = generate(p, bank, raw_body(ds, i, 1024), Endpoint::completions, 0);
        if (g.decisions.opened_think && g.decisions.reasoning == (choice == Choice::reasons)) {
            out.push_back(i);
        }
    }
    return out;
}

TEST_F(SimStream, CompletionDeltasAddUpToTheText) {
    auto c = client_for(*server);
    for (size_t i : {size_t{0}, questions_that(ds, Choice::reasons).at(0)}) {
        json body = raw_body(ds, i, 1024);
        auto whole = post(c, "/v1/completions", body);
        body["stream"] = true;
        body["stream_options"] = {{"include_usage", true}};
        auto streamed = post(c, "/v1/completions", body);
        ASSERT_TRUE(whole && streamed);
        EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream; charset=utf-8");
        json full = json::parse(whole->body);
        auto events = sse_events(streamed->body);
        ASSERT_GE(events.size(), 3u);
        EXPECT_EQ(events.back(), "[DONE]");
        const json& usage = events[events.size() - 2];
        EXPECT_TRUE(usage["choices"].empty());
        EXPECT_EQ(usage["usage"]["completion_tokens"], full["usage"]["completion_tokens"]);
        EXPECT_EQ(usage["usage"]["prompt_tokens"], full["usage"]["prompt_tokens"]);
        std::string text;
        for (size_t k = 0; k + 2 < events.size(); ++k) {
            const json& ch = events[k]["choices"][0];
            EXPECT_EQ(events[k]["object"], "text_completion");
            text += ch["text"].get<std::string>();
            bool last = k + 3 == events.size();
            EXPECT_EQ(ch["finish_reason"].is_null(), !last);
        }
        const json& last = events[events.size() - 3]["choices"][0];
        EXPECT_EQ(text, full["choices"][0]["text"]);
        EXPECT_EQ(last["finish_reason"], full["choices"][0]["finish_reason"]);
        EXPECT_EQ(last["stop_reason"], full["choices"][0]["stop_reason"]);
    }
}

TEST_F(SimStream, NoUsageChunkUnlessAsked) {
    auto c = client_for(*server);
    json body = raw_body(ds, 0, 20);
    body["stream"] = true;
    auto events = sse_events(post(c, "/v1/completions", body)->body);
    for (const auto& e : events) {
        if (e.is_object()) {
            EXPECT_FALSE(e["choices"].empty());
        }
    }
    auto bad = post(c, "/v1/completions", {{"prompt", "hi"}, {"stream_options", json::object()}});
    EXPECT_EQ(bad->status, 400);
}

TEST_F(SimStream, ChatStreamStartsWithRoleAndSplitsReasoning) {
    auto c = client_for(*server);
    json body = chat_body(ds, 2, 20000, Thinking::on);
    auto whole = post(c, "/v1/chat/completions", body);
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    auto events = sse_events(post(c, "/v1/chat/completions", body)->body);
    json msg = json::parse(whole->body)["choices"][0]["message"];
    ASSERT_GE(events.size(), 4u);
    EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
    EXPECT_EQ(events[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
    std::string reasoning;
    std::string content;
    for (size_t k = 1; k + 2 < events.size(); ++k) {
        const json& d = events[k]["choices"][0]["delta"];
        EXPECT_FALSE(d.contains("role"));
        reasoning += d.value("reasoning", "");
        content += d.value("content", "");
    }
    EXPECT_EQ(reasoning, msg["reasoning"]);
    EXPECT_EQ(content, msg["content"]);
    EXPECT_EQ(events[events.size() - 3]["choices"][0]["finish_reason"], "stop");
    EXPECT_TRUE(events[events.size() - 2]["choices"].empty());
}

TEST_F(SimStream, CompletionLogprobsHaveVllmShape) {
    auto c = client_for(*server);
    json body = raw_body(ds, 0, 30);
    body["logprobs"] = 3;
    json j = json::parse(post(c, "/v1/completions", body)->body);
    const json& lp = j["choices"][0]["logprobs"];
    ASSERT_TRUE(lp.is_object());
    size_t n = j["usage"]["completion_tokens"];
    ASSERT_EQ(lp["tokens"].size(), n);
    ASSERT_EQ(lp["token_logprobs"].size(), n);
    ASSERT_EQ(lp["top_logprobs"].size(), n);
    ASSERT_EQ(lp["text_offset"].size(), n);
    std::string joined;
    for (size_t k = 0; k < n; ++k) {
        const std::string tok = lp["tokens"][k];
        EXPECT_EQ(lp["text_offset"][k], joined.size()); // ASCII text: bytes == characters
        joined += tok;
        double chosen = lp["token_logprobs"][k];
        EXPECT_LE(chosen, 0.0);
        const json& top = lp["top_logprobs"][k];
        EXPECT_EQ(top.size(), 3u);
        ASSERT_TRUE(top.contains(tok));
        for (const auto& [alt, v] : top.items()) {
            EXPECT_LE(v.get<double>(), chosen + 1e-12) << alt;
        }
    }
    EXPECT_EQ(joined, j["choices"][0]["text"]);
}

TEST_F(SimStream, ChatLogprobsHaveVllmShape) {
    auto c = client_for(*server);
    json body = chat_body(ds, 0, 1024);
    body["logprobs"] = true;
    body["top_logprobs"] = 2;
    json j = json::parse(post(c, "/v1/chat/completions", body)->body);
    const json& content = j["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(content.size(), j["usage"]["completion_tokens"].get<size_t>());
    const json& first = content[0];
    EXPECT_TRUE(first["token"].is_string());
    EXPECT_TRUE(first["logprob"].is_number());
    EXPECT_EQ(first["bytes"].size(), first["token"].get<std::string>().size());
    ASSERT_EQ(first["top_logprobs"].size(), 2u);
    EXPECT_EQ(first["top_logprobs"][0]["token"], first["token"]);
    EXPECT_EQ(content.back()["token"], std::string(k_eos_token));
    auto bad = post(c, "/v1/chat/completions",
                    {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"top_logprobs", 2}});
    EXPECT_EQ(bad->status, 400);
}

TEST(SimStreamPaced, PacedStreamsCarryTheSameEvents) {
    // With latency the events are sent one by one; what arrives is the same.
    Profile paced = without_repeat_noise();
    paced.latency.ttft_ms = 1;
    paced.latency.per_token_ms = 1;
    auto slow = start_server(paced);
    auto fast = start_server(without_repeat_noise());
    datasets::Dataset ds = sample_dataset();
    json body = raw_body(ds, 0, 12);
    body["stream"] = true;
    auto cs = client_for(*slow);
    auto cf = client_for(*fast);
    auto a = post(cs, "/v1/completions", body);
    auto b = post(cf, "/v1/completions", body);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->body, b->body);
    body.erase("stream");
    EXPECT_EQ(post(cs, "/v1/completions", body)->body, post(cf, "/v1/completions", body)->body);
}

// The first token after the model's own "<think>\n" carries the choice the
// article is about: close the block at once, or start reasoning.
TEST_F(SimStream, ThinkChoiceLogprobsMatchTheDecision) {
    auto c = client_for(*server);
    for (Choice choice : {Choice::answers, Choice::reasons}) {
        bool reasoning = choice == Choice::reasons;
        size_t i = questions_that(ds, choice).at(0);
        json body = raw_body(ds, i, 12);
        body["logprobs"] = 5;
        json lp = json::parse(post(c, "/v1/completions", body)->body)["choices"][0]["logprobs"];
        size_t at = 0;
        while (at < lp["tokens"].size() && lp["tokens"][at] != "<think>") {
            ++at;
        }
        ASSERT_LT(at + 2, lp["tokens"].size());
        EXPECT_EQ(lp["tokens"][at + 1], "\n");
        const json& top = lp["top_logprobs"][at + 2];
        ASSERT_TRUE(top.contains("</think>")) << top.dump();
        ASSERT_TRUE(top.contains("The")) << top.dump();
        double p_close = std::exp(top["</think>"].get<double>());
        double p_reason = std::exp(top["The"].get<double>());
        EXPECT_EQ(lp["tokens"][at + 2], reasoning ? "The" : "</think>");
        EXPECT_EQ(p_reason > p_close, reasoning);
        EXPECT_LE(p_close + p_reason, 1.0 + 1e-9);
    }
}

} // namespace
} // namespace diffeval::sim
