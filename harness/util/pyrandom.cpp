// CPython's random.Random: MT19937 (Matsumoto and Nishimura's reference
// algorithm, as in CPython's Modules/_randommodule.c) plus the pure-Python
// parts of Lib/random.py that `sample` uses. The golden table in
// tests/data/cpython_random_sample.txt was printed by CPython.
#include <harness/util/pyrandom.hpp>

#include <bit>
#include <cmath>
#include <unordered_set>

namespace diffeval::util {

namespace {

constexpr int k_n = 624;
constexpr int k_m = 397;
constexpr uint32_t k_matrix_a = 0x9908b0dfU;
constexpr uint32_t k_upper_mask = 0x80000000U;
constexpr uint32_t k_lower_mask = 0x7fffffffU;

} // namespace

PyRandom::PyRandom(int64_t seed) {
    // |seed| without overflow for INT64_MIN.
    uint64_t magnitude =
        seed < 0 ? uint64_t{0} - static_cast<uint64_t>(seed) : static_cast<uint64_t>(seed);
    std::vector<uint32_t> key;
    while (magnitude != 0) {
        key.push_back(static_cast<uint32_t>(magnitude & 0xffffffffU));
        magnitude >>= 32;
    }
    if (key.empty()) {
        key.push_back(0); // CPython seeds 0 with the one-word key [0]
    }
    init_by_array(key);
}

void PyRandom::init_by_array(const std::vector<uint32_t>& key) {
    m_state[0] = 19650218U;
    for (int i = 1; i < k_n; ++i) {
        m_state[i] =
            1812433253U * (m_state[i - 1] ^ (m_state[i - 1] >> 30)) + static_cast<uint32_t>(i);
    }
    size_t i = 1;
    size_t j = 0;
    const size_t key_len = key.size();
    for (size_t k = std::max<size_t>(k_n, key_len); k > 0; --k) {
        m_state[i] = (m_state[i] ^ ((m_state[i - 1] ^ (m_state[i - 1] >> 30)) * 1664525U)) +
                     key[j] + static_cast<uint32_t>(j);
        ++i;
        ++j;
        if (i >= k_n) {
            m_state[0] = m_state[k_n - 1];
            i = 1;
        }
        if (j >= key_len) {
            j = 0;
        }
    }
    for (size_t k = k_n - 1; k > 0; --k) {
        m_state[i] = (m_state[i] ^ ((m_state[i - 1] ^ (m_state[i - 1] >> 30)) * 1566083941U)) -
                     static_cast<uint32_t>(i);
        ++i;
        if (i >= k_n) {
            m_state[0] = m_state[k_n - 1];
            i = 1;
        }
    }
    m_state[0] = 0x80000000U; // the most significant bit is 1: a non-zero state
    m_index = k_n;
}

uint32_t PyRandom::next_word() {
    if (m_index >= k_n) {
        int kk = 0;
        for (; kk < k_n - k_m; ++kk) {
            uint32_t y = (m_state[kk] & k_upper_mask) | (m_state[kk + 1] & k_lower_mask);
            m_state[kk] = m_state[kk + k_m] ^ (y >> 1) ^ ((y & 1U) ? k_matrix_a : 0U);
        }
        for (; kk < k_n - 1; ++kk) {
            uint32_t y = (m_state[kk] & k_upper_mask) | (m_state[kk + 1] & k_lower_mask);
            m_state[kk] = m_state[kk + (k_m - k_n)] ^ (y >> 1) ^ ((y & 1U) ? k_matrix_a : 0U);
        }
        uint32_t y = (m_state[k_n - 1] & k_upper_mask) | (m_state[0] & k_lower_mask);
        m_state[k_n - 1] = m_state[k_m - 1] ^ (y >> 1) ^ ((y & 1U) ? k_matrix_a : 0U);
        m_index = 0;
    }
    uint32_t y = m_state[static_cast<size_t>(m_index++)];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

uint32_t PyRandom::getrandbits(int k) {
    return next_word() >> (32 - k);
}

uint32_t PyRandom::randbelow(uint32_t n) {
    const int k = std::bit_width(n);
    uint32_t r = getrandbits(k);
    while (r >= n) {
        r = getrandbits(k);
    }
    return r;
}

std::vector<uint32_t> PyRandom::sample(uint32_t n, uint32_t k) {
    std::vector<uint32_t> out;
    out.reserve(k);
    // random.py compares the population's length with the size of the set
    // the other branch would build; the float expression is random.py's.
    uint64_t setsize = 21;
    if (k > 5) {
        setsize += static_cast<uint64_t>(
            std::pow(4.0, std::ceil(std::log(static_cast<double>(k) * 3) / std::log(4.0))));
    }
    if (n <= setsize) {
        // Pool branch: a partial Fisher-Yates shuffle of a copy.
        std::vector<uint32_t> pool(n);
        for (uint32_t i = 0; i < n; ++i) {
            pool[i] = i;
        }
        for (uint32_t i = 0; i < k; ++i) {
            uint32_t j = randbelow(n - i);
            out.push_back(pool[j]);
            pool[j] = pool[n - i - 1];
        }
    } else {
        // Set branch: draw indices, redrawing any already taken.
        std::unordered_set<uint32_t> selected;
        for (uint32_t i = 0; i < k; ++i) {
            uint32_t j = randbelow(n);
            while (selected.count(j)) {
                j = randbelow(n);
            }
            selected.insert(j);
            out.push_back(j);
        }
    }
    return out;
}

} // namespace diffeval::util
