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

// The object `top_json` rebuilds, as v_probe_responses writes it:
// {"token":logprob,...} with each log-probability's JSON text; nullopt when
// it is not [[string, float or null], ...] with plain tokens, or is empty.
std::optional<std::string> top_object(std::string_view top_json) {
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

} // namespace

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
