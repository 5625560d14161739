// Rewriting a body whose decoded fields held a secret; see redact_body.hpp.
// The stream is read again with the run's own parser and accumulator, so the
// pieces found are those the stored text was assembled from.
#include <harness/engine/redact_body.hpp>

#include <harness/http/sse.hpp>
#include <harness/util/untrusted_json.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

namespace diffeval::engine {

namespace {

using Json = nlohmann::ordered_json; // keeps the server's key order

// `text` parsed as JSON, keys in their order, or discarded (not JSON, too deep).
Json parse(std::string_view text) {
    if (!util::json_depth_within(text)) {
        return Json(Json::value_t::discarded);
    }
    return Json::parse(text, nullptr, false);
}

std::string dump(const Json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Redact every string of `j`, keys too; true when something changed.
bool redact_strings(Json& j, const util::Redactor& redactor) {
    if (j.is_string()) {
        return redactor.apply(j.get_ref<std::string&>());
    }
    bool changed = false;
    if (j.is_array()) {
        for (auto& v : j) {
            changed |= redact_strings(v, redactor);
        }
    } else if (j.is_object()) {
        bool key_changed = false;
        for (auto& [k, v] : j.items()) {
            changed |= redact_strings(v, redactor);
            key_changed |= !redactor.find(k).empty();
        }
        if (key_changed) {
            Json out = Json::object();
            for (auto& [k, v] : j.items()) {
                out[redactor.redacted(k)] = std::move(v);
            }
            j = std::move(out);
            changed = true;
        }
    }
    return changed;
}

// The JSON value a piece of event data came from: the first choice's `text`,
// or its delta's `key`; null when the event has no such place.
Json* place_of(Json& event, const StreamPiece& piece) {
    auto choices = event.find("choices");
    if (choices == event.end() || !choices->is_array() || choices->empty() ||
        !(*choices)[0].is_object()) {
        return nullptr;
    }
    auto& choice = (*choices)[0];
    Json* holder = &choice;
    if (std::string_view(piece.key) != "text") {
        auto delta = choice.find("delta");
        if (delta == choice.end() || !delta->is_object()) {
            return nullptr;
        }
        holder = &*delta;
    }
    auto value = holder->find(piece.key);
    return value == holder->end() || !value->is_string() ? nullptr : &*value;
}

// Each event's data written as `data:` lines and a blank line, which the SSE
// parser reads back as the same events.
std::string write_events(const std::vector<std::string>& events) {
    std::string out;
    for (const auto& data : events) {
        size_t from = 0;
        for (size_t nl; (nl = data.find('\n', from)) != std::string::npos; from = nl + 1) {
            out += "data: ";
            out.append(data, from, nl - from);
            out += '\n';
        }
        out += "data: ";
        out.append(data, from);
        out += "\n\n";
    }
    return out;
}

// A JSON string literal found in text that need not be whole JSON: from its
// opening quote to past its closing one, or to the end of the text when it
// is not closed, with its escapes decoded.
struct Literal {
    size_t begin = 0;
    size_t end = 0;
    bool closed = false;
    std::string decoded;
};

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// The four hex digits at `at` of `text` as a number, or -1.
int32_t hex4(std::string_view text, size_t at) {
    if (at + 4 > text.size()) {
        return -1;
    }
    int32_t v = 0;
    for (size_t i = at; i < at + 4; ++i) {
        const char c = text[i];
        const int d = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
        if (d < 0) {
            return -1;
        }
        v = v * 16 + d;
    }
    return v;
}

// Every string literal of `text`, read lexically: a body cut mid-document
// is no JSON a parser takes, but its strings are still strings. A bad escape
// is dropped, a lone surrogate read as U+FFFD.
std::vector<Literal> string_literals(std::string_view text) {
    std::vector<Literal> out;
    size_t i = 0;
    while ((i = text.find('"', i)) != std::string_view::npos) {
        Literal lit;
        lit.begin = i++;
        while (i < text.size() && !lit.closed) {
            const char c = text[i];
            if (c == '"') {
                lit.closed = true;
                ++i;
            } else if (c != '\\') {
                lit.decoded += c;
                ++i;
            } else if (i + 1 >= text.size()) {
                ++i; // an escape cut in half
            } else {
                const char e = text[i + 1];
                i += 2;
                static constexpr std::string_view k_from = "\"\\/bfnrt";
                static constexpr std::string_view k_to = "\"\\/\b\f\n\r\t";
                if (auto at = k_from.find(e); at != std::string_view::npos) {
                    lit.decoded += k_to[at];
                } else if (e == 'u') {
                    int32_t cp = hex4(text, i);
                    if (cp < 0) {
                        continue;
                    }
                    i += 4;
                    if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < text.size() && text[i] == '\\' &&
                        text[i + 1] == 'u') {
                        if (int32_t low = hex4(text, i + 2); low >= 0xDC00 && low < 0xE000) {
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                            i += 6;
                        }
                    }
                    append_utf8(lit.decoded, cp >= 0xD800 && cp < 0xE000 ? 0xFFFD : cp);
                }
            }
        }
        lit.end = i;
        out.push_back(std::move(lit));
    }
    return out;
}

// `s` as a JSON string literal, without its closing quote when `closed` is
// false (the literal of a cut body stays cut).
std::string literal_of(const std::string& s, bool closed) {
    auto q = dump(Json(s));
    if (!closed) {
        q.pop_back();
    }
    return q;
}

// `text` with each string literal whose decoded value holds a secret (or, in
// text cut at `end`, whose unclosed last literal ends in a secret's start)
// written again redacted; a literal in `given` (by its index) becomes the
// value given instead. True when something changed.
bool redact_literals(std::string& text, const util::Redactor& redactor, util::TextEnd end,
                     const std::map<size_t, std::string>& given = {}) {
    std::string out;
    size_t pos = 0;
    bool changed = false;
    auto lits = string_literals(text);
    for (size_t k = 0; k < lits.size(); ++k) {
        auto& lit = lits[k];
        std::string now = std::move(lit.decoded);
        bool hit;
        if (auto it = given.find(k); it != given.end()) {
            hit = now != it->second;
            now = it->second;
        } else {
            hit = redactor.apply(now, lit.closed ? util::TextEnd::whole : end);
        }
        if (!hit) {
            continue;
        }
        out.append(text, pos, lit.begin - pos);
        out += literal_of(now, lit.closed);
        pos = lit.end;
        changed = true;
    }
    if (changed) {
        out.append(text, pos);
        text = std::move(out);
    }
    return changed;
}

// Whether literal `k` of `lits` (read from `text`) is the value of a key the
// answer is assembled from ("text", "content", "reasoning",
// "reasoning_content"); `reasoning` says which.
bool answer_value(std::string_view text, const std::vector<Literal>& lits, size_t k,
                  bool& reasoning) {
    if (k == 0 || !lits[k - 1].closed) {
        return false;
    }
    const auto between = text.substr(lits[k - 1].end, lits[k].begin - lits[k - 1].end);
    if (between.find_first_not_of(" \t\r\n:") != std::string_view::npos ||
        std::count(between.begin(), between.end(), ':') != 1) {
        return false;
    }
    const auto& key = lits[k - 1].decoded;
    reasoning = key == "reasoning" || key == "reasoning_content";
    return reasoning || key == "text" || key == "content";
}

std::string redact_stream(std::string body, Endpoint endpoint, const util::Redactor& redactor,
                          util::TextEnd end) {
    http::SseParser parser;
    auto events = parser.feed(body);
    // What follows the last complete event: nothing in a whole stream, the
    // event the transfer stopped in when it was cut.
    const size_t complete = parser.complete_bytes();
    std::string rest = body.substr(complete);
    bool rest_is_event = false;
    if (end == util::TextEnd::cut && !rest.empty()) {
        // An event whole but for the blank line that ends it is read as one.
        if (auto more = parser.feed("\n\n"); more.size() == 1 && !parse(more[0]).is_discarded()) {
            events.push_back(std::move(more[0]));
            rest.clear();
            rest_is_event = true;
        }
    }
    StreamAccumulator acc(endpoint);
    acc.read_past_end();
    std::vector<StreamPiece> pieces;
    acc.record_pieces(&pieces);
    for (const auto& e : events) {
        acc.on_event(e, 0);
    }
    // Each piece's string as it is now (and after them, below, those of a
    // cut stream's unfinished event).
    std::vector<std::string> now;
    now.reserve(pieces.size() + 1);
    for (const auto& p : pieces) {
        now.push_back((p.reasoning ? acc.reasoning() : acc.text()).substr(p.begin, p.size));
    }
    const auto original = now;
    // A cut stream's unfinished event: the strings of its answer's fields
    // go on from where the complete events stopped (by index into `now`,
    // their literals' indexes, which field).
    struct Continued {
        size_t at = 0;
        size_t literal = 0;
        bool reasoning = false;
    };
    std::vector<Continued> continued;
    if (end == util::TextEnd::cut && !rest.empty()) {
        auto lits = string_literals(rest);
        for (size_t k = 0; k < lits.size(); ++k) {
            if (bool reasoning = false; answer_value(rest, lits, k, reasoning)) {
                // Copied: the next literal may read this one as its name.
                continued.push_back({now.size(), k, reasoning});
                now.push_back(lits[k].decoded);
            }
        }
    }
    // The secrets of the strings `which` (of `now`) joined, cut out of them.
    auto cut_from = [&](const std::vector<size_t>& which, util::TextEnd at) {
        std::string whole;
        std::vector<StreamPiece> slices;
        for (size_t i : which) {
            slices.push_back({0, "", false, whole.size(), now[i].size()});
            whole += now[i];
        }
        const auto spans = redactor.find(whole, at);
        if (spans.empty()) {
            return;
        }
        auto strings = redact_pieces(whole, slices, spans);
        for (size_t k = 0; k < which.size(); ++k) {
            now[which[k]] = std::move(strings[k]);
        }
    };
    // The text, the reasoning, then both in the order they arrived; the end
    // of a cut stream is where its last string stopped.
    for (const bool reasoning : {false, true}) {
        std::vector<size_t> mine;
        for (size_t i = 0; i < pieces.size(); ++i) {
            if (pieces[i].reasoning == reasoning) {
                mine.push_back(i);
            }
        }
        for (const auto& c : continued) {
            if (c.reasoning == reasoning) {
                mine.push_back(c.at);
            }
        }
        cut_from(mine, util::TextEnd::whole);
    }
    std::vector<size_t> all(now.size());
    for (size_t i = 0; i < all.size(); ++i) {
        all[i] = i;
    }
    cut_from(all, end);
    // The new string of every piece, by event.
    std::map<size_t, std::vector<std::pair<const StreamPiece*, std::string>>> by_event;
    for (size_t i = 0; i < pieces.size(); ++i) {
        if (now[i] != original[i]) {
            by_event[pieces[i].event].emplace_back(&pieces[i], now[i]);
        }
    }
    // The unfinished event: its answer's strings as cut above, its other
    // strings and bytes redacted on their own.
    std::map<size_t, std::string> given;
    for (const auto& c : continued) {
        given[c.literal] = now[c.at];
    }
    redact_literals(rest, redactor, end, given);
    redactor.apply(rest, end);
    // An event whose known spellings, replaced, leave its strings as they
    // must be keeps its bytes but for the marks; the others are written again.
    bool changed = false;
    for (size_t i = 0; i < events.size(); ++i) {
        std::string raw = events[i];
        redactor.apply(raw);
        auto j = parse(raw);
        bool rewrite = false;
        if (j.is_discarded()) {
            // Not JSON, or a key whose raw spelling took JSON syntax with it.
            j = parse(events[i]);
            if (j.is_discarded()) {
                changed |= redact_literals(raw, redactor, util::TextEnd::whole);
                events[i] = std::move(raw);
                continue;
            }
            rewrite = raw != events[i];
        }
        if (auto it = by_event.find(i); it != by_event.end()) {
            for (auto& [piece, text] : it->second) {
                if (auto* place = place_of(j, *piece); place && *place != text) {
                    *place = std::move(text);
                    rewrite = true;
                }
            }
        }
        // Secrets whole in other strings, in escapes of the server's own.
        rewrite |= redact_strings(j, redactor);
        if (rewrite) {
            events[i] = dump(j);
            changed = true;
        } else {
            events[i] = std::move(raw);
        }
    }
    if (!changed) {
        // Keeping the stream's bytes but for the marks.
        if (!rest_is_event) {
            body.resize(complete);
            body += rest;
        }
    } else {
        body = write_events(events) + rest;
    }
    // A spelling across an event's end and the next one's start.
    redactor.apply(body, end);
    return body;
}

} // namespace

std::vector<std::string> redact_pieces(std::string_view whole,
                                       const std::vector<StreamPiece>& pieces,
                                       const std::vector<util::Redactor::Span>& spans) {
    std::vector<std::string> out;
    out.reserve(pieces.size());
    auto span = spans.begin();
    for (const auto& p : pieces) {
        const size_t begin = p.begin;
        const size_t end = p.begin + p.size;
        while (span != spans.end() && span->end <= begin) {
            ++span;
        }
        std::string s;
        size_t pos = begin;
        for (auto sp = span; sp != spans.end() && sp->begin < end; ++sp) {
            if (sp->begin >= begin) {
                s.append(whole, pos, sp->begin - pos);
                s += util::Redactor::k_mark;
            }
            pos = std::max(pos, std::min(sp->end, end));
        }
        s.append(whole, pos, end - pos);
        out.push_back(std::move(s));
    }
    return out;
}

bool escaped_secret(std::string_view body, const util::Redactor& redactor) {
    if (redactor.empty() || (body.find("\\u") == std::string_view::npos &&
                             body.find("\\/") == std::string_view::npos)) {
        return false;
    }
    for (const auto& lit : string_literals(body)) {
        if (body.substr(lit.begin, lit.end - lit.begin).find('\\') != std::string_view::npos &&
            !redactor.find(lit.decoded).empty()) {
            return true;
        }
    }
    return false;
}

namespace {

// Passes over one body at most (see redact_body).
constexpr int k_max_passes = 16;

std::string redact_once(std::string body, BodyShape shape, Endpoint endpoint,
                        const util::Redactor& redactor, util::TextEnd end) {
    if (shape == BodyShape::stream) {
        return redact_stream(std::move(body), endpoint, redactor, end);
    }
    // The key written whole in a spelling the Redactor knows: the bytes are
    // kept but for the marks, unless a decoded string still holds it.
    redactor.apply(body);
    auto j = parse(body);
    if (j.is_discarded()) {
        // Cut short, or not JSON: its strings one by one.
        redact_literals(body, redactor, end);
        redactor.apply(body, end);
        return body;
    }
    if (redact_strings(j, redactor)) {
        body = dump(j);
    }
    // A cut body that parses all the same (a number) may still end in a start.
    redactor.apply(body, end);
    return body;
}

} // namespace

std::string redact_body(std::string body, BodyShape shape, Endpoint endpoint,
                        const util::Redactor& redactor, util::TextEnd end) {
    if (redactor.empty()) {
        return body;
    }
    // A secret holding a quote or a backslash, cut out of the bytes, moves
    // where the string literals begin and end, so the body read again can
    // hold strings (an answer's field, the key's start at the end) that were
    // not there: the result is read again until it stands. A pass that moves
    // them takes a quote or a backslash away, and the mark has none, so the
    // passes are few; a body with nothing to cut takes one.
    for (int pass = 0; pass < k_max_passes; ++pass) {
        auto next = redact_once(body, shape, endpoint, redactor, end);
        if (next == body) {
            break;
        }
        body = std::move(next);
    }
    return body;
}

} // namespace diffeval::engine
