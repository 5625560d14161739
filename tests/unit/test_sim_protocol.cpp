// The simulated server speaks vLLM's OpenAI-compatible protocol over real
// HTTP: endpoint shapes, error bodies and statuses, token limits, stop
// strings, EOS, and byte-for-byte determinism.
#include "test_sim_support.hpp"

#include <harness/sim/generate.hpp>
#include <harness/sim/question_bank.hpp>
#include <harness/sim/tokenizer.hpp>

namespace diffeval::sim {
namespace {

using namespace testing;

class SimProtocol : public ::testing::Test {
protected:
    void SetUp() override {
        server = start_server();
        ASSERT_NE(server, nullptr);
    }
    std::unique_ptr<Server> server;
    datasets::Dataset ds = sample_dataset();
};

// The index of the first sample question whose raw response (default
// profile, first sighting) satisfies `pred`.
template <typename Pred> size_t find_question(const datasets::Dataset& ds, Pred pred) {
    QuestionBank bank(ds);
    Profile p = default_profile();
    for (size_t i = 0; i < ds.test.size(); ++i) {
        if (pred(generate(p, bank, raw_body(ds, i, 1024), Endpoint::completions, 0))) {
            return i;
        }
    }
    ADD_FAILURE() << "no sample question fits";
    return 0;
}

void expect_error_shape(const httplib::Result& res, int status, const std::string& type) {
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status);
    json j = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << res->body;
    ASSERT_TRUE(j.contains("error")) << res->body;
    const json& e = j["error"];
    EXPECT_EQ(e.size(), 4u) << res->body;
    EXPECT_TRUE(e["message"].is_string());
    EXPECT_EQ(e["type"], type);
    EXPECT_TRUE(e.contains("param"));
    EXPECT_EQ(e["code"], status);
}

TEST_F(SimProtocol, ModelsListsTheServedModel) {
    auto c = client_for(*server);
    auto res = c.Get("/v1/models");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    json j = json::parse(res->body);
    EXPECT_EQ(j["object"], "list");
    ASSERT_EQ(j["data"].size(), 1u);
    const json& m = j["data"][0];
    EXPECT_EQ(m["id"], std::string(k_default_model_id));
    EXPECT_EQ(m["object"], "model");
    EXPECT_EQ(m["owned_by"], "vllm");
    EXPECT_EQ(m["root"], std::string(k_default_model_id));
    EXPECT_TRUE(m["parent"].is_null());
    EXPECT_EQ(m["max_model_len"], 262144);
    EXPECT_EQ(m["created"], 1767225600);
    ASSERT_EQ(m["permission"].size(), 1u);
    EXPECT_EQ(m["permission"][0]["object"], "model_permission");
}

TEST_F(SimProtocol, HealthIsEmptyAndVersionComesFromTheProfile) {
    auto c = client_for(*server);
    auto health = c.Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    EXPECT_TRUE(health->body.empty());
    auto version = c.Get("/version");
    ASSERT_TRUE(version);
    // vLLM's key, and the simulator's own: a report reads it to say that no
    // engine ran.
    EXPECT_EQ(json::parse(version->body),
              json({{"version", "0.28.0"}, {"diffeval_simulator", "default"}}));
    // /stats lists every endpoint, 0 for those not asked yet (docs audit:
    // a script reading requests.other failed on a fresh simulator).
    auto stats = c.Get("/stats");
    ASSERT_TRUE(stats);
    const auto requests = json::parse(stats->body)["requests"];
    EXPECT_EQ(requests, json({{"completions", 0},
                              {"chat", 0},
                              {"models", 0},
                              {"health", 1},
                              {"version", 1},
                              {"other", 0}}))
        << stats->body;
}

TEST_F(SimProtocol, UnknownPathsAndMethodsGetFastApiBodies) {
    auto c = client_for(*server);
    auto nope = c.Get("/v1/nope");
    ASSERT_TRUE(nope);
    EXPECT_EQ(nope->status, 404);
    EXPECT_EQ(json::parse(nope->body), json({{"detail", "Not Found"}}));
    auto get = c.Get("/v1/completions");
    ASSERT_TRUE(get);
    EXPECT_EQ(get->status, 405);
}

TEST_F(SimProtocol, ErrorsHaveVllmShapeAndStatus) {
    auto c = client_for(*server);
    expect_error_shape(c.Post("/v1/completions", "{not json", "application/json"), 400,
                       "BadRequestError");
    expect_error_shape(post(c, "/v1/completions", {{"max_tokens", 5}}), 400, "BadRequestError");
    expect_error_shape(post(c, "/v1/chat/completions", {{"max_tokens", 5}}), 400,
                       "BadRequestError");

    auto unknown = post(c, "/v1/completions", {{"prompt", "hi"}, {"model", "gpt-x"}});
    expect_error_shape(unknown, 404, "NotFoundError");
    EXPECT_EQ(json::parse(unknown->body)["error"]["message"], "The model `gpt-x` does not exist.");

    auto too_long = post(c, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 262144}});
    expect_error_shape(too_long, 400, "BadRequestError");
    EXPECT_EQ(json::parse(too_long->body)["error"]["param"], "max_tokens");
    EXPECT_NE(json::parse(too_long->body)["error"]["message"].get<std::string>().find(
                  "262144 > 262144 - 1"),
              std::string::npos);
}

