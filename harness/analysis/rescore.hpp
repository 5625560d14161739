// Classification and scoring of stored responses, written back to the store
// (tables `classifications` and `scores`). Everything here is recomputed from
// stored text, so a new scorer version or rule needs no new requests.
#pragma once

#include <harness/store/store.hpp>
#include <harness/util/result.hpp>
#include <scorers/registry.hpp>
#include <scorers/score_text.hpp>

#include <cstdint>
#include <string>
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

// Bring derived tables up to date before reading them: scores what is missing
// (everything when `added` changes the stored scorers), in the text mode
// already used in the database (full text when none).
util::Result<RescoreSummary> ensure_scored(store::Store& store,
                                           const std::vector<scorers::ScorerSource>& added = {});

} // namespace diffeval::analysis
