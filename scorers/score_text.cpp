// Selecting the scored part of a response; see score_text.hpp for the rules
// and docs/scorers.md for examples.
#include <scorers/score_text.hpp>

#include <fmt/format.h>

namespace diffeval::scorers {

namespace {

// ASCII whitespace, as a tokenizer would emit before a tag: Unicode spaces
// before `<think>` do not occur in practice.
constexpr std::string_view k_spaces = " \t\n\r\f\v";

} // namespace

bool opens_with_think(std::string_view text) {
    const size_t start = text.find_first_not_of(k_spaces);
    return start != std::string_view::npos && text.substr(start).starts_with(k_think_open);
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
