// The probe's probability from stored top log-probabilities: both response
// shapes, the marker listed or not, and the whitespace-then-marker chain.
#include <harness/probe/reading.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

using namespace diffeval::probe;

namespace {

// A vLLM legacy completions body whose first position chose `chosen` among
// `top` (a JSON object of token: logprob).
std::string legacy_body(const std::string& chosen, double chosen_lp, const std::string& top) {
    return R"({"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":")" + chosen +
           R"(","logprobs":{"text_offset":[0],"token_logprobs":[)" + std::to_string(chosen_lp) +
           R"(],"tokens":[")" + chosen + R"("],"top_logprobs":[)" + top +
           R"(]},"finish_reason":"length"}]})";
}

// A llama-server /v1/completions (or chat) body: content[0] with a
// top_logprobs list.
std::string content_body(const std::string& chosen, double chosen_lp, const std::string& top) {
    return R"({"choices":[{"text":"x","index":0,"logprobs":{"content":[{"id":220,"token":")" +
           chosen + R"(","bytes":[32],"logprob":)" + std::to_string(chosen_lp) +
           R"(,"top_logprobs":)" + top + R"(}]},"finish_reason":"length"}]})";
}

Reading read_body(const std::string& body) {
    auto p = first_position(body);
    EXPECT_TRUE(p) << (p ? "" : p.error().message);
    return p ? read(*p, "<think>", " ") : Reading{};
}

} // namespace

TEST(ProbeFirstPosition, ReadsVllmLegacyDictPerPosition) {
    auto p = first_position(
        legacy_body(" <think>", std::log(0.7), R"({" <think>": -0.3567, " Jan": -1.2040})"));
    ASSERT_TRUE(p);
    EXPECT_EQ(p->chosen, " <think>");
    ASSERT_EQ(p->top.size(), 2u);
    EXPECT_EQ(p->top[0].token, " <think>");
    EXPECT_EQ(p->top[1].token, " Jan");
}

TEST(ProbeFirstPosition, ReadsLlamaServerContentList) {
    auto p = first_position(content_body(
        " ", std::log(0.6),
        R"([{"id":220,"token":" ","logprob":-0.5108},{"id":9,"token":" In","logprob":-1.6094}])"));
    ASSERT_TRUE(p);
    EXPECT_EQ(p->chosen, " ");
    ASSERT_EQ(p->top.size(), 2u);
    EXPECT_NEAR(std::exp(p->top[1].logprob), 0.2, 1e-4);
}

TEST(ProbeFirstPosition, ReadsLlamaServerNativeCompletionProbabilities) {
    auto p = first_position(
        R"({"content":" ","completion_probabilities":[{"token":" ","logprob":-0.1,)"
        R"("top_logprobs":[{"token":" ","logprob":-0.1},{"token":" The","logprob":-2.5}]}]})");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->top.size(), 2u);
}

TEST(ProbeFirstPosition, NoLogprobsIsAnErrorNamingTheCause) {
    auto p = first_position(R"({"choices":[{"text":" Jan","logprobs":null}]})");
    ASSERT_FALSE(p);
    EXPECT_NE(p.error().message.find("no log-probabilities"), std::string::npos);
    // llama-server withholds them for part of a UTF-8 character: the cause
    // is not always an engine that ignores the options (an engine audit).
    const auto withheld = first_position(R"({"choices":[{"text":"\ufffd","logprobs":null}]})");
    ASSERT_FALSE(withheld);
    EXPECT_NE(withheld.error().message.find("or withheld them for that token"), std::string::npos)
        << withheld.error().message;
    EXPECT_FALSE(first_position("not json"));
    EXPECT_FALSE(first_position(R"({"choices":[{"logprobs":{"content":[]}}]})"));
}

TEST(ProbeFirstPosition, NullAndNonNumericLogprobsAreNotListed) {
    auto r = read_body(legacy_body(" <think>", -0.1, R"({" <think>": null, " Jan": "x"})"));
    EXPECT_TRUE(r.marker_listed);
    EXPECT_NEAR(r.p_marker, std::exp(-0.1), 1e-9); // the chosen token's own logprob is kept
    EXPECT_EQ(r.top.size(), 1u);                   // " Jan" has no number: not listed
    EXPECT_NEAR(r.floor, std::exp(-0.1), 1e-9);
}

