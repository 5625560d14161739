// What the results load reads (analysis/results.cpp): the names rows are
// indexed by, and two cursors that advance together in response_id order,
// one over the responses that count and one over their scores. The SQL
// stays here; the load keeps the indexing, merging and threading.
#pragma once

#include <harness/store/store.hpp>
#include <harness/util/result.hpp>
#include <harness/util/stop_reason.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::store {

// One read transaction on `store` while it lives: everything read through
// `store` meanwhile sees the database as it was at the first read, however
// many commits a run makes in between.
class ReadSnapshot {
public:
    explicit ReadSnapshot(Store& store);
    ~ReadSnapshot();
    ReadSnapshot(const ReadSnapshot&) = delete;
    ReadSnapshot& operator=(const ReadSnapshot&) = delete;
    // Whether the transaction began, or why not.
    util::Result<void> status() const { return m_status; }

private:
    Store& m_store;
    bool m_began = false;
    util::Result<void> m_status;
};

// Servers in the order first stored, framings and datasets sorted, and the
// stored score-text mode ("full" when nothing is scored yet).
struct ResultNames {
    std::string score_text;
    std::vector<std::string> servers;
    std::vector<std::string> framings;
    std::vector<std::string> datasets;
};
// An error (data) when a name holds what no diffeval writes (below).
util::Result<ResultNames> result_names(Store& store);
// What is wrong with a name read from a file (a server, framing, dataset or
// scorer name) that no diffeval would have stored, or nullopt: a control
// character (a line end, a terminal escape). Names earlier versions stored
// under looser rules than util::name_problem's are read as they are: bytes
// that are not UTF-8 among them (JSON outputs write them as U+FFFD).
std::optional<std::string> stored_name_problem(std::string_view name);

// How many requests point at a response the file does not hold.
util::Result<int64_t> requests_without_their_response(Store& store);

// How many responses count (requests pointing at a response).
util::Result<int64_t> counted_responses(Store& store);
// The response_id of the counted response at position `offset` in
// response_id order (0-based); nullopt past the end.
util::Result<std::optional<int64_t>> counted_response_at(Store& store, int64_t offset);
// The highest response_id a counted response has; nullopt when none counts.
util::Result<std::optional<int64_t>> last_counted_response(Store& store);
// Counted responses not classified yet: what the scoring stage still has to
// do.
util::Result<int64_t> unclassified_responses(Store& store);

// The counted responses with response_id in [lo, hi), in that order, found
// through the requests_counted index (schema v2) so the requests' large rows
// are never visited. With `texts` the response's texts are read too. Views
// are valid until the next call to next().
class CountedRows {
public:
    CountedRows(Store& store, int64_t lo, int64_t hi, bool texts);
    // Whether the statement could be prepared, or why not.
    util::Result<void> status() const;
    // Advance to the next row: false at the end or on an error (see error()).
    bool next() { return m_rows.step(); }
    const std::string& error() const { return m_rows.error(); }

    int64_t response_id() const { return m_rows.column_int(0); }
    std::string_view server() const { return m_rows.column_view(1); }
    std::string_view framing() const { return m_rows.column_view(2); }
    int64_t max_tokens() const { return m_rows.column_int(3); }
    int64_t repeat() const { return m_rows.column_int(4); }
    int64_t question_idx() const { return m_rows.column_int(5); }
    // classifications.outcome; "" when the response is not classified.
    std::string_view outcome() const { return m_rows.column_view(6); }
    bool reasoning_started() const { return m_rows.column_int(7) != 0; }
    std::optional<int64_t> completion_tokens() const { return optional_int(8); }
    // NULL for an answer nothing timed (an import).
    std::optional<double> latency_ms() const { return optional_double(9); }
    bool ok() const { return m_rows.column_int(10) != 0; }
    std::optional<double> ttft_ms() const { return optional_double(11); }
    // When the request was sent, ms since the Unix epoch; nullopt when the
    // stored time does not parse.
    std::optional<double> started_ms() const { return optional_double(12); }
    std::string_view dataset() const { return m_rows.column_view(13); }
    // requests.question_sha256; nullopt for a question whose row was
    // missing when the database was migrated to schema v3.
    std::optional<std::string_view> question_sha256() const { return optional_view(14); }
    // Attempts made (retries included).
    int64_t attempts() const { return m_rows.column_int(15); }

    // Only with `texts`.
    std::optional<std::string_view> text() const { return optional_view(16); }
    std::optional<std::string_view> reasoning() const { return optional_view(17); }
    std::optional<std::string_view> finish_reason() const { return optional_view(18); }
    util::StopReason stop_reason() const { return m_rows.column_stop_reason(19); }
    std::optional<std::string_view> response_error() const { return optional_view(20); }
    // The classification's stop cause ("eos", "stop_string", "unknown", ...)
    // and whether the text (or its prompt) opened a think block.
    std::optional<std::string_view> stop_cause() const { return optional_view(21); }
    bool opened() const { return m_rows.column_int(22) != 0; }

private:
    std::optional<int64_t> optional_int(int col) const;
    std::optional<double> optional_double(int col) const;
    std::optional<std::string_view> optional_view(int col) const;

    Statement m_rows;
};

// The scores of the responses with response_id in [lo, hi), ordered by
// response_id and scorer (superseded attempts' scores included: the reader
// skips what no counted row asks for). With `extracted` the extracted
// answers are read too.
class ScoreRows {
public:
    ScoreRows(Store& store, int64_t lo, int64_t hi, bool extracted);
    util::Result<void> status() const;
    bool next() { return m_scores.step(); }
    const std::string& error() const { return m_scores.error(); }

    int64_t response_id() const { return m_scores.column_int(0); }
    std::string_view scorer() const { return m_scores.column_view(1); }
    bool correct() const { return m_scores.column_int(2) != 0; }
    bool valid() const { return m_scores.column_int(3) != 0; }
    // Only with `extracted`.
    std::string_view extracted() const { return m_scores.column_view(4); }

private:
    Statement m_scores;
};

// The planned requests no response answers (a run stopped before sending
// them), in request order: they count as failed, wrong answers.
class UnsentRows {
public:
    explicit UnsentRows(Store& store);
    util::Result<void> status() const;
    bool next() { return m_rows.step(); }
    const std::string& error() const { return m_rows.error(); }

    std::string_view server() const { return m_rows.column_view(0); }
    std::string_view framing() const { return m_rows.column_view(1); }
    int64_t max_tokens() const { return m_rows.column_int(2); }
    int64_t repeat() const { return m_rows.column_int(3); }
    int64_t question_idx() const { return m_rows.column_int(4); }
    std::string_view dataset() const { return m_rows.column_view(5); }
    std::optional<std::string_view> question_sha256() const {
        return m_rows.column_null(6) ? std::nullopt : std::optional(m_rows.column_view(6));
    }

private:
    Statement m_rows;
};

// One response's answer as `scorer` saw it, for an excerpt.
struct ScoredAnswer {
    bool found = false;    // the response exists
    bool valid = false;    // the scorer extracted an answer
    std::string extracted; // what it extracted
    std::string text;      // the response's text, or its error, or ""
};
util::Result<ScoredAnswer> scored_answer(Store& store, int64_t response_id,
                                         const std::string& scorer);

} // namespace diffeval::store
