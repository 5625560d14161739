// Classification and scoring of stored responses, written back to the store
// (tables `classifications` and `scores`). Everything here is recomputed from
// stored text, so a new scorer version or rule needs no new requests.
#pragma once

#include <harness/store/store.hpp>
#include <harness/util/result.hpp>
#include <scorers/score_text.hpp>

#include <cstdint>

namespace diffeval::analysis {

struct RescoreSummary {
    int64_t responses = 0; // responses classified and scored
    int64_t scores = 0;    // score rows written
};

// Which responses to (re)compute.
enum class Scope { all, missing };

// Classify every response that counts and score it under every built-in
// scorer, reading `mode` of the text. Scope::missing only handles responses
// without a classification yet (after a run added some).
util::Result<RescoreSummary> rescore(store::Store& store, scorers::ScoreText mode, Scope scope);

// Bring derived tables up to date before reading them: scores what is missing,
// in the text mode already used in the database (full text when none).
util::Result<void> ensure_scored(store::Store& store);

} // namespace diffeval::analysis
