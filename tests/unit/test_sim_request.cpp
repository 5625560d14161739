// Reading request bodies (harness/sim/request.cpp): the content hash is the
// one the simulator always had, nlohmann's dump of the body hashed, over
// the bodies diffeval's framings send and over awkward JSON; and the
// simdjson reading keeps nlohmann's answers where the two parsers differ
// (duplicate keys, a byte-order mark, integers past 64 bits, deep nesting,
// a content part whose type is not a string).
#include <harness/sim/request.hpp>

#include <harness/util/hash.hpp>
#include <harness/util/pyjson.hpp>

#include <datasets/dataset.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace diffeval::sim {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

// The content hash as the simulator first defined it: the body parsed by
// nlohmann, its transport-only fields erased, dumped compactly (keys
// sorted by std::map) after the endpoint's prefix, and hashed.
uint64_t reference_hash(const std::string& body, Endpoint endpoint) {
    json j = json::parse(body);
    for (const char* key :
         {"echo", "logprobs", "request_id", "stream", "stream_options", "top_logprobs", "user"}) {
        j.erase(key);
    }
    return util::hash64((endpoint == Endpoint::chat ? "chat:" : "completions:") +
                        j.dump(-1, ' ', false, json::error_handler_t::replace));
}

const Profile& profile() {
    static const Profile p = load_profile("default").value();
    return p;
}

const std::string k_model(k_default_model_id);

std::variant<ParsedRequest, ApiError> parse(const std::string& body, Endpoint endpoint) {
    return parse_request(body, endpoint, profile(), k_model);
}

// The hash parse_request gives `body`, which must be a valid request.
uint64_t fast_hash(const std::string& body, Endpoint endpoint) {
    auto r = parse(body, endpoint);
    if (auto* e = std::get_if<ApiError>(&r)) {
        ADD_FAILURE() << e->message << "\n" << body;
        return 0;
    }
    return std::get<ParsedRequest>(r).content_hash;
}

ApiError error_of(const std::string& body, Endpoint endpoint) {
    auto r = parse(body, endpoint);
    if (auto* e = std::get_if<ApiError>(&r)) {
        return *e;
    }
    ADD_FAILURE() << "accepted: " << body;
    return {};
}

datasets::Dataset sample() {
    return datasets::open_dataset("sample").value();
}

std::string shots_text(const datasets::Dataset& ds, size_t first) {
    std::string p;
    for (size_t k = 0; k < 5; ++k) {
        const auto& s = ds.fewshot[(first + k) % ds.fewshot.size()];
        p += "Question: " + s.question + "\nAnswer: " + s.answer + "\n\n";
    }
    return p;
}

// Bodies in the shapes of the built-in framings (prompts/*.toml), written
// as diffeval writes them (Python's json.dumps: ", " separators, non-ASCII
// as \uXXXX), for every sample question, both token limits, with and
// without the probe's and streaming's transport fields.
std::vector<std::pair<std::string, Endpoint>> framing_bodies() {
    const auto ds = sample();
    std::vector<std::pair<std::string, Endpoint>> out;
    for (size_t i = 0; i < ds.test.size(); ++i) {
        const auto& q = ds.test[i];
        for (int max_tokens : {256, 1024}) {
            const std::string question = "Question: " + q.question + "\nAnswer:";
            ojson raw = {{"prompt", shots_text(ds, 0) + question},
                         {"max_tokens", max_tokens},
                         {"stop", {"Question", "Assistant:", "<|separator|>"}},
                         {"temperature", 0.0},
                         {"seed", 42}};
            out.emplace_back(util::python_json_dumps(raw), Endpoint::completions);
            raw["model"] = k_model;
            raw["logprobs"] = 20;
            raw["prompt"] = raw["prompt"].get<std::string>() + " ";
            out.emplace_back(util::python_json_dumps(raw), Endpoint::completions);

            for (size_t first : {size_t{0}, i}) { // chat's first five, lm-eval's drawn shots
                ojson messages = ojson::array();
                for (size_t k = 0; k < 5; ++k) {
                    const auto& s = ds.fewshot[(first + k) % ds.fewshot.size()];
                    messages.push_back(
                        {{"role", "user"}, {"content", "Question: " + s.question + "\nAnswer:"}});
                    messages.push_back({{"role", "assistant"}, {"content", s.answer}});
                }
                messages.push_back({{"role", "user"}, {"content", question}});
                ojson chat = {{"messages", messages},
                              {"model", k_model},
                              {"max_tokens", max_tokens},
                              {"temperature", 0.0},
                              {"stop", {"Question:", "</s>", "<|im_end|>"}},
                              {"seed", 1234},
                              {"chat_template_kwargs", {{"enable_thinking", false}}}};
                out.emplace_back(util::python_json_dumps(chat), Endpoint::chat);
                chat["stream"] = true;
                chat["stream_options"] = {{"include_usage", true}};
                chat["logprobs"] = true;
                chat["top_logprobs"] = 20;
                out.emplace_back(util::python_json_dumps(chat), Endpoint::chat);
            }

            ojson vllm_chat = {
                {"messages", {{{"role", "user"}, {"content", shots_text(ds, 0) + question}}}},
                {"max_tokens", max_tokens},
                {"stop", {"Question", "Assistant:", "<|separator|>"}},
                {"seed", 42}};
            out.emplace_back(util::python_json_dumps(vllm_chat), Endpoint::chat);
        }
    }
    return out;
}

