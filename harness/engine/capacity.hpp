// What a server publishes about its limits, and what the run does with it:
// how many requests it serves at once (llama.cpp's /props total_slots), how
// long a prompt may be (/props n_ctx per slot, vLLM's max_model_len in
// /v1/models), which engine build it is; the in-flight limit per server, the
// context check before anything is sent, and which errors no retry can fix.
//
// Why the in-flight limit follows the slots: llama-server answers HTTP from a
// small thread pool (slots + 2) and a thread stays with its connection while
// it is kept alive, so connections beyond the slots wait behind idle ones for
// the server's keep-alive timeout (5 s) instead of being served.
#pragma once

#include <datasets/dataset.hpp>
#include <harness/framing/framing.hpp>
#include <harness/util/result.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace diffeval::engine {

struct ServerLimits {
    std::optional<int> slots;       // requests served at once, when published
    std::optional<int64_t> context; // tokens one request may use (prompt + answer)
    std::string context_source;     // where `context` came from, for messages
    std::string engine;             // "llamacpp" when /props answered like llama-server
    nlohmann::json props = nullptr; // the /props fields diffeval keeps (servers.info_json)
};

// Read the limits of the server at `base_url`: GET /props with `headers`, and
// `models`, the `data` array its /v1/models answered. Never fails: what is
// not published stays unset.
ServerLimits read_limits(const std::string& base_url, const std::vector<std::string>& headers,
                         const nlohmann::json& models, std::chrono::milliseconds timeout);

// The default in-flight limit per server when neither the user nor the server
// says otherwise.
inline constexpr int k_default_concurrency = 64;

// Requests in flight at most for one server: `concurrency` (or, when
// `concurrency_auto`, the server's slots else the default), never more than
// the slots the server publishes. `note` says why when it differs from what
// was asked ("" otherwise).
size_t in_flight_limit(int concurrency, bool concurrency_auto, const ServerLimits& limits,
                       std::string& note);

// Before anything is sent: the longest prompt of `framings` over the first
// `n_questions` of `dataset`, counted by the server's own tokenizer, must fit
// its context. An error (usage) names the server, the prompt and both sizes;
// a prompt that fits but leaves less than `max_tokens` for the answer is one
// warning line on `log`. Passes silently when the server publishes no
// context or cannot count tokens. True when every framing's longest prompt
// was counted and, with `max_tokens`, fits the context: then every request
// fits it alone (permanent_error's `fits_alone`).
util::Result<bool> check_context(const std::string& server_name, const std::string& base_url,
                                 const std::vector<std::string>& headers,
                                 const ServerLimits& limits,
                                 const std::vector<framing::Framing>& framings,
                                 const datasets::Dataset& dataset, size_t n_questions,
                                 int max_tokens, const std::optional<std::string>& model,
                                 std::chrono::milliseconds timeout, std::ostream& log);

// What an HTTP error answer (`status`, `body`) says of another attempt.
enum class ErrorAnswer {
    // Nothing against one.
    transient,
    // No retry can change it: the prompt exceeds the context, the model does
    // not exist, the request is malformed. Stored at once.
    permanent,
    // llama-server's "Context size has been exceeded." from a server every
    // request fits alone (`fits_alone`, check_context): the answer outgrew a
    // cache requests share (-kvu, its default), which frees as they end.
    // Worth another attempt, with fewer at once.
    crowded,
};
ErrorAnswer error_answer(long status, const std::string& body, bool fits_alone);

// error_answer(...) == ErrorAnswer::permanent.
bool permanent_error(long status, const std::string& body, bool fits_alone = false);

// The server facts /props gives (engine version, slots, context per slot,
// the model file, `default_` + each sampling default kept under `sampling`),
// as fingerprint facts; an empty object when it gave none.
nlohmann::json limit_facts(const ServerLimits& limits);

} // namespace diffeval::engine
