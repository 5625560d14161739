// Spliced bodies; see splice.hpp. Each splice is checked by rebuilding the
// body the way the view will and comparing, so a body that would not come
// back byte for byte is stored whole.
#include <harness/store/splice.hpp>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <utility>
#include <vector>

namespace diffeval::store {

namespace {

// A byte every JSON writer copies into a string as it is, in text that is
// valid UTF-8: printable ASCII but the two escaped, and every non-ASCII byte.
bool copied_as_is(unsigned char c) {
    return c >= 0x80 || (c >= 0x20 && c < 0x7f && c != '"' && c != '\\');
}

// SQL's replace(): every occurrence of `from`, left to right.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(s.size() + to.size());
    size_t i = 0;
    for (size_t at; (at = s.find(from, i)) != std::string_view::npos; i = at + from.size()) {
        out.append(s.substr(i, at - i));
        out.append(to);
    }
    out.append(s.substr(i));
    return out;
}

// Every slot starts alike: a body holding that start is never spliced.
bool holds_a_slot(std::string_view body) {
    return body.find(k_slot_start) != std::string_view::npos;
}

// `body` with the first occurrence of `value` replaced by `slot`, when it
// occurs and is longer than the slot; false otherwise.
bool put_slot(std::string& body, std::string_view value, std::string_view slot) {
    if (value.size() <= slot.size()) {
        return false;
    }
    const auto at = body.find(value);
    if (at == std::string::npos) {
        return false;
    }
    body.replace(at, value.size(), slot);
    return true;
}

// Reads top_json's [[token, logprob], ...] keeping each log-probability's
// text as written: v_probe_responses copies that text (SQLite's `->`), and
// two texts can name one double, so a number parsed and written again could
// differ from it. Integers and anything but that shape are refused.
class TopReader : public nlohmann::json_sax<nlohmann::json> {
public:
    std::vector<std::pair<std::string, std::string>> pairs; // token, number text

    bool null() override { return value("null"); }
    bool boolean(bool) override { return false; }
    bool number_integer(number_integer_t) override { return false; }
    bool number_unsigned(number_unsigned_t) override { return false; }
    bool number_float(number_float_t, const string_t& s) override { return value(s); }
    bool string(string_t& s) override {
        if (m_depth != 2 || m_in_pair != 0) {
            return false;
        }
        pairs.emplace_back(s, "");
        m_in_pair = 1;
        return true;
    }
    bool binary(binary_t&) override { return false; }
    bool start_object(std::size_t) override { return false; }
    bool key(string_t&) override { return false; }
    bool end_object() override { return false; }
    bool start_array(std::size_t) override {
        if (++m_depth > 2) {
            return false;
        }
        m_in_pair = 0;
        return true;
    }
    bool end_array() override {
        if (m_depth == 2 && m_in_pair != 2) {
            return false;
        }
        --m_depth;
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        return false;
    }

private:
    bool value(const std::string& text) {
        if (m_depth != 2 || m_in_pair != 1) {
            return false;
        }
        pairs.back().second = text;
        m_in_pair = 2;
        return true;
    }
    int m_depth = 0;
    int m_in_pair = 0; // values seen in the current pair
};

// A JSON number with a fraction or an exponent at `s[at]`, as nlohmann reads
// it into a float: its end, or 0 when there is none. Only exponents whose
// value is plainly finite pass (at most 99, with up to 30 integer digits):
// nlohmann refuses a number that overflows, and this reading never converts.
size_t float_end(std::string_view s, size_t at) {
    const auto digits = [&](size_t from) {
        size_t i = from;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
            ++i;
        }
        return i - from;
    };
    size_t i = at;
    if (i < s.size() && s[i] == '-') {
        ++i;
    }
    const size_t whole = digits(i);
    if (whole == 0 || whole > 30 || (whole > 1 && s[i] == '0')) {
        return 0;
    }
    i += whole;
    bool is_float = false;
    if (i < s.size() && s[i] == '.') {
        const size_t fraction = digits(i + 1);
        if (fraction == 0) {
            return 0;
        }
        i += 1 + fraction;
        is_float = true;
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
            ++i;
        }
        const size_t exponent = digits(i);
        if (exponent == 0 || exponent > 2) {
            return 0;
        }
        i += exponent;
        is_float = true;
    }
    return is_float ? i : 0;
}

