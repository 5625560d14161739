// The scoring stage's SQL; see scoring.hpp.
#include <harness/store/scoring.hpp>

#include <harness/store/derived_sql.hpp>
#include <harness/store/view_sql.hpp>

#include <fmt/format.h>

#include <utility>

namespace diffeval::store {

using util::ErrorKind;
using util::make_error;

namespace {

// The responses that count, with their question's gold answer (a response to
// a question the store has no row for gets NULL, read as ""). The tables, not
// v_responses: the view also finds each request's body, which scoring does
// not read, and the pass after every run asks only for what is unclassified,
// found through the counted-requests index and the classifications' keys.
constexpr std::string_view k_select_responses =
    "SELECT r.response_id, q.dataset, q.question_idx, r.text, r.reasoning, r.finish_reason, "
    "r.stop_reason, r.ok, g.answer, r.stop_field, q.request_id, ";
// ... whether the response's finish state is unrecorded (k_finish_unrecorded),
// then the tables. The classification is looked up before the response
// (CROSS JOIN keeps that order), so a response already classified is never
// read. After a run, which classifies what it stores, the pass read every
// stored response's row to find none: 10-11 ms for one pass of the matrix
// (5,276 responses), now 4 ms, and 77-97 ms for 100,244, now 49-51 (each from
// a fresh connection); -0.9 us of the client's CPU a response (interleaved).
// The rows and their order are the same.
constexpr std::string_view k_select_responses_from =
    " FROM requests q "
    "LEFT JOIN classifications c ON c.response_id = q.response_id "
    "CROSS JOIN responses r ON r.response_id = q.response_id "
    "LEFT JOIN questions g ON g.dataset = q.dataset AND g.question_idx = q.question_idx";
constexpr std::string_view k_only_unclassified = " WHERE c.response_id IS NULL";

// The body's stop strings: json_each walks a list's items, or yields a single
// string as its one row; items that are not strings are skipped.
constexpr std::string_view k_select_stops_format =
    "SELECT s.value FROM requests q JOIN ({}) b ON b.body_id = q.body_id, "
    "json_each(b.request_json, '$.stop') s WHERE q.request_id = ? AND json_valid(b.request_json) "
    "AND json_type(b.request_json, '$.stop') IN ('array', 'text') AND s.type = 'text' "
    "ORDER BY s.key";

constexpr std::string_view k_select_scorers =
    "SELECT name, version, definition, origin, added_at FROM scorers ORDER BY name";
constexpr std::string_view k_select_scorer = "SELECT definition FROM scorers WHERE name = ?";
constexpr std::string_view k_put_scorer =
    "INSERT OR REPLACE INTO scorers (name, version, definition, origin, added_at) "
    "VALUES (?, ?, ?, ?, ?)";

util::Result<void> exec(Store& st, const char* sql) {
    if (sqlite3_exec(st.handle(), sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
        return make_error(ErrorKind::io, error_message(st.handle()));
    }
    return {};
}

} // namespace

util::Result<ScoringTransaction> ScoringTransaction::begin(Store& st) {
    if (auto r = exec(st, "BEGIN IMMEDIATE"); !r) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot lock {}: {}", st.path(), r.error().message));
    }
    return ScoringTransaction(st);
}

ScoringTransaction::ScoringTransaction(ScoringTransaction&& other) noexcept
    : m_store(std::exchange(other.m_store, nullptr)) {}

ScoringTransaction::~ScoringTransaction() {
    if (m_store) {
        (void)exec(*m_store, "ROLLBACK");
    }
}

util::Result<void> ScoringTransaction::commit() {
    if (auto r = exec(*m_store, "COMMIT"); !r) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot commit scores: {}", r.error().message));
    }
    m_store = nullptr;
    return {};
}

util::Result<void> clear_derived(Store& st) {
    if (auto r = exec(st, "DELETE FROM scores; DELETE FROM classifications;"); !r) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot clear the old scores: {}", r.error().message));
    }
    return {};
}

util::Result<ResponsesToScore> ResponsesToScore::open(Store& st, Pending which) {
    std::string sql(k_select_responses);
    sql += k_finish_unrecorded;
    sql += k_select_responses_from;
    if (which == Pending::unclassified) {
        sql += k_only_unclassified;
    }
    Statement select(st.handle(), sql);
    if (!select.valid()) {
        return make_error(ErrorKind::io, fmt::format("cannot read responses: {}", select.error()));
    }
    return ResponsesToScore(std::move(select));
}

