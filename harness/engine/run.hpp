// The run engine: plans every (server x framing x max_tokens x repeat x
// question) request, skips those already answered in the store, sends the rest
// through one event loop (http::MultiClient) with per-server concurrency, retries what
// is worth retrying, and hands every outcome to the store's writer thread.
#pragma once

#include <harness/engine/config.hpp>
#include <harness/util/result.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace diffeval::engine {

// How progress is shown: a redrawn bar on a terminal, periodic lines
// otherwise, or nothing.
enum class ProgressStyle { bar, lines, none };

struct RunOptions {
    ProgressStyle progress = ProgressStyle::lines;
    // Set from a signal handler to stop cleanly; checked by the loop.
    const std::atomic<bool>* stop_requested = nullptr;
    // Set by a second signal: launched servers are killed at once instead
    // of given their grace period to stop.
    const std::atomic<bool>* kill_requested = nullptr;
};

struct RunSummary {
    int64_t run_id = 0;
    int64_t planned = 0;   // requests in the matrix
    int64_t skipped = 0;   // already answered in the store
    int64_t succeeded = 0; // answered in this run
    int64_t failed = 0;    // ended in an error in this run
    // Of succeeded + failed, the decision-point probe's readings (stored in
    // probe_responses, not responses).
    int64_t probe_readings = 0;
    int64_t retries = 0; // extra attempts made
    // Sent and still unanswered when the run stopped (interrupted, or the
    // store failed) or their launched server died: dropped, and sent again
    // by the next run.
    int64_t dropped_in_flight = 0;
    // Of `failed`, those whose every attempt was refused at connect: never
    // sent to a server, though stored as failures.
    int64_t unreached = 0;
    bool interrupted = false;
    std::vector<std::string> crashed; // launched servers that died mid-run
    // Per server, the connections found holding bytes no request asked for
    // (http::MultiClient::unasked_bytes) while its phase sent.
    std::map<std::string, int64_t> unasked_bytes;
    double seconds = 0;
    // This run's final failures by what they say ("kind: error", redacted,
    // one line of at most 160 bytes), for the closing summary.
    std::map<std::string, int64_t> failures;
    // Groups of this run's servers holding requests an earlier run planned
    // and no run sent (label, count): a run with a lower --limit or
    // --repeats than one stopped before sending them leaves them unsent.
    // Filled only when this run sent all it planned.
    std::vector<std::pair<std::string, int64_t>> unsent_by_others;
};

// What `s` stored, in words: "48 responses", or "1728 responses and 1296
// probe responses" when the run sent the decision-point probe (failed ones
// too: the counts after it say how many were ok).
std::string stored_words(const RunSummary& s);

// Run `config`, writing to its database; progress and notes go to `log`.
// Errors before any request is sent (bad input, unreachable server) come
// back as Result errors; request failures are stored and counted.
util::Result<RunSummary> run(const RunConfig& config, const RunOptions& options, std::ostream& log);

} // namespace diffeval::engine
