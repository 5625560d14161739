// python_json_dumps must reproduce Python's json.dumps bytes; expected
// strings below were printed by Python 3.11.
#include <harness/util/pyjson.hpp>

#include <gtest/gtest.h>

using diffeval::util::python_float_repr;
using diffeval::util::python_json_dumps;

TEST(PythonJsonDumps, EscapesNonAsciiAndControlsLikePython) {
    nlohmann::ordered_json j = {{"a", "caf\u00e9 \u2019 \U0001F600 \x7f \x01"}};
    EXPECT_EQ(python_json_dumps(j), R"({"a": "caf\u00e9 \u2019 \ud83d\ude00 \u007f \u0001"})");
}

TEST(PythonJsonDumps, KeepsKeyOrderAndUsesPythonSeparators) {
    nlohmann::ordered_json j;
    j["z"] = 1;
    j["a"] = nlohmann::ordered_json::array({true, nullptr, "x\"y\\\n"});
    EXPECT_EQ(python_json_dumps(j), R"({"z": 1, "a": [true, null, "x\"y\\\n"]})");
}

TEST(PythonFloatRepr, MatchesPythonRepr) {
    EXPECT_EQ(python_float_repr(0.0), "0.0");
    EXPECT_EQ(python_float_repr(1e-05), "1e-05");
    EXPECT_EQ(python_float_repr(1e16), "1e+16");
    EXPECT_EQ(python_float_repr(123.5), "123.5");
    EXPECT_EQ(python_float_repr(0.1), "0.1");
    EXPECT_EQ(python_float_repr(-0.0), "-0.0");
    EXPECT_EQ(python_float_repr(100.0), "100.0");
    EXPECT_EQ(python_float_repr(0.0001), "0.0001");
}

TEST(AppendJsonString, ScriptStyleKeepsMarkupAndLineSeparatorsOutOfTheHtml) {
    std::string out;
    diffeval::util::append_json_string(
        out, "</script><img src=x onerror=alert(1)> & \"q\" \u2028 caf\u00e9",
        diffeval::util::JsonStringStyle::script);
    EXPECT_EQ(out, R"("\u003c/script\u003e\u003cimg src=x onerror=alert(1)\u003e \u0026 \"q\" )"
                   R"(\u2028 caf\u00e9")");
    EXPECT_EQ(out.find_first_of("<>&"), std::string::npos);
}

TEST(AppendJsonString, PythonStyleLeavesMarkupAndReplacesBrokenUtf8) {
    std::string out;
    diffeval::util::append_json_string(out, "<b>&\xff\xc3",
                                       diffeval::util::JsonStringStyle::python);
    EXPECT_EQ(out, R"("<b>&\ufffd\ufffd")");
}

TEST(AppendJsonString, MatchesAReferenceEncoderOnRandomTexts) {
    // Pieces that exercise every branch: plain runs longer than a word,
    // each escaped ASCII byte, and 2-, 3- and 4-byte UTF-8.
    const std::vector<std::string> pieces = {
        "abcdefghij", "0123456789 ", "\"",      "\\",         "\n", "\t",
        "\x01",       "\x7f",        "<",       ">",          "&",  "/",
        "caf\u00e9",  "\u2028",      "\u2019s", "\U0001F600", "x",  " "};
    std::uint32_t seed = 12345;
    auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
    for (int n = 0; n < 3000; ++n) {
        std::string text;
        const auto count = next() % 12;
        for (std::uint32_t k = 0; k < count; ++k) {
            text += pieces[(next() >> 8) % pieces.size()];
        }
        // nlohmann's ASCII-only dump escapes like Python for valid UTF-8.
        std::string reference = nlohmann::json(text).dump(-1, ' ', true);
        std::string script_reference;
        for (char c : reference) {
            script_reference += c == '<'   ? std::string("\\u003c")
                                : c == '>' ? std::string("\\u003e")
                                : c == '&' ? std::string("\\u0026")
                                           : std::string(1, c);
        }
        std::string python, script;
        diffeval::util::append_json_string(python, text, diffeval::util::JsonStringStyle::python);
        diffeval::util::append_json_string(script, text, diffeval::util::JsonStringStyle::script);
        ASSERT_EQ(python, reference) << "text: " << reference;
        ASSERT_EQ(script, script_reference) << "text: " << reference;
    }
}
