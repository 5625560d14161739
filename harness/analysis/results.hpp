// The scored results of a database, loaded once into memory for the
// summaries and paired comparisons: one small row per response that counts
// (no texts; excerpts are fetched on demand for the few rows shown).
#pragma once

#include <harness/store/store.hpp>
#include <harness/util/result.hpp>
#include <harness/util/stop_reason.hpp>
#include <scorers/classify.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::analysis {

// One flag per scorer, kept in the row itself: no allocation per row, so a
// large run's rows stay small. At most k_max_scorers scorers.
class ScorerFlags {
public:
    static constexpr size_t k_max_scorers = 64;
    bool operator[](size_t k) const { return k < k_max_scorers && ((m_bits >> k) & 1U) != 0; }
    void set(size_t k, bool on) {
        if (k < k_max_scorers) {
            m_bits = on ? (m_bits | (std::uint64_t{1} << k)) : (m_bits & ~(std::uint64_t{1} << k));
        }
    }
    void clear() { m_bits = 0; }

private:
    std::uint64_t m_bits = 0;
};

// The error a planned request with no response stored shows in place of a
// response's: never sent, or sent and in flight when its run stopped (a
// server may have read it), which no stored row tells apart.
inline constexpr std::string_view k_never_sent =
    "no response stored: the run stopped before sending this request, or while it was in "
    "flight; run the same command again";

// What accuracies are of, where a database was rescored on the text after
// the think block (rescore --score-text after-think): "on the text after
// the think block" (scored_text_words: with ", " before it, for a heading);
// empty for the full text, the default. Printed beside every accuracy
// heading, so two outputs that differ say why (an audit).
inline std::string scored_text(std::string_view score_text) {
    return score_text == "after-think" ? "on the text after the think block" : "";
}
inline std::string scored_text_words(std::string_view score_text) {
    const auto text = scored_text(score_text);
    return text.empty() ? text : ", " + text;
}

// How requests without a response count, where a sentence says they count
// as wrong answers: "... count as wrong answers (in a comparison ...)".
inline constexpr std::string_view k_unanswered_counting =
    "in a comparison only the candidate's: the baseline's are left out";

// One counted response, or (response_id 0) a planned request never sent,
// which counts as a failed, wrong answer (a comparison leaves a baseline's
// out: compare.hpp).
struct ResultRow {
    int64_t response_id = 0;
    int server = 0; // index into Results::servers
    int framing = 0;
    int max_tokens = 0;
    int repeat = 0;
    int question_idx = 0;
    int dataset = 0;                // index into Results::datasets
    std::uint64_t question_key = 0; // hash64 of the question's content hash; 0 when unknown
    scorers::Outcome outcome = scorers::Outcome::error;
    bool reasoning_started = false;
    std::optional<int64_t> completion_tokens;
    bool ok = false; // a successful HTTP response (errors have no meaningful latency)
    std::optional<double> latency_ms; // unset when nothing timed it (an import)
    std::optional<double> ttft_ms;    // only for streamed responses
    double started_ms = 0;            // when the request was sent, ms since the Unix epoch
    // More than one attempt: latency_ms is the last one's, and when that
    // one was sent is not stored, so the request's span is unknown.
    bool retried = false;
    ScorerFlags correct; // per scorer, in Results::scorers order
    ScorerFlags valid;
};

struct Results {
    std::vector<std::string> servers;  // in the order first stored
    std::vector<std::string> framings; // sorted
    std::vector<std::string> datasets; // sorted
    std::vector<std::string> scorers;  // sorted
    std::string score_text;            // "full" or "after-think"
    std::vector<ResultRow> rows;
};

// What one response said, for a writer that streams every text (the HTML
// explorer). The views are valid only during the call.
struct ResponseDetail {
    std::optional<std::string_view> text;
    std::optional<std::string_view> reasoning;
    std::optional<std::string_view> finish_reason;
    util::StopReason stop_reason;
    std::optional<std::string_view> error;
    // The classification's: why it stopped, as classification.md names it
    // (unknown where the server names no stop), and whether a think block
    // was opened (a stray `</think>` opens none).
    std::optional<std::string_view> stop_cause;
    bool opened = false;
    // Scorers in the order first seen (the list grows while a pass runs);
    // `extracted[k]` is meaningful where `scored[k]` is 1.
    const std::vector<std::string>* scorers = nullptr;
    std::vector<std::string> extracted;
    std::vector<uint8_t> scored;
};

// Called once per response that counts with its texts, in response_id order
// within one part of a load (see load_results). The row's server and framing
// index Results::servers and ::framings; its flags follow `detail.scorers`,
// the part's scorers in the order first seen. An error stops the load and is
// returned by it.
using ResponseVisitor =
    std::function<util::Result<void>(const ResultRow& row, const ResponseDetail& detail)>;

// How many responses that count have no classification yet: what the
// scoring stage (analysis::ensure_scored) still has to do.
util::Result<int64_t> unscored_count(store::Store& store);

// Load every scored response that counts; it only reads, so `store` must
// be scored first (cli::open_existing_store and cli::score_stored see to it).
// An empty database is a data error saying to run `diffeval run` first.
// Large databases are read in two halves of the response_id range at once,
// the upper half on a second connection and thread; `visit[0]` and
// `visit[1]` (when set) see the lower and upper half's responses with their
// texts, in the same pass. The rows come back in response_id order.
util::Result<Results> load_results(store::Store& store,
                                   const std::array<ResponseVisitor, 2>& visit);
// The same without visitors. (An overload, not a default argument `= {}`:
// clang 14 does not emit std::function's constructor for that default.)
util::Result<Results> load_results(store::Store& store);

// What `scorer` extracted from one response, cut to `max_chars`; when it
// extracted nothing, "(no answer)" and the end of the response's text.
std::string answer_excerpt(store::Store& store, int64_t response_id, const std::string& scorer,
                           size_t max_chars);

// Index of `scorer` in `results.scorers`, or an error listing them.
util::Result<size_t> scorer_index(const Results& results, const std::string& scorer);

} // namespace diffeval::analysis
