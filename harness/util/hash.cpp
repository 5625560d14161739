// sha256 comes from OpenSSL (already a dependency of libcurl); hash64 is a
// tiny FNV-1a with a splitmix finaliser, used where speed and stability
// matter more than collision resistance (simulator decisions).
#include <harness/util/hash.hpp>

#include <openssl/evp.h>

#include <array>

namespace diffeval::util {

namespace {

// SHA-256 fetched from OpenSSL's default provider once: EVP_sha256() makes
// every digest look the implementation up again under a lock, which cost
// more than hashing a 100-byte key (0.30 against 0.13 us).
const EVP_MD* sha256_md() {
    static const EVP_MD* const md = [] {
        const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
        return fetched != nullptr ? fetched : EVP_sha256();
    }();
    return md;
}

} // namespace

std::string sha256_hex(std::string_view data) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    EVP_Digest(data.data(), data.size(), md.data(), &len, sha256_md(), nullptr);
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(len * 2);
    for (unsigned i = 0; i < len; ++i) {
        out += k_hex[md[i] >> 4];
        out += k_hex[md[i] & 0xF];
    }
    return out;
}

Hash64Stream::Hash64Stream(uint64_t seed)
    : m_h(0xcbf29ce484222325ULL ^ (seed * 0x9E3779B97F4A7C15ULL)) {}

void Hash64Stream::add(std::string_view piece) {
    uint64_t h = m_h;
    for (unsigned char c : piece) {
        h ^= c;
        h *= 0x100000001b3ULL;
    }
    m_h = h;
}

uint64_t Hash64Stream::value() const {
    uint64_t h = m_h;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

uint64_t hash64(std::string_view data, uint64_t seed) {
    Hash64Stream h(seed);
    h.add(data);
    return h.value();
}

double unit_interval(uint64_t h) {
    return static_cast<double>(h >> 11) * 0x1.0p-53;
}

} // namespace diffeval::util
