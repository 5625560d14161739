// Rewriting a body whose decoded fields held the API key: a key split across
// stream events (in the text, the reasoning, 2 or 3 pieces, escaped) leaves
// no piece behind, the stream still assembles to the redacted text, and a
// body with nothing to cut comes back byte for byte.
#include <harness/engine/redact_body.hpp>

#include <harness/http/sse.hpp>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

using namespace diffeval;
using engine::BodyShape;
using engine::Endpoint;

namespace {

const std::string k_key = "sk-live-AbCdEf0123456789";

util::Redactor redactor() {
    util::Redactor r;
    r.add(k_key);
    return r;
}

std::string chat_event(const std::string& field, const std::string& value_json) {
    return "data: {\"choices\":[{\"index\":0,\"delta\":{\"" + field + "\":" + value_json +
           "},\"finish_reason\":null}]}\n\n";
}

std::string quoted(const std::string& s) {
    return nlohmann::json(s).dump();
}

// What `body` assembles to, through the run's own parser and accumulator.
store::ResponseRow assembled(const std::string& body, Endpoint endpoint) {
    http::SseParser parser;
    engine::StreamAccumulator acc(endpoint);
    for (const auto& e : parser.feed(body)) {
        acc.on_event(e, 0);
    }
    store::ResponseRow row;
    acc.finish(row);
    return row;
}

// Every delta string of the stream (text, content, reasoning) joined in order.
std::string joined_strings(const std::string& body) {
    http::SseParser parser;
    std::string all;
    for (const auto& e : parser.feed(body)) {
        auto j = nlohmann::json::parse(e, nullptr, false);
        if (!j.is_object() || !j.contains("choices")) {
            continue;
        }
        const auto& c = j["choices"][0];
        const auto& d = c.contains("delta") ? c["delta"] : c;
        for (const char* k : {"text", "content", "reasoning", "reasoning_content"}) {
            if (d.contains(k) && d[k].is_string()) {
                all += d[k].get<std::string>();
            }
        }
    }
    return all;
}

} // namespace

TEST(RedactPieces, PutsTheMarkWhereTheSecretStartsAndDropsTheRest) {
    const std::string whole = "half sk-live-AbCdEf0123456789 #### 5";
    // "half sk-live-Ab" | "CdEf01234" | "56789 #### 5"
    std::vector<engine::StreamPiece> pieces = {
        {0, "content", false, 0, 15}, {1, "content", false, 15, 9}, {2, "content", false, 24, 12}};
    auto spans = redactor().find(whole);
    auto out = engine::redact_pieces(whole, pieces, spans);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0], "half [REDACTED]");
    EXPECT_EQ(out[1], "");
    EXPECT_EQ(out[2], " #### 5");
}

TEST(RedactPieces, LeavesPiecesWithoutTheSecretAlone) {
    const std::string whole = "ab" + k_key + "cd";
    std::vector<engine::StreamPiece> pieces = {{0, "text", false, 0, 1},
                                               {1, "text", false, 1, whole.size() - 1}};
    auto out = engine::redact_pieces(whole, pieces, redactor().find(whole));
    EXPECT_EQ(out[0], "a");
    EXPECT_EQ(out[1], "b[REDACTED]cd");
}

TEST(RedactBody, AKeySplitAcrossTwoContentChunksLeavesNoPiece) {
    const std::string body = chat_event("content", quoted("half " + k_key.substr(0, 10))) +
                             chat_event("content", quoted(k_key.substr(10) + " #### 5")) +
                             "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
                             "\"stop\"}]}\n\ndata: [DONE]\n\n";
    auto out = engine::redact_body(body, BodyShape::stream, Endpoint::chat, redactor());
    EXPECT_EQ(out.find(k_key.substr(0, 10)), std::string::npos) << out;
    EXPECT_EQ(out.find(k_key.substr(10)), std::string::npos) << out;
    EXPECT_EQ(joined_strings(out), "half [REDACTED] #### 5");
    auto row = assembled(out, Endpoint::chat);
    EXPECT_TRUE(row.ok);
    EXPECT_EQ(row.text, "half [REDACTED] #### 5");
    EXPECT_EQ(row.finish_reason, "stop");
}

