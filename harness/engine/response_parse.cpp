// Response parsing for completions and chat completions (vLLM, SGLang,
// llama.cpp server and TGI all answer in the OpenAI shapes; the reasoning
// field is `reasoning` in current vLLM and `reasoning_content` before).
#include <harness/engine/response_parse.hpp>

#include <harness/util/simdjson_member.hpp>
#include <harness/util/text.hpp>
#include <harness/util/untrusted_json.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

namespace diffeval::engine {

namespace {

// More tokens than any served model's context: a count above it is a
// server bug, not a measurement.
constexpr int64_t k_max_token_count = 100'000'000;

std::optional<std::string> string_field(const nlohmann::json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string()) {
        return std::nullopt;
    }
    return it->get<std::string>();
}

// A usage count: absent or null is NULL; a value that is not a count (a
// fraction, a string, negative, overflowing, absurd) is NULL with a note.
std::optional<int64_t> count_field(const nlohmann::json& obj, const char* key, std::string& notes) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
        return std::nullopt;
    }
    if (it->is_number_unsigned() && it->get<uint64_t>() <= uint64_t{k_max_token_count}) {
        return static_cast<int64_t>(it->get<uint64_t>());
    }
    if (it->is_number_integer() && !it->is_number_unsigned() && it->get<int64_t>() >= 0 &&
        it->get<int64_t>() <= k_max_token_count) {
        return it->get<int64_t>();
    }
    std::string shown = it->dump();
    if (shown.size() > 40) {
        shown = shown.substr(0, 40) + "...";
    }
    notes += fmt::format("{}usage.{} {} is not a token count; stored as NULL",
                         notes.empty() ? "" : "; ", key, shown);
    return std::nullopt;
}

// A field that must be a string when present: false when it has another
// type (null counts as absent).
bool string_or_null(const nlohmann::json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() || it->is_string();
}

// A stop value with its JSON type: a stop string, a token id, or null (the
// end of sequence); nothing for any other type or a token id beyond int64,
// which no engine sends: such a field is of the wrong type, not a null.
std::optional<util::StopReason> stop_value(const nlohmann::json& v) {
    if (v.is_null()) {
        return util::StopReason{};
    }
    if (v.is_string()) {
        return v.get<std::string>();
    }
    if (v.is_number_integer() && !v.is_number_unsigned()) {
        return v.get<int64_t>();
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t{INT64_MAX}) {
        return static_cast<int64_t>(v.get<uint64_t>());
    }
    return std::nullopt;
}

// What is wrong with the stop field `key`: the wording of the other
// wrong-typed fields.
std::string wrong_stop(std::string_view whose, std::string_view key) {
    return fmt::format("{} {} is not a string, a token id or null", whose, key);
}

// The stop a choice names, and the field that named it: vLLM's stop_reason
// (null for EOS), SGLang's matched_stop (a string or a token id), TGI's
// finish_reason eos_token / stop_sequence (before TGI 2.2), llama.cpp's own
// `__verbose` object of the response `body` (only from a server started with
// --verbose: stop_type "word" with its stopping_word, "eos", "limit"). A field
// that is absent leaves `field` as it was. Returns the key of a stop field
// of the wrong type, leaving both as they were.
std::optional<std::string_view> read_stop(const nlohmann::json& body, const nlohmann::json& choice,
                                          util::StopReason& stop, std::string& field) {
    for (const char* key : {"stop_reason", "matched_stop"}) {
        auto it = choice.find(key);
        if (it == choice.end()) {
            continue;
        }
        auto value = stop_value(*it);
        if (!value) {
            return key;
        }
        field = key;
        stop = std::move(*value);
        return std::nullopt;
    }
    if (auto fr = string_field(choice, "finish_reason");
        fr && (*fr == "eos_token" || *fr == "stop_sequence")) {
        field = "finish_reason";
        return std::nullopt;
    }
    auto verbose = body.find("__verbose");
    if (verbose == body.end() || !verbose->is_object()) {
        return std::nullopt;
    }
    auto type = string_field(*verbose, "stop_type");
    if (type == "word") {
        field = "__verbose.stop_type";
        stop = string_field(*verbose, "stopping_word").value_or("");
    } else if (type == "eos") {
        field = "__verbose.stop_type";
    }
    return std::nullopt;
}

