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

// A server streaming several choices (`n` in a framing's fields) sends each
// one's chunks with its index: the answer is choice 0's alone, its finish
// too, as an unstreamed body's first choice. Joined, the chunks made up a
// text no choice said ("WRONG The answer is 42").
TEST(ParseStream, AnotherChoicesChunksAreNotPartOfTheAnswer) {
    for (const auto endpoint : {Endpoint::completion, Endpoint::chat}) {
        const auto chunk = [&](int index, const std::string& text, const char* finish) {
            const std::string piece = endpoint == Endpoint::chat
                                          ? R"("delta": {"content": ")" + text + R"("})"
                                          : R"("text": ")" + text + R"(")";
            return R"({"choices": [{"index": )" + std::to_string(index) + ", " + piece +
                   R"(, "finish_reason": )" + finish + "}]}";
        };
        StreamAccumulator acc(endpoint);
        acc.on_event(chunk(1, "WRONG ", "null"), 1);
        acc.on_event(chunk(0, "The answer is ", "null"), 2);
        acc.on_event(chunk(1, "7", "\"length\""), 3);
        acc.on_event(chunk(0, "42", "\"stop\""), 4);
        acc.on_event("[DONE]", 5);
        store::ResponseRow row;
        acc.finish(row);
        ASSERT_TRUE(row.ok) << row.error;
        EXPECT_EQ(row.text, "The answer is 42");
        EXPECT_EQ(row.finish_reason, "stop");

        // Only another choice's chunks: no answer.
        StreamAccumulator other(endpoint);
        other.on_event(chunk(1, "WRONG", "\"stop\""), 1);
        other.on_event("[DONE]", 2);
        store::ResponseRow none;
        other.finish(none);
        EXPECT_FALSE(none.ok);

        // An index that is no whole number is a chunk of the wrong shape.
        StreamAccumulator bad(endpoint);
        bad.on_event(R"({"choices": [{"index": "0", "text": "4", "finish_reason": "stop"}]})", 1);
        bad.on_event("[DONE]", 2);
        store::ResponseRow wrong;
        bad.finish(wrong);
        EXPECT_FALSE(wrong.ok);
        EXPECT_EQ(wrong.error_kind, "stream");
        EXPECT_EQ(wrong.error, "a stream chunk's choice index is not a whole number");
    }
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

// A stop field of a type no engine sends is of the wrong type, like any
// other field: an error, not a null read as the end of sequence.
TEST(ParseStop, AStopReasonOfTheWrongTypeIsAParseError) {
    for (const char* value :
         {"true", "1.5", "{\"a\":1}", "18446744073709551616", "9223372036854775808"}) {
        const std::string choice =
            std::string(R"({"text":"","finish_reason":"stop","stop_reason":)") + value + "}";
        store::ResponseRow row;
        parse_success_body(R"({"choices":[)" + choice + "]}", Endpoint::completion, row);
        EXPECT_FALSE(row.ok) << value;
        EXPECT_EQ(row.error_kind, "parse") << value;
        EXPECT_EQ(row.error, "the choice's stop_reason is not a string, a token id or null");
        StreamAccumulator acc(Endpoint::completion);
        acc.on_event(R"({"choices":[)" + choice + "]}", 1);
        acc.on_event("[DONE]", 2);
        store::ResponseRow streamed;
        acc.finish(streamed);
        EXPECT_FALSE(streamed.ok) << value;
        EXPECT_EQ(streamed.error_kind, "stream") << value;
        EXPECT_EQ(streamed.error,
                  "a stream chunk's stop_reason is not a string, a token id or null");
    }
    // null is the end of sequence, and stays an answer.
    auto eos = parse(R"({"choices":[{"text":"","finish_reason":"stop","stop_reason":null}]})");
    EXPECT_EQ(eos.stop_field, "stop_reason");
}

// Error events in the shapes other than {"error": ...}: vLLM's
// {"object": "error"} as a stream event or as a whole 200 body.
TEST(ParseBody, VllmErrorObjectsAreErrors) {
    const std::string error =
        R"({"object":"error","message":"engine dead","type":"InternalServerError","code":500})";
    store::ResponseRow row;
    parse_success_body(error, Endpoint::completion, row);
    EXPECT_FALSE(row.ok);
    EXPECT_EQ(row.error_kind, "parse");
    EXPECT_EQ(row.error, "the server answered with an error object: engine dead");
    StreamAccumulator acc(Endpoint::completion);
    acc.on_event(R"({"choices":[{"text":"The answer is","finish_reason":null}]})", 1);
    acc.on_event(error, 2);
    acc.on_event("[DONE]", 3);
    store::ResponseRow streamed;
    acc.finish(streamed);
    EXPECT_FALSE(streamed.ok);
    EXPECT_EQ(streamed.error_kind, "stream");
    EXPECT_EQ(streamed.error, "the server sent an error mid-stream: engine dead");
}

// A streamed completion whose chunks are chat-shaped (no `text` anywhere)
// is no answer, as the same body unstreamed is not; an empty `text` is.
TEST(ParseBody, AStreamedCompletionWithNoTextFieldIsNoAnswer) {
    auto finish = [](const std::vector<std::string>& events) {
        StreamAccumulator acc(Endpoint::completion);
        for (const auto& e : events) {
            acc.on_event(e, 1);
        }
        store::ResponseRow row;
        acc.finish(row);
        return row;
    };
    auto chat_shaped =
        finish({R"({"choices":[{"index":0,"delta":{"content":"42"},"finish_reason":null}]})",
                R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})", "[DONE]"});
    EXPECT_FALSE(chat_shaped.ok);
    EXPECT_EQ(chat_shaped.error_kind, "parse");
    EXPECT_EQ(chat_shaped.error, "no stream chunk's choice had a text field");
    auto empty = finish({R"({"choices":[{"index":0,"text":"","finish_reason":null}]})",
                         R"({"choices":[{"index":0,"finish_reason":"stop"}]})", "[DONE]"});
    EXPECT_TRUE(empty.ok) << empty.error;
    EXPECT_EQ(empty.text, "");
}

// The same on chat: completion-shaped chunks, or a whole `message` in place
// of a delta, were stored ok with empty text (an audit), the answer lost.
TEST(ParseBody, AStreamedChatWithNoDeltaIsNoAnswer) {
    auto finish = [](const std::vector<std::string>& events) {
        StreamAccumulator acc(Endpoint::chat);
        for (const auto& e : events) {
            acc.on_event(e, 1);
        }
        store::ResponseRow row;
        acc.finish(row);
        return row;
    };
    for (const auto& events : std::vector<std::vector<std::string>>{
             {R"({"choices":[{"index":0,"text":"The answer is 42.","finish_reason":null}]})",
              R"({"choices":[{"index":0,"text":"","finish_reason":"stop"}]})", "[DONE]"},
             {R"({"choices":[{"index":0,"message":{"content":"The answer is 42."},)"
              R"("finish_reason":"stop"}]})",
              "[DONE]"}}) {
        const auto row = finish(events);
        EXPECT_FALSE(row.ok) << events.front();
        EXPECT_EQ(row.error_kind, "parse");
        EXPECT_EQ(row.error, "no stream chunk's choice had a delta object");
    }
    // A delta with no content and a finish (llama.cpp when a stop string
    // comes first) is an empty answer still.
    const auto empty =
        finish({R"({"choices":[{"index":0,"delta":{"role":"assistant"},)"
                R"("finish_reason":null}]})",
                R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})", "[DONE]"});
    EXPECT_TRUE(empty.ok) << empty.error;
    EXPECT_EQ(empty.text, "");
    // So is a chunk whose delta is null: of chat's shape, with nothing in it.
    const auto null_delta =
        finish({R"({"choices":[{"index":0,"delta":null,"finish_reason":"stop"}]})", "[DONE]"});
    EXPECT_TRUE(null_delta.ok) << null_delta.error;
    EXPECT_EQ(null_delta.text, "");
}

// What went wrong, in words that name it (a hostile-server audit): a text
// of the wrong type is not a missing one, a usage that is no object gets a
// note, and a body with no stream event at all did not stream.
TEST(ParseBody, ErrorsAndNotesNameWhatTheServerSent) {
    store::ResponseRow number;
    parse_success_body(R"({"choices":[{"text":18,"finish_reason":"stop"}]})", Endpoint::completion,
                       number);
    EXPECT_FALSE(number.ok);
    EXPECT_EQ(number.error, "the completion choice's text is not a string");
    store::ResponseRow missing;
    parse_success_body(R"({"choices":[{"finish_reason":"stop"}]})", Endpoint::completion, missing);
    EXPECT_EQ(missing.error, "the completion choice has no text");
    auto lots = parse(R"({"choices":[{"text":"#### 4","finish_reason":"stop"}],"usage":"lots"})");
    EXPECT_EQ(lots.notes, "usage \"lots\" is not an object; token counts stored as NULL");
    EXPECT_FALSE(lots.completion_tokens.has_value());
    EXPECT_EQ(parse(R"({"choices":[{"text":"#### 4","finish_reason":"stop"}],"usage":null})").notes,
              "");
    StreamAccumulator unstreamed(Endpoint::completion);
    store::ResponseRow row;
    unstreamed.finish(row);
    EXPECT_FALSE(row.ok);
    EXPECT_EQ(row.error, "the response held no stream events (no `data:` line): the server did "
                         "not stream, though the request asked it to");
}

// A body that is not JSON because it holds bytes that are not UTF-8 says so:
// "not valid JSON" alone sends a reader looking for a missing brace.
TEST(ParseBody, BytesThatAreNotUtf8AreNamed) {
    const std::string latin1 =
        "{\"choices\":[{\"text\":\"caf\xe9 #### 4\",\"finish_reason\":\"stop\"}]}";
    store::ResponseRow whole;
    parse_success_body(latin1, Endpoint::completion, whole);
    EXPECT_FALSE(whole.ok);
    EXPECT_EQ(whole.error,
              "the response body is not valid JSON: it holds bytes that are not UTF-8");
    store::ResponseRow cut;
    parse_success_body(R"({"choices":[{"text":"#### 4")", Endpoint::completion, cut);
    EXPECT_EQ(cut.error, "the response body is not valid JSON");
    auto streamed = [](const std::string& event) {
        StreamAccumulator acc(Endpoint::completion);
        acc.on_event(event, 1);
        acc.on_event("[DONE]", 2);
        store::ResponseRow row;
        acc.finish(row);
        return row;
    };
    EXPECT_EQ(streamed("{\"choices\":[{\"index\":0,\"text\":\"\xff\"}]}").error,
              "a stream event is not valid JSON: it holds bytes that are not UTF-8");
    EXPECT_EQ(streamed("[1, 2]").error, "a stream event is not a JSON object");
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
        R"({"object":"error","message":"m","choices":[{"text":"t"}]})",
        R"({"object":"error","object":"text_completion","choices":[{"text":"t"}]})",
        R"({"choices":[{"text":"t","stop_reason":true}]})",
        R"({"choices":[{"text":"t","stop_reason":1.5}]})",
        R"({"choices":[{"text":"t","stop_reason":{"a":1}}]})",
        R"({"choices":[{"text":"t","stop_reason":18446744073709551616}]})",
        R"({"choices":[{"text":"t","matched_stop":[]}]})",
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