TEST(RedactBody, AKeySplitInThreeAcrossReasoningAndEscapedLeavesNoPiece) {
    util::Redactor r;
    const std::string key = "sk-\u00e9t\u00e9-AbCdEf0123456789";
    r.add(key);
    // Python's ensure_ascii spelling of each piece, reasoning_content as the
    // older vLLM names it, and the text too.
    auto ascii = [](const std::string& s) { return nlohmann::json(s).dump(-1, ' ', true); };
    const std::string body = chat_event("reasoning_content", ascii("think " + key.substr(0, 5))) +
                             chat_event("reasoning_content", ascii(key.substr(5, 9))) +
                             chat_event("reasoning_content", ascii(key.substr(14) + " done")) +
                             chat_event("content", ascii("say " + key.substr(0, 5))) +
                             chat_event("content", ascii(key.substr(5, 6))) +
                             chat_event("content", ascii(key.substr(11) + " #### 5")) +
                             "data: [DONE]\n\n";
    auto before = assembled(body, Endpoint::chat);
    ASSERT_EQ(before.reasoning, "think " + key + " done");
    auto out = engine::redact_body(body, BodyShape::stream, Endpoint::chat, r);
    auto row = assembled(out, Endpoint::chat);
    EXPECT_EQ(row.reasoning, "think [REDACTED] done");
    EXPECT_EQ(row.text, "say [REDACTED] #### 5");
    EXPECT_EQ(joined_strings(out), "think [REDACTED] donesay [REDACTED] #### 5");
    for (const auto& piece :
         {key.substr(0, 5), key.substr(5, 9), key.substr(14), key.substr(5, 6), key.substr(11)}) {
        EXPECT_EQ(joined_strings(out).find(piece), std::string::npos) << piece;
    }
}

TEST(RedactBody, ACompletionStreamAndTheEventsAroundKeepTheirBytes) {
    const std::string clean = "data: {\"choices\":[{\"text\":\"x\",  \"finish_reason\":null}]}";
    const std::string body =
        clean + "\n\n" + "data: {\"choices\":[{\"text\":" + quoted(k_key.substr(0, 12)) +
        "}]}\n\n" + "data: {\"choices\":[{\"text\":" + quoted(k_key.substr(12)) +
        ",\"finish_reason\":\"stop\"}]}\n\n";
    auto out = engine::redact_body(body, BodyShape::stream, Endpoint::completion, redactor());
    EXPECT_EQ(out.rfind(clean + "\n\n", 0), 0u) << out;
    EXPECT_EQ(assembled(out, Endpoint::completion).text, "x[REDACTED]");
    EXPECT_EQ(out.find(k_key.substr(12)), std::string::npos) << out;
}

TEST(RedactBody, KeysInAServersOwnEscapesAreCutFromAJsonBody) {
    // "s" and "k" escaped, mixed case: no spelling the Redactor knows.
    const std::string body = R"({"choices":[{"message":{"content":"key \u0073\u006B)" +
                             k_key.substr(2) + R"("},"finish_reason":"stop"}]})";
    auto out = engine::redact_body(body, BodyShape::json, Endpoint::chat, redactor());
    EXPECT_EQ(nlohmann::json::parse(out)["choices"][0]["message"]["content"], "key [REDACTED]");
}

TEST(RedactBody, AJsonBodyWithTheKeyInAKnownSpellingKeepsItsBytes) {
    const std::string body = R"({"a": 1.50, "content": "k )" + k_key + R"("})";
    EXPECT_EQ(engine::redact_body(body, BodyShape::json, Endpoint::chat, redactor()),
              R"({"a": 1.50, "content": "k [REDACTED]"})");
}

TEST(RedactBody, ABodyWithNothingToCutComesBackAsItWas) {
    const std::string stream = chat_event("content", "\"x\\u00e9\"") + "data: [DONE]\n\n";
    EXPECT_EQ(engine::redact_body(stream, BodyShape::stream, Endpoint::chat, redactor()), stream);
    const std::string json = R"({"a": 1.50, "b": "\u00e9"})";
    EXPECT_EQ(engine::redact_body(json, BodyShape::json, Endpoint::chat, redactor()), json);
    EXPECT_EQ(engine::redact_body("not json", BodyShape::json, Endpoint::chat, redactor()),
              "not json");
}

// Every way of cutting a text holding the key twice into three events: the
// stored events hold exactly the redacted text, nothing more.
TEST(RedactBody, EverySplitIntoThreeEventsAssemblesToTheRedactedText) {
    const std::string whole = "a " + k_key + k_key + " b";
    for (size_t i = 0; i <= whole.size(); ++i) {
        for (size_t j = i; j <= whole.size(); ++j) {
            const std::string body = chat_event("content", quoted(whole.substr(0, i))) +
                                     chat_event("content", quoted(whole.substr(i, j - i))) +
                                     chat_event("content", quoted(whole.substr(j))) +
                                     "data: [DONE]\n\n";
            auto out = engine::redact_body(body, BodyShape::stream, Endpoint::chat, redactor());
            ASSERT_EQ(joined_strings(out), "a [REDACTED][REDACTED] b") << i << " " << j;
        }
    }
}