util::Result<std::optional<ResponseToScore>> ResponsesToScore::next() {
    if (!m_select.step()) {
        if (!m_select.error().empty()) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot read responses: {}", m_select.error()));
        }
        return std::optional<ResponseToScore>{};
    }
    const auto& s = m_select;
    return std::optional<ResponseToScore>{ResponseToScore{
        s.column_int(0), s.column_text(1), s.column_int(2), s.column_text(3), s.column_text(4),
        s.column_text(5), s.column_stop_reason(6), s.column_int(7) != 0, s.column_text(8),
        s.column_text(9), s.column_int(10), s.column_int(11) != 0}};
}

util::Result<RequestStops> RequestStops::prepare(Store& st) {
    Statement select(st.handle(),
                     fmt::format(fmt::runtime(k_select_stops_format), k_request_bodies_select));
    if (!select.valid()) {
        return make_error(ErrorKind::io, fmt::format("cannot read responses: {}", select.error()));
    }
    return RequestStops(std::move(select));
}

util::Result<std::vector<std::string>> RequestStops::of(int64_t request_id) {
    std::vector<std::string> out;
    m_select.bind(request_id);
    while (m_select.step()) {
        out.push_back(m_select.column_text(0));
    }
    if (!m_select.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read a request's stop strings: {}",
                                                     m_select.error()));
    }
    return out;
}

util::Result<ScoreWriter> ScoreWriter::prepare(Store& st) {
    Statement classification(st.handle(), k_upsert_classification);
    Statement score(st.handle(), k_upsert_score);
    if (!classification.valid() || !score.valid()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot write scores: {}", error_message(st.handle())));
    }
    return ScoreWriter(std::move(classification), std::move(score));
}

util::Result<void> ScoreWriter::classification(const ClassificationRow& row) {
    const auto cause = row.stop_cause.empty() ? std::optional<std::string_view>{}
                                              : std::optional<std::string_view>{row.stop_cause};
    if (!m_classification
             .bind(row.response_id, row.opened ? 1 : 0, row.closed ? 1 : 0,
                   row.reasoning_started ? 1 : 0, row.outcome, cause)
             .run()) {
        return make_error(ErrorKind::io, fmt::format("cannot write classifications: {}",
                                                     m_classification.error()));
    }
    return {};
}

util::Result<void> ScoreWriter::score(const ScoreRow& row) {
    if (!m_score
             .bind(row.response_id, row.scorer, row.scorer_version, row.score_text, row.extracted,
                   row.valid ? 1 : 0, row.correct ? 1 : 0)
             .run()) {
        return make_error(ErrorKind::io, fmt::format("cannot write scores: {}", m_score.error()));
    }
    return {};
}

util::Result<std::vector<StoredScorer>> stored_scorers(Store& st) {
    Statement select(st.handle(), k_select_scorers);
    std::vector<StoredScorer> out;
    while (select.valid() && select.step()) {
        out.push_back({select.column_text(0), select.column_int(1), select.column_text(2),
                       select.column_text(3), select.column_text(4)});
    }
    if (!select.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the stored scorers of {}: {}",
                                                     st.path(), select.error()));
    }
    return out;
}

util::Result<ScorerChange> put_scorer(Store& st, const StoredScorer& scorer) {
    Statement select(st.handle(), k_select_scorer);
    const bool known = select.valid() && select.bind(scorer.name).step();
    if (!select.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the stored scorers of {}: {}",
                                                     st.path(), select.error()));
    }
    if (known && select.column_view(0) == scorer.definition) {
        return ScorerChange::unchanged;
    }
    select.reset();
    Statement put(st.handle(), k_put_scorer);
    if (!put.bind(scorer.name, scorer.version, scorer.definition, scorer.origin, now_iso8601())
             .run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot store scorer '{}': {}", scorer.name, put.error()));
    }
    return known ? ScorerChange::replaced : ScorerChange::added;
}

util::Result<std::optional<std::string>> stored_score_text(Store& st) {
    Statement select(st.handle(), "SELECT score_text FROM scores LIMIT 1");
    if (!select.valid()) {
        return make_error(ErrorKind::io, fmt::format("cannot read scores: {}", select.error()));
    }
    if (select.step()) {
        return std::optional<std::string>{select.column_text(0)};
    }
    if (!select.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read scores: {}", select.error()));
    }
    return std::optional<std::string>{};
}

} // namespace diffeval::store