// The common answer read with simdjson, several times faster than the DOM
// parser below (a sixth of the client's CPU per response went to it). It
// only ever fills `row` with a success exactly as parse_success_body_nlohmann
// would; anything else (an error of any kind, a count that needs a note, a
// number simdjson cannot hold) returns false without touching `row`, and the
// DOM parser decides. Duplicate keys resolve to the last, as nlohmann's do.
namespace fast {

constexpr size_t k_max_fast_bytes = size_t{1} << 20;

using simdjson::dom::element;
using simdjson::dom::object;
using util::last_member;

// `v` as an optional string: absent or null is nullopt; false when present
// with another type.
bool string_or_null(const std::optional<element>& v, std::optional<std::string>& out) {
    out.reset();
    if (!v || v->is_null()) {
        return true;
    }
    std::string_view text;
    if (v->get_string().get(text) != simdjson::SUCCESS) {
        return false;
    }
    out.emplace(text);
    return true;
}

// A string member, or nullopt when absent or of another type.
std::optional<std::string> string_field(object obj, std::string_view key) {
    std::optional<std::string> out;
    if (!string_or_null(last_member(obj, key), out)) {
        out.reset();
    }
    return out;
}

// A usage count; false when it would need a note.
bool count_field(object usage, std::string_view key, std::optional<int64_t>& out) {
    out.reset();
    auto v = last_member(usage, key);
    if (!v || v->is_null()) {
        return true;
    }
    int64_t n = 0;
    if (v->type() != simdjson::dom::element_type::INT64 || v->get_int64().get(n) || n < 0 ||
        n > k_max_token_count) {
        return false;
    }
    out = n;
    return true;
}

// stop_value() of the JSON types simdjson gives: an integer that does not
// fit int64 fails its parse, a fraction is a double; nothing for those and
// every other type, which the DOM parser names.
std::optional<util::StopReason> stop_value(const element& v) {
    std::string_view text;
    int64_t n = 0;
    if (v.is_null()) {
        return util::StopReason{};
    }
    if (v.get_string().get(text) == simdjson::SUCCESS) {
        return std::string(text);
    }
    if (v.type() == simdjson::dom::element_type::INT64 && !v.get_int64().get(n)) {
        return n;
    }
    return std::nullopt;
}

// read_stop() above, member for member; false for a stop field of the wrong
// type.
bool read_stop(object body, object choice, const std::optional<std::string>& finish_reason,
               util::StopReason& stop, std::string& field) {
    for (const char* key : {"stop_reason", "matched_stop"}) {
        if (auto v = last_member(choice, key)) {
            auto value = stop_value(*v);
            if (!value) {
                return false;
            }
            field = key;
            stop = std::move(*value);
            return true;
        }
    }
    if (finish_reason && (*finish_reason == "eos_token" || *finish_reason == "stop_sequence")) {
        field = "finish_reason";
        return true;
    }
    object verbose;
    if (auto v = last_member(body, "__verbose"); !v || v->get_object().get(verbose)) {
        return true;
    }
    auto type = string_field(verbose, "stop_type");
    if (type == "word") {
        field = "__verbose.stop_type";
        stop = string_field(verbose, "stopping_word").value_or("");
    } else if (type == "eos") {
        field = "__verbose.stop_type";
    }
    return true;
}

bool parse(const std::string& body, Endpoint endpoint, store::ResponseRow& row) {
    // Bodies past k_max_fast_bytes go to the DOM parser, so a thread's
    // parser never keeps more than that much room. simdjson parses without
    // recursion; its depth limit only sends what nlohmann would refuse as
    // too deep to the DOM parser, which says so (it counts a level more in
    // some shapes, so a few bodies of exactly k_max_json_depth levels go
    // there too and are read the same).
    struct Parser {
        simdjson::dom::parser dom{k_max_fast_bytes};
        bool ready = dom.allocate(4096, util::k_max_json_depth) == simdjson::SUCCESS;
    };
    thread_local Parser parser;
    object top;
    if (!parser.ready || body.size() > k_max_fast_bytes ||
        parser.dom.parse(body).get_object().get(top)) {
        return false;
    }
    if (auto e = last_member(top, "error"); e && !e->is_null()) {
        return false;
    }
    if (string_field(top, "object") == "error") {
        return false;
    }
    simdjson::dom::array choices;
    object choice;
    if (auto c = last_member(top, "choices");
        !c || c->get_array().get(choices) || choices.at(0).get_object().get(choice)) {
        return false;
    }
    std::optional<std::string> text;
    std::optional<std::string> reasoning;
    if (endpoint == Endpoint::completion) {
        if (!string_or_null(last_member(choice, "text"), text) || !text) {
            return false;
        }
    } else {
        object msg;
        std::optional<std::string> content;
        std::optional<std::string> reasoning_content;
        if (auto m = last_member(choice, "message");
            !m || m->get_object().get(msg) ||
            !string_or_null(last_member(msg, "content"), content) ||
            !string_or_null(last_member(msg, "reasoning"), reasoning) ||
            !string_or_null(last_member(msg, "reasoning_content"), reasoning_content)) {
            return false;
        }
        if (!reasoning) {
            reasoning = std::move(reasoning_content);
        }
        if (!content && !reasoning) {
            return false;
        }
        text = content.value_or("");
    }
    std::optional<std::string> finish_reason;
    if (!string_or_null(last_member(choice, "finish_reason"), finish_reason)) {
        return false;
    }
    // Counts are set only from a usage object, as below.
    std::optional<int64_t> prompt_tokens;
    std::optional<int64_t> completion_tokens;
    object usage;
    const auto u = last_member(top, "usage");
    const bool counted = u && !u->get_object().get(usage);
    // A usage that is neither an object nor null gets its note there.
    if (u && !counted && !u->is_null()) {
        return false;
    }
    if (counted && (!count_field(usage, "prompt_tokens", prompt_tokens) ||
                    !count_field(usage, "completion_tokens", completion_tokens))) {
        return false;
    }
    util::StopReason stop = row.stop_reason;
    std::string stop_field = row.stop_field;
    if (!read_stop(top, choice, finish_reason, stop, stop_field)) {
        return false;
    }
    row.text = std::move(text);
    if (endpoint == Endpoint::chat) {
        row.reasoning = std::move(reasoning);
    }
    row.stop_reason = std::move(stop);
    row.stop_field = std::move(stop_field);
    row.finish_reason = std::move(finish_reason);
    if (counted) {
        row.prompt_tokens = prompt_tokens;
        row.completion_tokens = completion_tokens;
    }
    row.ok = true;
    row.error.clear();
    row.error_kind.clear();
    return true;
}

} // namespace fast

} // namespace

