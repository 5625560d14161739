// Rescoring: one pass over the responses that count, in one transaction, so
// readers see either the old derived rows or the new ones, never a mix.
#include <harness/analysis/rescore.hpp>

#include <scorers/classify.hpp>
#include <scorers/registry.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace diffeval::analysis {

using util::ErrorKind;
using util::make_error;

namespace {

constexpr const char* k_select_all =
    "SELECT v.response_id, v.dataset, v.question_idx, v.text, v.reasoning, v.finish_reason, "
    "v.stop_reason, v.ok, q.answer, v.stop_field, v.request_id FROM v_responses v LEFT JOIN "
    "questions q ON q.dataset = v.dataset AND q.question_idx = v.question_idx";
constexpr const char* k_insert_class =
    "INSERT OR REPLACE INTO classifications (response_id, opened, closed, reasoning_started, "
    "outcome, stop_cause) VALUES (?, ?, ?, ?, ?, ?)";
// The request's stop strings, read only for a stop no response field names.
constexpr const char* k_select_stops =
    "SELECT json_extract(b.request_json, '$.stop') FROM requests q JOIN request_bodies b ON "
    "b.body_id = q.body_id WHERE q.request_id = ? AND json_valid(b.request_json)";

// The stop strings of request `request_id` (a JSON array or one string).
std::vector<std::string> request_stops(store::Statement& select, int64_t request_id) {
    std::vector<std::string> out;
    select.reset();
    if (!select.bind(request_id).step()) {
        return out;
    }
    auto j = nlohmann::json::parse(select.column_text(0), nullptr, false);
    if (j.is_string()) {
        out.push_back(j.get<std::string>());
    } else if (j.is_array()) {
        for (const auto& s : j) {
            if (s.is_string()) {
                out.push_back(s.get<std::string>());
            }
        }
    }
    return out;
}
constexpr const char* k_insert_score =
    "INSERT OR REPLACE INTO scores (response_id, scorer, scorer_version, score_text, extracted, "
    "valid, correct) VALUES (?, ?, ?, ?, ?, ?, ?)";

} // namespace

namespace {

// One stored response as the select returns it.
struct StoredResponse {
    int64_t response_id = 0;
    std::string dataset;
    int64_t question = 0;
    std::string text, reasoning, finish_reason;
    store::Value stop;
    bool ok = false;
    std::string answer, stop_field;
    int64_t request_id = 0;
};

StoredResponse stored_response(const store::Statement& select) {
    return {select.column_int(0),   select.column_text(1),     select.column_int(2),
            select.column_text(3),  select.column_text(4),     select.column_text(5),
            select.column_value(6), select.column_int(7) != 0, select.column_text(8),
            select.column_text(9),  select.column_int(10)};
}

// Classify `r`; the request's stop strings are read when the server named
// no stop field and the response stopped.
scorers::Classification classify_stored(const StoredResponse& r, store::Statement& select_stops) {
    scorers::ClassifyInput in;
    in.text = r.text;
    in.reasoning = r.reasoning;
    in.finish_reason = r.finish_reason;
    in.failed = !r.ok;
    in.stop_field = r.stop_field;
    if (const auto* s = std::get_if<std::string>(&r.stop)) {
        in.stop_reason = *s;
    } else if (const auto* i = std::get_if<int64_t>(&r.stop)) {
        in.stop_reason = *i;
    }
    std::vector<std::string> stops;
    if (r.stop_field.empty() && r.finish_reason == "stop") {
        stops = request_stops(select_stops, r.request_id);
        in.stop_strings = stops;
    }
    return scorers::classify(in);
}

// Writes classifications and scores inside rescore's transaction; gold
// answers are prepared once per (dataset, question) and scorer.
class ScoreWriter {
public:
    ScoreWriter(sqlite3* db, scorers::ScoreText mode)
        : m_scorers(scorers::all_scorers()), m_mode(mode),
          m_mode_name(scorers::score_text_name(mode)), m_class(db, k_insert_class),
          m_score(db, k_insert_score) {}

    bool valid() const { return m_class.valid() && m_score.valid(); }

