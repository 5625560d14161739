// Small text helpers shared by the scorers and the simulator.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace diffeval::util {

// Bytes in the UTF-8 sequence that lead byte `b` introduces, from its high
// bits alone (1 for ASCII and for a stray continuation byte, so a scan
// always advances). Callers that need validity check the bytes themselves.
inline size_t utf8_sequence_length(unsigned char b) {
    if (b >= 0xf0) {
        return 4;
    }
    if (b >= 0xe0) {
        return 3;
    }
    if (b >= 0xc0) {
        return 2;
    }
    return 1;
}

// Characters (code points) in `s`, counting each lead byte once.
inline size_t utf8_length(std::string_view s) {
    size_t n = 0;
    for (size_t i = 0; i < s.size(); i += utf8_sequence_length(static_cast<unsigned char>(s[i]))) {
        ++n;
    }
    return n;
}

// The first `chars` characters of `s`, never cutting a sequence in two.
inline std::string_view utf8_prefix(std::string_view s, size_t chars) {
    size_t i = 0;
    for (size_t n = 0; n < chars && i < s.size(); ++n) {
        i += utf8_sequence_length(static_cast<unsigned char>(s[i]));
    }
    return s.substr(0, std::min(i, s.size()));
}

// `s` without leading and trailing spaces, tabs and line ends.
inline std::string_view trim(std::string_view s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) {
        return {};
    }
    const size_t e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

} // namespace diffeval::util
