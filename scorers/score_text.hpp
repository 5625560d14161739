// Which part of a response a scorer reads.
//
// The reference harnesses score the whole `text` the server returned, think
// block included, which is how a number inside unfinished reasoning becomes
// an "answer". `after_think` scores only what the model wrote after its
// reasoning, so the two can be compared on the same stored responses.
#pragma once

#include <harness/util/result.hpp>

#include <string_view>

namespace diffeval::scorers {

enum class ScoreText {
    full,        // the `text` field as returned (what the reference harnesses score)
    after_think, // only what follows the last `</think>`
};

// The tags that delimit a reasoning block inside `text`.
inline constexpr std::string_view k_think_open = "<think>";
inline constexpr std::string_view k_think_close = "</think>";

// The part of `text` to score under `mode`. For `after_think`: what follows
// the last `</think>`; with no `</think>`, the whole text if it does not open
// with `<think>` (after leading whitespace), else the empty string, because
// an unclosed block is still reasoning. The result is a view into `text`.
std::string_view select_scored_text(std::string_view text, ScoreText mode);

// "full" or "after-think".
std::string_view score_text_name(ScoreText mode);

// Parse "full" or "after-think" (as written by score_text_name) from `name`.
util::Result<ScoreText> parse_score_text(std::string_view name);

// True if `text`, after leading whitespace (what Python's str.isspace()
// accepts), starts with `<think>`.
bool opens_with_think(std::string_view text);

} // namespace diffeval::scorers
