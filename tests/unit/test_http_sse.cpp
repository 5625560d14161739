// SSE events must come out whole however the network splits the bytes.
#include <harness/http/sse.hpp>

#include <gtest/gtest.h>

using diffeval::http::SseParser;

TEST(SseParser, EventsSplitAcrossChunksAndLineEndings) {
    SseParser p;
    std::string stream = "data: {\"a\":1}\r\n\r\n: keep-alive comment\n\ndata: {\"b\"\ndata: "
                         ":2}\n\ndata: [DONE]\n\n";
    std::vector<std::string> events;
    for (char c : stream) {
        for (auto& e : p.feed(std::string_view(&c, 1))) {
            events.push_back(e);
        }
    }
    EXPECT_EQ(events, (std::vector<std::string>{"{\"a\":1}", "{\"b\"\n:2}", "[DONE]"}));
}

TEST(SseParser, IncompleteEventIsHeldBack) {
    SseParser p;
    EXPECT_TRUE(p.feed("data: {\"x\": ").empty());
    EXPECT_TRUE(p.feed("1}\n").empty());
    EXPECT_EQ(p.feed("\n"), (std::vector<std::string>{"{\"x\": 1}"}));
}

// WHATWG's two rules servers may lean on: a line may end with CR alone, and
// one byte order mark may open the stream. Both, byte by byte and whole.
TEST(SseParser, CrLineEndingsAndALeadingByteOrderMark) {
    const std::string stream = "\xEF\xBB\xBF"
                               "data: {\"a\":1}\r\rdata: {\"b\":2}\r\n\r\n"
                               "data: \xEF\xBB\xBF{\"c\":3}\r\r";
    const std::vector<std::string> expected = {"{\"a\":1}", "{\"b\":2}", "\xEF\xBB\xBF{\"c\":3}"};
    SseParser whole;
    EXPECT_EQ(whole.feed(stream), expected);
    SseParser bytes;
    std::vector<std::string> events;
    for (char c : stream) {
        for (auto& e : bytes.feed(std::string_view(&c, 1))) {
            events.push_back(e);
        }
    }
    EXPECT_EQ(events, expected);
}

// Where the last complete event ended: what follows is the event a cut
// stream stopped in, kept by redaction as it came.
TEST(SseParser, CompleteBytesEndWhereTheLastEventDid) {
    SseParser p;
    const std::string whole = "data: {\"a\":1}\r\n\r\n: comment\n\n";
    const std::string cut = "data: {\"b\":";
    EXPECT_EQ(p.feed(whole.substr(0, 7)).size(), 0u);
    EXPECT_EQ(p.complete_bytes(), 0u);
    EXPECT_EQ(p.feed(whole.substr(7) + cut).size(), 1u);
    EXPECT_EQ((whole + cut).substr(p.complete_bytes()), "\n: comment\n\n" + cut);
}

// llama.cpp reports a failure mid-stream as an `error:` line; it comes out
// as an error event (a JSON object as sent, other text as a JSON string),
// which WHATWG's rules alone would drop.
TEST(SseParser, AnErrorFieldIsAnErrorEvent) {
    SseParser p;
    EXPECT_EQ(p.feed("data: {\"a\":1}\n\nerror: {\"code\":500,\"message\":\"m\"}\n\n"
                     "error: out of \"memory\"\n\ndata: [DONE]\n\n"),
              (std::vector<std::string>{"{\"a\":1}", "{\"error\":{\"code\":500,\"message\":\"m\"}}",
                                        "{\"error\":\"out of \\\"memory\\\"\"}", "[DONE]"}));
}

// An event typed "error" (`event: error`, the SSE standard's field) is an
// error event with its data as the error, even with no data; the type is
// the event's only, and other types are data as before. Read as data, an
// audit's "engine died" between two chunks was stored as one answer.
TEST(SseParser, AnEventNamedErrorIsAnErrorEvent) {
    SseParser p;
    EXPECT_EQ(
        p.feed("data: {\"a\":1}\n\nevent: error\ndata: {\"message\":\"engine died\"}\n\n"
               "event: error\ndata: overloaded\n\nevent: error\n\n"
               "event: message\ndata: {\"b\":2}\n\ndata: [DONE]\n\n"),
        (std::vector<std::string>{"{\"a\":1}", "{\"error\":{\"message\":\"engine died\"}}",
                                  "{\"error\":\"overloaded\"}",
                                  "{\"error\":\"an event named error\"}", "{\"b\":2}", "[DONE]"}));
}
