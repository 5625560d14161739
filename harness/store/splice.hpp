// Spliced bodies (schema version 11, docs/schema.md): a response body is
// stored without the text the row already holds in its own columns.
//
// A completion's text is in `responses.text` and, JSON-quoted, in the raw
// body; a probe's top alternatives are in `probe_responses.top_json` and, as
// an object, in the raw body. The stored body has that one occurrence
// replaced by a slot, a small JSON object naming the column, and the views
// put it back with SQLite's replace() and json_quote(). A body is spliced
// only when that gives back exactly the bytes received; otherwise it is
// stored whole.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace diffeval::store {

// What stands in a stored body for the text of each column. Valid JSON, so a
// stored body still parses; all begin with k_slot_start.
inline constexpr std::string_view k_slot_start = R"({"$diffeval":")";
inline constexpr std::string_view k_text_slot = R"({"$diffeval":"text"})";
inline constexpr std::string_view k_reasoning_slot = R"({"$diffeval":"reasoning"})";
inline constexpr std::string_view k_top_slot = R"({"$diffeval":"top_json"})";
static_assert(k_text_slot.starts_with(k_slot_start) && k_reasoning_slot.starts_with(k_slot_start) &&
              k_top_slot.starts_with(k_slot_start));

// `s` as a JSON string, the way SQLite's json_quote() writes it, when every
// JSON writer we know writes it the same way (Python's json with
// ensure_ascii=False, nlohmann, SQLite): valid UTF-8 with no control
// character but newline, tab and carriage return, and no DEL. nullopt for
// anything else, which is then never spliced.
std::optional<std::string> plain_json_quote(std::string_view s);

// The stored form of a response body: `body` with the first occurrence of
// `text` and of `reasoning`, JSON-quoted, replaced by their slots, when that
// saves bytes and v_responses's expression gives `body` back exactly.
// nullopt when the body is stored as received.
std::optional<std::string> splice_response(std::string_view body,
                                           const std::optional<std::string>& text,
                                           const std::optional<std::string>& reasoning);

// The object of top alternatives that `top_json` ([[token, logprob], ...])
// rebuilds, as v_probe_responses writes it: {"token":logprob,...} with each
// log-probability's JSON text as top_json has it; nullopt when top_json is
// not [[string, float or null], ...] with plain tokens (plain_json_quote),
// or is empty. top_json as diffeval writes it is read by a scan that copies
// each token's and number's text; anything else by a JSON parser,
// top_object_parsed, which the scan is tested against.
std::optional<std::string> top_object(std::string_view top_json);
std::optional<std::string> top_object_parsed(std::string_view top_json);

// The stored form of a probe body: the object of top alternatives that
// `top_json` ([[token, logprob], ...]) rebuilds replaced by k_top_slot, when
// v_probe_responses's expression gives `body` back exactly. nullopt when the
// body is stored as received (chat and llama.cpp's formats list more than
// the token and its log-probability).
std::optional<std::string> splice_probe(std::string_view body, std::string_view top_json);

} // namespace diffeval::store