TEST_F(SimProtocol, CompletionHasVllmShapeAndConsistentUsage) {
    auto c = client_for(*server);
    json body = raw_body(ds, 0);
    auto res = post(c, "/v1/completions", body);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
    json j = json::parse(res->body);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
    EXPECT_EQ(j["created"], 1767225600);
    EXPECT_EQ(j["model"], std::string(k_default_model_id));
    ASSERT_EQ(j["choices"].size(), 1u);
    const json& ch = j["choices"][0];
    for (const char* key :
         {"index", "text", "logprobs", "finish_reason", "stop_reason", "prompt_logprobs"}) {
        EXPECT_TRUE(ch.contains(key)) << key;
    }
    const json& u = j["usage"];
    EXPECT_EQ(u["prompt_tokens"], count_tokens(body["prompt"].get<std::string>()));
    EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
    EXPECT_TRUE(u.contains("prompt_tokens_details"));
}

TEST_F(SimProtocol, ChatHasVllmShape) {
    auto c = client_for(*server);
    auto res = post(c, "/v1/chat/completions", chat_body(ds, 0));
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    json j = json::parse(res->body);
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
    const json& m = j["choices"][0]["message"];
    EXPECT_EQ(m["role"], "assistant");
    EXPECT_TRUE(m["content"].is_string());
    EXPECT_TRUE(m["tool_calls"].is_array());
    EXPECT_TRUE(m.contains("reasoning"));
    EXPECT_TRUE(m["reasoning"].is_null()); // thinking off
}

TEST_F(SimProtocol, MaxTokensCutsWithFinishReasonLength) {
    auto c = client_for(*server);
    json body = raw_body(ds, 0, 7);
    auto res = post(c, "/v1/completions", body);
    ASSERT_TRUE(res);
    json j = json::parse(res->body);
    const json& ch = j["choices"][0];
    EXPECT_EQ(ch["finish_reason"], "length");
    EXPECT_TRUE(ch["stop_reason"].is_null());
    EXPECT_EQ(j["usage"]["completion_tokens"], 7);
    EXPECT_EQ(count_tokens(ch["text"].get<std::string>()), 7);
}

TEST_F(SimProtocol, StopStringEndsTheTextAndIsReported) {
    // A question answered at once: the base-style continuation writes the
    // next "Question:", which the stop string cuts.
    size_t i = find_question(ds, [](const Generation& g) {
        return g.decisions.opened_think && !g.decisions.reasoning && !g.decisions.verbose &&
               !g.decisions.loop;
    });
    auto c = client_for(*server);
    json body = raw_body(ds, i, 1024);
    auto res = post(c, "/v1/completions", body);
    json ch = json::parse(res->body)["choices"][0];
    EXPECT_EQ(ch["finish_reason"], "stop");
    EXPECT_EQ(ch["stop_reason"], "Question");
    std::string text = ch["text"];
    EXPECT_EQ(text.find("Question"), std::string::npos);
    EXPECT_EQ(text.rfind(" <think>\n</think>\n\n", 0), 0u) << text;
    EXPECT_EQ(text.substr(text.size() - 2), "\n\n");
    EXPECT_NE(text.find("#### "), std::string::npos);

    body["include_stop_str_in_output"] = true;
    auto kept = post(c, "/v1/completions", body);
    std::string with = json::parse(kept->body)["choices"][0]["text"];
    EXPECT_EQ(with, text + "Question");
    // The token that completed the stop string is counted either way.
    EXPECT_EQ(json::parse(kept->body)["usage"]["completion_tokens"],
              json::parse(res->body)["usage"]["completion_tokens"]);
    EXPECT_EQ(json::parse(res->body)["usage"]["completion_tokens"], count_tokens(with));
}

