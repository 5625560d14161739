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

std::string hex_of(const unsigned char* md, unsigned len) {
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(len * 2);
    for (unsigned i = 0; i < len; ++i) {
        out += k_hex[md[i] >> 4];
        out += k_hex[md[i] & 0xF];
    }
    return out;
}

} // namespace

std::string sha256_hex(std::string_view data) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    EVP_Digest(data.data(), data.size(), md.data(), &len, sha256_md(), nullptr);
    return hex_of(md.data(), len);
}

struct Sha256Prefix::State {
    std::string prefix;
    EVP_MD_CTX* after_prefix = nullptr; // null when OpenSSL could not make one
    EVP_MD_CTX* scratch = nullptr;
    ~State() {
        EVP_MD_CTX_free(after_prefix);
        EVP_MD_CTX_free(scratch);
    }
};

Sha256Prefix::Sha256Prefix(std::string_view prefix) : m_state(std::make_unique<State>()) {
    m_state->prefix.assign(prefix);
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_MD_CTX* scratch = EVP_MD_CTX_new();
    if (ctx != nullptr && scratch != nullptr && EVP_DigestInit_ex(ctx, sha256_md(), nullptr) == 1 &&
        EVP_DigestUpdate(ctx, prefix.data(), prefix.size()) == 1) {
        m_state->after_prefix = ctx;
        m_state->scratch = scratch;
        return;
    }
    EVP_MD_CTX_free(ctx);
    EVP_MD_CTX_free(scratch);
}

Sha256Prefix::~Sha256Prefix() = default;
Sha256Prefix::Sha256Prefix(Sha256Prefix&&) noexcept = default;
Sha256Prefix& Sha256Prefix::operator=(Sha256Prefix&&) noexcept = default;

std::string Sha256Prefix::hex(std::string_view data) const {
    const State& s = *m_state;
    if (s.after_prefix == nullptr || !data.starts_with(s.prefix)) {
        return sha256_hex(data);
    }
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    const std::string_view rest = data.substr(s.prefix.size());
    if (EVP_MD_CTX_copy_ex(s.scratch, s.after_prefix) != 1 ||
        EVP_DigestUpdate(s.scratch, rest.data(), rest.size()) != 1 ||
        EVP_DigestFinal_ex(s.scratch, md.data(), &len) != 1) {
        return sha256_hex(data);
    }
    return hex_of(md.data(), len);
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
