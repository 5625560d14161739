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

util::Result<RescoreSummary> rescore(store::Store& st, scorers::ScoreText mode, Scope scope) {
    auto scorer_list = scorers::all_scorers();
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
    store::Statement ins_class(db, k_insert_class);
    store::Statement ins_score(db, k_insert_score);
    store::Statement select_stops(db, k_select_stops);
    if (!select.valid() || !ins_class.valid() || !ins_score.valid() || !select_stops.valid()) {
        return rollback(fmt::format("cannot read responses: {}", sqlite3_errmsg(db)));
    }
    // Gold answers prepared once per (dataset, question) and scorer.
    std::map<std::pair<std::string, int64_t>, std::vector<scorers::Gold>> golds;
    const auto mode_name = std::string(scorers::score_text_name(mode));
    while (select.step()) {
        const int64_t response_id = select.column_int(0);
        const auto dataset = select.column_text(1);
        const int64_t q = select.column_int(2);
        const auto text = select.column_text(3);
        const auto reasoning = select.column_text(4);
        const auto finish = select.column_text(5);
        const auto stop = select.column_value(6);
        const bool ok = select.column_int(7) != 0;
        const auto answer = select.column_text(8);
        const auto stop_field = select.column_text(9);
        const int64_t request_id = select.column_int(10);

        scorers::ClassifyInput in;
        in.text = text;
        in.reasoning = reasoning;
        in.finish_reason = finish;
        in.failed = !ok;
        in.stop_field = stop_field;
        if (auto* s = std::get_if<std::string>(&stop)) {
            in.stop_reason = {scorers::StopReason::Kind::string, *s, 0};
        } else if (auto* i = std::get_if<int64_t>(&stop)) {
            in.stop_reason = {scorers::StopReason::Kind::token_id, "", *i};
        }
        std::vector<std::string> stops;
        if (stop_field.empty() && finish == "stop") {
            stops = request_stops(select_stops, request_id);
            in.stop_strings = stops;
        }
        auto c = scorers::classify(in);
        const auto cause = scorers::stop_cause_name(c.stop_cause);
        if (!ins_class
                 .bind(response_id, c.opened ? 1 : 0, c.closed ? 1 : 0, c.reasoning_started ? 1 : 0,
                       std::string(scorers::outcome_name(c.outcome)),
                       cause.empty() ? std::optional<std::string>{}
                                     : std::optional<std::string>{std::string(cause)})
                 .run()) {
            return rollback(fmt::format("cannot write classifications: {}", ins_class.error()));
        }
        auto& gold = golds[{dataset, q}];
        if (gold.empty()) {
            for (const auto* s : scorer_list) {
                gold.push_back(s->prepare_gold(answer));
            }
        }
        const auto scored = scorers::select_scored_text(text, mode);
        for (size_t k = 0; k < scorer_list.size(); ++k) {
            scorers::ScoreResult r;
            if (ok) {
                r = scorer_list[k]->score(scored, gold[k]);
            } else {
                r.extracted = "[invalid]";
            }
            if (!ins_score
                     .bind(response_id, std::string(scorer_list[k]->name()),
                           static_cast<int64_t>(scorer_list[k]->version()), mode_name, r.extracted,
                           r.valid ? 1 : 0, r.correct ? 1 : 0)
                     .run()) {
                return rollback(fmt::format("cannot write scores: {}", ins_score.error()));
            }
            ++out.scores;
        }
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