void parse_success_body(const std::string& body, Endpoint endpoint, store::ResponseRow& row) {
    if (!fast::parse(body, endpoint, row)) {
        parse_success_body_nlohmann(body, endpoint, row);
    }
}

void parse_success_body_nlohmann(const std::string& body, Endpoint endpoint,
                                 store::ResponseRow& row) {
    auto fail = [&](std::string why) {
        row.ok = false;
        row.error_kind = "parse";
        row.error = std::move(why);
    };
    auto j = util::parse_untrusted_json(body);
    if (j.is_discarded()) {
        return fail(!util::json_depth_within(body)
                        ? fmt::format("the response body nests deeper than {} levels",
                                      util::k_max_json_depth)
                    : util::is_utf8(body)
                        ? "the response body is not valid JSON"
                        : "the response body is not valid JSON: it holds bytes that are not "
                          "UTF-8");
    }
    if (!j.is_object()) {
        return fail("the response body is not a JSON object");
    }
    if (is_error_object(j)) {
        return fail("the server answered with an error object: " + error_message(body));
    }
    auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array() || choices->empty() ||
        !(*choices)[0].is_object()) {
        return fail("the response has no choices");
    }
    const auto& choice = (*choices)[0];
    if (endpoint == Endpoint::completion) {
        row.text = string_field(choice, "text");
        if (!row.text) {
            return fail(choice.contains("text") ? "the completion choice's text is not a string"
                                                : "the completion choice has no text");
        }
    } else {
        auto msg = choice.find("message");
        if (msg == choice.end() || !msg->is_object()) {
            return fail("the chat choice has no message");
        }
        for (const char* key : {"content", "reasoning", "reasoning_content"}) {
            if (!string_or_null(*msg, key)) {
                return fail(fmt::format("the chat message's {} is not a string", key));
            }
        }
        row.reasoning = string_field(*msg, "reasoning");
        if (!row.reasoning) {
            row.reasoning = string_field(*msg, "reasoning_content");
        }
        // content may be null when everything went to reasoning, but a
        // message with neither is no answer.
        auto content = string_field(*msg, "content");
        if (!content && !row.reasoning) {
            return fail("the chat message has neither content nor reasoning");
        }
        row.text = content.value_or("");
    }
    if (!string_or_null(choice, "finish_reason")) {
        return fail("the choice's finish_reason is not a string");
    }
    row.finish_reason = string_field(choice, "finish_reason");
    if (auto key = read_stop(j, choice, row.stop_reason, row.stop_field)) {
        return fail(wrong_stop("the choice's", *key));
    }
    if (auto usage = j.find("usage"); usage != j.end() && usage->is_object()) {
        row.prompt_tokens = count_field(*usage, "prompt_tokens", row.notes);
        row.completion_tokens = count_field(*usage, "completion_tokens", row.notes);
    } else if (usage != j.end() && !usage->is_null()) {
        // `"usage": "lots"` was stored with no word of it.
        row.notes += fmt::format("{}usage {} is not an object; token counts stored as NULL",
                                 row.notes.empty() ? "" : "; ", util::one_line(usage->dump(), 40));
    }
    row.ok = true;
    row.error.clear();
    row.error_kind.clear();
}

