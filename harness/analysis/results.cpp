// Loading scored results; see results.hpp.
#include <harness/analysis/results.hpp>

#include <harness/util/hash.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <limits>

namespace diffeval::analysis {

using util::ErrorKind;
using util::make_error;

namespace {

// The responses that count in one response_id range, in that order, found
// through the requests_counted index (schema v2) so the requests' large rows
// are never visited; `k_text_columns` are added when a visitor wants them.
constexpr const char* k_row_columns =
    "SELECT q.response_id, q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, "
    "c.outcome, c.reasoning_started, r.completion_tokens, r.latency_ms, r.ok, r.ttft_ms, "
    "(julianday(r.started_at) - 2440587.5) * 86400000.0, q.dataset, q.question_sha256";
constexpr const char* k_text_columns =
    ", r.text, r.reasoning, r.finish_reason, r.stop_reason, r.error";
constexpr const char* k_row_source =
    " FROM requests q JOIN responses r ON r.response_id = q.response_id "
    "LEFT JOIN classifications c ON c.response_id = q.response_id "
    "WHERE q.response_id >= ?1 AND q.response_id < ?2 ORDER BY q.response_id";
constexpr const char* k_score_columns = "SELECT response_id, scorer, correct, valid";
constexpr const char* k_score_source =
    " FROM scores WHERE response_id >= ?1 AND response_id < ?2 ORDER BY response_id, scorer";
// Counted responses not classified yet (the scoring stage has not run on them).
constexpr const char* k_unclassified =
    "SELECT count(*) FROM requests q LEFT JOIN classifications c ON c.response_id = "
    "q.response_id WHERE q.response_id IS NOT NULL AND c.response_id IS NULL";
// Below this many responses one thread reads them all (a second connection
// costs about a millisecond).
constexpr int64_t k_parallel_from = 256;

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
    store::Statement d(db, "SELECT DISTINCT dataset FROM requests ORDER BY dataset");
    while (d.step()) {
        out.datasets.push_back(d.column_text(0));
    }
    for (const auto* st : {&t, &f, &sv, &d}) {
        if (!st->error().empty()) {
            return make_error(ErrorKind::io, fmt::format("cannot read results: {}", st->error()));
        }
    }
    return {};
}

// One counted response's row from the rows cursor (columns 0 to 14).
void read_row(store::Statement& rows, Results& out, ResultRow& r) {
    r.response_id = rows.column_int(0);
    r.server = index_of(out.servers, rows.column_view(1));
    r.framing = index_of(out.framings, rows.column_view(2));
    r.max_tokens = static_cast<int>(rows.column_int(3));
    r.repeat = static_cast<int>(rows.column_int(4));
    r.question_idx = static_cast<int>(rows.column_int(5));
    r.outcome = scorers::outcome_from_name(rows.column_view(6)).value_or(scorers::Outcome::error);
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
    r.dataset = index_of(out.datasets, rows.column_view(13));
    // A question without a stored hash (its row was missing when the
    // database was migrated) is known only by dataset and index.
    r.question_key = rows.column_null(14) ? 0 : util::hash64(rows.column_view(14));
}

// The scores of response `r` from the scores cursor, which advances in
// response_id order beside the rows. Scorers are numbered as first seen.
util::Result<void> read_scores(store::Statement& scores, bool& have_score, Results& out,
                               bool with_extracted, ResultRow& r, ResponseDetail& detail) {
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
            if (with_extracted) {
                detail.extracted[k] = scores.column_view(4);
                detail.scored[k] = 1;
            }
        }
        have_score = scores.step();
    }
    return {};
}

// The texts a visitor sees (columns 15 to 19).
void read_detail(store::Statement& rows, ResponseDetail& detail) {
    detail.text = opt_view(rows, 15);
    detail.reasoning = opt_view(rows, 16);
    detail.finish_reason = opt_view(rows, 17);
    const int stop_type = rows.column_type(18);
    detail.stop_reason = stop_type == SQLITE_NULL      ? StopValue{}
                         : stop_type == SQLITE_INTEGER ? StopValue{rows.column_int(18)}
                                                       : StopValue{rows.column_view(18)};
    detail.error = opt_view(rows, 19);
}

// Read the counted responses with response_id in [lo, hi) and their scores
// in one pass: the rows cursor and the scores cursor both advance in
// response_id order.
util::Result<void> read_rows(sqlite3* db, Results& out, const ResponseVisitor& visit, int64_t lo,
                             int64_t hi) {
    store::Statement rows(db, std::string(k_row_columns) + (visit ? k_text_columns : "") +
                                  k_row_source);
    store::Statement scores(db, std::string(k_score_columns) + (visit ? ", extracted" : "") +
                                    k_score_source);
    if (!rows.valid() || !scores.valid()) {
        return make_error(ErrorKind::io, fmt::format("cannot read results: {}",
                                                     rows.valid() ? scores.error() : rows.error()));
    }
    rows.bind(lo, hi);
    scores.bind(lo, hi);
    bool have_score = scores.step();
    ResponseDetail detail;
    detail.scorers = &out.scorers;
    ResultRow r;
    while (rows.step()) {
        read_row(rows, out, r);
        r.correct.clear();
        r.valid.clear();
        std::fill(detail.scored.begin(), detail.scored.end(), 0);
        if (auto s = read_scores(scores, have_score, out, bool(visit), r, detail); !s) {
            return s;
        }
        if (visit) {
            read_detail(rows, detail);
            if (auto v = visit(r, detail); !v) {
                return v.error();
            }
        }
        out.rows.push_back(r);
    }
    for (const auto* st : {&rows, &scores}) {
        if (!st->error().empty()) {
            return make_error(ErrorKind::io, fmt::format("cannot read results: {}", st->error()));
        }
    }
    return {};
}