// A marker whose only log-probability is not a number was not measured: it
// read as a probability of 0, a logit of -20.7 that moved a comparison's
// shift by logits. It is left unlisted, so P(open) is bounded by what was.
TEST(ProbeFirstPosition, AMarkerWithoutANumberIsNotMeasuredAsZero) {
    const std::string body =
        R"({"choices":[{"index":0,"text":" <think>","logprobs":{"tokens":[" <think>"],)"
        R"("token_logprobs":[null],"top_logprobs":[{" <think>":"-0.1"," Jan":-2.0}]}}]})";
    for (const auto& p : {first_position(body), first_position_nlohmann(body)}) {
        ASSERT_TRUE(p);
        auto r = read(*p, "<think>", " ");
        EXPECT_FALSE(r.marker_listed);
        EXPECT_NEAR(r.floor, std::exp(-2.0), 1e-9);
        auto e = combine(r, std::nullopt);
        EXPECT_TRUE(e.bounded);
        EXPECT_NEAR(e.p_open, std::exp(-2.0), 1e-9);
    }
    // Nothing with a number: nothing listed, which is no reading at all.
    EXPECT_FALSE(first_position(
        R"({"choices":[{"logprobs":{"content":[{"token":" ","logprob":"x","top_logprobs":[]}]}}]})"));
}

// A log-probability above 0 is no probability: " <think>" at +5 read as
// P(open) = 1, measured. Above rounding's reach it is left unlisted like a
// value that is not a number; a float-rounded 1.2e-7 still reads as 1. A
// marker listed so has no known probability: the reading is unusable, not a
// bound (probe audit D3: it was stored as bounded by the smallest listed).
TEST(ProbeFirstPosition, ALogprobAboveZeroIsNotListed) {
    auto r =
        read_body(legacy_body(" Jan", -6.0, R"({" <think>": 5.0, " Jan": -6.0, " In": 1.2e-7})"));
    EXPECT_FALSE(r.marker_listed);
    ASSERT_EQ(r.top.size(), 2u);
    EXPECT_EQ(r.top[0].token, " In");
    EXPECT_NEAR(r.floor, std::exp(-6.0), 1e-9);
    EXPECT_EQ(r.unusable, "the response lists ' <think>' without a usable log-probability, so "
                          "P(open) is unknown");
}

// Probe audit D1, D3, D4: what no distribution is, or neither reads nor
// bounds P(open), is refused or left unusable, never stored as a reading.
TEST(ProbeFirstPosition, WhatIsNoDistributionIsRefused) {
    // Listed probabilities adding up to 3.46.
    auto over = first_position(
        content_body(" <think>", -0.05,
                     R"([{"token":" <think>","logprob":-0.05},{"token":"<think>","logprob":-0.05},)"
                     R"({"token":" ","logprob":-0.2},{"token":" N","logprob":-0.3}])"));
    ASSERT_FALSE(over);
    EXPECT_NE(over.error().message.find("add up to a probability of 3.462, above 1"),
              std::string::npos)
        << over.error().message;
    // One token listed twice with contradicting numbers: more than 1 in all.
    auto dup = first_position(
        content_body(" ", -3.0,
                     R"([{"token":" ","logprob":-3.0},{"token":" ","logprob":-0.01},)"
                     R"({"token":" N","logprob":-0.5}])"));
    EXPECT_FALSE(dup);
    // Two token ids that decode alike, within one distribution: they add up.
    auto alike = first_position(content_body(
        " ", std::log(0.5),
        R"([{"token":" ","logprob":-0.6931471805599453},{"token":"<think>","logprob":-2.302585092994046},)"
        R"({"token":"<think>","logprob":-2.302585092994046}])"));
    ASSERT_TRUE(alike) << alike.error().message;
    auto r = read(*alike, "<think>", " ");
    EXPECT_NEAR(r.p_marker, 0.2, 1e-9);
    EXPECT_NEAR(r.p_whitespace, 0.5, 1e-9) << "the chosen token is its listing, counted once";
}

