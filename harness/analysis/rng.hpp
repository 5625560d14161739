// A small pseudo-random generator whose output is the same on every platform,
// standard library and compiler, so a bootstrap interval printed in a report
// can be reproduced bit for bit from its seed.
//
// The standard engines are portable but the standard distributions
// (std::uniform_int_distribution and friends) are implementation-defined, so
// the same seed gives different intervals under libstdc++ and libc++. Here
// everything is spelled out:
//   - the 64-bit seed is expanded into 256 bits of state by splitmix64
//     (Steele, Lea and Flood 2014), which also guards against an all-zero state;
//   - the generator is xoshiro256** 1.0 (Blackman and Vigna 2018);
//   - a bounded integer takes the upper 32 bits of one output and maps them to
//     [0, bound) with Lemire's multiply-and-reject method (Lemire 2019), which is
//     exactly uniform and needs no division on the common path.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace diffeval::analysis {

class Rng {
public:
    // Seed the state from `seed`; equal seeds give equal sequences everywhere.
    explicit Rng(std::uint64_t seed) {
        std::uint64_t x = seed;
        for (auto& word : m_state) {
            word = splitmix64(x);
        }
    }

    // The next 64 uniformly distributed bits.
    std::uint64_t next() {
        const std::uint64_t result = std::rotl(m_state[1] * 5, 7) * 9;
        const std::uint64_t t = m_state[1] << 17;
        m_state[2] ^= m_state[0];
        m_state[3] ^= m_state[1];
        m_state[1] ^= m_state[2];
        m_state[0] ^= m_state[3];
        m_state[2] ^= t;
        m_state[3] = std::rotl(m_state[3], 45);
        return result;
    }

    // A uniform integer in [0, `bound`); `bound` must be at least 1.
    std::uint32_t below(std::uint32_t bound) {
        std::uint64_t product = next32() * std::uint64_t{bound};
        auto low = static_cast<std::uint32_t>(product);
        if (low < bound) {
            // 2^32 mod bound: the count of low products that would over-represent
            // some results; rejecting them makes every result equally likely.
            const auto threshold = static_cast<std::uint32_t>((std::uint64_t{1} << 32) % bound);
            while (low < threshold) {
                product = next32() * std::uint64_t{bound};
                low = static_cast<std::uint32_t>(product);
            }
        }
        return static_cast<std::uint32_t>(product >> 32);
    }

    // A uniform double in [0, 1) with 53 random bits.
    double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
    std::uint64_t next32() { return next() >> 32; }

    static std::uint64_t splitmix64(std::uint64_t& x) {
        std::uint64_t z = (x += 0x9e3779b97f4a7c15);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
        z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
        return z ^ (z >> 31);
    }

    std::array<std::uint64_t, 4> m_state{};
};

} // namespace diffeval::analysis
