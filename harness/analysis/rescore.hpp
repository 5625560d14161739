// Classification and scoring of stored responses, written back to the store
// (tables `classifications` and `scores`). Everything here is recomputed from
// stored text, so a new scorer version or rule needs no new requests.
#pragma once

#include <harness/store/scoring.hpp>
#include <harness/store/store.hpp>
#include <harness/util/result.hpp>
#include <scorers/registry.hpp>
#include <scorers/score_text.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace diffeval::analysis {

struct RescoreSummary {
    int64_t responses = 0; // responses classified and scored
    int64_t scores = 0;    // score rows written
    // User scorers this pass stored: new to the database, or with another
    // definition than the one stored (every response was then scored again).
    std::vector<std::string> added;
    std::vector<std::string> replaced;
};

// Which responses to (re)compute.
enum class Scope { all, missing };

// Classifies and scores responses under `scorers`, reading `mode` of the
// text: what a scoring pass writes, and what a run computes for each
// response it stores. Gold answers are prepared once per (dataset, question)
// and scorer, and each distinct text of a question is scored once: decoding
// at temperature 0 repeats answers across repeats and configurations (the
// official demo's 47,484 responses hold 4,623 distinct texts per question),
// and a score depends on nothing else. One thread at a time.
class ResponseScorer {
public:
    // Past `memo_bytes` of remembered texts, scores and golds (with an
    // estimate of their containers' overhead) the memory starts over, so a
    // pass keeps a few MB however many distinct answers it meets.
    static constexpr size_t k_pass_memo_bytes = size_t{4} << 20;
    // A run scores each response as it is stored, and plans a question's
    // requests together (every framing, token limit and repeat:
    // engine::Planner), so the texts it meets again come within a few
    // responses, and a small memory keeps its peak RSS flat in the plan's
    // length (bench/goals.sh).
    static constexpr size_t k_run_memo_bytes = size_t{128} << 10;

    ResponseScorer(std::vector<const scorers::Scorer*> scorers, scorers::ScoreText mode,
                   size_t memo_bytes = k_pass_memo_bytes);

    // Whether classifying `r` reads its request's stop strings: the server
    // named no stop field and the response stopped.
    static bool needs_stop_strings(const store::ResponseToScore& r);

    // `r`'s classification and every scorer's score; `stops` are the
    // request's stop strings when needs_stop_strings(r).
    store::DerivedRows derive(const store::ResponseToScore& r,
                              const std::vector<std::string>& stops);

private:
    // Every scorer's result for the successful response `r`.
    const std::vector<scorers::ScoreResult>& scored(const store::ResponseToScore& r);

    std::vector<const scorers::Scorer*> m_scorers;
    // For each scorer, the first scorer whose gold is the same (itself when
    // none before it): a question's gold is prepared once per distinct rule.
    std::vector<size_t> m_gold_of;
    scorers::ScoreText m_mode;
    std::string m_mode_name;
    std::map<std::pair<std::string, int64_t>, std::vector<scorers::Gold>> m_golds;
    std::unordered_map<std::string, std::vector<scorers::ScoreResult>> m_memo;
    size_t m_memo_limit;
    size_t m_memo_bytes = 0;
    std::vector<scorers::ScoreResult> m_invalid;
};

// What a database scores with (stored_registry's scorers, the text mode its
// scores were computed from), for a run to score each response as it stores
// it, as the scoring stage would.
class StoredScoring {
public:
    static util::Result<std::unique_ptr<StoredScoring>> open(store::Store& store);
    ResponseScorer& scorer() { return m_scorer; }

private:
    StoredScoring(scorers::Registry registry, scorers::ScoreText mode)
        : m_registry(std::move(registry)),
          m_scorer(m_registry.all(), mode, ResponseScorer::k_run_memo_bytes) {}

    scorers::Registry m_registry;
    ResponseScorer m_scorer;
};

// Read the user scorer files at `paths` and check them before anything is
// stored: each must be readable, parse and compile, and its name (the file's
// stem) must be no built-in scorer's and no other file's. Errors are usage
// errors naming the file, and the line where the file says something wrong.
util::Result<std::vector<scorers::ScorerSource>>
read_scorer_files(const std::vector<std::string>& paths);

// The scorers every scoring pass of `store` uses: the built-in ones and the
// user scorers stored in it (table scorers).
util::Result<scorers::Registry> stored_registry(store::Store& store);

// Classify every response that counts and score it under every scorer of
// stored_registry, reading `mode` of the text. `added` (from
// read_scorer_files) is stored first, in the same transaction; a scorer new
// to the database or with a changed definition makes the pass score every
// response, so no response lacks its scores. Otherwise Scope::missing only
// handles responses without a classification yet (after a run added some).
util::Result<RescoreSummary> rescore(store::Store& store, scorers::ScoreText mode, Scope scope,
                                     const std::vector<scorers::ScorerSource>& added = {});

// The text mode the stored scores were computed from; none stored yet:
// `otherwise`, else the full text (as for a name this diffeval does not know).
util::Result<scorers::ScoreText> stored_mode(store::Store& store,
                                             std::optional<scorers::ScoreText> otherwise = {});

// Bring derived tables up to date before reading them: scores what is missing
// (everything when `added` changes the stored scorers), in the text mode
// already used in the database (`mode` when none is, then the full text).
util::Result<RescoreSummary> ensure_scored(store::Store& store,
                                           const std::vector<scorers::ScorerSource>& added = {},
                                           std::optional<scorers::ScoreText> mode = {});

} // namespace diffeval::analysis