TEST(ProbeRead, AMarkerThatMayArriveUnseenIsNeitherReadNorBounded) {
    // The marker's first piece listed at 0.905: the floor is no bound.
    auto split = read_body(
        content_body("<", -0.1, R"([{"token":"<","logprob":-0.1},{"token":" N","logprob":-3.0}])"));
    EXPECT_FALSE(split.marker_listed);
    EXPECT_EQ(split.unusable, "the response lists '<', the start of the marker '<think>', which "
                              "the marker may follow: P(open) is neither read nor bounded");
    // A marker led by Unicode whitespace, or a tokenizer's space sign, is
    // the marker.
    for (const std::string lead : {"\u00a0", "\u3000", "\u2581", "\u0120"}) {
        auto r = read_body(
            content_body(" N", -3.0,
                         R"([{"token":")" + lead +
                             R"(<think>","logprob":-0.1},{"token":" N","logprob":-3.0}])"));
        EXPECT_TRUE(r.marker_listed) << lead;
        EXPECT_NEAR(r.p_marker, std::exp(-0.1), 1e-9) << lead;
        EXPECT_TRUE(r.unusable.empty()) << lead << ": " << r.unusable;
    }
    // The chain whitespace listed without a number.
    auto ws = read_body(content_body(
        " N", -0.5, R"([{"token":" N","logprob":-0.5},{"token":" ","logprob":null}])"));
    EXPECT_NE(ws.unusable.find("lists ' ' without a usable log-probability"), std::string::npos)
        << ws.unusable;
    // The marker listed once without a number and once with one: read.
    auto twice = read_body(
        content_body(" N", -0.5,
                     R"([{"token":" <think>","logprob":"x"},{"token":" N","logprob":-0.5},)"
                     R"({"token":" <think>","logprob":-2.0}])"));
    EXPECT_TRUE(twice.unusable.empty()) << twice.unusable;
    EXPECT_NEAR(twice.p_marker, std::exp(-2.0), 1e-9);
}

TEST(ProbeRead, OneTokenMarkerWithLeadingWhitespaceNeedsOneRequest) {
    auto r = read_body(
        legacy_body(" <think>", std::log(0.7), R"({" <think>": -0.35667494, " Jan": -1.2039728})"));
    auto e = combine(r, std::nullopt);
    EXPECT_FALSE(e.bounded);
    EXPECT_NEAR(e.p_open, 0.7, 1e-6);
    EXPECT_NEAR(e.p_direct, 0.7, 1e-6);
}

TEST(ProbeRead, MarkerAbsentIsBoundedByTheSmallestListedProbability) {
    auto r = read_body(
        legacy_body(" Jan", std::log(0.8), R"({" Jan": -0.22314355, " In": -2.3025851})"));
    EXPECT_FALSE(r.marker_listed);
    auto e = combine(r, std::nullopt);
    EXPECT_TRUE(e.bounded);
    EXPECT_NEAR(e.p_open, 0.1, 1e-6);
}

TEST(ProbeRead, WhitespaceThenMarkerChainMultipliesTheTwoFactors) {
    // llama-server with a byte-level BPE model: " " first, then <think>.
    auto first = read_body(content_body(
        " ", std::log(0.6),
        R"([{"token":" ","logprob":-0.51082562},{"token":" Jan","logprob":-1.2039728}])"));
    auto second = read_body(content_body(
        "<think>", std::log(0.9),
        R"([{"token":"<think>","logprob":-0.10536052},{"token":"Jan","logprob":-2.3025851}])"));
    EXPECT_TRUE(first.whitespace_listed);
    EXPECT_FALSE(first.marker_listed);
    auto e = combine(first, second);
    EXPECT_FALSE(e.bounded);
    EXPECT_NEAR(e.p_whitespace, 0.6, 1e-6);
    EXPECT_NEAR(e.p_after_whitespace, 0.9, 1e-6);
    EXPECT_NEAR(e.p_open, 0.54, 1e-6);
}

TEST(ProbeRead, ChainWithoutTheWhitespaceListedIsBounded) {
    auto first = read_body(
        content_body(" Jan", std::log(0.9),
                     R"([{"token":" Jan","logprob":-0.10536052},{"token":" In","logprob":-3.0}])"));
    auto second =
        read_body(content_body("<think>", -0.1, R"([{"token":"<think>","logprob":-0.1}])"));
    auto e = combine(first, second);
    EXPECT_TRUE(e.bounded);
    EXPECT_NEAR(e.p_open, std::exp(-3.0), 1e-9);
}