void StreamAccumulator::on_event(const std::string& data, double at_ms) {
    const size_t event = m_events++;
    if ((!m_error.empty() || m_done_ms) && !m_past_end) {
        ++m_unread;
        return;
    }
    if (data == "[DONE]") {
        m_done_ms = at_ms;
        return;
    }
    auto j = util::parse_untrusted_json(data);
    if (j.is_discarded()) {
        m_error =
            !util::json_depth_within(data)
                ? fmt::format("a stream event nests deeper than {} levels", util::k_max_json_depth)
            : util::is_utf8(data)
                ? "a stream event is not valid JSON"
                : "a stream event is not valid JSON: it holds bytes that are not UTF-8";
        return;
    }
    if (!j.is_object()) {
        m_error = "a stream event is not a JSON object";
        return;
    }
    if (is_error_object(j)) {
        m_error = "the server sent an error mid-stream: " + error_message(data);
        return;
    }
    if (auto usage = j.find("usage"); usage != j.end() && usage->is_object()) {
        m_notes.clear();
        m_prompt_tokens = count_field(*usage, "prompt_tokens", m_notes);
        m_completion_tokens = count_field(*usage, "completion_tokens", m_notes);
    }
    auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array() || choices->empty() ||
        !(*choices)[0].is_object()) {
        return; // e.g. the final usage-only chunk
    }
    // The answer is choice 0's, as an unstreamed body's first choice: a
    // server streaming several (`n` in a framing's fields) sends each
    // choice's chunks with its index, and joining them made up a text no
    // choice said. A chunk of another choice only is passed over.
    const nlohmann::json* found = nullptr;
    for (const auto& c : *choices) {
        if (!c.is_object()) {
            continue;
        }
        const auto index = c.find("index");
        if (index != c.end() && !index->is_number_integer()) {
            m_error = "a stream chunk's choice index is not a whole number";
            return;
        }
        if (index == c.end() || *index == 0) {
            found = &c;
            break;
        }
    }
    if (!found) {
        return;
    }
    m_any_choice = true;
    const auto& choice = *found;
    if (auto why = wrong_type_in(choice)) {
        m_error = *why;
        return;
    }
    if (auto key = read_stop(j, choice, m_stop_reason, m_stop_field)) {
        m_error = wrong_stop("a stream chunk's", *key);
        return;
    }
    // Only when asked (a body being redacted): the run's hot path pays a test.
    auto record = [&](const char* key, bool reasoning, const std::string& into,
                      const std::string& added) {
        if (m_pieces && !added.empty()) {
            m_pieces->push_back({event, key, reasoning, into.size() - added.size(), added.size()});
        }
    };
    std::string piece;
    if (m_endpoint == Endpoint::completion) {
        auto text = string_field(choice, "text");
        m_any_text |= text.has_value();
        // `"text": null` too: a stream of nulls ending with a finish_reason is
        // an empty answer, as chat's null content is (llama.cpp streams one
        // cut by a stop string before any text so).
        m_shaped |= choice.contains("text");
        piece = text.value_or("");
        m_text += piece;
        record("text", false, m_text, piece);
    } else if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_null()) {
        // A chat chunk with nothing in it (`"delta": null`, as `"text":
        // null` on a completion): of the endpoint's shape, no text.
        m_shaped = true;
    } else if (delta != choice.end() && delta->is_object()) {
        m_shaped = true;
        auto maybe_content = string_field(*delta, "content");
        m_any_text |= maybe_content.has_value();
        auto content = maybe_content.value_or("");
        const char* reasoning_key = "reasoning";
        auto reasoning = string_field(*delta, "reasoning");
        if (!reasoning) {
            reasoning_key = "reasoning_content";
            reasoning = string_field(*delta, "reasoning_content");
        }
        if (reasoning) {
            m_has_reasoning = true;
            m_reasoning += *reasoning;
            record(reasoning_key, true, m_reasoning, *reasoning);
            piece += *reasoning;
        }
        m_text += content;
        record("content", false, m_text, content);
        piece += content;
    }
    if (!piece.empty()) {
        if (!m_first_token_ms) {
            m_first_token_ms = at_ms;
        } else {
            m_gaps_ms.push_back(at_ms - m_last_token_ms);
        }
        m_last_token_ms = at_ms;
    }
    if (auto fr = string_field(choice, "finish_reason")) {
        m_finish_reason = fr;
    }
}

