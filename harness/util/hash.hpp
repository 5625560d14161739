// Content hashes: sha256 for stable request keys and dataset verification,
// and a fast 64-bit hash for deterministic simulator decisions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace diffeval::util {

// Lower-case hex sha256 of `data`.
std::string sha256_hex(std::string_view data);

// sha256_hex for many texts that start alike: the state after `prefix` is
// kept, so a text beginning with it is hashed from there (SHA-256 reads its
// input in order, so the digest is the same). A plan's bodies share their
// few-shot block: 2.2 of their 2.5 KB are hashed once instead of per body.
class Sha256Prefix {
public:
    explicit Sha256Prefix(std::string_view prefix);
    ~Sha256Prefix();
    Sha256Prefix(Sha256Prefix&&) noexcept;
    Sha256Prefix& operator=(Sha256Prefix&&) noexcept;

    // sha256_hex(data), whether or not `data` starts with the prefix. Safe
    // from several threads at once (each call copies the kept state).
    std::string hex(std::string_view data) const;

private:
    struct State;
    std::unique_ptr<State> m_state;
};

// Standard base64 of `data` (RFC 4648, with padding): the spelling of an
// HTTP Basic credential.
std::string base64(std::string_view data);

// base64 of `data`'s sha256 digest: how a Content-Security-Policy names an
// inline script ('sha256-...').
std::string sha256_base64(std::string_view data);

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
