// Loading scored results; see results.hpp.
#include <harness/analysis/results.hpp>

#include <harness/analysis/rescore.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace diffeval::analysis {

using util::ErrorKind;
using util::make_error;

namespace {

// The responses that count, in response_id order, found through the
// requests_counted index (schema v2) so the requests' large rows are never
// visited.
constexpr const char* k_row_columns =
    "SELECT q.response_id, q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, "
    "c.outcome, c.reasoning_started, r.completion_tokens, r.latency_ms, r.ok, r.ttft_ms, "
    "(julianday(r.started_at) - 2440587.5) * 86400000.0";
// A visiting pass reads the texts instead of the timings, which a writer of
// texts does not need (latency_ms, ttft_ms and started_ms stay 0 / empty).
constexpr const char* k_visit_columns =
    "SELECT q.response_id, q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, "
    "c.outcome, c.reasoning_started, r.completion_tokens, 0.0, r.ok, NULL, NULL, "
    "r.text, r.reasoning, r.finish_reason, r.stop_reason, r.error";
constexpr const char* k_row_source =
    " FROM requests q JOIN responses r ON r.response_id = q.response_id "
    "LEFT JOIN classifications c ON c.response_id = q.response_id "
    "WHERE q.response_id IS NOT NULL ORDER BY q.response_id";
// Counted responses not classified yet (they need scoring before a load).
constexpr const char* k_unclassified =
    "SELECT count(*) FROM requests q LEFT JOIN classifications c ON c.response_id = "
    "q.response_id WHERE q.response_id IS NOT NULL AND c.response_id IS NULL";

int index_of(const std::vector<std::string>& names, std::string_view name) {
    return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
}

std::optional<std::string_view> opt_view(const store::Statement& s, int col) {
    return s.column_null(col) ? std::nullopt : std::optional(s.column_view(col));
}

// Servers in the order first stored, framings sorted, and the score text
// mode; scorers are found while the scores are read (a DISTINCT over every
// score row would cost as much as reading them).
util::Result<void> read_names(sqlite3* db, Results& out) {
    store::Statement t(db, "SELECT score_text FROM scores LIMIT 1");
    out.score_text = t.step() ? t.column_text(0) : "full";
    store::Statement f(db, "SELECT DISTINCT framing FROM requests ORDER BY framing");
    while (f.step()) {
        out.framings.push_back(f.column_text(0));
    }
    store::Statement sv(db, "SELECT server FROM requests GROUP BY server ORDER BY min(request_id)");
    while (sv.step()) {
        out.servers.push_back(sv.column_text(0));
    }
    for (const auto* st : {&t, &f, &sv}) {
        if (!st->error().empty()) {
            return make_error(ErrorKind::io, fmt::format("cannot read results: {}", st->error()));
        }
    }
    return {};
}

// Read every counted response with its scores in one pass: the rows cursor
// and the scores cursor both advance in response_id order. Scorers are
// numbered as first seen; `keep` false hands rows to `visit` only.
util::Result<void> read_rows(sqlite3* db, Results& out, const ResponseVisitor& visit, bool keep) {
    store::Statement rows(db, std::string(visit ? k_visit_columns : k_row_columns) + k_row_source);
    store::Statement scores(db, visit ? "SELECT response_id, scorer, correct, 0, extracted "
                                        "FROM scores ORDER BY response_id, scorer"
                                      : "SELECT response_id, scorer, correct, valid "
                                        "FROM scores ORDER BY response_id, scorer");
    if (!rows.valid() || !scores.valid()) {
        return make_error(ErrorKind::io, fmt::format("cannot read results: {}",
                                                     rows.valid() ? scores.error() : rows.error()));
    }
    bool have_score = scores.step();
    ResponseDetail detail;
    detail.scorers = &out.scorers;
    ResultRow r;
    while (rows.step()) {
        r.response_id = rows.column_int(0);
        r.server = index_of(out.servers, rows.column_view(1));
        r.framing = index_of(out.framings, rows.column_view(2));
        r.max_tokens = static_cast<int>(rows.column_int(3));
        r.repeat = static_cast<int>(rows.column_int(4));
        r.question_idx = static_cast<int>(rows.column_int(5));
        r.outcome =
            scorers::outcome_from_name(rows.column_view(6)).value_or(scorers::Outcome::error);
        r.reasoning_started = rows.column_int(7) != 0;
        r.completion_tokens.reset();
        if (!rows.column_null(8)) {
            r.completion_tokens = rows.column_int(8);
        }
        r.latency_ms = rows.column_double(9);
        r.ok = rows.column_int(10) != 0;
        r.ttft_ms.reset();
        if (!rows.column_null(11)) {
            r.ttft_ms = rows.column_double(11);
        }
        // julianday() turns the stored ISO-8601 text into days; NULL
        // (unparseable) leaves the row out of the throughput span.
        r.started_ms = rows.column_null(12) ? 0 : rows.column_double(12);
        r.correct.clear();
        r.valid.clear();
        std::fill(detail.scored.begin(), detail.scored.end(), 0);
        // Scores of superseded attempts sort before and are skipped.
        while (have_score && scores.column_int(0) <= r.response_id) {
            if (scores.column_int(0) == r.response_id) {
                auto k = static_cast<size_t>(index_of(out.scorers, scores.column_view(1)));
                if (k == out.scorers.size()) {
                    if (k == ScorerFlags::k_max_scorers) {
                        return make_error(ErrorKind::data,
                                          fmt::format("more than {} scorers in the scores table",
                                                      ScorerFlags::k_max_scorers));
                    }
                    out.scorers.emplace_back(scores.column_view(1));
                    detail.extracted.resize(out.scorers.size());
                    detail.scored.resize(out.scorers.size());
                }
                r.correct.set(k, scores.column_int(2) != 0);
                r.valid.set(k, scores.column_int(3) != 0);
                if (visit) {
                    detail.extracted[k] = scores.column_view(4);
                    detail.scored[k] = 1;
                }
            }
            have_score = scores.step();
        }
        if (visit) {
            detail.text = opt_view(rows, 13);
            detail.reasoning = opt_view(rows, 14);
            detail.finish_reason = opt_view(rows, 15);
            const int stop_type = rows.column_type(16);
            detail.stop_reason = stop_type == SQLITE_NULL      ? StopValue{}
                                 : stop_type == SQLITE_INTEGER ? StopValue{rows.column_int(16)}
                                                               : StopValue{rows.column_view(16)};
            detail.error = opt_view(rows, 17);
            if (auto v = visit(r, detail); !v) {
                return v.error();
            }
        }
        if (keep) {
            out.rows.push_back(r);
        }
    }
    for (const auto* st : {&rows, &scores}) {
        if (!st->error().empty()) {
            return make_error(ErrorKind::io, fmt::format("cannot read results: {}", st->error()));
        }
    }
    return {};
}

// Put the scorers in name order, every row's flags with them (rows read
// before a scorer was first seen have 0 for it).
void sort_scorers(Results& out) {
    const size_t n = out.scorers.size();
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) {
        order[i] = i;
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return out.scorers[a] < out.scorers[b]; });
    std::vector<std::string> names;
    for (size_t i : order) {
        names.push_back(out.scorers[i]);
    }
    out.scorers = std::move(names);
    for (auto& row : out.rows) {
        ScorerFlags correct, valid;
        for (size_t j = 0; j < n; ++j) {
            correct.set(j, row.correct[order[j]]);
            valid.set(j, row.valid[order[j]]);
        }
        row.correct = correct;
        row.valid = valid;
    }
}

