// Selecting the scored part of a response; see score_text.hpp for the rules
// and docs/scorers.md for examples.
#include <scorers/score_text.hpp>

#include <scorers/python.hpp>

#include <fmt/format.h>

namespace diffeval::scorers {

// After leading whitespace as docs/classification.md defines it, Python's
// str.isspace() (U+3000 and U+00A0 too).
bool opens_with_think(std::string_view text) {
    return python_lstrip(text).starts_with(k_think_open);
}

std::string_view select_scored_text(std::string_view text, ScoreText mode) {
    if (mode == ScoreText::full) {
        return text;
    }
    if (const size_t close = text.rfind(k_think_close); close != std::string_view::npos) {
        return text.substr(close + k_think_close.size());
    }
    if (opens_with_think(text)) {
        return text.substr(text.size());
    }
    return text;
}

std::string_view score_text_name(ScoreText mode) {
    switch (mode) {
    case ScoreText::full:
        return "full";
    case ScoreText::after_think:
        return "after-think";
    }
    return "full";
}

util::Result<ScoreText> parse_score_text(std::string_view name) {
    for (ScoreText mode : {ScoreText::full, ScoreText::after_think}) {
        if (name == score_text_name(mode)) {
            return mode;
        }
    }
    return util::make_error(
        util::ErrorKind::usage,
        fmt::format("unknown scored text '{}': use 'full' or 'after-think'", name));
}

} // namespace diffeval::scorers