TEST(ProbeRead, ChainWithTheMarkerMissingAfterTheWhitespaceIsBounded) {
    auto first = read_body(content_body(" ", -0.1, R"([{"token":" ","logprob":-0.1}])"));
    auto second = read_body(content_body("Jan", -0.05, R"([{"token":"Jan","logprob":-0.05}])"));
    EXPECT_TRUE(combine(first, second).bounded);
}

// The bound through the whitespace: " " at 0.99 and a first floor of 1e-4,
// then no marker after it among alternatives down to 0.01. P(open) may be
// as large as 1e-4 + 0.99 x 0.01, not 1e-4.
TEST(ProbeRead, AChainBoundCountsTheMarkerUnlistedAfterTheWhitespace) {
    auto first = read_body(content_body(
        " ", std::log(0.99),
        R"([{"token":" ","logprob":-0.01005034},{"token":" Jan","logprob":-9.21034037}])"));
    auto second = read_body(content_body(
        "Jan", std::log(0.9),
        R"([{"token":"Jan","logprob":-0.10536052},{"token":"In","logprob":-4.60517019}])"));
    auto e = combine(first, second);
    EXPECT_TRUE(e.bounded);
    EXPECT_NEAR(e.p_open, 1e-4 + 0.99 * 0.01, 1e-8);
}

TEST(ProbeRead, BothPathsAddUp) {
    auto first = read_body(legacy_body(
        " ", std::log(0.5), R"({" ": -0.69314718, " <think>": -1.6094379, " Jan": -1.6094379})"));
    auto second = read_body(legacy_body("<think>", std::log(0.5), R"({"<think>": -0.69314718})"));
    auto e = combine(first, second);
    EXPECT_FALSE(e.bounded);
    EXPECT_NEAR(e.p_open, 0.2 + 0.5 * 0.5, 1e-6);
}

TEST(ProbeLogit, StaysFiniteAtTheEnds) {
    EXPECT_NEAR(logit(0.5), 0.0, 1e-12);
    EXPECT_TRUE(std::isfinite(logit(0.0)));
    EXPECT_TRUE(std::isfinite(logit(1.0)));
    EXPECT_NEAR(logit(0.9), std::log(9.0), 1e-12);
}

TEST(ProbeTopJson, KeepsTokensAndLogprobs) {
    EXPECT_EQ(top_json({{" ", -0.5}, {"<think>", -1.0}}), R"([[" ",-0.5],["<think>",-1.0]])");
    EXPECT_EQ(top_json({}), "[]");
}

