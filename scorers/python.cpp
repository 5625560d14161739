// Python semantics on UTF-8 text. The literal rules are CPython's tokenizer
// rules for a decimal literal, restricted to what a run of \p{Nd} characters
// can hold; the whitespace set is exactly the characters for which
// str.isspace() is true.
#include <scorers/python.hpp>

#include <harness/util/text.hpp>

#include <algorithm>
#include <array>
#include <cstdint>

namespace diffeval::scorers {

namespace {

// Code points above ASCII for which Python's str.isspace() is true.
constexpr std::array<char32_t, 19> k_unicode_spaces = {
    0x85,   0xa0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
    0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000};

bool is_python_space(char32_t c) {
    if (c < 0x80) {
        return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20);
    }
    return std::find(k_unicode_spaces.begin(), k_unicode_spaces.end(), c) != k_unicode_spaces.end();
}

// Whether the `len` bytes at `p` are one whitespace character. Only one- to
// three-byte sequences can be spaces; malformed bytes never are.
bool is_space_sequence(const unsigned char* p, size_t len) {
    if (len != util::utf8_sequence_length(p[0])) {
        return false;
    }
    switch (len) {
    case 1:
        return p[0] < 0x80 && is_python_space(p[0]);
    case 2:
        return (p[1] & 0xc0) == 0x80 && is_python_space(((p[0] & 0x1fu) << 6) | (p[1] & 0x3fu));
    case 3:
        return (p[1] & 0xc0) == 0x80 && (p[2] & 0xc0) == 0x80 &&
               is_python_space(((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu));
    default:
        return false;
    }
}

} // namespace

std::optional<std::string> python_int_literal(std::string_view digits) {
    if (digits.empty()) {
        return std::nullopt;
    }
    // Any byte outside 0-9 belongs to a non-ASCII digit, which the tokenizer
    // rejects as an invalid character.
    const bool ascii =
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!ascii) {
        return std::nullopt;
    }
    if (digits.front() == '0') {
        // "0", "00", "000" are the literal zero; "007" is a SyntaxError.
        if (digits.find_first_not_of('0') != std::string_view::npos) {
            return std::nullopt;
        }
        return std::string("0");
    }
    if (digits.size() > k_python_int_max_digits) {
        return std::nullopt;
    }
    return std::string(digits);
}

std::string_view python_lstrip(std::string_view text) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    size_t begin = 0;
    while (begin < text.size()) {
        const size_t len = util::utf8_sequence_length(bytes[begin]);
        if (len > text.size() - begin || !is_space_sequence(bytes + begin, len)) {
            break;
        }
        begin += len;
    }
    return text.substr(begin);
}

std::string_view python_strip(std::string_view text) {
    const size_t begin = text.size() - python_lstrip(text).size();
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    size_t end = text.size();
    while (end > begin) {
        // Step back over continuation bytes to the start of the last character.
        size_t start = end - 1;
        while (start > begin && (bytes[start] & 0xc0) == 0x80 && end - start < 4) {
            --start;
        }
        if (!is_space_sequence(bytes + start, end - start)) {
            break;
        }
        end = start;
    }
    return text.substr(begin, end - begin);
}

} // namespace diffeval::scorers