TEST(SimRequest, ContentHashMatchesNlohmannOnFramingBodies) {
    auto bodies = framing_bodies();
    ASSERT_GT(bodies.size(), 100u);
    for (const auto& [body, endpoint] : bodies) {
        EXPECT_EQ(fast_hash(body, endpoint), reference_hash(body, endpoint)) << body;
    }
}

TEST(SimRequest, ContentHashMatchesNlohmannOnAwkwardJson) {
    // Each value sits beside a valid prompt and messages, so both endpoints
    // accept the body and hash it.
    const std::vector<std::string> values = {R"(0.0)",
                                             R"(-0.0)",
                                             R"(-0)",
                                             R"(1e-05)",
                                             R"(0.95)",
                                             R"(-3)",
                                             R"(-3.0)",
                                             R"(1.0)",
                                             R"(100.0)",
                                             R"(1e15)",
                                             R"(1e16)",
                                             R"(1e17)",
                                             R"(123456789012345.6)",
                                             R"(0.0001)",
                                             R"(0.00001234)",
                                             R"(1e300)",
                                             R"(5e-324)",
                                             R"(2.2250738585072014e-308)",
                                             R"(1e-400)",
                                             R"(0.30000000000000004)",
                                             R"(1E+2)",
                                             R"(12.5e-3)",
                                             R"(9223372036854775807)",
                                             R"(9223372036854775808)",
                                             R"(18446744073709551615)",
                                             R"(18446744073709551616)",
                                             R"(-9223372036854775808)",
                                             R"(-9223372036854775809)",
                                             R"(123456789012345678901234567890)",
                                             R"(true)",
                                             R"(false)",
                                             R"(null)",
                                             R"({})",
                                             R"([])",
                                             R"([[]])",
                                             R"({"b":1,"a":{"d":[1,{"z":null,"y":[]}],"c":"x"}})",
                                             R"({"k":1,"k":2,"j":{"x":1,"x":[3]}})",
                                             R"(["caf\u00e9", "日本", "😀", "\ud83d\ude00"])",
                                             R"("\u0000\u0001\u001f\u007f\b\f\n\r\t\/\"\\")",
                                             R"("raw\u2028\u2029 \u00ff")",
                                             R"({"é":1,"z":2,"Z":3,"":4,"\u0000":5,"a\"b":6})",
                                             R"("<script>&amp;</script>")"};
    const std::string prefix =
        R"({"prompt":"Question: 2+2?\nAnswer:","messages":[{"role":"user","content":"hi"}],)";
    std::vector<std::string> bodies;
    for (const auto& v : values) {
        bodies.push_back(prefix + R"("x":)" + v + "}");
        bodies.push_back(prefix + R"("temperature":)" + v + R"(,"user":)" + v + "}");
    }
    // Whitespace, key order, duplicates (the last wins, as in a std::map),
    // escaped keys, a byte-order mark and deep nesting.
    bodies.push_back(" \n\t{ \"seed\" : 1 ,\r\n \"prompt\" : \"p\", \"messages\": [{\"role\": "
                     "\"user\", \"content\": \"q\"}] } \n");
    bodies.push_back(R"({"prompt":"a","prompt":"b","messages":[{"role":"user","role":"user",)"
                     R"("content":"c","content":"d"}],"max_tokens":5,"max_tokens":7})");
    bodies.push_back(R"({"pro\u006dpt":"a","m\u0065ssages":[{"role":"user","content":"c"}]})");
    bodies.push_back("\xEF\xBB\xBF" + prefix + R"("seed":3})");
    bodies.push_back(prefix + R"("x":)" + std::string(2000, '[') + std::string(2000, ']') + "}");
    bodies.push_back(prefix + R"("x":{"content":[{"type":"text","text":"a"},{"text":"b"}]}})");
    for (const auto& body : bodies) {
        for (Endpoint ep : {Endpoint::completions, Endpoint::chat}) {
            EXPECT_EQ(fast_hash(body, ep), reference_hash(body, ep)) << body;
        }
    }
}