std::optional<std::string> StreamAccumulator::wrong_type_in(const nlohmann::json& choice) const {
    if (!string_or_null(choice, "finish_reason")) {
        return "a stream chunk's finish_reason is not a string";
    }
    if (m_endpoint == Endpoint::completion) {
        if (!string_or_null(choice, "text")) {
            return "a stream chunk's text is not a string";
        }
        return std::nullopt;
    }
    auto delta = choice.find("delta");
    if (delta == choice.end() || delta->is_null()) {
        return std::nullopt;
    }
    if (!delta->is_object()) {
        return "a stream chunk's delta is not an object";
    }
    for (const char* key : {"content", "reasoning", "reasoning_content"}) {
        if (!string_or_null(*delta, key)) {
            return fmt::format("a stream chunk's delta.{} is not a string", key);
        }
    }
    return std::nullopt;
}

void StreamAccumulator::finish(store::ResponseRow& row) const {
    row.streamed = true;
    row.text = m_text;
    if (m_has_reasoning) {
        row.reasoning = m_reasoning;
    }
    row.finish_reason = m_finish_reason;
    row.stop_reason = m_stop_reason;
    row.stop_field = m_stop_field;
    row.prompt_tokens = m_prompt_tokens;
    row.completion_tokens = m_completion_tokens;
    row.ttft_ms = m_first_token_ms;
    row.token_gaps_json = nlohmann::json(m_gaps_ms).dump();
    row.notes = m_notes;
    if (!m_error.empty()) {
        row.ok = false;
        row.error_kind = "stream";
        row.error = m_error;
    } else if (!m_any_choice) {
        row.ok = false;
        row.error_kind = "parse";
        // No event at all: the body was no event stream (a server that
        // ignores `stream: true` sends one JSON body, which an audit saw
        // called "the stream carried no choices").
        row.error = m_events == 0 ? "the response held no stream events (no `data:` line): the "
                                    "server did not stream, though the request asked it to"
                                  : "the stream carried no choices";
    } else if (!m_shaped) {
        // Chunks of another shape (a chat delta on a completion, a
        // completion's text or a whole message on chat) ending with a bare
        // finish_reason: no answer at all, as the same body unstreamed is
        // none. `"text": ""` or a `delta` without content would be an empty
        // one.
        row.ok = false;
        row.error_kind = "parse";
        row.error = m_endpoint == Endpoint::completion
                        ? "no stream chunk's choice had a text field"
                        : "no stream chunk's choice had a delta object";
    } else if (!m_any_text && !m_has_reasoning && !m_finish_reason) {
        // Like a message with neither content nor reasoning: no answer. (A
        // stream that ends with a finish_reason and nothing before it is an
        // empty answer, as llama.cpp sends when a stop string comes first.)
        row.ok = false;
        row.error_kind = "parse";
        row.error = "the stream carried neither text nor reasoning";
    } else if (!m_finish_reason && !m_done_ms) {
        // Closed mid-answer: what arrived is kept in the raw body, but
        // it is not an answer.
        row.ok = false;
        row.error_kind = "stream";
        row.error = "the stream ended without a finish_reason or [DONE] (cut off)";
    } else {
        row.ok = true;
    }
}

namespace {

// The message as the server wrote it, control characters kept.
std::string raw_error_message(const std::string& body) {
    auto j = util::parse_untrusted_json(body);
    if (j.is_object()) {
        if (auto e = j.find("error"); e != j.end()) {
            if (e->is_object()) {
                if (auto m = string_field(*e, "message")) {
                    return *m;
                }
            } else if (e->is_string()) {
                return e->get<std::string>();
            }
        }
        if (auto m = string_field(j, "message")) {
            return *m;
        }
        if (auto d = string_field(j, "detail")) {
            return *d;
        }
    }
    constexpr size_t k_max = 300;
    std::string cut(util::utf8_byte_prefix(body, k_max));
    if (body.size() > k_max) {
        cut += "...";
    }
    return cut.empty() ? "(empty body)" : cut;
}

} // namespace

bool is_error_object(const nlohmann::json& j) {
    if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
        return true;
    }
    auto o = j.find("object");
    return o != j.end() && o->is_string() && o->get_ref<const std::string&>() == "error";
}

std::string error_message(const std::string& body) {
    // Printed and stored as one line: a server's control characters must not
    // forge lines of diffeval's own, and it may send a message of any length.
    return util::one_line(raw_error_message(body), util::k_server_words_bytes);
}

} // namespace diffeval::engine