// What a server sends after [DONE] is read by no field, but the raw stream
// keeps it: a key split across such events, or across the answer's end,
// leaves no piece, and the answer keeps its text (the mark where a key that
// crossed its end started).
TEST(RedactBody, AKeySplitAfterDoneLeavesNoPiece) {
    const std::string answer = chat_event("content", quoted("x #### 5")) +
                               "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
                               "\"stop\"}]}\n\ndata: [DONE]\n\n";
    const std::string after = chat_event("content", quoted(k_key.substr(0, 10))) +
                              chat_event("content", quoted(k_key.substr(10)));
    auto out = engine::redact_body(answer + after, BodyShape::stream, Endpoint::chat, redactor());
    EXPECT_EQ(out.find(k_key.substr(0, 10)), std::string::npos) << out;
    EXPECT_EQ(out.find(k_key.substr(10)), std::string::npos) << out;
    EXPECT_EQ(joined_strings(out), "x #### 5[REDACTED]");
    auto row = assembled(out, Endpoint::chat);
    EXPECT_TRUE(row.ok);
    EXPECT_EQ(row.text, "x #### 5");

    // Across the end: the answer's last characters were the key's first.
    const std::string across = chat_event("content", quoted("say " + k_key.substr(0, 7))) +
                               "data: [DONE]\n\n" + chat_event("content", quoted(k_key.substr(7)));
    out = engine::redact_body(across, BodyShape::stream, Endpoint::chat, redactor());
    EXPECT_EQ(joined_strings(out), "say [REDACTED]");
    EXPECT_EQ(assembled(out, Endpoint::chat).text, "say [REDACTED]");

    // After an error event, as after [DONE].
    const std::string error = chat_event("content", quoted("x")) +
                              "data: {\"error\":{\"message\":\"overloaded\"}}\n\n" + after;
    out = engine::redact_body(error, BodyShape::stream, Endpoint::chat, redactor());
    EXPECT_EQ(joined_strings(out), "x[REDACTED]");
}

// A key whose first part ends the reasoning and whose rest starts the
// content: neither field holds it, the order they arrived in does.
TEST(RedactBody, AKeySplitBetweenReasoningAndContentLeavesNoPiece) {
    const std::string body = chat_event("reasoning", quoted("I saw " + k_key.substr(0, 9))) +
                             chat_event("content", quoted(k_key.substr(9) + " #### 5")) +
                             "data: [DONE]\n\n";
    auto out = engine::redact_body(body, BodyShape::stream, Endpoint::chat, redactor());
    auto row = assembled(out, Endpoint::chat);
    EXPECT_EQ(row.reasoning, "I saw [REDACTED]");
    EXPECT_EQ(row.text, " #### 5");
    EXPECT_EQ(out.find(k_key.substr(0, 9)), std::string::npos) << out;
    EXPECT_EQ(out.find(k_key.substr(9)), std::string::npos) << out;

    // Pieces of it that spell it in no order (neither field, nor the two as
    // they came): as they came, byte for byte.
    const std::string clean = chat_event("reasoning", quoted("sk-live-Ab")) +
                              chat_event("content", quoted("Ef0123456789")) + "data: [DONE]\n\n";
    EXPECT_EQ(engine::redact_body(clean, BodyShape::stream, Endpoint::chat, redactor()), clean);
}

