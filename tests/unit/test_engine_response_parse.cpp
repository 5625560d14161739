// parse_success_body and StreamAccumulator: the stop each engine names, and
// the field it names it in (bodies shaped like vLLM's, SGLang's, TGI's before
// 2.2 and llama.cpp's OpenAI answers).
#include <harness/engine/response_parse.hpp>

#include <gtest/gtest.h>

#include <string>

namespace diffeval::engine {
namespace {

store::ResponseRow parse(const std::string& body, Endpoint e = Endpoint::completion) {
    store::ResponseRow row;
    parse_success_body(body, e, row);
    EXPECT_TRUE(row.ok) << row.error;
    return row;
}

TEST(ParseStop, VllmNullStopReasonIsNamedByItsField) {
    auto row = parse(
        R"({"choices": [{"text": " #### 4", "finish_reason": "stop", "stop_reason": null}]})");
    EXPECT_EQ(row.stop_field, "stop_reason");
    EXPECT_TRUE(std::holds_alternative<std::monostate>(row.stop_reason));
    auto str =
        parse(R"({"choices": [{"text": "", "finish_reason": "stop", "stop_reason": "Question"}]})");
    EXPECT_EQ(std::get<std::string>(str.stop_reason), "Question");
}

TEST(ParseStop, SglangMatchedStopStringOrTokenId) {
    auto row = parse(R"({"choices": [{"index": 0, "message": {"role": "assistant", "content": ""},
        "finish_reason": "stop", "matched_stop": "Question:"}]})",
                     Endpoint::chat);
    EXPECT_EQ(row.stop_field, "matched_stop");
    EXPECT_EQ(std::get<std::string>(row.stop_reason), "Question:");
    auto tok =
        parse(R"({"choices": [{"text": "x", "finish_reason": "stop", "matched_stop": 151645}]})");
    EXPECT_EQ(tok.stop_field, "matched_stop");
    EXPECT_EQ(std::get<int64_t>(tok.stop_reason), 151645);
}

TEST(ParseStop, OldTgiFinishReasonsNameTheField) {
    auto row = parse(R"({"choices": [{"text": " #### 4", "finish_reason": "eos_token"}]})");
    EXPECT_EQ(row.stop_field, "finish_reason");
    EXPECT_EQ(*row.finish_reason, "eos_token");
}

TEST(ParseStop, LlamaCppNamesNoStop) {
    auto row =
        parse(R"({"choices": [{"text": "", "index": 0, "logprobs": null, "finish_reason": "stop"}],
        "system_fingerprint": "b11669-Debian"})");
    EXPECT_EQ(row.stop_field, "");
    EXPECT_TRUE(std::holds_alternative<std::monostate>(row.stop_reason));
}