    util::Result<void> classification(int64_t response_id, const scorers::Classification& c) {
        const auto cause = scorers::stop_cause_name(c.stop_cause);
        if (!m_class
                 .bind(response_id, c.opened ? 1 : 0, c.closed ? 1 : 0, c.reasoning_started ? 1 : 0,
                       std::string(scorers::outcome_name(c.outcome)),
                       cause.empty() ? std::optional<std::string>{}
                                     : std::optional<std::string>{std::string(cause)})
                 .run()) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot write classifications: {}", m_class.error()));
        }
        return {};
    }

    // Every scorer's score of `r`; returns how many rows were written.
    util::Result<int64_t> scores(const StoredResponse& r) {
        auto& gold = m_golds[{r.dataset, r.question}];
        if (gold.empty()) {
            for (const auto* s : m_scorers) {
                gold.push_back(s->prepare_gold(r.answer));
            }
        }
        const auto scored = scorers::select_scored_text(r.text, m_mode);
        for (size_t k = 0; k < m_scorers.size(); ++k) {
            scorers::ScoreResult result;
            if (r.ok) {
                result = m_scorers[k]->score(scored, gold[k]);
            } else {
                result.extracted = "[invalid]";
            }
            if (!m_score
                     .bind(r.response_id, std::string(m_scorers[k]->name()),
                           static_cast<int64_t>(m_scorers[k]->version()), m_mode_name,
                           result.extracted, result.valid ? 1 : 0, result.correct ? 1 : 0)
                     .run()) {
                return make_error(ErrorKind::io,
                                  fmt::format("cannot write scores: {}", m_score.error()));
            }
        }
        return static_cast<int64_t>(m_scorers.size());
    }

private:
    std::vector<const scorers::Scorer*> m_scorers;
    scorers::ScoreText m_mode;
    std::string m_mode_name;
    store::Statement m_class;
    store::Statement m_score;
    std::map<std::pair<std::string, int64_t>, std::vector<scorers::Gold>> m_golds;
};

} // namespace

util::Result<RescoreSummary> rescore(store::Store& st, scorers::ScoreText mode, Scope scope) {
    RescoreSummary out;
    auto* db = st.handle();
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot lock {}: {}", st.path(), sqlite3_errmsg(db)));
    }
    auto rollback = [&](std::string msg) -> util::Result<RescoreSummary> {
        sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
        return make_error(ErrorKind::io, std::move(msg));
    };
    if (scope == Scope::all) {
        sqlite3_exec(db, "DELETE FROM scores; DELETE FROM classifications;", nullptr, nullptr,
                     nullptr);
    }
    std::string sql = k_select_all;
    if (scope == Scope::missing) {
        sql += " WHERE v.outcome IS NULL";
    }
    store::Statement select(db, sql);
    store::Statement select_stops(db, k_select_stops);
    ScoreWriter writer(db, mode);
    if (!select.valid() || !select_stops.valid() || !writer.valid()) {
        return rollback(fmt::format("cannot read responses: {}", sqlite3_errmsg(db)));
    }
    while (select.step()) {
        const auto r = stored_response(select);
        if (auto w = writer.classification(r.response_id, classify_stored(r, select_stops)); !w) {
            return rollback(w.error().message);
        }
        auto written = writer.scores(r);
        if (!written) {
            return rollback(written.error().message);
        }
        out.scores += *written;
        ++out.responses;
    }
    if (!select.error().empty()) {
        return rollback(fmt::format("cannot read responses: {}", select.error()));
    }
    if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
        return rollback(fmt::format("cannot commit scores: {}", sqlite3_errmsg(db)));
    }
    return out;
}

util::Result<void> ensure_scored(store::Store& st) {
    store::Statement mode(st.handle(), "SELECT score_text FROM scores LIMIT 1");
    auto text_mode = scorers::ScoreText::full;
    if (mode.step() && mode.column_text(0) == "after-think") {
        text_mode = scorers::ScoreText::after_think;
    }
    mode.reset();
    auto r = rescore(st, text_mode, Scope::missing);
    if (!r) {
        return r.error();
    }
    return {};
}

} // namespace diffeval::analysis
