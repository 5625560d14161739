// Rewriting a body whose decoded fields held a secret; see redact_body.hpp.
// The stream is read again with the run's own parser and accumulator, so the
// pieces found are those the stored text was assembled from.
#include <harness/engine/redact_body.hpp>

#include <harness/http/sse.hpp>
#include <harness/util/untrusted_json.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
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

std::string redact_stream(std::string body, Endpoint endpoint, const util::Redactor& redactor) {
    http::SseParser parser;
    auto events = parser.feed(body);
    StreamAccumulator acc(endpoint);
    std::vector<StreamPiece> pieces;
    acc.record_pieces(&pieces);
    for (const auto& e : events) {
        acc.on_event(e, 0);
    }
    // The new string of every piece, by event.
    std::map<size_t, std::vector<std::pair<const StreamPiece*, std::string>>> by_event;
    for (const bool reasoning : {false, true}) {
        const auto& whole = reasoning ? acc.reasoning() : acc.text();
        const auto spans = redactor.find(whole);
        if (spans.empty()) {
            continue;
        }
        std::vector<size_t> index; // of `pieces`
        std::vector<StreamPiece> mine;
        for (size_t i = 0; i < pieces.size(); ++i) {
            if (pieces[i].reasoning == reasoning) {
                index.push_back(i);
                mine.push_back(pieces[i]);
            }
        }
        auto strings = redact_pieces(whole, mine, spans);
        for (size_t i = 0; i < mine.size(); ++i) {
            if (whole.compare(mine[i].begin, mine[i].size, strings[i]) != 0) {
                by_event[mine[i].event].emplace_back(&pieces[index[i]], std::move(strings[i]));
            }
        }
    }
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
        redactor.apply(body); // keeping the stream's bytes but for the marks
        return body;
    }
    return write_events(events);
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

std::string redact_body(std::string body, BodyShape shape, Endpoint endpoint,
                        const util::Redactor& redactor) {
    if (redactor.empty()) {
        return body;
    }
    if (shape == BodyShape::stream) {
        return redact_stream(std::move(body), endpoint, redactor);
    }
    // The key written whole in a spelling the Redactor knows: the bytes are
    // kept but for the marks, unless a decoded string still holds it.
    redactor.apply(body);
    auto j = parse(body);
    if (j.is_discarded() || !redact_strings(j, redactor)) {
        return body;
    }
    return dump(j);
}

} // namespace diffeval::engine
