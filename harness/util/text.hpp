// Small text helpers shared by the scorers, the simulator, the engine and
// analysis.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

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

// The value of a number as it was printed ("-5.5" -> -5.5): what a reader who
// subtracts printed numbers works with, so a difference printed beside them
// is computed from these.
inline double printed_value(const std::string& text) {
    return std::strtod(text.c_str(), nullptr);
}

// `plain` (an optional '-', digits, an optional fraction) with a comma
// between each three digits of its integer part: 1319 -> "1,319".
inline std::string with_commas(std::string_view plain) {
    const size_t dot = std::min(plain.find('.'), plain.size());
    const bool neg = !plain.empty() && plain[0] == '-';
    const std::string_view digits = plain.substr(neg ? 1 : 0, dot - (neg ? 1 : 0));
    std::string out = neg ? "-" : "";
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) {
            out += ',';
        }
        out += digits[i];
    }
    out += plain.substr(dot);
    return out;
}

// `singular` when `n` is 1, else its plural: `plural` when given, else
// `singular` + "s" (noun(1, "question") is "question", noun(0, "question")
// "questions"): for a count printed apart from its noun.
template <typename N>
requires std::is_integral_v<N> std::string noun(N n, std::string_view singular,
                                                std::string_view plural = {}) {
    if (n == 1) {
        return std::string(singular);
    }
    return plural.empty() ? std::string(singular) + "s" : std::string(plural);
}

// `n`, a space and its noun (`noun`'s rule): counted(1, "question") is
// "1 question", counted(3, "repeat") "3 repeats".
template <typename N>
requires std::is_integral_v<N> std::string counted(N n, std::string_view singular,
                                                   std::string_view plural = {}) {
    return std::to_string(n) + " " + noun(n, singular, plural);
}

// A p-value to `digits` significant digits ("0.0215"); one below 1e-300,
// or 0 because the exact value is past a double's range (2^-1312 for 1,313
// questions against none), is "< 1e-300", never a printed 0.
std::string p_text(double p, int digits = 3);

// Two sides' repeat counts: "1 repeat each" when they match, else "1 and 3
// repeats".
inline std::string repeats_of_two(int64_t a, int64_t b) {
    return a == b ? counted(a, "repeat") + " each"
                  : std::to_string(a) + " and " + std::to_string(b) + " repeats";
}

// The first `chars` characters of `s`, never cutting a sequence in two.
inline std::string_view utf8_prefix(std::string_view s, size_t chars) {
    size_t i = 0;
    for (size_t n = 0; n < chars && i < s.size(); ++n) {
        i += utf8_sequence_length(static_cast<unsigned char>(s[i]));
    }
    return s.substr(0, std::min(i, s.size()));
}

// The longest prefix of `s` of at most `max_bytes` bytes that does not cut a
// UTF-8 sequence in two.
inline std::string_view utf8_byte_prefix(std::string_view s, size_t max_bytes) {
    if (s.size() <= max_bytes) {
        return s;
    }
    size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) {
        --cut;
    }
    return s.substr(0, cut);
}

// Whether `c` is a control character (C0 or DEL: a line end, a tab, a
// terminal escape's ESC).
inline bool is_control(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7F;
}

// The bytes of the control character that starts at `i` of `text`: 1 for
// C0 or DEL, 2 for a C1 control (U+0080-U+009F: CSI, OSC, ST, NEL, which
// terminals honouring C1 in UTF-8 act on; its UTF-8 is C2 80-9F), 0 for none.
inline size_t control_length(std::string_view text, size_t i) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (u < 0x20 || u == 0x7F) {
        return 1;
    }
    if (u == 0xC2 && i + 1 < text.size()) {
        const auto v = static_cast<unsigned char>(text[i + 1]);
        return v >= 0x80 && v <= 0x9F ? 2 : 0;
    }
    return 0;
}

// The bytes of the Unicode format character that starts at `i` of `text`,
// 0 for none: the Arabic letter mark U+061C; zero-width characters and
// direction marks U+200B-U+200F; line and paragraph separators, direction
// embeddings and overrides U+2028-U+202E; the word joiner, invisible
// operators and direction isolates U+2060-U+2069; the byte-order mark
// U+FEFF. Each is invisible, or reorders what follows it on screen, so that
// model text read in a report is not the text that was scored ("12" shown
// for "\u202E21"): readers see them as <U+XXXX> (format_char_shown).
inline size_t format_char_length(std::string_view text, size_t i) {
    const auto at = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    if (i + 1 < text.size() && at(i) == 0xD8 && at(i + 1) == 0x9C) {
        return 2;
    }
    if (i + 2 >= text.size()) {
        return 0;
    }
    const unsigned a = at(i), b = at(i + 1), c = at(i + 2);
    const bool format =
        (a == 0xE2 && b == 0x80 && ((c >= 0x8B && c <= 0x8F) || (c >= 0xA8 && c <= 0xAE))) ||
        (a == 0xE2 && b == 0x81 && c >= 0xA0 && c <= 0xA9) || (a == 0xEF && b == 0xBB && c == 0xBF);
    return format ? 3 : 0;
}

