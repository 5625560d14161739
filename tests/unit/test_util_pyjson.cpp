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