TEST(ParseStop, VerboseLlamaCppNamesTheStopInItsOwnObject) {
    auto word = parse(
        R"({"choices": [{"text": "", "finish_reason": "stop"}], "__verbose": {"stop_type": "word", "stopping_word": "Question", "stop": true}})");
    EXPECT_EQ(word.stop_field, "__verbose.stop_type");
    EXPECT_EQ(std::get<std::string>(word.stop_reason), "Question");
    auto eos = parse(
        R"({"choices": [{"text": " #### 4", "finish_reason": "stop"}], "__verbose": {"stop_type": "eos", "stopping_word": ""}})");
    EXPECT_EQ(eos.stop_field, "__verbose.stop_type");
    EXPECT_TRUE(std::holds_alternative<std::monostate>(eos.stop_reason));
}

TEST(ParseStop, SglangStreamNamesTheStopInItsLastChoice) {
    StreamAccumulator acc(Endpoint::chat);
    acc.on_event(
        R"({"choices": [{"index": 0, "delta": {"content": " 4"}, "finish_reason": null, "matched_stop": null}]})",
        1);
    acc.on_event(
        R"({"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop", "matched_stop": "Question:"}]})",
        2);
    acc.on_event("[DONE]", 3);
    store::ResponseRow row;
    acc.finish(row);
    ASSERT_TRUE(row.ok) << row.error;
    EXPECT_EQ(row.stop_field, "matched_stop");
    EXPECT_EQ(std::get<std::string>(row.stop_reason), "Question:");
}

TEST(ParseStop, LlamaCppStreamNamesNoStop) {
    StreamAccumulator acc(Endpoint::completion);
    acc.on_event(
        R"({"choices": [{"text": "", "index": 0, "logprobs": null, "finish_reason": "stop"}]})", 1);
    acc.on_event("[DONE]", 2);
    store::ResponseRow row;
    acc.finish(row);
    ASSERT_TRUE(row.ok) << row.error;
    EXPECT_EQ(row.stop_field, "");
}

// The simdjson path and the DOM parser it stands in for agree field by field
// on answers at the edges of what each parser holds; duplicate keys resolve
// to the last one in both.
TEST(ParseBody, FastPathAgreesWithTheDomParser) {
    const char* bodies[] = {
        R"({"choices":[{"text":"a","finish_reason":"stop","text":"b"}],"usage":{"prompt_tokens":3}})",
        R"({"choices":[{"text":"t"}],"usage":{"prompt_tokens":3,"prompt_tokens":-1}})",
        R"({"choices":[{"text":"t"}],"error":{"message":"x"},"error":null})",
        R"({"choices":[{"text":"t","stop_reason":-0}],"usage":{"completion_tokens":100000000}})",
        R"({"choices":[{"text":"t","matched_stop":18446744073709551615}],"usage":{"completion_tokens":100000001}})",
        R"({"choices":[{"text":"t","matched_stop":2.0}],"usage":{"prompt_tokens":1.0}})",
        R"({"choices":[{"text":"t","stop_reason":1e400}]})",
        R"({"choices":[{"text":"x\u0000y","finish_reason":"stop_sequence"}],"usage":[]})",
        R"({"choices":[{"message":{"content":null,"reasoning_content":"r"}}],"__verbose":{"stop_type":"word"}})",
        R"({"choices":[{"message":{"content":"c","reasoning":null,"reasoning_content":"r"}}]})",
        R"({"choices":[{"message":{"content":null,"reasoning":null}}]})",
        R"({"choices":[{"message":{"content":"c","reasoning":7}}]})",
        R"({"choices":[{"text":"t","finish_reason":3}]})",
        R"({"choices":[{"text":"\ud800"}]})",
        R"({"choices":[],"usage":{}})",
        "\xef\xbb\xbf{\"choices\":[{\"text\":\"bom\"}]}",
        "{\"choices\":[{\"text\":\"\xff\"}]}",
    };
    for (const char* body : bodies) {
        for (Endpoint e : {Endpoint::completion, Endpoint::chat}) {
            store::ResponseRow fast;
            store::ResponseRow dom;
            parse_success_body(body, e, fast);
            parse_success_body_nlohmann(body, e, dom);
            EXPECT_EQ(fast.ok, dom.ok) << body;
            EXPECT_EQ(fast.error, dom.error) << body;
            EXPECT_EQ(fast.text, dom.text) << body;
            EXPECT_EQ(fast.reasoning, dom.reasoning) << body;
            EXPECT_EQ(fast.finish_reason, dom.finish_reason) << body;
            EXPECT_EQ(fast.stop_reason, dom.stop_reason) << body;
            EXPECT_EQ(fast.stop_field, dom.stop_field) << body;
            EXPECT_EQ(fast.prompt_tokens, dom.prompt_tokens) << body;
            EXPECT_EQ(fast.completion_tokens, dom.completion_tokens) << body;
            EXPECT_EQ(fast.notes, dom.notes) << body;
        }
    }
    store::ResponseRow last;
    parse_success_body(bodies[0], Endpoint::completion, last);
    EXPECT_EQ(last.text, "b");
}

} // namespace
} // namespace diffeval::engine
