// Content hashes: sha256 for stable request keys and dataset verification,
// and a fast 64-bit hash for deterministic simulator decisions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace diffeval::util {

// Lower-case hex sha256 of `data`.
std::string sha256_hex(std::string_view data);

// 64-bit FNV-1a of `data`, mixed; stable across platforms and runs.
uint64_t hash64(std::string_view data, uint64_t seed = 0);

// hash64 fed piece by piece: after add()ing pieces whose concatenation is
// `data`, value() == hash64(data, seed).
class Hash64Stream {
public:
    explicit Hash64Stream(uint64_t seed = 0);
    void add(std::string_view piece);
    void add(char c) { m_h = (m_h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL; }
    uint64_t value() const;

private:
    uint64_t m_h;
};

// A uniform double in [0, 1) derived from `h`.
double unit_interval(uint64_t h);

} // namespace diffeval::util
