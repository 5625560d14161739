// capacity.hpp: the in-flight limit a server's published slots allow, and
// which error answers no retry can fix (llama.cpp's, vLLM's, TGI's wording).
#include <harness/engine/capacity.hpp>

#include <harness/analysis/facts.hpp>
#include <harness/fingerprint/fingerprint.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace diffeval::engine {
namespace {

ServerLimits with_slots(int slots) {
    ServerLimits l;
    l.slots = slots;
    return l;
}

TEST(InFlightLimit, PublishedSlotsCapAnyConcurrency) {
    std::string note;
    EXPECT_EQ(in_flight_limit(64, false, with_slots(4), note), 4u);
    EXPECT_NE(note.find("/props total_slots is 4: at most 4 in flight instead of 64"),
              std::string::npos)
        << note;
    EXPECT_EQ(in_flight_limit(2, false, with_slots(4), note), 2u);
    EXPECT_EQ(note, "");
    EXPECT_EQ(in_flight_limit(64, false, ServerLimits{}, note), 64u);
    EXPECT_EQ(note, "");
}

TEST(InFlightLimit, AutoUsesTheSlotsElseTheDefault) {
    std::string note;
    EXPECT_EQ(in_flight_limit(0, true, with_slots(3), note), 3u);
    EXPECT_NE(note.find("3 in flight"), std::string::npos) << note;
    EXPECT_EQ(in_flight_limit(0, true, ServerLimits{}, note),
              static_cast<size_t>(k_default_concurrency));
    EXPECT_NE(note.find("publishes no capacity"), std::string::npos) << note;
}

TEST(PermanentError, ContextAndModelErrorsAreNeverRetried) {
    const char* k_bodies[] = {
        // llama.cpp, a unified KV cache full (HTTP 500)
        R"j({"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}})j",
        // llama.cpp, a prompt longer than the slot's context (HTTP 400)
        R"j({"error":{"message":"request (3001 tokens) exceeds the available context size (2048 tokens)","type":"exceed_context_size_error"}})j",
        // vLLM
        R"j({"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError"})j",
        R"j({"error":{"message":"The model `x` does not exist.","type":"invalid_request_error"}})j",
        // TGI
        R"j({"error":"Input validation error: inputs too long","error_type":"validation"})j",
    };
    for (const char* body : k_bodies) {
        EXPECT_TRUE(permanent_error(500, body)) << body;
    }
}

// llama-server's "Context size has been exceeded." is an answer that
// outgrew the context. When every request of the run fits it alone, the
// answer met others in a cache they share (-kvu), which frees as they end:
// retried. A prompt that does not fit, and the other engines' words, stay
// permanent either way.
TEST(PermanentError, AnAnswerThatOutgrewASharedCacheIsRetriedWhenEveryRequestFitsAlone) {
    const char* outgrown =
        R"j({"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}})j";
    EXPECT_TRUE(permanent_error(500, outgrown, false));
    EXPECT_FALSE(permanent_error(500, outgrown, true));
    for (
        const char* body : {
            R"j({"error":{"message":"request (3001 tokens) exceeds the available context size (2048 tokens)","type":"exceed_context_size_error"}})j",
            R"j({"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError"})j",
        }) {
        EXPECT_TRUE(permanent_error(400, body, true)) << body;
    }
}

TEST(PermanentError, OverloadAndUnknownFailuresStayRetriable) {
    EXPECT_FALSE(permanent_error(500, R"({"error":{"message":"internal error"}})"));
    EXPECT_FALSE(permanent_error(
        503, R"({"error":{"message":"Loading model","type":"unavailable_error"}})"));
    EXPECT_FALSE(permanent_error(429, "Too many requests; context length exceeded"));
    EXPECT_FALSE(permanent_error(502, "<html>bad gateway</html>"));
}

TEST(LimitFacts, PropsBecomeServerFacts) {
    ServerLimits l = with_slots(2);
    l.props = {{"build_info", "b11669-Debian"}, {"total_slots", 2}, {"n_ctx", 2048}};
    auto facts = limit_facts(l);
    EXPECT_EQ(facts["engine_version"], "b11669-Debian");
    EXPECT_EQ(facts["slots"], "2");
    EXPECT_EQ(facts["context_per_slot"], "2048");
    EXPECT_TRUE(limit_facts(ServerLimits{}).empty());
}

// llama-server serves a model under its alias (`--alias`, else the path), so
// /v1/models can name two GGUF files alike: /props model_path tells them
// apart, as the log's "loading model '...'" line does for a launched server.
TEST(LimitFacts, PropsModelPathIsTheModelFact) {
    ServerLimits l = with_slots(1);
    l.props = {{"build_info", "b11669-Debian"},
               {"total_slots", 1},
               {"model_alias", "tiny"},
               {"model_path", "/opt/diffeval/models/random.gguf"}};
    EXPECT_EQ(limit_facts(l)["model"], "/opt/diffeval/models/random.gguf");
    auto logged = fingerprint::fingerprint_log(
        "0.00.050.282 I srv    load_model: loading model '/opt/diffeval/models/random.gguf'\n");
    ASSERT_TRUE(logged.ok());
    EXPECT_EQ(logged->facts.at("model"), limit_facts(l)["model"].get<std::string>());
}

// llama-server's sampling defaults act on every request that does not set
// them, at temperature 0 too (penalties, DRY, XTC, mirostat, ignore_eos):
// each is a fact, in JSON's words.
TEST(LimitFacts, SamplingDefaultsAreFacts) {
    ServerLimits l = with_slots(1);
    l.props = {
        {"total_slots", 1},
        {"sampling", {{"repeat_penalty", 1.5}, {"repeat_last_n", 64}, {"ignore_eos", false}}}};
    auto facts = limit_facts(l);
    EXPECT_EQ(facts["default_repeat_penalty"], "1.5");
    EXPECT_EQ(facts["default_repeat_last_n"], "64");
    EXPECT_EQ(facts["default_ignore_eos"], "false");
}

// A server diffeval launched has its build from its log ("build 11669
// (Debian)"); one it only attached to, from /props ("b11669-Debian"). The
// same build is one build in the report's table, not two.
TEST(LimitFacts, PropsBuildAndLogBuildCompareAsOne) {
    ServerLimits l = with_slots(1);
    l.props = {{"build_info", "b11669-Debian"}, {"total_slots", 1}};
    analysis::ServerFacts attached;
    attached.name = "attached";
    attached.fingerprinted = true;
    attached.fingerprint.engine = "llamacpp";
    const auto props_facts = limit_facts(l);
    for (const auto& [k, v] : props_facts.items()) {
        attached.fingerprint.facts[k] = v.get<std::string>();
    }
    analysis::ServerFacts launched;
    launched.name = "launched";
    launched.fingerprinted = true;
    auto fp = fingerprint::fingerprint_log(
        "0.00.096.801 I cmn  common_param: common_params_print_info: build 11669 (Debian) with "
        "GNU 16.2.0 for Linux x86_64\n"
        "0.00.022.078 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 4096\n");
    ASSERT_TRUE(fp.ok());
    launched.fingerprint = *fp;
    bool seen = false;
    for (const auto& row : analysis::fact_rows({launched, attached})) {
        if (row.name == "engine_version") {
            seen = true;
            EXPECT_FALSE(row.differs);
            EXPECT_EQ(row.values, (std::vector<std::string>{"b11669-Debian", "b11669-Debian"}));
        }
    }
    EXPECT_TRUE(seen);
}

} // namespace
} // namespace diffeval::engine
