// sha256 comes from OpenSSL (already a dependency of libcurl); hash64 is a
// tiny FNV-1a with a splitmix finaliser, used where speed and stability
// matter more than collision resistance (simulator decisions).
#include <harness/util/hash.hpp>

#include <openssl/evp.h>

#include <array>

namespace diffeval::util {

std::string sha256_hex(std::string_view data) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_sha256(), nullptr);
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