TEST(SimRequest, ContentHashIgnoresOrderWhitespaceAndTransportFields) {
    auto a = fast_hash(R"({"prompt":"p","max_tokens":5,"stream":true,"logprobs":2})",
                       Endpoint::completions);
    auto b = fast_hash(R"({ "max_tokens" : 5, "prompt" : "p" })", Endpoint::completions);
    EXPECT_EQ(a, b);
    EXPECT_NE(b, fast_hash(R"({"prompt":"p","max_tokens":6})", Endpoint::completions));
    EXPECT_NE(fast_hash(R"({"prompt":"p","messages":[]})", Endpoint::completions),
              fast_hash(R"({"prompt":"p","messages":[]})", Endpoint::chat));
}

TEST(SimRequest, DuplicateKeysResolveToTheLast) {
    auto r = parse(R"({"prompt":"Question: one?\nAnswer:","prompt":"Question: two?\nAnswer:",)"
                   R"("max_tokens":3,"max_tokens":9,"stop":["x"],"stop":"y"})",
                   Endpoint::completions);
    const auto& p = std::get<ParsedRequest>(r);
    EXPECT_EQ(p.prompts.at(0).question, "two?");
    EXPECT_EQ(p.max_tokens, 9);
    EXPECT_EQ(p.stop, std::vector<std::string>{"y"});
    auto chat = parse(R"({"messages":[{"role":"system","role":"user","content":"a",)"
                      R"("content":"Question: b?\nAnswer:"}],)"
                      R"("chat_template_kwargs":{"enable_thinking":true,"enable_thinking":false}})",
                      Endpoint::chat);
    const auto& c = std::get<ParsedRequest>(chat);
    EXPECT_EQ(c.prompts.at(0).question, "b?");
    EXPECT_FALSE(c.thinking);
}

