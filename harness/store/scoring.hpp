// Typed store access for the scoring stage (analysis/rescore.cpp): the
// responses to classify and score, the stop strings a classification may
// need, and the derived rows it writes. Analysis decides what to compute;
// the SQL stays in the store.
#pragma once

#include <harness/store/sqlite.hpp>
#include <harness/store/store.hpp>
#include <harness/util/result.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::store {

// A write transaction on `store` (BEGIN IMMEDIATE, so the write lock is taken
// at once): rescoring writes every derived row inside one, so readers see the
// old rows or the new ones, never a mix. Rolled back when destroyed before
// commit(), so an error return leaves the database as it was.
class ScoringTransaction {
public:
    // Begin the transaction; an error names the database when it is locked.
    static util::Result<ScoringTransaction> begin(Store& store);

    ScoringTransaction(ScoringTransaction&& other) noexcept;
    ScoringTransaction& operator=(ScoringTransaction&&) = delete;
    ScoringTransaction(const ScoringTransaction&) = delete;
    ~ScoringTransaction();

    util::Result<void> commit();

private:
    explicit ScoringTransaction(Store& store) : m_store(&store) {}

    Store* m_store = nullptr; // null once committed or moved from
};

// Delete every classification and score (rescoring everything starts from
// none, so a scorer no longer used leaves no rows behind). Call inside a
// ScoringTransaction.
util::Result<void> clear_derived(Store& store);

// One stored response that counts (v_responses), with what classifying and
// scoring it reads.
struct ResponseToScore {
    int64_t response_id = 0;
    std::string dataset;
    int64_t question_idx = 0;
    std::string text;
    std::string reasoning;
    std::string finish_reason;
    util::StopReason stop_reason;
    bool ok = false;        // a parsed successful response
    std::string answer;     // the question's gold answer; "" without a question row
    std::string stop_field; // the response field that named the stop; "" for none
    int64_t request_id = 0;
    // Imported from a log that keeps no finish_reason (an lm-eval samples
    // document, whose body is {"lm_eval": ...}): how it ended is unrecorded.
    bool finish_unrecorded = false;
};

// Which responses a pass reads.
enum class Pending {
    all,          // every response that counts
    unclassified, // only those without a classification yet (a run added them)
};

// A cursor over the responses that count, in the store's order. Rows written
// through a ScoreWriter during the pass do not change what it reads.
class ResponsesToScore {
public:
    // Prepare the read of `which` responses of `store`.
    static util::Result<ResponsesToScore> open(Store& store, Pending which);

    // The next response, std::nullopt after the last; an error when reading
    // fails.
    util::Result<std::optional<ResponseToScore>> next();

private:
    explicit ResponsesToScore(Statement select) : m_select(std::move(select)) {}

    Statement m_select;
};

// The stop strings of a request's body: `stop` as the OpenAI API allows it,
// one string or a list (its string items, in order); empty when the body has
// none. Read only for a response whose server named no stop field.
class RequestStops {
public:
    static util::Result<RequestStops> prepare(Store& store);

    // The stop strings of request `request_id`.
    util::Result<std::vector<std::string>> of(int64_t request_id);

private:
    explicit RequestStops(Statement select) : m_select(std::move(select)) {}

    Statement m_select;
};

// A response's classification row (table classifications).
struct ClassificationRow {
    int64_t response_id = 0;
    bool opened = false;
    bool closed = false;
    bool reasoning_started = false;
    std::string_view outcome;
    std::string_view stop_cause; // "" is stored as NULL: no stop
};

// One scorer's score of a response (table scores).
struct ScoreRow {
    int64_t response_id = 0;
    std::string_view scorer;
    int64_t scorer_version = 0;
    std::string_view score_text; // "full" or "after-think"
    std::string_view extracted;
    bool valid = false;
    bool correct = false;
};

// Writes derived rows, replacing any row with the same key; call inside a
// ScoringTransaction.
class ScoreWriter {
public:
    static util::Result<ScoreWriter> prepare(Store& store);

    util::Result<void> classification(const ClassificationRow& row);
    util::Result<void> score(const ScoreRow& row);

private:
    ScoreWriter(Statement classification, Statement score)
        : m_classification(std::move(classification)), m_score(std::move(score)) {}

    Statement m_classification;
    Statement m_score;
};

// A user's scorer as the store keeps it (table scorers, schema v10): the text
// of the file it was loaded from, so every later scoring pass of the database
// (a resumed run, an import, a merge) scores with the same rules.
struct StoredScorer {
    std::string name;
    int64_t version = 0;
    std::string definition; // the scorer file's TOML text
    std::string origin;     // the path it was loaded from
    std::string added_at;   // ISO 8601 UTC, when this definition was stored
};

// Every stored user scorer, by name.
util::Result<std::vector<StoredScorer>> stored_scorers(Store& store);

// What put_scorer changed.
enum class ScorerChange {
    unchanged, // the same definition was stored already
    added,     // a name the store did not hold
    replaced,  // the name held another definition, now replaced
};

// Store `scorer` (its added_at is set now), replacing a stored one of the
// same name; call inside a ScoringTransaction. Scores stored under an older
// definition stay until the caller scores again.
util::Result<ScorerChange> put_scorer(Store& store, const StoredScorer& scorer);

// The text mode ("full" or "after-think") the stored scores were computed
// from, std::nullopt when there are no scores yet; a scoring pass that adds
// rows keeps the mode already used.
util::Result<std::optional<std::string>> stored_score_text(Store& store);

} // namespace diffeval::store