// How many responses count, and the response_id that splits them into two
// halves (nullopt when too few to be worth a second thread).
struct Split {
    int64_t count = 0;
    std::optional<int64_t> at;
};

util::Result<Split> split_point(sqlite3* db) {
    store::Statement count(db, "SELECT count(*) FROM requests WHERE response_id IS NOT NULL");
    if (!count.step()) {
        return make_error(ErrorKind::io, fmt::format("cannot read results: {}", count.error()));
    }
    Split out;
    out.count = count.column_int(0);
    if (out.count < k_parallel_from) {
        return out;
    }
    store::Statement mid(db, "SELECT response_id FROM requests WHERE response_id IS NOT NULL "
                             "ORDER BY response_id LIMIT 1 OFFSET ?");
    mid.bind(out.count / 2);
    if (!mid.step()) {
        return make_error(ErrorKind::io, fmt::format("cannot read results: {}", mid.error()));
    }
    out.at = mid.column_int(0);
    return out;
}

// Join the parts read in response_id order into `out`: scorers in name
// order, each part's flags moved to it (rows of a part that never saw a
// scorer have 0). The first part's rows are moved, not copied.
void merge_parts(Results& out, std::array<Results, 2>& parts) {
    for (auto& part : parts) {
        for (auto& name : part.scorers) {
            if (std::find(out.scorers.begin(), out.scorers.end(), name) == out.scorers.end()) {
                out.scorers.push_back(name);
            }
        }
    }
    std::sort(out.scorers.begin(), out.scorers.end());
    for (auto& part : parts) {
        std::vector<size_t> to(part.scorers.size());
        bool identity = true;
        for (size_t k = 0; k < part.scorers.size(); ++k) {
            to[k] = static_cast<size_t>(index_of(out.scorers, part.scorers[k]));
            identity = identity && to[k] == k;
        }
        if (identity) {
            continue;
        }
        for (auto& row : part.rows) {
            ScorerFlags correct, valid;
            for (size_t k = 0; k < to.size(); ++k) {
                correct.set(to[k], row.correct[k]);
                valid.set(to[k], row.valid[k]);
            }
            row.correct = correct;
            row.valid = valid;
        }
    }
    out.rows = std::move(parts[0].rows);
    out.rows.insert(out.rows.end(), parts[1].rows.begin(), parts[1].rows.end());
    parts[1].rows = {};
}

} // namespace

util::Result<int64_t> unscored_count(store::Store& st) {
    store::Statement missing(st.handle(), k_unclassified);
    if (!missing.step()) {
        return make_error(ErrorKind::io, fmt::format("cannot read results: {}", missing.error()));
    }
    return missing.column_int(0);
}

util::Result<Results> load_results(store::Store& st, const std::array<ResponseVisitor, 2>& visit) {
    Results out;
    if (auto r = read_names(st.handle(), out); !r) {
        return r.error();
    }
    if (out.servers.empty()) {
        return make_error(
            ErrorKind::data,
            fmt::format("{} holds no responses; run 'diffeval run' first", st.path()));
    }
    auto split = split_point(st.handle());
    if (!split) {
        return split.error();
    }
    constexpr int64_t lowest = std::numeric_limits<int64_t>::min();
    constexpr int64_t highest = std::numeric_limits<int64_t>::max();
    std::array<Results, 2> parts;
    for (auto& part : parts) {
        part.servers = out.servers;
        part.framings = out.framings;
        part.datasets = out.datasets;
    }
    // The first part's vector will hold every row (no copy when merging).
    parts[0].rows.reserve(static_cast<size_t>(split->count));
    // Large runs: the upper half on a second connection and core.
    std::future<util::Result<void>> upper;
    if (split->at) {
        upper = std::async(std::launch::async, [&]() -> util::Result<void> {
            auto second = store::Store::open(st.path(), store::Store::Mode::read_only);
            if (!second) {
                return second.error();
            }
            return read_rows((*second)->handle(), parts[1], visit[1], *split->at, highest);
        });
    }
    auto lower = read_rows(st.handle(), parts[0], visit[0], lowest, split->at.value_or(highest));
    auto upper_done = upper.valid() ? upper.get() : util::Result<void>{};
    if (!lower) {
        return lower.error();
    }
    if (!upper_done) {
        return upper_done.error();
    }
    merge_parts(out, parts);
    return out;
}

namespace {

// `text` on one line without control characters, cut to `max_chars`.

} // namespace

std::string answer_excerpt(store::Store& st, int64_t response_id, const std::string& scorer,
                           size_t max_chars) {
    store::Statement s(st.handle(),
                       "SELECT s.extracted, s.valid, coalesce(r.text, r.error, '') "
                       "FROM responses r LEFT JOIN scores s ON s.response_id = r.response_id "
                       "AND s.scorer = ?1 WHERE r.response_id = ?2");
    s.bind(scorer, response_id);
    if (!s.step()) {
        return "";
    }
    if (s.column_int(1) == 1) {
        return util::one_line(s.column_text(0), max_chars);
    }
    // No answer extracted: the end of the text says why (cut off, rambling).
    const std::string text = s.column_text(2);
    const size_t keep = max_chars > 20 ? max_chars - 20 : max_chars;
    size_t from = text.size() > keep ? text.size() - keep : 0;
    while (from > 0 && from < text.size() &&
           (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) {
        ++from;
    }
    return "(no answer) " + std::string(from > 0 ? "..." : "") +
           util::one_line(text.substr(from), max_chars);
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
