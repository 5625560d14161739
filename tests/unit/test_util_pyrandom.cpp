// PyRandom must return what CPython's random.Random returns: the expected
// values are a table CPython printed (tests/data/cpython_random_sample.py).
#include <harness/util/pyrandom.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

using diffeval::util::PyRandom;

namespace {

std::vector<uint32_t> parse_list(const std::string& text) {
    std::vector<uint32_t> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        out.push_back(static_cast<uint32_t>(std::stoul(item)));
    }
    return out;
}

} // namespace

TEST(PyRandomSample, MatchesCpythonTable) {
    std::ifstream in(std::string(DIFFEVAL_SOURCE_DIR) + "/tests/data/cpython_random_sample.txt");
    ASSERT_TRUE(in) << "tests/data/cpython_random_sample.txt missing";
    std::string line;
    int rows = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        std::stringstream ss(line);
        std::string seed_text, bar, draws_text;
        uint32_t n = 0, k = 0;
        ss >> seed_text >> n >> k >> bar >> draws_text;
        // Seeds up to 2**63 - 1 fit in int64.
        PyRandom rng(std::stoll(seed_text));
        std::stringstream draws(draws_text);
        std::string one;
        int call = 0;
        while (std::getline(draws, one, ';')) {
            EXPECT_EQ(rng.sample(n, k), parse_list(one))
                << "seed " << seed_text << ", n " << n << ", k " << k << ", call " << call;
            ++call;
        }
        EXPECT_EQ(call, 3) << line;
        ++rows;
    }
    EXPECT_EQ(rows, 99);
}

TEST(PyRandomSample, LmEvalGsm8kFirstQuestionShots) {
    // lm-eval: random.Random(1234).sample(train_docs, 5), 7473 train items.
    PyRandom rng(1234);
    EXPECT_EQ(rng.sample(7473, 5), (std::vector<uint32_t>{6374, 3610, 957, 61, 742}));
}
