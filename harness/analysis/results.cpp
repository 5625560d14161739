// Loading scored results; see results.hpp.
#include <harness/analysis/results.hpp>

#include <harness/analysis/rescore.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace diffeval::analysis {

using util::ErrorKind;
using util::make_error;

util::Result<Results> load_results(store::Store& st) {
    if (auto r = ensure_scored(st); !r) {
        return r.error();
    }
    Results out;
    auto* db = st.handle();
    {
        store::Statement s(db, "SELECT DISTINCT scorer FROM scores ORDER BY scorer");
        while (s.step()) {
            out.scorers.push_back(s.column_text(0));
        }
        store::Statement t(db, "SELECT score_text FROM scores LIMIT 1");
        out.score_text = t.step() ? t.column_text(0) : "full";
        store::Statement f(db, "SELECT DISTINCT framing FROM requests ORDER BY framing");
        while (f.step()) {
            out.framings.push_back(f.column_text(0));
        }
        store::Statement sv(db,
                            "SELECT server FROM requests GROUP BY server ORDER BY min(request_id)");
        while (sv.step()) {
            out.servers.push_back(sv.column_text(0));
        }
    }
    if (out.servers.empty()) {
        return make_error(
            ErrorKind::data,
            fmt::format("{} holds no responses; run 'diffeval run' first", st.path()));
    }
    auto index_of = [](const std::vector<std::string>& v, const std::string& s) {
        return static_cast<int>(std::find(v.begin(), v.end(), s) - v.begin());
    };
    store::Statement rows(
        db,
        "SELECT v.response_id, v.server, v.framing, v.max_tokens, v.repeat, v.question_idx, "
        "v.outcome, v.reasoning_started, v.completion_tokens, v.latency_ms, s.scorer, s.correct, "
        "s.valid, v.ok, v.ttft_ms, (julianday(v.started_at) - 2440587.5) * 86400000.0 FROM "
        "v_responses v LEFT JOIN scores s ON s.response_id = v.response_id "
        "ORDER BY v.response_id, s.scorer");
    while (rows.step()) {
        const int64_t id = rows.column_int(0);
        if (out.rows.empty() || out.rows.back().response_id != id) {
            ResultRow r;
            r.response_id = id;
            r.server = index_of(out.servers, rows.column_text(1));
            r.framing = index_of(out.framings, rows.column_text(2));
            r.max_tokens = static_cast<int>(rows.column_int(3));
            r.repeat = static_cast<int>(rows.column_int(4));
            r.question_idx = static_cast<int>(rows.column_int(5));
            r.outcome =
                scorers::outcome_from_name(rows.column_text(6)).value_or(scorers::Outcome::error);
            r.reasoning_started = rows.column_int(7) != 0;
            if (!rows.column_null(8)) {
                r.completion_tokens = rows.column_int(8);
            }
            r.latency_ms = rows.column_double(9);
            r.ok = rows.column_int(13) != 0;
            if (!rows.column_null(14)) {
                r.ttft_ms = rows.column_double(14);
            }
            // julianday() turns the stored ISO-8601 text into days; NULL
            // (unparseable) leaves the row out of the throughput span.
            r.started_ms = rows.column_null(15) ? 0 : rows.column_double(15);
            r.correct.assign(out.scorers.size(), 0);
            r.valid.assign(out.scorers.size(), 0);
            out.rows.push_back(std::move(r));
        }
        if (!rows.column_null(10)) {
            auto k = static_cast<size_t>(index_of(out.scorers, rows.column_text(10)));
            if (k < out.scorers.size()) {
                out.rows.back().correct[k] = rows.column_int(11) != 0;
                out.rows.back().valid[k] = rows.column_int(12) != 0;
            }
        }
    }
    if (!rows.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read results: {}", rows.error()));
    }
    return out;
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
