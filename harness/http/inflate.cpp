// See inflate.hpp.
#include <harness/http/inflate.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>

namespace diffeval::http::detail {

std::optional<Encoding> encoding_of(std::string_view content_encoding) {
    std::string value;
    for (const char c : content_encoding) {
        if (c != ' ') {
            value.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
        }
    }
    if (value == "gzip" || value == "x-gzip") {
        return Encoding::gzip;
    }
    if (value == "deflate") {
        return Encoding::deflate;
    }
    if (value.empty() || value == "identity") {
        return Encoding::identity;
    }
    return std::nullopt;
}

std::string unasked_encoding_error(std::string_view content_encoding) {
    return fmt::format("the response's Content-Encoding '{}' was not asked for (diffeval accepts "
                       "gzip and deflate)",
                       content_encoding);
}

uint64_t wire_limit(size_t max_body_bytes) {
    const uint64_t max = max_body_bytes;
    const uint64_t room = max / 64 + (uint64_t{64} << 10);
    return max > std::numeric_limits<uint64_t>::max() - room ? std::numeric_limits<uint64_t>::max()
                                                             : max + room;
}

} // namespace diffeval::http::detail
