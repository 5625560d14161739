// How a response ended: finished, cut by a stop string or the token limit,
// ended for another reason, or failed.
//
// Accuracy alone hides why answers are lost; sorting responses by how they
// ended shows it (a kernel that makes the model start reasoning more often
// loses points to truncation, not to wrong answers). The rules, with
// examples, are in docs/classification.md.
#pragma once

#include <harness/util/stop_reason.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace diffeval::scorers {

enum class Outcome {
    finished,         // the model ended its answer: finish_reason "stop" with an answer
    stop_truncated,   // a stop string (or EOS) ended it inside reasoning or before any answer
    length_truncated, // finish_reason "length": the output limit cut it
    other,            // any other finish_reason, or none at all
    error,            // no usable response: transport/HTTP failure, bad body, abort/error
    // an answer from another tool's log that kept its text but not how it
    // ended (an lm-eval samples import): neither finished nor cut, unknown
    unrecorded,
};

// How many outcomes there are: Outcome values are 0 .. k_outcome_count - 1,
// the indices of Comparison's transition tables.
inline constexpr int k_outcome_count = 6;

// "finished", "stop_truncated", "length_truncated", "other", "error" or
// "unrecorded".
std::string_view outcome_name(Outcome outcome);

// The name of the outcome with value `index` (0 .. k_outcome_count - 1).
inline std::string_view outcome_name(int index) {
    return outcome_name(static_cast<Outcome>(index));
}

// The Outcome called `name` (as written by outcome_name), or nullopt.
std::optional<Outcome> outcome_from_name(std::string_view name);

// True for the outcomes the report counts as "never finished":
// stop_truncated, length_truncated and other. An unrecorded outcome is not:
// nothing says how that response ended.
bool never_finished(Outcome outcome);

// What ended a response whose finish_reason says it stopped: end-of-sequence,
// a stop string, a stop token, or nothing the server said (llama.cpp's OpenAI
// endpoints name no stop) and the text does not show.
enum class StopCause { none, eos, stop_string, stop_token, unknown };

// "eos", "stop_string", "stop_token", "unknown"; "" for none.
std::string_view stop_cause_name(StopCause cause);

struct ClassifyInput {
    std::string_view text;          // choices[0].text or message.content ("" if null)
    std::string_view reasoning;     // message.reasoning(_content) when the server split it off
    std::string_view finish_reason; // empty if absent or null
    util::StopReason stop_reason;   // the server's, as the response named it
    // The response field the stop cause was read from (responses.stop_field):
    // "stop_reason" (vLLM), "matched_stop" (SGLang), "finish_reason" (TGI
    // before 2.2: eos_token, stop_sequence), "__verbose.stop_type" (llama.cpp
    // with --verbose), or empty when the server sent none of them.
    std::string_view stop_field;
    // The request's stop strings: with no stop field, a text that ends in
    // one of them was stopped by it.
    std::span<const std::string> stop_strings;
    bool failed = false; // transport or HTTP failure after retries, or an unparsable body
    // The response was imported from a log that keeps no finish_reason (lm-eval
    // --log_samples): with none, its outcome is unrecorded, not other.
    bool finish_unrecorded = false;
    // The prompt itself ends inside an open `<think>` (a chat template that
    // opens the block for the model), so `text` starts as reasoning.
    bool prompt_opened_think = false;
};

struct Classification {
    bool opened = false;            // a reasoning block was started
    bool closed = false;            // ... and ended before the response did
    bool reasoning_started = false; // ... and holds more than whitespace
    Outcome outcome = Outcome::error;
    StopCause stop_cause = StopCause::none; // set when the response stopped (not length)
};

// Classify one response from `input`.
Classification classify(const ClassifyInput& input);

} // namespace diffeval::scorers
