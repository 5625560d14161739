// Spliced bodies (schema version 11): a stored body leaves out the text its
// row holds in other columns, and the views give back every byte received.
// The bodies here are the shapes servers send (vLLM's completions and chat,
// a stream, an error), with text that JSON writers escape alike and text they
// do not.
#include <harness/store/splice.hpp>
#include <harness/store/store.hpp>

#include <gtest/gtest.h>

#include <filesystem>

using namespace diffeval::store;
namespace fs = std::filesystem;

namespace {

fs::path fresh_db(const std::string& name) {
    auto p = fs::temp_directory_path() / ("diffeval_test_splice_" + name + ".sqlite");
    for (const char* suffix : {"", "-wal", "-shm"}) {
        fs::remove(p.string() + suffix);
    }
    return p;
}

std::string query_text(Store& s, const std::string& sql, const std::string& arg) {
    Statement st(s.handle(), sql);
    st.bind(arg);
    return st.step() ? st.column_text(0) : "<no row>";
}

std::string sqlite_json_quote(Store& s, const std::string& text) {
    return query_text(s, "SELECT json_quote(?)", text);
}

// A vLLM-style completions body holding `escaped` as choices[0].text.
std::string completion(const std::string& escaped) {
    return R"({"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":")" + escaped +
           R"(","logprobs":null,"finish_reason":"stop","stop_reason":"Question"}],)"
           R"("usage":{"prompt_tokens":661,"completion_tokens":65}})";
}

struct Case {
    std::string name;
    std::string body;
    std::optional<std::string> text;
    std::optional<std::string> reasoning;
    bool spliced;
};

std::vector<Case> cases() {
    const std::string answer = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs.\n#### 18";
    const std::string answer_json = R"(Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs.\n#### 18)";
    const std::string quoted = "He said \"stop\"\tthen\r\nleft C:\\x / é 中文 🎉 <b>&amp;</b>";
    const std::string quoted_json =
        R"(He said \"stop\"\tthen\r\nleft C:\\x / é 中文 🎉 <b>&amp;</b>)";
    return {
        {"completions", completion(answer_json), answer, std::nullopt, true},
        {"escapes and UTF-8", completion(quoted_json), quoted, std::nullopt, true},
        {"chat with reasoning",
         R"({"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":)"
         R"({"role":"assistant","content":")" +
             answer_json + R"(","reasoning":"First, the eggs: 16 - 3 - 4 = 9."}}]})",
         answer, "First, the eggs: 16 - 3 - 4 = 9.", true},
        // The text twice: the first occurrence is cut, the second stays.
        {"text twice", completion(answer_json + R"(","echo":")" + answer_json), answer,
         std::nullopt, true},
        // Python escapes a control character as \u0001; not plain, kept whole.
        {"control character", completion(R"(before\u0001after and some more words)"),
         std::string("before\x01"
                     "after and some more words"),
         std::nullopt, false},
        // ensure_ascii=True escapes é: the quoted text is not in the body.
        {"ASCII-escaped server", completion(R"(caf\u00e9 au lait with enough text to cut)"),
         "café au lait with enough text to cut", std::nullopt, false},
        // A body that already holds a slot is never spliced.
        {"slot in the body", completion(answer_json) + R"( {"$diffeval":"text"})", answer,
         std::nullopt, false},
        {"slot's start in the body", completion(answer_json) + R"( {"$diffeval":"other"})", answer,
         std::nullopt, false},
        {"short text", completion("18"), "18", std::nullopt, false},
        {"stream",
         "data: {\"choices\":[{\"text\":\"Janet sells \"}]}\n\ndata: {\"choices\":[{\"text\":"
         "\"16 ducks\"}]}\n\ndata: [DONE]\n\n",
         "Janet sells 16 ducks", std::nullopt, false},
        {"error", "upstream timed out", std::nullopt, std::nullopt, false},
    };
}

} // namespace