// top_object() for top_json as top_json() writes it for plain tokens:
// [["token",number or null],...] with no space, tokens escaping nothing but
// " \\ \n \t \r, and float numbers. Each token's JSON text is then the
// plain quoting of the token it reads as, and each number's is copied. The
// outer nullopt: top_json is not of that shape, and the SAX reading decides.
std::optional<std::optional<std::string>> plain_top_object(std::string_view top_json) {
    if (!simdjson::validate_utf8(top_json)) {
        return std::nullopt;
    }
    const auto at = [&](size_t i, char c) { return i < top_json.size() && top_json[i] == c; };
    if (!at(0, '[')) {
        return std::nullopt;
    }
    std::string out = "{";
    size_t i = 1;
    while (!at(i, ']')) {
        if (!at(i, '[') || !at(i + 1, '"')) {
            return std::nullopt;
        }
        const size_t token_start = i + 1;
        i += 2;
        for (;; ++i) {
            if (i >= top_json.size()) {
                return std::nullopt;
            }
            const auto c = static_cast<unsigned char>(top_json[i]);
            if (c == '"') {
                break;
            }
            if (c < 0x20 || c == 0x7f) {
                return std::nullopt;
            }
            if (c == '\\') {
                const char e = i + 1 < top_json.size() ? top_json[i + 1] : '\0';
                if (e != '"' && e != '\\' && e != 'n' && e != 't' && e != 'r') {
                    return std::nullopt;
                }
                ++i;
            }
        }
        const size_t token_end = ++i; // past the closing quote
        if (!at(i, ',')) {
            return std::nullopt;
        }
        ++i;
        size_t number_end = top_json.compare(i, 4, "null") == 0 ? i + 4 : float_end(top_json, i);
        if (number_end == 0 || !at(number_end, ']')) {
            return std::nullopt;
        }
        out += out.size() > 1 ? "," : "";
        out.append(top_json.substr(token_start, token_end - token_start));
        out += ':';
        out.append(top_json.substr(i, number_end - i));
        i = number_end + 1;
        if (at(i, ',') && at(i + 1, '[')) {
            ++i;
        } else if (!at(i, ']')) {
            return std::nullopt;
        }
    }
    if (i + 1 != top_json.size()) {
        return std::nullopt;
    }
    if (out.size() == 1) {
        return std::optional<std::string>{}; // no pair
    }
    out += '}';
    return std::optional<std::string>{std::move(out)};
}

} // namespace

std::optional<std::string> top_object_parsed(std::string_view top_json) {
    TopReader reader;
    if (!nlohmann::json::sax_parse(top_json, &reader) || reader.pairs.empty()) {
        return std::nullopt;
    }
    std::string out = "{";
    for (const auto& [token, number] : reader.pairs) {
        auto quoted = plain_json_quote(token);
        if (!quoted) {
            return std::nullopt;
        }
        out += out.size() > 1 ? "," : "";
        out += *quoted;
        out += ':';
        out += number;
    }
    out += '}';
    return out;
}

std::optional<std::string> top_object(std::string_view top_json) {
    if (auto plain = plain_top_object(top_json)) {
        return std::move(*plain);
    }
    return top_object_parsed(top_json);
}

std::optional<std::string> plain_json_quote(std::string_view s) {
    if (!simdjson::validate_utf8(s)) {
        return std::nullopt;
    }
    std::string out;
    out.reserve(s.size() + 16);
    out += '"';
    for (size_t i = 0; i < s.size(); ++i) {
        // Runs of bytes written as they are are copied whole.
        size_t run = i;
        while (run < s.size() && copied_as_is(static_cast<unsigned char>(s[run]))) {
            ++run;
        }
        out.append(s.substr(i, run - i));
        i = run;
        if (i == s.size()) {
            break;
        }
        switch (s[i]) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\r':
            out += "\\r";
            break;
        default: // other control characters, DEL
            return std::nullopt;
        }
    }
    out += '"';
    return out;
}

std::optional<std::string> splice_response(std::string_view body,
                                           const std::optional<std::string>& text,
                                           const std::optional<std::string>& reasoning) {
    if ((!text && !reasoning) || holds_a_slot(body)) {
        return std::nullopt;
    }
    std::string stored(body);
    auto quoted_text = text ? plain_json_quote(*text) : std::nullopt;
    if (quoted_text && !put_slot(stored, *quoted_text, k_text_slot)) {
        quoted_text.reset();
    }
    auto quoted_reasoning = reasoning ? plain_json_quote(*reasoning) : std::nullopt;
    if (quoted_reasoning && !put_slot(stored, *quoted_reasoning, k_reasoning_slot)) {
        quoted_reasoning.reset();
    }
    if (!quoted_text && !quoted_reasoning) {
        return std::nullopt;
    }
    // v_responses's expression; a slot put only for a plain value, so the
    // arms of a value not spliced (json_quote(NULL) is 'null') meet no slot.
    auto rebuilt = quoted_text ? replace_all(stored, k_text_slot, *quoted_text) : stored;
    if (quoted_reasoning) {
        rebuilt = replace_all(rebuilt, k_reasoning_slot, *quoted_reasoning);
    }
    if (rebuilt != body) {
        return std::nullopt;
    }
    return stored;
}

std::optional<std::string> splice_probe(std::string_view body, std::string_view top_json) {
    if (holds_a_slot(body)) {
        return std::nullopt;
    }
    auto object = top_object(top_json);
    if (!object) {
        return std::nullopt;
    }
    std::string stored(body);
    if (!put_slot(stored, *object, k_top_slot) ||
        replace_all(stored, k_top_slot, *object) != body) {
        return std::nullopt;
    }
    return stored;
}

} // namespace diffeval::store
