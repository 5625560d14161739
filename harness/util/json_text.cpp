// nlohmann's serializer byte for byte: its string escapes (serializer.hpp,
// dump_escaped with ensure_ascii off) are a short table, and its doubles
// come from its own Grisu2 formatter, called here for the one number. A
// string that is not valid UTF-8 goes to nlohmann itself, whose
// replacement of bad bytes is not worth restating; the simulator's texts
// come from JSON that was valid UTF-8 and never take that path, and the
// texts an export writes rarely do.
#include <harness/util/json_text.hpp>

#include <harness/util/text.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstring>

namespace diffeval::util {

namespace {

// The escape of each byte that needs one, "" for the others.
constexpr std::array<std::string_view, 256> k_escapes = [] {
    std::array<std::string_view, 256> e{};
    constexpr std::array<std::string_view, 32> k_control = {
        "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
        "\\b",     "\\t",     "\\n",     "\\u000b", "\\f",     "\\r",     "\\u000e", "\\u000f",
        "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
        "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f"};
    for (size_t c = 0; c < k_control.size(); ++c) {
        e[c] = k_control[c];
    }
    e['"'] = "\\\"";
    e['\\'] = "\\\\";
    return e;
}();

// Whether one of the eight bytes of `w` needs an escape: below 0x20, '"' or
// '\\' (the bit tricks of "Bit Twiddling Hacks", exact for "any byte").
bool needs_escape(uint64_t w) {
    constexpr uint64_t k_ones = 0x0101010101010101ULL;
    constexpr uint64_t k_high = 0x8080808080808080ULL;
    auto has_zero = [](uint64_t x) { return (x - k_ones) & ~x & k_high; };
    const uint64_t below_space = (w - k_ones * 0x20) & ~w & k_high;
    return (below_space | has_zero(w ^ (k_ones * '"')) | has_zero(w ^ (k_ones * '\\'))) != 0;
}

} // namespace

void append_valid_dump_string(std::string& out, std::string_view s) {
    out += '"';
    size_t run = 0; // start of the bytes not yet copied
    size_t i = 0;
    while (i < s.size()) {
        // Prompts are long and rarely escaped: skip eight plain bytes at a time.
        if (uint64_t w = 0; i + sizeof w <= s.size()) {
            std::memcpy(&w, s.data() + i, sizeof w);
            if (!needs_escape(w)) {
                i += sizeof w;
                continue;
            }
        }
        std::string_view escape = k_escapes[static_cast<unsigned char>(s[i])];
        if (!escape.empty()) {
            out.append(s.data() + run, i - run);
            out += escape;
            run = i + 1;
        }
        ++i;
    }
    out.append(s.data() + run, s.size() - run);
    out += '"';
}

void append_dump_string(std::string& out, std::string_view s) {
    if (is_utf8(s)) {
        append_valid_dump_string(out, s);
        return;
    }
    out += nlohmann::json(std::string(s))
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string valid_utf8(std::string_view s) {
    if (is_utf8(s)) {
        return std::string(s);
    }
    std::string quoted;
    append_dump_string(quoted, s);
    return nlohmann::json::parse(quoted).get<std::string>();
}

std::string document_text(const nlohmann::json& j) {
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void append_dump_double(std::string& out, double x) {
    if (!std::isfinite(x)) {
        out += "null";
        return;
    }
    std::array<char, 64> buffer{}; // the size nlohmann's serializer gives it
    char* end = nlohmann::detail::to_chars(buffer.data(), buffer.data() + buffer.size(), x);
    out.append(buffer.data(), end);
}

void append_dump_int(std::string& out, int64_t n) {
    fmt::format_int text(n);
    out.append(text.data(), text.size());
}

void append_dump_uint(std::string& out, uint64_t n) {
    fmt::format_int text(n);
    out.append(text.data(), text.size());
}

} // namespace diffeval::util
