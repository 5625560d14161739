// Parsing JSON that came from outside diffeval (servers, downloads). Depth is
// bounded before the parser sees the text: nlohmann's copies and dumps recurse
// once per nesting level, so a 100,000-deep reply would overflow the stack.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace diffeval::util {

// Deepest nesting of arrays and objects accepted from outside. OpenAI-style
// responses use 5 levels; tool-call arguments a few more.
inline constexpr int k_max_json_depth = 64;

// True when no array or object in `text` nests deeper than `max_depth`
// (strings are skipped, so brackets inside them do not count).
bool json_depth_within(std::string_view text, int max_depth = k_max_json_depth);

// Parse `text`; a discarded value when it is not JSON or nests too deep.
nlohmann::json parse_untrusted_json(std::string_view text);

} // namespace diffeval::util