// The bytes of the Unicode dash that starts at `i` of `text`, 0 for none:
// the hyphen, non-breaking hyphen, figure dash, en dash, em dash and
// horizontal bar (U+2010-U+2015) and the minus sign (U+2212), which a word
// processor or a chat app puts where a flag's '-' was typed.
inline size_t unicode_dash_length(std::string_view text, size_t i) {
    if (i + 2 >= text.size()) {
        return 0;
    }
    const auto at = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned a = at(i), b = at(i + 1), c = at(i + 2);
    const bool dash =
        a == 0xE2 && ((b == 0x80 && c >= 0x90 && c <= 0x95) || (b == 0x88 && c == 0x92));
    return dash ? 3 : 0;
}

// The code point of the valid UTF-8 sequence of `n` bytes (1 to 4) at `i`
// of `text`.
inline uint32_t utf8_code_point(std::string_view text, size_t i, size_t n) {
    const auto at = [&](size_t k) {
        return static_cast<uint32_t>(static_cast<unsigned char>(text[k]));
    };
    uint32_t code = n == 1 ? at(i) : at(i) & (0xFFu >> (n + 1));
    for (size_t k = 1; k < n; ++k) {
        code = (code << 6) | (at(i + k) & 0x3F);
    }
    return code;
}

// "U+202E" for code point `code`: at least four upper-case hex digits.
inline std::string code_point_name(uint32_t code) {
    static constexpr char k_hex[] = "0123456789ABCDEF";
    std::string digits;
    for (int shift = 20; shift >= 0; shift -= 4) {
        if (shift < 16 || (code >> shift) != 0) {
            digits += k_hex[(code >> shift) & 0xF];
        }
    }
    return "U+" + digits;
}

// "<U+202E>" for the format character of `n` bytes (format_char_length) at
// `i` of `text`.
inline std::string format_char_shown(std::string_view text, size_t i, size_t n) {
    return "<" + code_point_name(utf8_code_point(text, i, n)) + ">";
}

// `text` with each format character as <U+XXXX> (format_char_length).
inline std::string format_chars_shown(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        if (const size_t n = format_char_length(text, i); n > 0) {
            out += format_char_shown(text, i, n);
            i += n - 1;
        } else {
            out += text[i];
        }
    }
    return out;
}

// Whether `text` holds a control character (C0, DEL or C1).
inline bool has_control_character(std::string_view text) {
    for (size_t i = 0; i < text.size(); ++i) {
        if (control_length(text, i) > 0) {
            return true;
        }
    }
    return false;
}

// `text` with each control character (C0, DEL, C1) as spaces: one line, no
// terminal escapes, its length and every other byte as they were.
inline std::string controls_as_spaces(std::string_view text) {
    std::string out(text);
    for (size_t i = 0; i < out.size(); ++i) {
        const size_t n = control_length(out, i);
        for (size_t k = 0; k < n; ++k) {
            out[i + k] = ' ';
        }
        i += n > 0 ? n - 1 : 0;
    }
    return out;
}

// Whether `text` is valid UTF-8 (RFC 3629: no stray continuation byte,
// overlong form, surrogate or code point past U+10FFFF), which every JSON
// text diffeval writes must be: nlohmann's dump() throws on anything else.
// simdjson's validator (text.cpp).
bool is_utf8(std::string_view text);

// The bytes of the valid UTF-8 sequence (RFC 3629) that starts at `i` of
// `text`, 0 when none starts there: a stray continuation byte, an overlong
// form, a surrogate, a sequence cut short, a raw C1 byte such as 0x9B (the
// 8-bit CSI).
size_t utf8_valid_length(std::string_view text, size_t i);

