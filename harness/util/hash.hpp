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

// A uniform double in [0, 1) derived from `h`.
double unit_interval(uint64_t h);

} // namespace diffeval::util
