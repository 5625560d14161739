// The upserts of derived rows (tables classifications and scores), shared by
// the scoring stage (scoring.cpp's ScoreWriter) and the writer (store.cpp:
// a run's responses scored as they are stored). Internal to harness/store.
#pragma once

#include <string_view>

namespace diffeval::store {

inline constexpr std::string_view k_upsert_classification =
    "INSERT INTO classifications (response_id, opened, closed, reasoning_started, "
    "outcome, stop_cause) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (response_id) DO UPDATE SET "
    "opened = excluded.opened, closed = excluded.closed, reasoning_started = "
    "excluded.reasoning_started, outcome = excluded.outcome, stop_cause = excluded.stop_cause";

inline constexpr std::string_view k_upsert_score =
    "INSERT INTO scores (response_id, scorer, scorer_version, score_text, extracted, "
    "valid, correct) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (response_id, scorer) DO UPDATE "
    "SET scorer_version = excluded.scorer_version, score_text = excluded.score_text, "
    "extracted = excluded.extracted, valid = excluded.valid, correct = excluded.correct";

// Whether response `r` was imported from a log that keeps no finish_reason
// (an lm-eval samples document, stored as {"lm_eval": ...}), so how it ended
// is unrecorded. Only a success without a finish_reason reads the start of its
// body (a server's body starts otherwise), so a run's pass reads almost none.
inline constexpr std::string_view k_finish_unrecorded =
    "(CASE WHEN r.ok = 1 AND r.finish_reason IS NULL "
    "THEN substr(r.response_json, 1, 11) = '{\"lm_eval\":' ELSE 0 END)";

} // namespace diffeval::store