// Whether `text` holds a Unicode space other than ' ' (no-break, ideographic,
// U+2000-U+200A, ...), a line or paragraph separator, or an invisible
// formatting character (zero-width, direction marks and overrides, the
// byte-order mark, the soft hyphen): each looks like nothing, or like a space, or reorders
// what follows it on screen.
inline bool has_unicode_space_or_format(std::string_view text) {
    const auto at = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    for (size_t i = 0; i + 1 < text.size(); ++i) {
        if (at(i) == 0xC2 && (at(i + 1) == 0xA0 || at(i + 1) == 0xAD)) {
            return true; // U+00A0, and the soft hyphen U+00AD (invisible unless a line breaks)
        }
        if (i + 2 >= text.size()) {
            continue;
        }
        const unsigned a = at(i), b = at(i + 1), c = at(i + 2);
        if ((a == 0xE1 && b == 0x9A && c == 0x80) ||                               // U+1680
            (a == 0xE2 && b == 0x80 && (c <= 0x8F || (c >= 0xA8 && c <= 0xAF))) || // U+2000-200F,
                                                                                   // U+2028-202F
            (a == 0xE2 && b == 0x81 && c >= 0x9F && c <= 0xAF) ||                  // U+205F-206F
            (a == 0xE3 && b == 0x80 && c == 0x80) ||                               // U+3000
            (a == 0xEF && b == 0xBB && c == 0xBF)) {                               // U+FEFF
            return true;
        }
    }
    return false;
}

// The most bytes of a name: every table of summary and the reports is as
// wide as its longest name (an audit's 120 KB name made a 4 MB summary);
// 1,000 bytes holds any name a person or a model id needs.
inline constexpr size_t k_max_name_bytes = 1000;

// What is wrong with `name` as a part of a group's name (a server, an
// imported group, a framing), or nullopt: groups are written SERVER/FRAMING/
// MAX_TOKENS on the command line, and names reach terminals, Markdown tables
// and XML unescaped by some readers, so none may be empty or hold '/',
// spaces or control characters (line ends, terminal escapes); and every JSON
// output holds them, so each is UTF-8 text.
inline std::optional<std::string> name_problem(std::string_view name) {
    if (name.empty()) {
        return std::string("must not be empty");
    }
    if (name.size() > k_max_name_bytes) {
        return "must be at most " + with_commas(std::to_string(k_max_name_bytes)) + " bytes";
    }
    if (!is_utf8(name)) {
        return std::string("must be UTF-8 text");
    }
    if (name.find_first_of("/ ") != std::string_view::npos || has_control_character(name)) {
        return std::string("must not contain '/', spaces or control characters");
    }
    // A name that looks like another, or reorders the line it is shown on.
    if (has_unicode_space_or_format(name)) {
        return std::string("must not contain Unicode spaces (such as a no-break space) or "
                           "invisible formatting characters (zero-width characters, direction "
                           "marks and overrides)");
    }
    return std::nullopt;
}

// The most bytes of a server's own words diffeval prints as one line (an
// error message, what a fingerprint's server stated): a server may send any
// length.
inline constexpr size_t k_server_words_bytes = 1000;

// Untrusted text (model output, a server's message) as one line of at most
// `max_bytes` bytes plus "..." when cut: control characters (line ends,
// terminal escapes) become spaces, runs of spaces one space, format
// characters (direction overrides, zero-width) <U+XXXX>, bytes that are no
// UTF-8 U+FFFD, and a cut never splits a UTF-8 sequence.
inline std::string one_line(std::string_view text, size_t max_bytes) {
    std::string out;
    out.reserve(std::min(text.size(), max_bytes + 3));
    for (size_t i = 0; i < text.size(); ++i) {
        if (const size_t format = format_char_length(text, i); format > 0) {
            out += format_char_shown(text, i, format);
            i += format - 1;
            if (out.size() > max_bytes) {
                break;
            }
            continue;
        }
        const size_t control = control_length(text, i);
        // A byte that is no UTF-8 would reach a terminal as it is: 0x9B is
        // CSI to one that reads 8-bit controls (an audit's HTTP 400 body).
        if (control == 0 && static_cast<unsigned char>(text[i]) >= 0x80) {
            const size_t n = utf8_valid_length(text, i);
            out += n > 0 ? text.substr(i, n) : std::string_view("\xEF\xBF\xBD");
            i += n > 0 ? n - 1 : 0;
            if (out.size() > max_bytes) {
                break;
            }
            continue;
        }
        i += control > 0 ? control - 1 : 0;
        const char kept = control > 0 ? ' ' : text[i];
        if (kept == ' ' && !out.empty() && out.back() == ' ') {
            continue;
        }
        out += kept;
        if (out.size() > max_bytes) {
            break;
        }
    }
    if (out.size() > max_bytes) {
        out = std::string(utf8_byte_prefix(out, max_bytes)) + "...";
    }
    return out;
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
