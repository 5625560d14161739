// What the results load reads; see results.hpp.
#include <harness/store/results.hpp>

#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <utility>

namespace diffeval::store {

using util::ErrorKind;
using util::make_error;

namespace {

constexpr const char* k_row_columns =
    "SELECT q.response_id, q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, "
    "c.outcome, c.reasoning_started, r.completion_tokens, r.latency_ms, r.ok, r.ttft_ms, "
    "(julianday(r.started_at) - 2440587.5) * 86400000.0, q.dataset, q.question_sha256, "
    "r.attempts";
constexpr const char* k_text_columns =
    ", r.text, r.reasoning, r.finish_reason, r.stop_reason, r.error, c.stop_cause, c.opened";
constexpr const char* k_row_source =
    " FROM requests q JOIN responses r ON r.response_id = q.response_id "
    "LEFT JOIN classifications c ON c.response_id = q.response_id "
    "WHERE q.response_id >= ?1 AND q.response_id < ?2 ORDER BY q.response_id";
constexpr const char* k_score_columns = "SELECT response_id, scorer, correct, valid";
constexpr const char* k_score_source =
    " FROM scores WHERE response_id >= ?1 AND response_id < ?2 ORDER BY response_id, scorer";

util::Error read_error(const std::string& why) {
    return util::Error{ErrorKind::io, fmt::format("cannot read results: {}", why)};
}

// The single integer a query returns.
util::Result<int64_t> count_of(Store& store, const char* sql) {
    Statement s(store.handle(), sql);
    if (!s.step()) {
        return read_error(s.error().empty() ? "no row" : s.error());
    }
    return s.column_int(0);
}

// Every value of column 0 of `sql`, in the order it returns them.
util::Result<void> column_values(Store& store, const char* sql, std::vector<std::string>& out) {
    Statement s(store.handle(), sql);
    while (s.step()) {
        out.push_back(s.column_text(0));
    }
    if (!s.error().empty()) {
        return read_error(s.error());
    }
    return {};
}

} // namespace

ReadSnapshot::ReadSnapshot(Store& store) : m_store(store) {
    if (sqlite3_get_autocommit(store.handle()) == 0) {
        return; // a transaction is open already, and is the snapshot
    }
    Statement begin(store.handle(), "BEGIN");
    if (!begin.valid() || !begin.run()) {
        m_status = read_error(begin.error());
        return;
    }
    m_began = true;
    // BEGIN alone takes no snapshot; the first read does.
    if (auto r = count_of(store, "SELECT count(*) FROM sqlite_master"); !r) {
        m_status = r.error();
    }
}

ReadSnapshot::~ReadSnapshot() {
    if (m_began) {
        (void)sqlite3_exec(m_store.handle(), "COMMIT", nullptr, nullptr, nullptr);
    }
}

util::Result<ResultNames> result_names(Store& store) {
    ResultNames out;
    std::vector<std::string> mode;
    // A DISTINCT over every score row would cost as much as reading them:
    // the first row's mode is every row's (rescore writes one mode).
    if (auto r = column_values(store, "SELECT score_text FROM scores LIMIT 1", mode); !r) {
        return r.error();
    }
    out.score_text = mode.empty() ? "full" : mode.front();
    if (auto r = column_values(store, "SELECT DISTINCT framing FROM requests ORDER BY framing",
                               out.framings);
        !r) {
        return r.error();
    }
    if (auto r = column_values(
            store, "SELECT server FROM requests GROUP BY server ORDER BY min(request_id)",
            out.servers);
        !r) {
        return r.error();
    }
    if (auto r = column_values(store, "SELECT DISTINCT dataset FROM requests ORDER BY dataset",
                               out.datasets);
        !r) {
        return r.error();
    }
    // A group's numbers are integers in the range a run takes: SQLite gave
    // 2^63-1 tokens as -1, a repeat of 0.5 as repeat 0, and '256abc' as
    // 256, each a group no run made (a hostile-file audit). One scan of the
    // group index, which holds the three.
    if (auto odd = count_of(store, "SELECT count(*) FROM requests WHERE NOT (typeof(max_tokens) = "
                                   "'integer' AND typeof(repeat) = 'integer' AND "
                                   "typeof(question_idx) = 'integer' AND max_tokens BETWEEN 1 AND "
                                   "2147483647 AND repeat BETWEEN 0 AND 2147483647 AND "
                                   "question_idx BETWEEN 0 AND 2147483647)");
        !odd) {
        return odd.error();
    } else if (*odd > 0) {
        return make_error(ErrorKind::data,
                          fmt::format("{}: {} a token limit, repeat or question index that is no "
                                      "integer a run stores (requests.max_tokens, repeat, "
                                      "question_idx): the file was edited or is not diffeval's; "
                                      "use a copy from before the edit",
                                      store.path(),
                                      *odd == 1 ? std::string("a request holds")
                                                : fmt::format("{} requests hold", *odd)));
    }
    // Names reach terminals, tables and JSON as they are: one no diffeval
    // writes (a file edited, or another program's) is refused, as a run
    // refuses it. A terminal escape in a server's name cleared the screen
    // of whoever ran `summary` on a colleague's file (a hostile-file audit).
    for (const auto& [kind, names] : {std::pair{"server", &out.servers},
                                      {"framing", &out.framings},
                                      {"dataset", &out.datasets}}) {
        for (const auto& name : *names) {
            if (auto problem = stored_name_problem(name)) {
                return make_error(
                    ErrorKind::data,
                    fmt::format("{}: a stored {} name, '{}', {}: no diffeval writes such a name, "
                                "so the file was edited or is not diffeval's; use a copy from "
                                "before the edit, or rename it in every table that holds it "
                                "(docs/schema.md)",
                                store.path(), kind, util::one_line(name, 80), *problem));
            }
        }
    }
    return out;
}

std::optional<std::string> stored_name_problem(std::string_view name) {
    if (util::has_control_character(name)) {
        return std::string("holds a control character (a line end, a terminal escape)");
    }
    return std::nullopt;
}

util::Result<int64_t> requests_without_their_response(Store& store) {
    return count_of(store, "SELECT count(*) FROM requests q WHERE q.response_id IS NOT NULL AND "
                           "NOT EXISTS (SELECT 1 FROM responses r WHERE r.response_id = "
                           "q.response_id)");
}

util::Result<int64_t> counted_responses(Store& store) {
    return count_of(store, "SELECT count(*) FROM requests WHERE response_id IS NOT NULL");
}

util::Result<std::optional<int64_t>> counted_response_at(Store& store, int64_t offset) {
    Statement s(store.handle(), "SELECT response_id FROM requests WHERE response_id IS NOT NULL "
                                "ORDER BY response_id LIMIT 1 OFFSET ?");
    if (s.bind(offset).step()) {
        return std::optional<int64_t>(s.column_int(0));
    }
    if (!s.error().empty()) {
        return read_error(s.error());
    }
    return std::optional<int64_t>();
}

util::Result<std::optional<int64_t>> last_counted_response(Store& store) {
    // The WHERE lets SQLite read it from requests_counted's last entry
    // instead of visiting every request.
    Statement s(store.handle(),
                "SELECT max(response_id) FROM requests WHERE response_id IS NOT NULL");
    if (!s.step()) {
        return read_error(s.error().empty() ? "no row" : s.error());
    }
    return s.column_null(0) ? std::optional<int64_t>() : std::optional(s.column_int(0));
}

util::Result<int64_t> unclassified_responses(Store& store) {
    return count_of(store, "SELECT count(*) FROM requests q LEFT JOIN classifications c ON "
                           "c.response_id = q.response_id WHERE q.response_id IS NOT NULL AND "
                           "c.response_id IS NULL");
}

CountedRows::CountedRows(Store& store, int64_t lo, int64_t hi, bool texts)
    : m_rows(store.handle(),
             std::string(k_row_columns) + (texts ? k_text_columns : "") + k_row_source) {
    m_rows.bind(lo, hi);
}

util::Result<void> CountedRows::status() const {
    if (!m_rows.valid()) {
        return read_error(m_rows.error());
    }
    return {};
}

std::optional<int64_t> CountedRows::optional_int(int col) const {
    return m_rows.column_null(col) ? std::nullopt : std::optional(m_rows.column_int(col));
}

std::optional<double> CountedRows::optional_double(int col) const {
    return m_rows.column_null(col) ? std::nullopt : std::optional(m_rows.column_double(col));
}

std::optional<std::string_view> CountedRows::optional_view(int col) const {
    return m_rows.column_null(col) ? std::nullopt : std::optional(m_rows.column_view(col));
}

ScoreRows::ScoreRows(Store& store, int64_t lo, int64_t hi, bool extracted)
    : m_scores(store.handle(),
               std::string(k_score_columns) + (extracted ? ", extracted" : "") + k_score_source) {
    m_scores.bind(lo, hi);
}

util::Result<void> ScoreRows::status() const {
    if (!m_scores.valid()) {
        return read_error(m_scores.error());
    }
    return {};
}

UnsentRows::UnsentRows(Store& store)
    : m_rows(store.handle(), "SELECT server, framing, max_tokens, repeat, question_idx, dataset, "
                             "question_sha256 FROM requests WHERE response_id IS NULL "
                             "ORDER BY request_id") {}

util::Result<void> UnsentRows::status() const {
    if (!m_rows.valid()) {
        return read_error(m_rows.error());
    }
    return {};
}

util::Result<ScoredAnswer> scored_answer(Store& store, int64_t response_id,
                                         const std::string& scorer) {
    Statement s(store.handle(),
                "SELECT s.extracted, s.valid, coalesce(r.text, r.error, '') "
                "FROM responses r LEFT JOIN scores s ON s.response_id = r.response_id "
                "AND s.scorer = ?1 WHERE r.response_id = ?2");
    ScoredAnswer out;
    if (!s.bind(scorer, response_id).step()) {
        if (!s.error().empty()) {
            return read_error(s.error());
        }
        return out;
    }
    out.found = true;
    out.valid = s.column_int(1) == 1;
    out.extracted = s.column_text(0);
    out.text = s.column_text(2);
    return out;
}

} // namespace diffeval::store
