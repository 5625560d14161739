// Loading scored results; see results.hpp.
#include <harness/analysis/results.hpp>

#include <harness/store/readers.hpp>
#include <harness/store/results.hpp>

#include <harness/util/hash.hpp>
#include <harness/util/text.hpp>
#include <scorers/registry.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <limits>

namespace diffeval::analysis {

using util::ErrorKind;
using util::make_error;

namespace {

// Below this many responses one thread reads them all (a second connection
// costs about a millisecond).
constexpr int64_t k_parallel_from = 256;

int index_of(const std::vector<std::string>& names, std::string_view name) {
    return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
}

// A row's place in the matrix (group, repeat, question) from either cursor
// (counted responses, or requests never sent), which name them alike.
template <typename Rows> bool read_place(const Rows& rows, const Results& out, ResultRow& r) {
    r.server = index_of(out.servers, rows.server());
    r.framing = index_of(out.framings, rows.framing());
    r.max_tokens = static_cast<int>(rows.max_tokens());
    r.repeat = static_cast<int>(rows.repeat());
    r.question_idx = static_cast<int>(rows.question_idx());
    r.dataset = index_of(out.datasets, rows.dataset());
    // A question without a stored hash is known only by dataset and index.
    const auto sha = rows.question_sha256();
    r.question_key = sha ? util::hash64(*sha) : 0;
    // A name the load did not read first: a row from a later state of the
    // file than the names (changed_error).
    return r.server < static_cast<int>(out.servers.size()) &&
           r.framing < static_cast<int>(out.framings.size()) &&
           r.dataset < static_cast<int>(out.datasets.size());
}

// One counted response's row from the rows cursor; false when its names
// are not the load's (read_place).
bool read_row(const store::CountedRows& rows, Results& out, ResultRow& r) {
    r.response_id = rows.response_id();
    const bool known = read_place(rows, out, r);
    r.outcome = scorers::outcome_from_name(rows.outcome()).value_or(scorers::Outcome::error);
    r.reasoning_started = rows.reasoning_started();
    r.completion_tokens = rows.completion_tokens();
    r.latency_ms = rows.latency_ms();
    r.ok = rows.ok();
    r.ttft_ms = rows.ttft_ms();
    // An unparseable start time leaves the row out of the throughput span.
    r.started_ms = rows.started_ms().value_or(0);
    r.retried = rows.attempts() > 1;
    return known;
}

// A second connection's half that is not the half the first connection's
// snapshot holds: the file changed between the two reads (a run retried a
// request, a rescore or merge finished), and the halves would mix two
// states of it.
util::Error changed_error(const store::Store& st) {
    return util::Error{ErrorKind::io,
                       fmt::format("cannot read results: {} changed while it was read (another "
                                   "diffeval wrote it); run the command again",
                                   st.path())};
}

// The scores of response `r` from the scores cursor, which advances in
// response_id order beside the rows. Scorers are numbered as first seen.
util::Result<void> read_scores(store::ScoreRows& scores, bool& have_score, Results& out,
                               bool with_extracted, ResultRow& r, ResponseDetail& detail) {
    // Scores of superseded attempts sort before and are skipped.
    while (have_score && scores.response_id() <= r.response_id) {
        if (scores.response_id() == r.response_id) {
            auto k = static_cast<size_t>(index_of(out.scorers, scores.scorer()));
            if (k == out.scorers.size()) {
                if (k == ScorerFlags::k_max_scorers) {
                    return make_error(ErrorKind::data,
                                      fmt::format("more than {} scorers in the scores table",
                                                  ScorerFlags::k_max_scorers));
                }
                // Each name heads a column of every table (store::result_names).
                if (auto problem = store::stored_name_problem(scores.scorer())) {
                    return make_error(
                        ErrorKind::data,
                        fmt::format(
                            "the scores table holds the scorer name '{}', which {}: no diffeval "
                            "stores such a name, so the file was edited or is not "
                            "diffeval's; use a copy from before the edit",
                            util::one_line(scores.scorer(), 80), *problem));
                }
                out.scorers.emplace_back(scores.scorer());
                detail.extracted.resize(out.scorers.size());
                detail.scored.resize(out.scorers.size());
            }
            r.correct.set(k, scores.correct());
            r.valid.set(k, scores.valid());
            if (with_extracted) {
                detail.extracted[k] = scores.extracted();
                detail.scored[k] = 1;
            }
        }
        have_score = scores.next();
    }
    return {};
}

// The texts a visitor sees.
void read_detail(const store::CountedRows& rows, ResponseDetail& detail) {
    detail.text = rows.text();
    detail.reasoning = rows.reasoning();
    detail.finish_reason = rows.finish_reason();
    detail.stop_reason = rows.stop_reason();
    detail.error = rows.response_error();
    detail.stop_cause = rows.stop_cause();
    detail.opened = rows.opened();
}

// Read the counted responses with response_id in [lo, hi) and their scores
// in one pass: the rows cursor and the scores cursor both advance in
// response_id order.
util::Result<void> read_rows(store::Store& st, Results& out, const ResponseVisitor& visit,
                             int64_t lo, int64_t hi) {
    store::CountedRows rows(st, lo, hi, bool(visit));
    store::ScoreRows scores(st, lo, hi, bool(visit));
    if (auto r = rows.status(); !r) {
        return r;
    }
    if (auto r = scores.status(); !r) {
        return r;
    }
    bool have_score = scores.next();
    ResponseDetail detail;
    detail.scorers = &out.scorers;
    ResultRow r;
    while (rows.next()) {
        if (!read_row(rows, out, r)) {
            return changed_error(st);
        }
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
    for (const auto* error : {&rows.error(), &scores.error()}) {
        if (!error->empty()) {
            return make_error(ErrorKind::io, fmt::format("cannot read results: {}", *error));
        }
    }
    return {};
}

// How many responses count, and the response_id that splits them into two
// halves (nullopt when too few to be worth a second thread).
struct Split {
    int64_t count = 0;
    std::optional<int64_t> at;
    int64_t end = 0; // past the last counted response_id
};

util::Result<Split> split_point(store::Store& st) {
    auto count = store::counted_responses(st);
    if (!count) {
        return count.error();
    }
    Split out;
    out.count = *count;
    if (out.count < k_parallel_from) {
        return out;
    }
    auto at = store::counted_response_at(st, out.count / 2);
    if (!at) {
        return at.error();
    }
    out.at = *at;
    auto last = store::last_counted_response(st);
    if (!last) {
        return last.error();
    }
    out.end = last->value_or(0) + 1;
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

// The planned requests never sent, appended to `out.rows` as failed
// responses (response_id 0, no scores: wrong for every scorer), so a group's
// accuracy and its errors count them as docs/ci.md says.
util::Result<void> read_unsent(store::Store& st, Results& out, const ResponseVisitor& visit) {
    store::UnsentRows rows(st);
    if (auto r = rows.status(); !r) {
        return r;
    }
    ResponseDetail detail;
    detail.scorers = &out.scorers;
    detail.extracted.resize(out.scorers.size());
    detail.scored.assign(out.scorers.size(), 0);
    detail.error = k_never_sent;
    while (rows.next()) {
        ResultRow r;
        if (!read_place(rows, out, r)) {
            return changed_error(st);
        }
        r.outcome = scorers::Outcome::error;
        if (visit) {
            if (auto v = visit(r, detail); !v) {
                return v.error();
            }
        }
        out.rows.push_back(r);
    }
    if (!rows.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read results: {}", rows.error()));
    }
    return {};
}

} // namespace

util::Result<int64_t> unscored_count(store::Store& st) {
    return store::unclassified_responses(st);
}

util::Result<Results> load_results(store::Store& st) {
    return load_results(st, std::array<ResponseVisitor, 2>{});
}

util::Result<Results> load_results(store::Store& st, const std::array<ResponseVisitor, 2>& visit) {
    Results out;
    // Names, halves and unsent requests from one state of the file, though
    // a run commits meanwhile: a row of a server or framing the names never
    // saw, or a request both answered and unsent, would be counted wrong.
    store::ReadSnapshot snapshot(st);
    if (auto r = snapshot.status(); !r) {
        return r.error();
    }
    auto names = store::result_names(st);
    if (!names) {
        return names.error();
    }
    // A request pointing at a response the file does not hold (a file
    // edited or damaged) is in no count and no join: summary left it out
    // without a word, and report called the file changed while read, "run
    // the command again", each time alike (a hostile-file audit).
    if (auto dangling = store::requests_without_their_response(st); !dangling) {
        return dangling.error();
    } else if (*dangling > 0) {
        return make_error(ErrorKind::data,
                          fmt::format("{} holds {} whose response it does not hold "
                                      "(requests.response_id names none): the file was edited or "
                                      "is damaged; use a copy from before",
                                      st.path(), util::counted(*dangling, "request")));
    }
    out.score_text = std::move(names->score_text);
    out.servers = std::move(names->servers);
    out.framings = std::move(names->framings);
    out.datasets = std::move(names->datasets);
    if (out.servers.empty()) {
        // A CI matrix's shard that held none of the questions ran, and
        // stored nothing: "run 'diffeval run' first" told its user to do
        // what they had just done (docs audit).
        auto shards = store::empty_shard_runs(st);
        if (shards && !shards->empty()) {
            return make_error(
                ErrorKind::data,
                fmt::format("{} holds no responses: {} of {} {}, which held none of {} "
                            "questions; read the database the shards are merged into "
                            "(diffeval merge)",
                            st.path(), shards->size() == 1 ? "its run was" : "its runs were",
                            shards->size() == 1 ? "shard" : "shards", fmt::join(*shards, ", "),
                            shards->size() == 1 ? "the run's" : "their"));
        }
        return make_error(
            ErrorKind::data,
            fmt::format("{} holds no responses; run 'diffeval run' first", st.path()));
    }
    auto split = split_point(st);
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
    // Large runs: the upper half on a second connection and core, up to the
    // last response the snapshot holds. That connection's snapshot begins
    // later: what a run committed meanwhile to that half (a retried
    // request's new response) makes it another half than the snapshot's,
    // which is then read again here, or refused to a visitor that has seen
    // it.
    std::future<util::Result<void>> upper;
    if (split->at) {
        upper = std::async(std::launch::async, [&]() -> util::Result<void> {
            auto second = store::Store::open(st.path(), store::Store::Mode::read_only);
            if (!second) {
                return second.error();
            }
            return read_rows(**second, parts[1], visit[1], *split->at, split->end);
        });
    }
    auto lower = read_rows(st, parts[0], visit[0], lowest, split->at.value_or(highest));
    auto upper_done = upper.valid() ? upper.get() : util::Result<void>{};
    if (!lower) {
        return lower.error();
    }
    const auto in_upper = static_cast<size_t>(split->count) - parts[0].rows.size();
    if (split->at && (!upper_done || parts[1].rows.size() != in_upper)) {
        if (visit[1]) {
            return upper_done ? changed_error(st) : upper_done.error();
        }
        parts[1].rows.clear();
        parts[1].scorers.clear();
        upper_done = read_rows(st, parts[1], {}, *split->at, split->end);
    }
    if (!upper_done) {
        return upper_done.error();
    }
    merge_parts(out, parts);
    if (auto r = read_unsent(st, out, visit[0]); !r) {
        return r.error();
    }
    return out;
}

std::string answer_excerpt(store::Store& st, int64_t response_id, const std::string& scorer,
                           size_t max_chars) {
    // A request planned and never sent has no response: said so, where a
    // blank cell read as nothing extracted (an outside audit).
    if (response_id <= 0) {
        return "(no response)";
    }
    auto answer = store::scored_answer(st, response_id, scorer);
    if (!answer || !answer->found) {
        return "";
    }
    if (answer->valid) {
        return util::one_line(answer->extracted, max_chars);
    }
    // No answer extracted: the end of the text says why (cut off, rambling).
    const std::string& text = answer->text;
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
    // No score stored means no response is: say that, not "unknown scorer
    // 'vllm' Known scorers: (none)".
    if (results.scorers.empty()) {
        return make_error(ErrorKind::data,
                          "the database holds no response to a measured request yet (a probe's "
                          "responses are not scored), so nothing is scored; run 'diffeval run' "
                          "(the same command again resumes a killed run)");
    }
    auto it = std::find(results.scorers.begin(), results.scorers.end(), scorer);
    if (it == results.scorers.end()) {
        return scorers::unknown_scorer(scorer, results.scorers);
    }
    return static_cast<size_t>(it - results.scorers.begin());
}

} // namespace diffeval::analysis