TEST(Splice, PlainQuotingIsSqliteJsonQuote) {
    auto s = Store::open(fresh_db("quote").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    for (std::string text :
         {"", "plain", "a \"quoted\" word", "back\\slash", "new\nline\ttab\rreturn", "/ < > & '",
          "é 中文 🎉", "\xf4\x8f\xbf\xbf", "#### 18\n\nQuestion: x"}) {
        auto q = plain_json_quote(text);
        ASSERT_TRUE(q) << text;
        EXPECT_EQ(*q, sqlite_json_quote(**s, text)) << text;
    }
    // Writers escape these differently, or the bytes are not UTF-8.
    for (std::string text :
         {std::string("nul\0", 4), std::string("bell\x07"), std::string("del\x7f"),
          std::string("\xc0\x80"), std::string("\xed\xa0\x80"), std::string("\xe4\xb8"),
          std::string("\xf5\x80\x80\x80"), std::string("\x80")}) {
        EXPECT_FALSE(plain_json_quote(text)) << text;
    }
}

TEST(Splice, ResponsesReadBackByteForByteThroughTheView) {
    auto s = Store::open(fresh_db("responses").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    const auto all = cases();
    std::vector<RequestRow> requests;
    std::vector<ResponseRow> rows;
    for (size_t i = 0; i < all.size(); ++i) {
        const auto key = "k" + std::to_string(i);
        requests.push_back(RequestRow{key, "a", "raw", 256, 0, static_cast<int>(i), "sample",
                                      "{\"prompt\": \"x\"}", "sha"});
        ResponseRow r;
        r.key = key;
        r.ok = all[i].text.has_value();
        r.status = 200;
        r.response_json = all[i].body;
        r.text = all[i].text;
        r.reasoning = all[i].reasoning;
        r.attempts = 1;
        r.started_at = now_iso8601();
        rows.push_back(r);
    }
    ASSERT_TRUE((*s)->put_requests(requests).ok());
    ASSERT_TRUE((*s)->write_batch(rows).ok());
    for (size_t i = 0; i < all.size(); ++i) {
        const auto key = "k" + std::to_string(i);
        EXPECT_EQ(
            query_text(**s, "SELECT response_json FROM v_responses WHERE request_key = ?", key),
            all[i].body)
            << all[i].name;
        const auto stored = query_text(
            **s,
            "SELECT r.spliced || ' ' || length(r.response_json) FROM responses r JOIN requests "
            "q ON q.response_id = r.response_id WHERE q.request_key = ?",
            key);
        const auto length = std::to_string(all[i].body.size());
        if (all[i].spliced) {
            EXPECT_EQ(stored.substr(0, 2), "1 ") << all[i].name;
            EXPECT_LT(std::stoul(stored.substr(2)), all[i].body.size()) << all[i].name;
        } else {
            EXPECT_EQ(stored, "0 " + length) << all[i].name;
        }
    }
}

TEST(Splice, ProbeBodiesReadBackByteForByteThroughTheView) {
    auto s = Store::open(fresh_db("probes").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    struct ProbeCase {
        std::string body;
        std::string top_json;
        bool spliced;
    };
    const std::vector<ProbeCase> all = {
        // vLLM's completions: the object is what top_json rebuilds.
        {R"({"choices":[{"text":" ","logprobs":{"tokens":[" "],"top_logprobs":[{" ":-0.1604313388971044,"<think>":-1.9090326967458644,"\"q\\":-6.0,"é\n":1e-05}]}}]})",
         R"([[" ",-0.1604313388971044],["<think>",-1.9090326967458644],["\"q\\",-6.0],["é\n",1e-05]])",
         true},
        // Chat lists each alternative with its bytes: kept whole.
        {R"({"choices":[{"logprobs":{"content":[{"token":" ","logprob":-0.5,"top_logprobs":[{"token":" ","logprob":-0.5,"bytes":[32]},{"token":"<think>","logprob":-1.0,"bytes":[60]}]}]}}]})",
         R"([[" ",-0.5],["<think>",-1.0]])", false},
        // Two texts of one double: the view copies top_json's text, so the
        // object it would write is not the server's (found by fuzz_splice).
        {R"({"choices":[{"logprobs":{"top_logprobs":[{" ":-1.9090326967458644,"a":-2.5}]}}]})",
         R"([[" ",-1.9090326967458645],["a",-2.5]])", false},
        // Sorted by us, listed otherwise by the server: kept whole.
        {R"({"choices":[{"logprobs":{"top_logprobs":[{"<think>":-1.0," ":-0.5,"Jan":-2.0,"x":-3.0}]}}]})",
         R"([[" ",-0.5],["<think>",-1.0],["Jan",-2.0],["x",-3.0]])", false},
    };
    std::vector<RequestRow> requests;
    std::vector<ResponseRow> rows;
    for (size_t i = 0; i < all.size(); ++i) {
        const auto key = "p" + std::to_string(i);
        RequestRow q{key, "a", "raw", 1, 0, static_cast<int>(i), "sample", "{}", "sha"};
        q.probe = "think-open";
        q.probe_step = 0;
        requests.push_back(q);
        ResponseRow r;
        r.key = key;
        r.probe = true;
        r.ok = true;
        r.status = 200;
        r.response_json = all[i].body;
        r.reading = ProbeReadingRow{" ", all[i].top_json, 0.1, true, 0.8, true, 0.01};
        r.attempts = 1;
        r.started_at = now_iso8601();
        rows.push_back(r);
    }
    ASSERT_TRUE((*s)->put_requests(requests).ok());
    ASSERT_TRUE((*s)->write_batch(rows).ok());
    for (size_t i = 0; i < all.size(); ++i) {
        const auto key = "p" + std::to_string(i);
        EXPECT_EQ(query_text(**s,
                             "SELECT r.response_json FROM probe_requests q JOIN v_probe_responses "
                             "r ON r.response_id = q.response_id WHERE q.request_key = ?",
                             key),
                  all[i].body)
            << i;
        EXPECT_EQ(query_text(**s,
                             "SELECT r.spliced FROM probe_requests q JOIN probe_responses r ON "
                             "r.response_id = q.response_id WHERE q.request_key = ?",
                             key),
                  all[i].spliced ? "1" : "0")
            << i;
    }
}

