// libFuzzer target: cutting the API key out of a stored body (redact_body).
// Whatever a server sends, once redacted no place the Redactor claims to
// cover holds the key: the raw bytes in any of its spellings, every string
// the body decodes to (a JSON document's, each stream event's, the string
// literals of what does not parse), a stream's assembled text and
// reasoning, events after [DONE] or an error included, and both joined in
// the order they came; a cut body does not end in the key's start. And a
// body none of those places holds the key in comes back byte for byte.
//
// Input: a flags byte (1: a stream, 2: chat, 4: cut short), the key up to a
// 0xff byte (the default key when shorter than 8 bytes or holding the
// mark's brackets, which a mark beside the text could spell), then the body.
#include <harness/engine/redact_body.hpp>
#include <harness/http/sse.hpp>
#include <harness/util/untrusted_json.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

using namespace diffeval;

namespace {

using util::TextEnd;

// Every string of `j`, keys too.
void strings_of(const nlohmann::json& j, std::vector<std::string>& out) {
    if (j.is_string()) {
        out.push_back(j.get<std::string>());
    } else if (j.is_array()) {
        for (const auto& v : j) {
            strings_of(v, out);
        }
    } else if (j.is_object()) {
        for (const auto& [k, v] : j.items()) {
            out.push_back(k);
            strings_of(v, out);
        }
    }
}

nlohmann::json parse(std::string_view text) {
    if (!util::json_depth_within(text)) {
        return nlohmann::json(nlohmann::json::value_t::discarded);
    }
    return nlohmann::json::parse(text, nullptr, false);
}

void utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    } else if (cp < 0x10000) {
        out += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                static_cast<char>(0x80 | (cp & 0x3F))};
    } else {
        out +=
            {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
             static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
}

long hex(std::string_view s) {
    if (s.size() != 4) {
        return -1;
    }
    long v = 0;
    for (char c : s) {
        const auto d = std::string_view("0123456789abcdef0123456789ABCDEF").find(c);
        if (d == std::string_view::npos) {
            return -1;
        }
        v = v * 16 + static_cast<long>(d % 16);
    }
    return v;
}

struct Literal {
    size_t begin = 0;
    size_t end = 0;
    bool closed = false;
    std::string decoded;
};

// The string literals of text that does not parse, decoded as JSON decodes
// them but leniently (what no parser takes is still a string: a raw control
// character kept, a bad escape dropped, a lone surrogate as U+FFFD).
std::vector<Literal> literals_of(std::string_view text) {
    std::vector<Literal> out;
    size_t i = 0;
    while ((i = text.find('"', i)) != std::string_view::npos) {
        Literal lit;
        lit.begin = i;
        std::string& s = lit.decoded;
        for (++i; i < text.size();) {
            const char c = text[i];
            if (c == '"') {
                lit.closed = true;
                ++i;
                break;
            }
            if (c != '\\') {
                s += c;
                ++i;
                continue;
            }
            if (i + 1 >= text.size()) {
                ++i;
                break;
            }
            const char e = text[i + 1];
            i += 2;
            if (auto at = std::string_view("\"\\/bfnrt").find(e); at != std::string_view::npos) {
                s += "\"\\/\b\f\n\r\t"[at];
            } else if (e == 'u') {
                long cp = hex(text.substr(i, std::min<size_t>(4, text.size() - i)));
                if (cp < 0) {
                    continue;
                }
                i += 4;
                if (cp >= 0xD800 && cp < 0xDC00 && text.substr(i, 2) == "\\u") {
                    if (long lo = hex(text.substr(i + 2, std::min<size_t>(4, text.size() - i - 2)));
                        lo >= 0xDC00 && lo < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        i += 6;
                    }
                }
                utf8(s, cp >= 0xD800 && cp < 0xE000 ? 0xFFFD : static_cast<uint32_t>(cp));
            }
        }
        lit.end = i;
        out.push_back(std::move(lit));
    }
    return out;
}

// The texts a body decodes to, each to be searched whole (`whole`), and
// those that end where a cut body did (`at_end`).
struct Views {
    std::vector<std::string> whole;
    std::vector<std::string> at_end;
};

Views views_of(const std::string& body, engine::BodyShape shape, engine::Endpoint endpoint,
               TextEnd end) {
    Views v;
    v.whole.push_back(body);
    if (end == TextEnd::cut) {
        v.at_end.push_back(body);
    }
    // The literals of what does not parse: each whole, the unclosed one at
    // the end of a cut body.
    auto add_literals = [&](const std::vector<Literal>& lits) {
        for (const auto& l : lits) {
            v.whole.push_back(l.decoded);
            if (!l.closed && end == TextEnd::cut) {
                v.at_end.push_back(l.decoded);
            }
        }
    };
    if (shape == engine::BodyShape::json) {
        if (auto j = parse(body); !j.is_discarded()) {
            strings_of(j, v.whole);
        } else {
            add_literals(literals_of(body));
        }
        return v;
    }
    http::SseParser parser;
    auto events = parser.feed(body);
    const std::string rest = body.substr(parser.complete_bytes());
    // The answer's strings in a cut stream's unfinished event: the values
    // of "text", "content", "reasoning", "reasoning_content".
    std::string rest_text;
    std::string rest_reasoning;
    std::string rest_joined;
    if (!rest.empty()) {
        std::vector<std::string> more;
        if (end == TextEnd::cut) {
            more = parser.feed("\n\n");
        }
        if (more.size() == 1 && !parse(more[0]).is_discarded()) {
            events.push_back(more[0]);
        } else {
            const auto lits = literals_of(rest);
            add_literals(lits);
            for (size_t k = 1; end == TextEnd::cut && k < lits.size(); ++k) {
                const auto between =
                    std::string_view(rest).substr(lits[k - 1].end, lits[k].begin - lits[k - 1].end);
                const auto& key = lits[k - 1].decoded;
                if (!lits[k - 1].closed ||
                    between.find_first_not_of(" \t\r\n:") != std::string_view::npos ||
                    std::count(between.begin(), between.end(), ':') != 1) {
                    continue;
                }
                if (key == "reasoning" || key == "reasoning_content") {
                    rest_reasoning += lits[k].decoded;
                } else if (key == "text" || key == "content") {
                    rest_text += lits[k].decoded;
                } else {
                    continue;
                }
                rest_joined += lits[k].decoded;
            }
        }
    }
    engine::StreamAccumulator acc(endpoint);
    acc.read_past_end();
    std::vector<engine::StreamPiece> pieces;
    acc.record_pieces(&pieces);
    for (const auto& e : events) {
        if (auto j = parse(e); !j.is_discarded()) {
            strings_of(j, v.whole);
        } else {
            for (auto& l : literals_of(e)) {
                v.whole.push_back(std::move(l.decoded));
            }
        }
        acc.on_event(e, 0);
    }
    std::string joined;
    for (const auto& p : pieces) {
        joined += (p.reasoning ? acc.reasoning() : acc.text()).substr(p.begin, p.size);
    }
    v.whole.push_back(acc.text() + rest_text);
    v.whole.push_back(acc.reasoning() + rest_reasoning);
    v.whole.push_back(joined + rest_joined);
    if (end == TextEnd::cut) {
        v.at_end.push_back(joined + rest_joined);
    }
    return v;
}

bool holds_key(const Views& v, const util::Redactor& r) {
    for (const auto& s : v.whole) {
        if (!r.find(s).empty()) {
            return true;
        }
    }
    for (const auto& s : v.at_end) {
        if (!r.find(s, TextEnd::cut).empty()) {
            return true;
        }
    }
    return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) {
        return 0;
    }
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const auto flags = static_cast<uint8_t>(in[0]);
    const auto shape = flags & 1 ? engine::BodyShape::stream : engine::BodyShape::json;
    const auto endpoint = flags & 2 ? engine::Endpoint::chat : engine::Endpoint::completion;
    const auto end = flags & 4 ? TextEnd::cut : TextEnd::whole;
    const auto sep = std::min(in.find('\xff', 1), in.size());
    std::string key(in.substr(1, sep - 1));
    const std::string body(sep < in.size() ? in.substr(sep + 1) : std::string_view());
    if (key.size() < util::Redactor::k_min_secret || key.find_first_of("[]") != std::string::npos ||
        std::string(util::Redactor::k_mark).find(key) != std::string::npos) {
        key = "sk-live-AbCdEf0123456789";
    }
    util::Redactor redactor;
    redactor.add(key);

    const auto out = engine::redact_body(body, shape, endpoint, redactor, end);
    // No place the Redactor covers holds the key once redacted.
    if (holds_key(views_of(out, shape, endpoint, end), redactor)) {
        std::abort();
    }
    // A body none of them held it in is left as it came.
    if (out != body && !holds_key(views_of(body, shape, endpoint, end), redactor)) {
        std::abort();
    }
    return 0;
}
