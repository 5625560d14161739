// nlohmann's JSON text written directly (harness/util/json_text.cpp): strings
// and doubles byte for byte as nlohmann::json's dump() writes them.
#include <harness/util/json_text.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace diffeval::util {
namespace {

using nlohmann::json;

std::string dumped(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

TEST(DumpText, StringsAreEscapedAsNlohmannEscapesThem) {
    // Pieces that need an escape, pieces that do not, and invalid UTF-8, at
    // every offset of the eight-byte blocks the writer skips through.
    const std::vector<std::string> pieces = {"a",
                                             "Question: ",
                                             "\"",
                                             "\\",
                                             "\n",
                                             "\t",
                                             "\b",
                                             "\f",
                                             "\r",
                                             std::string(1, '\0'),
                                             "\x01",
                                             "\x1f",
                                             " ",
                                             "\x7f",
                                             "/",
                                             "\xc3\xa9",
                                             "\xe2\x80\x99",
                                             "\xf0\x9f\x98\x80",
                                             "\xff",
                                             "\xc3",
                                             "\xe2\x80",
                                             "\x80",
                                             "0123456789abcdef"};
    std::mt19937 rng(7);
    for (int i = 0; i < 20000; ++i) {
        std::string s;
        const int n = static_cast<int>(rng() % 12);
        for (int k = 0; k < n; ++k) {
            s += pieces[rng() % pieces.size()];
        }
        std::string out;
        append_dump_string(out, s);
        ASSERT_EQ(out, dumped(json(s))) << s;
    }
}

TEST(DumpText, DoublesAreWrittenAsNlohmannWritesThem) {
    std::vector<double> values = {0.0,
                                  -0.0,
                                  1.0,
                                  -3.0,
                                  0.95,
                                  1e-05,
                                  0.1 + 0.2,
                                  100.0,
                                  1e15,
                                  1e16,
                                  1e17,
                                  1e300,
                                  5e-324,
                                  -9999.0,
                                  0.0001,
                                  1.5e-7,
                                  123.456,
                                  2.5e-8,
                                  1e22,
                                  1e21,
                                  -1e-300,
                                  std::numeric_limits<double>::infinity(),
                                  std::numeric_limits<double>::quiet_NaN()};
    std::mt19937_64 rng(11);
    for (int i = 0; i < 20000; ++i) {
        uint64_t bits = rng();
        double x = 0;
        std::memcpy(&x, &bits, sizeof x);
        values.push_back(x);
        values.push_back(std::log(static_cast<double>(rng() % 1000 + 1) / 1000.0));
    }
    for (double x : values) {
        std::string out;
        append_dump_double(out, x);
        ASSERT_EQ(out, dumped(json(x))) << x;
    }
}

TEST(DumpText, IntegersAreDecimal) {
    for (int64_t n : {int64_t{0}, int64_t{-1}, int64_t{42}, std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max()}) {
        std::string out;
        append_dump_int(out, n);
        EXPECT_EQ(out, dumped(json(n)));
    }
    std::string out;
    append_dump_uint(out, std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(out, dumped(json(std::numeric_limits<uint64_t>::max())));
}

} // namespace
} // namespace diffeval::util