// The scan that reads top_json as diffeval writes it gives the object the
// JSON parser gives, on top_json() of tokens of every kind and on text that
// only looks like it; both decline what cannot be spliced.
TEST(Splice, TheScanOfTopJsonReadsWhatTheParserReads) {
    const std::vector<std::string> inputs = {
        R"([[" ",-0.1604313388971044],["<think>",-1.9090326967458644],["\"q\\",-6.0],["é\n",1e-05]])",
        R"([[" ",-0.5],["x",null]])",
        R"([["\t\r",-0.5]])",
        R"([])",
        R"([[" ",-1]])",               // an integer: the parser declines
        R"([[" ",-0.5], ["x",-1.0]])", // a space
        R"([["\u00e9",-0.5]])",        // an escape plain quoting writes otherwise
        R"([["\b",-0.5]])",
        R"([["\/",-0.5]])",
        R"([["a",1e400]])", // overflows: the parser refuses it
        R"([["a",1.5e99]])",
        R"([["a",01.5]])",
        R"([["a",-.5]])",
        R"([["a",1.]])",
        R"([["a",1.5E+07]])",
        R"([["a",-0.0]])",
        R"([["a",-0.5,1]])",
        R"([["a",-0.5]],)",
        R"([["a",-0.5]] )",
        R"([["a",-0.5],])",
        R"([["a"]])",
        R"([[1,-0.5]])",
        "[[\"a\x7f\",-0.5]]",
        "[[\"\xff\",-0.5]]",
        "[[\"a\x01\",-0.5]]",
        R"([["a",-0.5])",
        R"([["a",nul]])",
        R"([["a\",-0.5]])",
        R"({"a":-0.5})",
    };
    for (const auto& in : inputs) {
        EXPECT_EQ(top_object(in), top_object_parsed(in)) << in;
    }
    EXPECT_EQ(
        top_object(inputs[0]),
        R"({" ":-0.1604313388971044,"<think>":-1.9090326967458644,"\"q\\":-6.0,"é\n":1e-05})");
    EXPECT_EQ(top_object(inputs[1]), R"({" ":-0.5,"x":null})");
    EXPECT_FALSE(top_object("[]").has_value());
}
