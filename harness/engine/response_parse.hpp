// Turning a server's raw answer into the stored fields: the text, the
// separated reasoning, finish and stop reasons (with their JSON types kept),
// and token usage. Parsing never throws: what cannot be parsed is an error
// that keeps the raw body.
#pragma once

#include <harness/store/store.hpp>

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

namespace diffeval::engine {

enum class Endpoint { completion, chat };

// Fill `row` from an HTTP 200 `body` of `endpoint`. Sets row.ok, or row.error
// and row.error_kind = "parse" when the body is not a usable response: not
// JSON, nested too deep, no choice, or a field of the wrong type. Token
// counts that are not counts are stored as NULL with a note in row.notes.
void parse_success_body(const std::string& body, Endpoint endpoint, store::ResponseRow& row);

// The same with nlohmann's DOM parser alone. parse_success_body reads the
// common answer with simdjson and leaves everything else to this; fuzz_response
// checks that the two always agree.
void parse_success_body_nlohmann(const std::string& body, Endpoint endpoint,
                                 store::ResponseRow& row);

// A string of one stream event that went into the assembled text or
// reasoning: the event (counted from 0 over every event given to the
// accumulator), its key, and where it lies in the assembled field.
struct StreamPiece {
    size_t event = 0;
    const char* key = "";   // "text", "content", "reasoning" or "reasoning_content"
    bool reasoning = false; // in the reasoning, else in the text
    size_t begin = 0;
    size_t size = 0;
};

// Accumulates a streamed (SSE) response chunk by chunk: text and reasoning
// deltas, finish and stop reasons, usage, the time of the first token and
// the gaps between content chunks. An error object mid-stream, a field of
// the wrong type, a completion none of whose chunks had a `text` field, or a
// stream that ends with neither a finish_reason nor [DONE] makes the
// response an error, keeping what arrived before it.
class StreamAccumulator {
public:
    explicit StreamAccumulator(Endpoint endpoint) : m_endpoint(endpoint) {}

    // One event's data, received `at_ms` after the request started.
    void on_event(const std::string& data, double at_ms);
    // Fill `row` from what arrived (call after the transfer ended with 2xx).
    void finish(store::ResponseRow& row) const;
    // Whether [DONE] arrived: the answer is whole, however the transfer ends.
    bool done() const { return m_done_ms.has_value(); }
    // When [DONE] arrived (on_event's clock); nullopt before.
    std::optional<double> done_ms() const { return m_done_ms; }
    // Record into `pieces` every non-empty string taken into the text or the
    // reasoning from now on (redact_body.cpp maps a secret back to them).
    void record_pieces(std::vector<StreamPiece>* pieces) { m_pieces = pieces; }
    // Read on past [DONE] and past an error: the text and reasoning then go
    // on with what a server sent after its answer ended (redact_body.cpp
    // looks for a secret there too; the answer itself is never read so).
    void read_past_end() { m_past_end = true; }
    // Events that arrived after [DONE] or an error and were not read.
    size_t unread_events() const { return m_unread; }
    // The text and the reasoning assembled so far.
    const std::string& text() const { return m_text; }
    const std::string& reasoning() const { return m_reasoning; }

private:
    // Why `choice` cannot be read (a field of the wrong type), if it cannot.
    std::optional<std::string> wrong_type_in(const nlohmann::json& choice) const;

    Endpoint m_endpoint;
    std::string m_text;
    std::string m_reasoning;
    bool m_has_reasoning = false;
    std::optional<std::string> m_finish_reason;
    util::StopReason m_stop_reason;
    std::string m_stop_field;
    std::optional<int64_t> m_prompt_tokens;
    std::optional<int64_t> m_completion_tokens;
    std::optional<double> m_first_token_ms;
    double m_last_token_ms = 0;
    std::vector<double> m_gaps_ms;
    std::optional<double> m_done_ms; // set when [DONE] arrived
    bool m_any_choice = false;
    bool m_any_text = false; // some chunk had content (or text) as a string
    // A choice of the endpoint's shape: a completion's `text` (a string or
    // null), a chat's `delta` (an object or null). Without one the chunks were of
    // another shape, and an answer ok with empty text lost what they held
    // (an audit: completion chunks on chat).
    bool m_shaped = false;
    std::string m_error;
    std::string m_notes; // about the usage counts
    size_t m_events = 0; // given to on_event so far
    std::vector<StreamPiece>* m_pieces = nullptr;
    bool m_past_end = false;
    size_t m_unread = 0;
};

// Whether `j` (a JSON object) is a server's error rather than an answer: an
// OpenAI-style `error` member, or vLLM's {"object": "error", "message": ...}.
bool is_error_object(const nlohmann::json& j);

// The message of an OpenAI-style error body ({"error": {"message": ...}} or
// {"message": ...}), else the body itself cut to a readable length.
std::string error_message(const std::string& body);

} // namespace diffeval::engine
