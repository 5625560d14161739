// sha256 comes from Nettle (its x86-64 code uses the CPU's SHA extensions
// where there are any); hash64 is a tiny FNV-1a with a splitmix finaliser,
// used where speed and stability matter more than collision resistance
// (simulator decisions).
//
// Why Nettle rather than OpenSSL's libcrypto: loading libcrypto cost every
// process about 3 ms of CPU before main() and its provider set-up more at the
// first digest, for the one function diffeval needs; Nettle's library loads
// in 0.5 ms and hashes a 2.5 KB body as fast (1.7 against 1.6 us) and a
// 100-byte key faster (0.10 against 0.15 us).
#include <harness/util/hash.hpp>

#include <nettle/base64.h>
#include <nettle/sha2.h>

#include <array>

namespace diffeval::util {

namespace {

std::string hex_of(const uint8_t* md, size_t len) {
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(len * 2);
    for (size_t i = 0; i < len; ++i) {
        out += k_hex[md[i] >> 4];
        out += k_hex[md[i] & 0xF];
    }
    return out;
}

void update(sha256_ctx& ctx, std::string_view data) {
    sha256_update(&ctx, data.size(), reinterpret_cast<const uint8_t*>(data.data()));
}

std::string finish(sha256_ctx& ctx) {
    std::array<uint8_t, SHA256_DIGEST_SIZE> md{};
    sha256_digest(&ctx, md.size(), md.data());
    return hex_of(md.data(), md.size());
}

} // namespace

std::string sha256_hex(std::string_view data) {
    sha256_ctx ctx;
    sha256_init(&ctx);
    update(ctx, data);
    return finish(ctx);
}

struct Sha256Prefix::State {
    std::string prefix;
    sha256_ctx after_prefix; // a plain struct: copied for each text
};

Sha256Prefix::Sha256Prefix(std::string_view prefix) : m_state(std::make_unique<State>()) {
    m_state->prefix.assign(prefix);
    sha256_init(&m_state->after_prefix);
    update(m_state->after_prefix, prefix);
}

Sha256Prefix::~Sha256Prefix() = default;
Sha256Prefix::Sha256Prefix(Sha256Prefix&&) noexcept = default;
Sha256Prefix& Sha256Prefix::operator=(Sha256Prefix&&) noexcept = default;

std::string Sha256Prefix::hex(std::string_view data) const {
    const State& s = *m_state;
    if (!data.starts_with(s.prefix)) {
        return sha256_hex(data);
    }
    sha256_ctx ctx = s.after_prefix;
    update(ctx, data.substr(s.prefix.size()));
    return finish(ctx);
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

std::string sha256_base64(std::string_view data) {
    sha256_ctx ctx;
    sha256_init(&ctx);
    update(ctx, data);
    std::array<uint8_t, SHA256_DIGEST_SIZE> md{};
    sha256_digest(&ctx, md.size(), md.data());
    return base64(std::string_view(reinterpret_cast<const char*>(md.data()), md.size()));
}

std::string base64(std::string_view data) {
    std::string out(BASE64_ENCODE_RAW_LENGTH(data.size()), '\0');
    nettle_base64_encode_raw(out.data(), data.size(),
                             reinterpret_cast<const uint8_t*>(data.data()));
    return out;
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
