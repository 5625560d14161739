// A compiled scorer: extracts an answer from a response and compares it with
// the dataset's gold answer, following one reference harness to the letter.
//
// The rules come from a ScorerDefinition (a TOML file); construction compiles
// every regex once, because a rescore calls score() for every stored
// response under every scorer. Scoring is a pure function of its inputs and
// is safe to call from several threads at once.
#pragma once

#include <scorers/definition.hpp>

#include <harness/util/result.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::scorers {

// The outcome of scoring one response.
struct ScoreResult {
    std::string extracted; // the answer as the harness reads it, or the fallback "[invalid]"
    bool valid = false;    // an answer was found (and, for python_int, parses)
    bool correct = false;  // the harness would count the response as correct
};

// The gold side of a comparison, prepared once per dataset question.
struct Gold {
    std::string value; // extracted (python_int) or normalised (exact_match) gold answer
    bool valid = false;
    // False when normalising ran past its bound (a hostile scorer file):
    // then no answer equals it.
    bool comparable = true;
};

class Scorer {
public:
    // Compile the regexes of `definition`; a bad pattern or rewrite is an
    // error naming the scorer's origin.
    static util::Result<Scorer> create(ScorerDefinition definition);

    Scorer(Scorer&&) noexcept;
    Scorer& operator=(Scorer&&) noexcept;
    ~Scorer();

    std::string_view name() const { return m_def.name; }
    int version() const { return m_def.version; }
    std::string_view description() const { return m_def.description; }
    const ScorerDefinition& definition() const { return m_def; }

    // Score `response_text` (already chosen by select_scored_text) against
    // the dataset's full answer `gold_answer_full_text`.
    ScoreResult score(std::string_view response_text, std::string_view gold_answer_full_text) const;

    // The same, against a `gold` from prepare_gold(), so a caller scoring
    // many responses to one question prepares its gold once.
    ScoreResult score(std::string_view response_text, const Gold& gold) const;

    // What responses are compared against for the full answer
    // `gold_answer_full_text`, e.g. "72" for "...\n#### 72".
    Gold prepare_gold(std::string_view gold_answer_full_text) const;

    // Whether prepare_gold gives `other`'s gold for every answer: the rules
    // it reads are the same (lm-eval's strict and flexible scorers share them).
    bool same_gold_as(const Scorer& other) const;

private:
    struct Compiled;

    Scorer(ScorerDefinition definition, std::unique_ptr<Compiled> compiled);

    ScorerDefinition m_def;
    std::unique_ptr<Compiled> m_compiled;
};

// Parse and compile the scorer TOML `text` as scorer `name`; `origin` names
// the source in messages.
util::Result<Scorer> load_scorer(std::string_view text, std::string name, std::string origin);

// A user's scorer as text: what a scorer file says, the name it gives the
// scorer (the file's stem) and where it was read from (for messages). The
// store keeps this text, so later scoring passes use the same rules.
struct ScorerSource {
    std::string name;
    std::string text;
    std::string origin;
};

// Read the scorer file at `path` (not yet parsed); a file that cannot be
// read, or whose stem is no UTF-8 text or holds a control character, is a
// usage error naming the path.
util::Result<ScorerSource> read_scorer_source(const std::filesystem::path& path);

// Read, parse and compile the scorer file at `path` (read_scorer_source,
// then load_scorer); the scorer is named after the file's stem
// ("my-scorer.toml" -> "my-scorer").
util::Result<Scorer> load_scorer_file(const std::filesystem::path& path);

} // namespace diffeval::scorers
