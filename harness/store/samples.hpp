// Typed reads and writes for lm-eval samples files (harness/interop/): the
// groups and answered requests an export writes, and what an import checks
// and stores. The SQL stays in the store, and callers get rows with names.
#pragma once

#include <harness/store/store.hpp>
#include <harness/util/result.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace diffeval::store {

// A group with at least one answered request: an export writes one samples
// file per group.
struct AnsweredGroup {
    std::string server;
    std::string framing;
    int max_tokens = 0;
    int repeat = 0;
};
// Every group with an answered request, ordered by server, framing,
// max_tokens and repeat.
util::Result<std::vector<AnsweredGroup>> answered_groups(Store& store);

// One scorer's stored verdict on a response.
struct StoredVerdict {
    std::string extracted;
    bool correct = false;
};

// An answered request with its response, its question (empty strings when
// the questions table has no row for it) and the verdicts asked for.
struct AnsweredRequest {
    int64_t question_idx = 0;
    int64_t response_id = 0;
    std::string_view request_json;
    std::string_view text; // "" when the response has none
    std::string_view question;
    std::string_view answer;
    // A failed response (no successful answer): its error kind and error.
    bool ok = true;
    std::string_view error_kind;
    std::string_view error;
    // One per scorer asked for, in that order; nullopt where that scorer has
    // no score for the response.
    std::vector<std::optional<StoredVerdict>> verdicts;
};
// Called once per answered request; an error stops the walk and is returned.
using AnsweredRequestVisitor = std::function<util::Result<void>(const AnsweredRequest& request)>;
// Visit the answered requests of `group` by question index, each with the
// verdicts of `scorers`; the views are valid during the call only.
util::Result<void> for_each_answered_request(Store& store, const AnsweredGroup& group,
                                             const std::vector<std::string>& scorers,
                                             const AnsweredRequestVisitor& visit);

// The url recorded for server `name`, nullopt when the servers table has no
// row for it. An import's url starts with "lm-eval:".
util::Result<std::optional<std::string>> server_url(Store& store, const std::string& name);

// The text of the successful response to each of `requests` (found by its
// place and key), in that order; nullopt where none is stored (or it has no
// text).
util::Result<std::vector<std::optional<std::string>>>
answered_texts(Store& store, const std::vector<RequestRow>& requests);

// The error kind and message of each request of group `server`/`framing`
// whose counted response is a failure, by request key: a samples file's
// failed line that matches one is stored already.
using CountedFailures = std::unordered_map<std::string, std::pair<std::string, std::string>>;
util::Result<CountedFailures> counted_failures(Store& store, const std::string& server,
                                               const std::string& framing);

// The first of `rows` (requests not stored yet) whose place (server,
// framing, max_tokens, repeat, question) holds a stored request of another
// key: one sent with another body, which beside it would count the question
// twice in one repeat of its group. nullopt when every place is free.
util::Result<std::optional<size_t>> first_taken_place(Store& store,
                                                      const std::vector<RequestRow>& rows);

// The stored question text at each of `question_idxs` in `dataset`, in that
// order; nullopt where the questions table has no row.
util::Result<std::vector<std::optional<std::string>>>
stored_questions(Store& store, const std::string& dataset,
                 const std::vector<int64_t>& question_idxs);

// A question at the index another tool gave it.
struct IndexedQuestion {
    int64_t question_idx = 0;
    std::string_view question;
    std::string_view answer;
};
// Store `questions` in `dataset` at their own indexes (Store::put_questions
// numbers them from 0) with their question_sha256 (question_hash), as a run
// stores them; a question already stored at an index is kept as it is, and
// takes its hash if an older import left it NULL (with its requests), so
// analysis pairs it with a run's by content.
util::Result<void> put_questions_at(Store& store, const std::string& dataset,
                                    const std::vector<IndexedQuestion>& questions);

} // namespace diffeval::store
