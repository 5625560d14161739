// Cutting secrets (API keys) out of text that is stored, printed or reported.
// A server may echo request headers back in its body or error message; the
// key must not end up in the database, in report.html or on stderr.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::util {

// Whether a text is all there is, or was cut short (a body cut by a timeout,
// a dropped connection or the size limit): a cut text may end in the first
// part of a secret whose rest never arrived.
enum class TextEnd { whole, cut };

class Redactor {
public:
    // Replaced by this wherever a secret appeared.
    static constexpr std::string_view k_mark = "[REDACTED]";
    // Shorter values are not treated as secrets: cutting every "abc" out of
    // model text would change answers, and such a key protects nothing.
    static constexpr size_t k_min_secret = 8;
    // The fewest bytes of a secret's start that end a cut text to be cut
    // with it: fewer say next to nothing of a key, and a cut answer ending
    // in "s" or "sk-" is common.
    static constexpr size_t k_min_cut_piece = 4;

    // Redact `secret` from now on (also in its JSON-escaped spelling).
    void add(std::string_view secret);
    // Where a secret lies in `text`: [begin, end) byte ranges, in order,
    // overlapping ones merged (so each holds one whole mark). Empty when none.
    // With TextEnd::cut, the end of `text` that begins a secret (in any of its
    // spellings, k_min_cut_piece bytes or more) is a span too.
    struct Span {
        size_t begin = 0;
        size_t end = 0;
    };
    std::vector<Span> find(std::string_view text, TextEnd end = TextEnd::whole) const;
    // Replace every secret in `text` (each span of find() by one mark); true
    // when something was replaced.
    bool apply(std::string& text, TextEnd end = TextEnd::whole) const;
    // `text` with every secret replaced.
    std::string redacted(std::string text) const;
    bool empty() const { return m_secrets.empty(); }

private:
    std::vector<std::string> m_secrets;
};

} // namespace diffeval::util
