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

std::vector<Redactor::Span> Redactor::find(std::string_view text, TextEnd end) const {
    std::vector<Span> spans;
    for (const auto& s : m_secrets) {
        for (size_t pos = text.find(s); pos != std::string_view::npos;
             pos = text.find(s, pos + 1)) {
            spans.push_back({pos, pos + s.size()});
        }
    }
    if (end == TextEnd::cut) {
        // The longest end of the text that a spelling starts with, from
        // k_min_cut_piece bytes: "s" ending a cut answer is no piece of a key.
        size_t longest = k_min_cut_piece - 1;
        for (const auto& s : m_secrets) {
            for (size_t n = std::min(s.size() - 1, text.size()); n > longest; --n) {
                if (text.compare(text.size() - n, n, s, 0, n) == 0) {
                    longest = n;
                    break;
                }
            }
        }
        if (longest >= k_min_cut_piece) {
            spans.push_back({text.size() - longest, text.size()});
        }
    }
    if (spans.size() < 2) {
        return spans; // the common cases: no secret, or one
    }
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.begin < b.begin; });
    // Overlapping spellings (a key and its escaped form, a key overlapping
    // itself) become one span, so no piece of a secret is left beside a mark.
    size_t kept = 0;
    for (size_t i = 1; i < spans.size(); ++i) {
        if (spans[i].begin < spans[kept].end) {
            spans[kept].end = std::max(spans[kept].end, spans[i].end);
        } else {
            spans[++kept] = spans[i];
        }
    }
    spans.resize(kept + 1);
    return spans;
}

bool Redactor::apply(std::string& text, TextEnd end) const {
    const auto spans = find(text, end);
    if (spans.empty()) {
        return false;
    }
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    for (const auto& span : spans) {
        out.append(text, pos, span.begin - pos);
        out += k_mark;
        pos = span.end;
    }
    out.append(text, pos);
    text = std::move(out);
    return true;
}

std::string Redactor::redacted(std::string text) const {
    apply(text);
    return text;
}

} // namespace diffeval::util
