// A scorer as data: what a scorer TOML file says, before any regex is
// compiled.
//
// Scorers are files (scorers/*.toml, or a user's own) so that a new answer
// extraction rule needs no recompile, and so that the exact rule behind every
// stored score can be read. docs/scorers.md describes the format.
#pragma once

#include <harness/util/result.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace diffeval::scorers {

// One regex substitution: every match of `pattern` (RE2) is replaced by
// `replace` (RE2 rewrite syntax: \0-\9 name groups).
struct Substitution {
    std::string pattern;
    std::string replace;

    bool operator==(const Substitution&) const = default;
};

// Which match of the extraction pattern is taken.
enum class MatchPick {
    first, // Python findall(...)[0]
    last,  // Python findall(...)[-1]
};

// Capture groups an extraction pattern may have; a fixed bound keeps the
// matching allocation-free.
inline constexpr int k_max_capture_groups = 9;

// Which part of the chosen match is the extracted answer.
struct GroupChoice {
    enum class Kind {
        index,          // capture group `index`; 0 is the whole match
        first_nonempty, // the first capture group that matched non-empty text
    };
    Kind kind = Kind::index;
    int index = 0;

    bool operator==(const GroupChoice&) const = default;
};

// What the response's answer is compared against.
enum class GoldSource {
    extract,   // the dataset's full answer, run through the same extraction
    full_text, // the dataset's full answer as is (normalised by the comparison)
};

// How the extracted answer and the gold are compared.
enum class Comparison {
    python_int,  // both are valid Python int literals with equal values
    exact_match, // equal after the normalising substitutions (and lower-casing)
};

struct Extraction {
    std::vector<Substitution> prepare; // applied in order to the text before matching
    std::string pattern;
    MatchPick match = MatchPick::first;
    GroupChoice group;
    bool strip = false; // Python str.strip() on the extracted text
    std::string fallback = "[invalid]";

    bool operator==(const Extraction&) const = default;
};

struct ScorerDefinition {
    std::string name;   // the file's stem: "vllm", "lm-eval-strict", ...
    std::string origin; // where it was read from, for messages
    int version = 0;
    std::string description;
    Extraction extract;
    GoldSource gold = GoldSource::full_text;
    Comparison compare = Comparison::exact_match;
    bool ignore_case = false;            // exact_match: lower-case (ASCII) both sides last
    std::vector<Substitution> normalise; // exact_match: applied in order to both sides

    bool operator==(const ScorerDefinition&) const = default;
};

// Parse the scorer TOML `text`, naming the scorer `name`; `origin` (a path)
// prefixes error messages. Unknown keys and values are errors with the line.
util::Result<ScorerDefinition> parse_scorer_definition(std::string_view text, std::string name,
                                                       std::string origin);

} // namespace diffeval::scorers