TEST_F(SimProtocol, NaturalEndIsEosWithNullStopReason) {
    auto c = client_for(*server);
    auto res = post(c, "/v1/chat/completions", chat_body(ds, 0, 1024));
    json j = json::parse(res->body);
    const json& ch = j["choices"][0];
    EXPECT_EQ(ch["finish_reason"], "stop");
    EXPECT_TRUE(ch["stop_reason"].is_null());
    // The EOS token is generated, counted, and not shown.
    EXPECT_EQ(j["usage"]["completion_tokens"],
              count_tokens(ch["message"]["content"].get<std::string>()) + 1);
}

TEST_F(SimProtocol, ChatPromptTokensCountTheTemplate) {
    auto c = client_for(*server);
    json body = chat_body(ds, 0);
    auto res = post(c, "/v1/chat/completions", body);
    std::string rendered = "<|im_start|>user\nQuestion: " + ds.test[0].question +
                           "\nAnswer:<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    EXPECT_EQ(json::parse(res->body)["usage"]["prompt_tokens"], count_tokens(rendered));
}

TEST_F(SimProtocol, ThinkingChatSeparatesReasoning) {
    auto c = client_for(*server);
    auto res = post(c, "/v1/chat/completions", chat_body(ds, 0, 20000, Thinking::on));
    json m = json::parse(res->body)["choices"][0]["message"];
    ASSERT_TRUE(m["reasoning"].is_string());
    EXPECT_EQ(m["reasoning"].get<std::string>().find("</think>"), std::string::npos);
    ASSERT_TRUE(m["content"].is_string());
    EXPECT_NE(m["content"].get<std::string>().find("#### "), std::string::npos);
}

TEST_F(SimProtocol, SameContentGivesSameBytesWhateverTheFormatting) {
    auto c = client_for(*server);
    json body = raw_body(ds, 3);
    auto a = c.Post("/v1/completions", body.dump(), "application/json");
    // Same content, keys reversed and pretty-printed: the second sighting.
    std::string pretty = "{\n";
    std::vector<std::string> parts;
    for (auto it = body.items().begin(); it != body.items().end(); ++it) {
        parts.insert(parts.begin(), "  " + json(it.key()).dump() + " : " + it.value().dump(2));
    }
    for (size_t k = 0; k < parts.size(); ++k) {
        pretty += parts[k] + (k + 1 < parts.size() ? ",\n" : "\n");
    }
    pretty += "}";
    auto other = start_server();
    auto c2 = client_for(*other);
    auto b = c2.Post("/v1/completions", pretty, "application/json");
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->body, b->body); // first sighting on each server
    // Transport-only fields do not change the content either.
    body["stream"] = false;
    auto again = c2.Post("/v1/completions", body.dump(), "application/json");
    json ja = json::parse(a->body);
    json jc = json::parse(again->body);
    EXPECT_NE(ja["id"], jc["id"]); // a repeat is a new response...
    EXPECT_EQ(other->stats().repeated_sightings, 1);
}

TEST_F(SimProtocol, RepeatsDifferForASmallShare) {
    auto c = client_for(*server);
    int differ = 0;
    for (size_t i = 0; i < ds.test.size(); ++i) {
        json body = raw_body(ds, i, 1024);
        auto first = post(c, "/v1/completions", body);
        auto second = post(c, "/v1/completions", body);
        ASSERT_TRUE(first && second);
        differ += json::parse(first->body)["choices"][0]["text"] !=
                  json::parse(second->body)["choices"][0]["text"];
    }
    EXPECT_GE(differ, 1);
    EXPECT_LE(differ, static_cast<int>(ds.test.size()) / 4);
    Stats s = server->stats();
    EXPECT_EQ(s.distinct_requests, static_cast<int64_t>(ds.test.size()));
    EXPECT_EQ(s.repeated_sightings, static_cast<int64_t>(ds.test.size()));
}

TEST_F(SimProtocol, BatchPromptsAndNGiveOneChoiceEach) {
    auto c = client_for(*server);
    json body = raw_body(ds, 0);
    body["prompt"] = {raw_prompt(ds, 0), raw_prompt(ds, 1)};
    body["n"] = 2;
    auto res = post(c, "/v1/completions", body);
    json j = json::parse(res->body);
    ASSERT_EQ(j["choices"].size(), 4u);
    for (size_t k = 0; k < 4; ++k) {
        EXPECT_EQ(j["choices"][k]["index"], k);
    }
    EXPECT_EQ(j["choices"][0]["text"], j["choices"][1]["text"]);
    EXPECT_EQ(j["usage"]["prompt_tokens"],
              count_tokens(raw_prompt(ds, 0)) + count_tokens(raw_prompt(ds, 1)));
}

} // namespace
} // namespace diffeval::sim