// A body cut by a timeout (or a dropped connection, or the size limit) may
// stop inside the key: its first characters are a piece of it too.
TEST(RedactBody, ACutBodyLosesTheKeysStartItEndsIn) {
    const auto cut = util::TextEnd::cut;
    // Streamed: 10 characters in a whole event, 6 in the unfinished one.
    const std::string stream = chat_event("content", quoted("The key is " + k_key.substr(0, 10))) +
                               "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" +
                               k_key.substr(10, 6);
    auto out = engine::redact_body(stream, BodyShape::stream, Endpoint::chat, redactor(), cut);
    for (size_t i = 0; i + 4 <= 16; ++i) {
        EXPECT_EQ(out.find(k_key.substr(i, 4)), std::string::npos) << k_key.substr(i, 4) << out;
    }
    EXPECT_EQ(assembled(out, Endpoint::chat).text, "The key is [REDACTED]");
    // The unfinished event stays unfinished.
    EXPECT_EQ(out.substr(out.size() - 11), "\"content\":\"") << out;

    // The unfinished event's text whole, the event cut after it.
    const std::string after_text =
        chat_event("content", quoted("The key is " + k_key.substr(0, 10))) +
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + k_key.substr(10, 6) +
        "\"},\"finish_reason\":nu";
    out = engine::redact_body(after_text, BodyShape::stream, Endpoint::chat, redactor(), cut);
    for (size_t i = 0; i + 4 <= 16; ++i) {
        EXPECT_EQ(out.find(k_key.substr(i, 4)), std::string::npos) << k_key.substr(i, 4) << out;
    }
    EXPECT_EQ(out.substr(out.size() - 32), "\"content\":\"\"},\"finish_reason\":nu") << out;

    // The unfinished event cut in a key's name: the text ended in the key.
    const std::string in_name =
        chat_event("content", quoted("The key is " + k_key.substr(0, 10))) + "data: {\"choi";
    out = engine::redact_body(in_name, BodyShape::stream, Endpoint::chat, redactor(), cut);
    EXPECT_EQ(assembled(out, Endpoint::chat).text, "The key is [REDACTED]");
    EXPECT_EQ(out.substr(out.size() - 12), "data: {\"choi") << out;

    // Whole JSON cut inside the key, raw and in a server's own escapes.
    const std::string json =
        R"({"choices":[{"message":{"content":"The key is )" + k_key.substr(0, 12);
    EXPECT_EQ(engine::redact_body(json, BodyShape::json, Endpoint::chat, redactor(), cut),
              R"({"choices":[{"message":{"content":"The key is [REDACTED])");
    const std::string escaped =
        R"({"error":{"message":"bad key \u0073\u006B)" + k_key.substr(2) + R"(", "type": "au)";
    out = engine::redact_body(escaped, BodyShape::json, Endpoint::chat, redactor(), cut);
    EXPECT_EQ(out, R"({"error":{"message":"bad key [REDACTED]", "type": "au)");

    // A cut body that neither holds the key nor ends in its start is as it came.
    const std::string clean = chat_event("content", quoted("The answer")) +
                              "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" is";
    EXPECT_EQ(engine::redact_body(clean, BodyShape::stream, Endpoint::chat, redactor(), cut),
              clean);
    const std::string half = R"({"choices":[{"message":{"content":"The ans)";
    EXPECT_EQ(engine::redact_body(half, BodyShape::json, Endpoint::chat, redactor(), cut), half);
}

// A cut stream's unfinished event read leniently: a string that is the value
// of one answer field and the name of the next ("content":"text":"...") is
// both, and the text it names still loses the key's start it ends in. (The
// first string's value was moved out before it was read as the next one's
// name; libFuzzer found it.)
TEST(RedactBody, AStringThatIsBothAValueAndANameStillCutsTheKeysStart) {
    const std::string body = R"("content":"text":")" + k_key.substr(0, 4) + "\"";
    const auto out = engine::redact_body(body, BodyShape::stream, Endpoint::chat, redactor(),
                                         util::TextEnd::cut);
    EXPECT_EQ(out.find(k_key.substr(0, 4)), std::string::npos) << out;
    EXPECT_EQ(out, R"("content":"text":"[REDACTED]")");
}

// A key holding quotes, cut out of the bytes, moves where the strings begin
// and end: read again, the body's unfinished event holds a text field ending
// in the key's start, which is cut too (libFuzzer found it).
TEST(RedactBody, AKeyWithQuotesCutFromTheBytesLeavesNoStartInTheStringsItReveals) {
    util::Redactor r;
    r.add(R"(sg-l"s"")");
    const std::string body = R"(sg-l"s"""text":"sg-l"")";
    const auto out =
        engine::redact_body(body, BodyShape::stream, Endpoint::chat, r, util::TextEnd::cut);
    EXPECT_EQ(out, R"([REDACTED]"text":"[REDACTED]"")");
}

// The test before a body's rewrite: a key escaped in a spelling of the
// server's own, in any string, is found; escapes that hold no key are not a
// reason to parse the body again (a server escaping all non-ASCII text made
// every body's rewrite cost 2.3 times the run's CPU: an audit).
TEST(EscapedSecret, FindsAnEscapedKeyAndNothingElse) {
    const auto r = redactor();
    EXPECT_FALSE(engine::escaped_secret(R"({"text":"caf\u00e9 \ud83d\ude00 http:\/\/x"})", r));
    EXPECT_FALSE(engine::escaped_secret(R"({"text":"no escapes here"})", r));
    // Written whole, the Redactor's own spelling finds it: not this test's.
    EXPECT_FALSE(engine::escaped_secret(std::string(R"({"id":")") + k_key + "\"}", r));
    std::string escaped = k_key;
    escaped.replace(0, 1, "\\u0073");
    EXPECT_TRUE(engine::escaped_secret(R"({"id":")" + escaped + R"(","choices":[]})", r));
    EXPECT_TRUE(engine::escaped_secret("data: {\"model\":\"" + escaped + "\"}\n\n", r));
    EXPECT_FALSE(engine::escaped_secret(R"({"id":")" + escaped + "\"}", util::Redactor{}));
}