TEST(SimRequest, BodiesOnlyNlohmannParsesAreRead) {
    auto bom = parse("\xEF\xBB\xBF{\"prompt\":\"hi\",\"max_tokens\":4}", Endpoint::completions);
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(bom));
    EXPECT_EQ(std::get<ParsedRequest>(bom).max_tokens, 4);
    // Past 64 bits an integer is a double to nlohmann, so not an integer.
    EXPECT_EQ(
        error_of(R"({"prompt":"hi","max_tokens":18446744073709551616})", Endpoint::completions)
            .message,
        "max_tokens: Input should be a valid integer");
    EXPECT_EQ(error_of("{\"prompt\":\"hi\",\"max_tokens\":0,\"x\":" + std::string(1500, '[') +
                           std::string(1500, ']') + "}",
                       Endpoint::completions)
                  .message,
              "max_tokens must be at least 1, got 0.");
    EXPECT_EQ(error_of("\xEF\xBB\xBF{", Endpoint::completions).message,
              "JSON decode error: the request body is not valid JSON");
    // So deep that reading it level by level would overflow the stack.
    EXPECT_EQ(error_of("{\"prompt\":\"hi\",\"x\":" + std::string(100'000, '[') +
                           std::string(100'000, ']') + "}",
                       Endpoint::completions)
                  .message,
              "JSON decode error: the request body is not valid JSON");
}

TEST(SimRequest, IntegersReadAsNlohmannReadsThem) {
    // An unsigned value past INT64_MAX wraps to a negative int64.
    EXPECT_EQ(
        error_of(R"({"prompt":"hi","max_tokens":18446744073709551615})", Endpoint::completions)
            .message,
        "max_tokens must be at least 1, got -1.");
    EXPECT_EQ(error_of(R"({"prompt":[1,18446744073709551615]})", Endpoint::completions).message,
              "prompt: token ids must be non-negative integers");
    EXPECT_EQ(error_of(R"({"prompt":"hi","max_tokens":5.0})", Endpoint::completions).message,
              "max_tokens: Input should be a valid integer");
    auto ids = parse(R"({"prompt":[3,0,9223372036854775807]})", Endpoint::completions);
    EXPECT_EQ(std::get<ParsedRequest>(ids).prompts.at(0).text, "3 0 9223372036854775807 ");
    EXPECT_EQ(std::get<ParsedRequest>(ids).prompts.at(0).tokens, 3);
}

TEST(SimRequest, ContentPartTypesAreCheckedAsNlohmannsValueChecksThem) {
    // nlohmann's value("type", "") threw on a part whose type is not a
    // string; the server answered that as a 500 with the exception's text.
    ApiError e =
        error_of(R"({"messages":[{"role":"user","content":[{"type":5}]}]})", Endpoint::chat);
    EXPECT_EQ(e.status, 500);
    EXPECT_EQ(e.type, "InternalServerError");
    EXPECT_EQ(e.message, "[json.exception.type_error.302] type must be string, but is number");
    // A user's content is read as its role is checked; the others' only
    // after every role was.
    EXPECT_EQ(error_of(R"({"messages":[{"role":"system","content":[{"type":null}]},{"x":1}]})",
                       Endpoint::chat)
                  .message,
              "messages: each message needs a string 'role'");
    EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":[{"type":[]}]},{"x":1}]})",
                       Endpoint::chat)
                  .message,
              "[json.exception.type_error.302] type must be string, but is array");
    EXPECT_EQ(error_of(R"({"messages":[{"role":"system","content":[{"type":{}}]},)"
                       R"({"role":"user","content":"q"}],"max_tokens":"x"})",
                       Endpoint::chat)
                  .message,
              "[json.exception.type_error.302] type must be string, but is object");
    auto ok = parse(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},)"
                    R"({"type":"image"},{"text":"b"},{"type":"text","text":"c"}]}]})",
                    Endpoint::chat);
    EXPECT_EQ(std::get<ParsedRequest>(ok).prompts.at(0).question, "ac");
}

TEST(SimRequest, RendersTheQwenChatTemplate) {
    std::vector<ChatMessage> messages = {{"user", "hi"}};
    EXPECT_EQ(render_chat_prompt(messages, Thinking::off),
              "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    EXPECT_EQ(render_chat_prompt(messages, Thinking::on),
              "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n");
}

TEST(SimRequest, ErrorBodiesAreNlohmannsDump) {
    ApiError e{404, "NotFoundError", "The model `m\"\n\x01` does not exist.", "model"};
    ojson j;
    j["error"]["message"] = e.message;
    j["error"]["type"] = e.type;
    j["error"]["param"] = *e.param;
    j["error"]["code"] = e.status;
    EXPECT_EQ(error_body(e), j.dump());
    e.param.reset();
    e.message = "bad \xff byte";
    j["error"]["message"] = e.message;
    j["error"]["param"] = nullptr;
    EXPECT_EQ(error_body(e), j.dump(-1, ' ', false, ojson::error_handler_t::replace));
}

} // namespace
} // namespace diffeval::sim
