// Python-compatible JSON writer; see pyjson.hpp for why it exists.
#include <harness/util/pyjson.hpp>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>

namespace diffeval::util {

namespace {

// Decode one UTF-8 code point at `i`, advancing `i`. Invalid bytes decode as
// U+FFFD, as Python would never see them (its str is already decoded).
uint32_t next_code_point(std::string_view s, size_t& i) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char c = byte(i);
    int extra = c < 0x80           ? 0
                : (c >> 5) == 0x6  ? 1
                : (c >> 4) == 0xE  ? 2
                : (c >> 3) == 0x1E ? 3
                                   : -1;
    if (extra < 0 || i + extra >= s.size() + (extra == 0 ? 1 : 0)) {
        ++i;
        return 0xFFFD;
    }
    uint32_t cp = extra == 0 ? c : c & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
        if (i + k >= s.size() || (byte(i + k) & 0xC0) != 0x80) {
            ++i;
            return 0xFFFD;
        }
        cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    i += extra + 1;
    return cp;
}

// Append \uXXXX with lower-case hex digits, as Python writes it.
void append_u_escape(std::string& out, uint32_t unit) {
    static constexpr char k_hex[] = "0123456789abcdef";
    const char buf[6] = {'\\',
                         'u',
                         k_hex[(unit >> 12) & 0xF],
                         k_hex[(unit >> 8) & 0xF],
                         k_hex[(unit >> 4) & 0xF],
                         k_hex[unit & 0xF]};
    out.append(buf, sizeof buf);
}

// Which bytes are written as themselves: printable ASCII but " and \\, and
// in script style not < > & either.
struct PlainBytes {
    std::array<bool, 256> python{};
    std::array<bool, 256> script{};
    constexpr PlainBytes() {
        for (int c = 0x20; c < 0x7F; ++c) {
            python[c] = c != '"' && c != '\\';
            script[c] = python[c] && c != '<' && c != '>' && c != '&';
        }
    }
};
constexpr PlainBytes k_plain;

void write_string(std::string& out, const std::string& s) {
    append_json_string(out, s, JsonStringStyle::python);
}

} // namespace

void append_json_string(std::string& out, std::string_view s, JsonStringStyle style) {
    out += '"';
    append_json_escaped(out, s, style);
    out += '"';
}

void append_json_escaped(std::string& out, std::string_view s, JsonStringStyle style) {
    const auto& plain = style == JsonStringStyle::script ? k_plain.script : k_plain.python;
    for (size_t i = 0; i < s.size();) {
        // Runs of printable ASCII are copied in one go.
        size_t run = i;
        while (run < s.size() && plain[static_cast<unsigned char>(s[run])]) {
            ++run;
        }
        out.append(s.data() + i, run - i);
        i = run;
        if (i >= s.size()) {
            break;
        }
        const uint32_t cp = next_code_point(s, i);
        switch (cp) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\b':
            out += "\\b";
            break;
        case '\f':
            out += "\\f";
            break;
        default:
            // Everything outside printable ASCII (space..~) is escaped, and
            // in script style also < > &.
            if (cp >= 0x10000) {
                const uint32_t v = cp - 0x10000;
                append_u_escape(out, 0xD800 + (v >> 10));
                append_u_escape(out, 0xDC00 + (v & 0x3FF));
            } else if (cp < 0x20 || cp >= 0x7F || style == JsonStringStyle::script) {
                append_u_escape(out, cp);
            } else {
                out += static_cast<char>(cp);
            }
        }
    }
}

namespace {

void write(std::string& out, const nlohmann::ordered_json& v) {
    using T = nlohmann::ordered_json::value_t;
    switch (v.type()) {
    case T::null:
        out += "null";
        break;
    case T::boolean:
        out += v.get<bool>() ? "true" : "false";
        break;
    case T::number_integer:
        out += std::to_string(v.get<int64_t>());
        break;
    case T::number_unsigned:
        out += std::to_string(v.get<uint64_t>());
        break;
    case T::number_float:
        out += python_float_repr(v.get<double>());
        break;
    case T::string:
        write_string(out, v.get_ref<const std::string&>());
        break;
    case T::array: {
        out += '[';
        bool first = true;
        for (const auto& e : v) {
            if (!first) {
                out += ", ";
            }
            first = false;
            write(out, e);
        }
        out += ']';
        break;
    }
    case T::object: {
        out += '{';
        bool first = true;
        for (const auto& [k, e] : v.items()) {
            if (!first) {
                out += ", ";
            }
            first = false;
            write_string(out, k);
            out += ": ";
            write(out, e);
        }
        out += '}';
        break;
    }
    default:
        out += "null";
        break;
    }
}

} // namespace

std::string python_float_repr(double x) {
    if (std::isnan(x)) {
        return "NaN";
    }
    if (std::isinf(x)) {
        return x > 0 ? "Infinity" : "-Infinity";
    }
    // Python's repr: shortest round-trip digits; scientific when the exponent
    // is < -4 or >= 16, else positional with at least one fractional digit.
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    std::string sci(buf, end);
    auto epos = sci.find('e');
    std::string mant = sci.substr(0, epos);
    int exp = std::stoi(sci.substr(epos + 1));
    bool neg = !mant.empty() && mant[0] == '-';
    if (neg) {
        mant.erase(0, 1);
    }
    std::string digits;
    for (char c : mant) {
        if (c != '.') {
            digits += c;
        }
    }
    std::string out = neg ? "-" : "";
    if (exp < -4 || exp >= 16) {
        out += digits.substr(0, 1);
        if (digits.size() > 1) {
            out += "." + digits.substr(1);
        }
        out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
        return out;
    }
    if (exp < 0) {
        out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
        return out;
    }
    auto int_len = static_cast<size_t>(exp + 1);
    if (digits.size() <= int_len) {
        out += digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
        out += digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
    return out;
}

std::string python_json_dumps(const nlohmann::ordered_json& value) {
    std::string out;
    write(out, value);
    return out;
}

} // namespace diffeval::util
