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
    return fmt::format("{:.{}g}", p, digits);
}

} // namespace diffeval::util
