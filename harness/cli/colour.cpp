// Verdict colours; see colour.hpp.
#include <harness/cli/colour.hpp>

#include <array>
#include <cctype>
#include <cstdlib>
#include <utility>

#include <unistd.h>

namespace diffeval::cli {

namespace {

constexpr std::string_view k_reset = "\033[0m";

// Words, and the colour each is shown in.
constexpr std::array<std::pair<std::string_view, std::string_view>, 8> k_words = {{
    {"PASS", "\033[1;32m"},
    {"better", "\033[32m"},
    {"FAIL", "\033[1;31m"},
    {"worse", "\033[31m"},
    {"CONFLICT", "\033[1;31m"},
    {"INCONCLUSIVE", "\033[1;33m"},
    {"inconclusive", "\033[33m"}, // the gate's "FAIL (inconclusive)"
    {"SKIP", "\033[1;33m"},
}};

bool word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

} // namespace

bool colour_enabled(std::FILE* stream) {
    const char* no_colour = std::getenv("NO_COLOR");
    if (no_colour && *no_colour) {
        return false;
    }
    return isatty(fileno(stream)) == 1;
}

std::string colour_verdicts(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    size_t i = 0;
    while (i < text.size()) {
        bool matched = false;
        if (i == 0 || !word_char(text[i - 1])) {
            for (const auto& [word, colour] : k_words) {
                const size_t end = i + word.size();
                if (text.substr(i, word.size()) == word &&
                    (end == text.size() || !word_char(text[end]))) {
                    out += colour;
                    out += word;
                    out += k_reset;
                    i = end;
                    matched = true;
                    break;
                }
            }
        }
        if (!matched) {
            out += text[i++];
        }
    }
    return out;
}

std::string for_terminal(std::string_view text, std::FILE* stream) {
    return colour_enabled(stream) ? colour_verdicts(text) : std::string(text);
}

} // namespace diffeval::cli
