// CPython's random.Random, exactly, for the calls reference harnesses make.
//
// lm-evaluation-harness draws each question's few-shot examples with
// `random.Random(1234).sample(train_docs, n)`; reproducing its request bytes
// means reproducing that stream: the Mersenne Twister (MT19937) seeded from
// an integer the way CPython seeds it, `getrandbits`, the rejection-sampling
// `_randbelow`, and both branches of `sample`. std::mt19937 is the same
// generator but is seeded differently, so it cannot stand in.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace diffeval::util {

class PyRandom {
public:
    // Seeded as `random.Random(seed)`: init_by_array over the 32-bit chunks
    // of |seed|, least significant first.
    explicit PyRandom(int64_t seed);

    // `getrandbits(k)` for 1 <= k <= 32.
    uint32_t getrandbits(int k);
    // `_randbelow(n)` for 1 <= n < 2^31: getrandbits(n.bit_length()) until
    // the draw is below `n`.
    uint32_t randbelow(uint32_t n);
    // The indices `random.sample(range(n), k)` returns, in order (`k <= n`).
    std::vector<uint32_t> sample(uint32_t n, uint32_t k);

private:
    uint32_t next_word();
    void init_by_array(const std::vector<uint32_t>& key);

    std::array<uint32_t, 624> m_state{};
    int m_index = 625;
};

} // namespace diffeval::util
