// What text.hpp does not hold inline: the check that needs a library, and
// a p-value's words.
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <simdjson.h>

namespace diffeval::util {

bool is_utf8(std::string_view text) {
    return simdjson::validate_utf8(text.data(), text.size());
}

size_t utf8_valid_length(std::string_view text, size_t i) {
    const auto at = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const auto continuation = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
        return k < text.size() && at(k) >= lo && at(k) <= hi;
    };
    const unsigned b = at(i);
    if (b < 0x80) {
        return 1;
    }
    if (b >= 0xC2 && b <= 0xDF) {
        return continuation(i + 1) ? 2 : 0;
    }
    if (b >= 0xE0 && b <= 0xEF) {
        // E0 takes no overlong form, ED no surrogate.
        const unsigned lo = b == 0xE0 ? 0xA0 : 0x80;
        const unsigned hi = b == 0xED ? 0x9F : 0xBF;
        return continuation(i + 1, lo, hi) && continuation(i + 2) ? 3 : 0;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        // F0 takes no overlong form, F4 nothing past U+10FFFF.
        const unsigned lo = b == 0xF0 ? 0x90 : 0x80;
        const unsigned hi = b == 0xF4 ? 0x8F : 0xBF;
        return continuation(i + 1, lo, hi) && continuation(i + 2) && continuation(i + 3) ? 4 : 0;
    }
    return 0;
}

std::string p_text(double p, int digits) {
    if (p < 1e-300) {
        return "< 1e-300";
    }
    // A tie rounds up, as a p-value should (1/16 with two digits is 0.063,
    // not the 0.062 of rounding to even): a relative nudge far below any
    // printed digit.
    return fmt::format("{:.{}g}", p * (1.0 + 1e-12), digits);
}

} // namespace diffeval::util
