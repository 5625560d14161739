// Secret redaction; see redact.hpp.
#include <harness/util/redact.hpp>

#include <harness/util/pyjson.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

namespace diffeval::util {

namespace {

// `escaped` (a JSON string's inside) with the hex digits of each \uXXXX in
// upper case.
std::string upper_hex_escapes(std::string escaped) {
    for (size_t i = 0; i + 1 < escaped.size(); ++i) {
        if (escaped[i] != '\\') {
            continue;
        }
        if (escaped[i + 1] == 'u') {
            for (size_t k = i + 2; k < std::min(i + 6, escaped.size()); ++k) {
                escaped[k] =
                    static_cast<char>(std::toupper(static_cast<unsigned char>(escaped[k])));
            }
        }
        ++i; // past the escaped character
    }
    return escaped;
}

} // namespace

void Redactor::add(std::string_view secret) {
    if (secret.size() < k_min_secret) {
        return;
    }
    auto push = [&](std::string s) {
        if (std::find(m_secrets.begin(), m_secrets.end(), s) == m_secrets.end()) {
            m_secrets.push_back(std::move(s));
        }
    };
    push(std::string(secret));
    // As it appears inside a JSON string (quotes, backslashes and control
    // characters escaped).
    auto quoted = nlohmann::json(std::string(secret))
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const auto escaped = quoted.substr(1, quoted.size() - 2);
    push(escaped);
    // As an encoder that writes ASCII only spells it (Python's json by
    // default): every other character as \uXXXX, in lower or upper case hex.
    std::string ascii;
    append_json_escaped(ascii, secret, JsonStringStyle::python);
    push(ascii);
    push(upper_hex_escapes(ascii));
    // Some encoders also escape "/" as "\/".
    for (const auto& spelling : {std::string(secret), escaped, ascii, upper_hex_escapes(ascii)}) {
        std::string slashed;
        for (char c : spelling) {
            if (c == '/') {
                slashed += '\\';
            }
            slashed += c;
        }
        push(slashed);
    }
}

bool Redactor::apply(std::string& text) const {
    bool changed = false;
    for (const auto& s : m_secrets) {
        for (size_t pos = text.find(s); pos != std::string::npos;
             pos = text.find(s, pos + k_mark.size())) {
            text.replace(pos, s.size(), k_mark);
            changed = true;
        }
    }
    return changed;
}

std::string Redactor::redacted(std::string text) const {
    apply(text);
    return text;
}

} // namespace diffeval::util