// Read the names; an empty database is an error.
util::Result<void> prepare(store::Store& st, Results& out) {
    if (auto r = read_names(st.handle(), out); !r) {
        return r.error();
    }
    if (out.servers.empty()) {
        return make_error(
            ErrorKind::data,
            fmt::format("{} holds no responses; run 'diffeval run' first", st.path()));
    }
    return {};
}

} // namespace

util::Result<void> score_missing(store::Store& st) {
    // A fully scored database is only read, so loading needs no write access.
    store::Statement missing(st.handle(), k_unclassified);
    if (!missing.step()) {
        return make_error(ErrorKind::io, fmt::format("cannot read results: {}", missing.error()));
    }
    if (missing.column_int(0) == 0) {
        return {};
    }
    missing.reset();
    return ensure_scored(st);
}

util::Result<Results> load_results(store::Store& st) {
    if (auto r = score_missing(st); !r) {
        return r.error();
    }
    Results out;
    if (auto r = prepare(st, out); !r) {
        return r.error();
    }
    if (auto r = read_rows(st.handle(), out, {}, true); !r) {
        return r.error();
    }
    sort_scorers(out);
    return out;
}

util::Result<Results> visit_responses(store::Store& st, const ResponseVisitor& visit) {
    Results names;
    if (auto r = prepare(st, names); !r) {
        return r.error();
    }
    if (auto r = read_rows(st.handle(), names, visit, false); !r) {
        return r.error();
    }
    return names;
}

std::string excerpt(store::Store& st, int64_t response_id, size_t max_chars) {
    store::Statement s(st.handle(),
                       "SELECT coalesce(text, error, '') FROM responses WHERE response_id = ?");
    s.bind(response_id);
    if (!s.step()) {
        return "";
    }
    std::string text = s.column_text(0);
    std::string out;
    // Model output is untrusted: no control characters (terminal escapes)
    // reach a listing.
    for (char c : text) {
        auto u = static_cast<unsigned char>(c);
        out += u < 0x20 || u == 0x7F ? ' ' : c;
    }
    // Collapse runs of spaces, then cut at a UTF-8 boundary.
    out.erase(
        std::unique(out.begin(), out.end(), [](char a, char b) { return a == ' ' && b == ' '; }),
        out.end());
    if (out.size() > max_chars) {
        size_t cut = max_chars;
        while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) {
            --cut;
        }
        out = out.substr(0, cut) + "...";
    }
    return out;
}

util::Result<size_t> scorer_index(const Results& results, const std::string& scorer) {
    auto it = std::find(results.scorers.begin(), results.scorers.end(), scorer);
    if (it == results.scorers.end()) {
        return make_error(ErrorKind::usage, fmt::format("unknown scorer '{}'; known: {}", scorer,
                                                        fmt::join(results.scorers, ", ")));
    }
    return static_cast<size_t>(it - results.scorers.begin());
}

} // namespace diffeval::analysis