// The text is what nlohmann's dump of the same array was (stored rows and
// their splicing were defined by it): awkward tokens, and logprobs that are
// not finite, tiny, whole or negative zero.
TEST(ProbeTopJson, IsNlohmannsDumpOfTheArray) {
    const std::vector<Alternative> top = {
        {"\"q\"\\", -1e-300}, {std::string("\x01\x1f\x7f\n\t", 5), -0.0},
        {"é 😀", -12345.678},  {"\xff\xfe bad", -INFINITY},
        {"", std::nan("")},   {"x", -3.0},
        {"y", -0.1 - 0.2}};
    nlohmann::json want = nlohmann::json::array();
    for (const auto& a : top) {
        want.push_back(nlohmann::json::array(
            {a.token, std::isfinite(a.logprob) ? nlohmann::json(a.logprob) : nlohmann::json()}));
    }
    EXPECT_EQ(top_json(top), want.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// simdjson reads what nlohmann reads: every shape, and the awkward bodies a
// server may send (duplicate keys, keys out of order, wrong types, numbers
// out of range, deep nesting, not JSON at all). A body 100,000 levels deep
// is refused, not copied level by level until the stack runs out.
TEST(ProbeFirstPosition, BothParsersReadTheSame) {
    const std::vector<std::string> bodies = {
        legacy_body(" <think>", -0.25, R"({" <think>": -0.3567, " Jan": -1.2040, "A": -3})"),
        legacy_body(" <think>", -0.25, R"({"b": -1, "a": -2, "b": -0.5})"),
        legacy_body("", -0.25, R"({})"),
        legacy_body("x", -0.25, R"(null)"),
        content_body(" ", -0.1,
                     R"([{"token":" ","logprob":-0.1},{"token":"<think>","logprob":-2}])"),
        content_body(" ", -0.1, R"([{"token":" "},{"token":7,"logprob":-2},3,{"logprob":-1}])"),
        content_body("", -0.1, R"([{"token":"a","logprob":"-1"},{"token":"a","logprob":-4}])"),
        content_body("z", -0.1, R"([{"token":"z","logprob":null}])"),
        R"({"completion_probabilities":[{"token":" ","logprob":-0.2,"top_logprobs":[{"token":"<think>","logprob":-1.5}]}]})",
        R"({"completion_probabilities":[]})",
        R"({"completion_probabilities":{"a":1}})",
        R"({"choices":[{"logprobs":null}]})",
        R"({"choices":[{"logprobs":{"content":[],"tokens":["t"],"token_logprobs":[-1]}}]})",
        R"({"choices":[{"text":"x"}],"completion_probabilities":[{"token":"q","logprob":-1}]})",
        R"({"choices":[],"choices":[{"logprobs":{"tokens":["d"],"token_logprobs":[-2]}}]})",
        R"({"choices":[{"logprobs":{"tokens":["t"],"token_logprobs":[1e400]}}]})",
        R"({"choices":[{"logprobs":{"tokens":["t"],"token_logprobs":[-1e-400, 5]}}]})",
        R"({"choices":[{"logprobs":{"tokens":["\u00e9\ud83d\ude00"],"token_logprobs":[-0.5]}}]})",
        std::string(70, '[') + std::string(70, ']'),
        R"({"completion_probabilities":[)" + std::string(100'000, '[') + std::string(100'000, ']') +
            "]}",
        R"([1, 2])",
        R"("text")",
        "not json",
        "",
        "{\"choices\":[{\"logprobs\":{\"tokens\":[\"\xff\"],\"token_logprobs\":[-1]}}]}",
    };
    for (const auto& body : bodies) {
        auto fast = first_position(body);
        auto dom = first_position_nlohmann(body);
        ASSERT_EQ(bool(fast), bool(dom)) << body;
        if (!fast) {
            EXPECT_EQ(fast.error().message, dom.error().message) << body;
            continue;
        }
        EXPECT_EQ(fast->chosen, dom->chosen) << body;
        ASSERT_EQ(fast->top.size(), dom->top.size()) << body;
        for (size_t i = 0; i < fast->top.size(); ++i) {
            EXPECT_EQ(fast->top[i].token, dom->top[i].token) << body;
            EXPECT_EQ(std::signbit(fast->top[i].logprob), std::signbit(dom->top[i].logprob));
            EXPECT_TRUE(fast->top[i].logprob == dom->top[i].logprob ||
                        (std::isnan(fast->top[i].logprob) && std::isnan(dom->top[i].logprob)))
                << body << ": " << fast->top[i].logprob << " vs " << dom->top[i].logprob;
        }
    }
}

// A server listing far more alternatives than the probe asked for: keeping
// the first 1,000 kept them in list order, not the most likely (probe audit
// D3: a marker listed last was bounded by the floor). Both parsers refuse it,
// reading no further than the cap.
TEST(ProbeFirstPosition, AHugeListOfAlternativesIsRefused) {
    std::string top = "[";
    for (int i = 0; i < 20'000; ++i) {
        top += (i ? "," : "") + std::string(R"({"token":"t)") + std::to_string(i) +
               R"(","logprob":-20.0})";
    }
    top += R"(,{"token":"<think>","logprob":-0.1}])";
    const auto body = content_body("x", -3.0, top);
    for (auto parse : {first_position, first_position_nlohmann}) {
        auto p = parse(body);
        ASSERT_FALSE(p);
        EXPECT_EQ(p.error().message, "the response lists more than 1000 alternatives at the first "
                                     "position (the probe asks for 20)");
    }
}

// Probe audit D8: a body with NaN (Python's json.dumps writes it) or a
// number past a double's range was "not a JSON object".
TEST(ProbeFirstPosition, ABodyWithNanIsNamedNotValidJson) {
    for (const std::string bad : {"NaN", "Infinity", "1e999"}) {
        auto p =
            first_position(content_body(" ", -0.1, R"([{"token":" ","logprob":)" + bad + R"(}])"));
        ASSERT_FALSE(p) << bad;
        EXPECT_NE(p.error().message.find("the probe response is not valid JSON (a NaN, an "
                                         "Infinity or a number past a double's range"),
                  std::string::npos)
            << bad << ": " << p.error().message;
    }
}
