// Secret redaction; see redact.hpp.
#include <harness/util/redact.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace diffeval::util {

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
    // Some encoders also escape "/" as "\/".
    for (const auto& spelling : {std::string(secret), escaped}) {
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
