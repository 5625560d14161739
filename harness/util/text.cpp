// What text.hpp does not hold inline: the check that needs a library, and
// a p-value's words.
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <simdjson.h>

namespace diffeval::util {

bool is_utf8(std::string_view text) {
    return simdjson::validate_utf8(text.data(), text.size());
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
