// The simulated model: what it writes for a request, as a deterministic
// function of the profile, the request's content and how many times that
// content was seen before. No HTTP here, so tests and tuning call it
// directly.
//
// Raw completion framing (the article's /v1/completions probe): the model
// opens its own think block, then either closes it at once and answers, or
// starts reasoning; reasoning is long and may write "Question", which a stop
// string turns into an unfinished response. Chat framing with thinking off
// answers directly and ends with EOS; with thinking on it always reasons.
// The rates and lengths come from the profile; docs/simulator.md describes
// the model in full.
#pragma once

#include <harness/sim/profile.hpp>
#include <harness/sim/question_bank.hpp>
#include <harness/sim/request.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace diffeval::sim {

// The choices the model made for one response (for tests, tuning and logs).
struct Decisions {
    bool known_question = false; // the question is in the dataset
    bool opened_think = false;   // raw: wrote <think>
    bool reasoning = false;      // started reasoning (raw: first token after <think>\n)
    bool wrong = false;          // its answer carries an arithmetic slip
    bool verbose = false;        // explained at length
    bool loop = false;           // repeats a line until the limit
    bool missing_hash = false;   // chat: no "#### N" line
    double p_reason = 0;         // probability it gave to starting reasoning
    double p_open = 0;           // raw: probability its answer opens <think> (" " then <think>)
    int reasoning_tokens = 0;    // planned length of the reasoning block
};

// One generated choice, cut the way vLLM cuts it.
struct Generation {
    std::string text;                   // the output text as vLLM returns it (choices[].text)
    std::string reasoning;              // chat with a reasoning parser: the separated reasoning
    std::optional<std::string> content; // chat: message.content (nullopt = null)
    std::string finish_reason;          // "stop" or "length"
    nlohmann::json stop_reason;         // null, or the stop string that fired
    int prompt_tokens = 0;
    int completion_tokens = 0; // tokens generated, including the one that completed a
                               // stop string and the EOS token
    std::string output;        // the generated characters up to the cut (may extend past `text`
                               // by the stop string)
    std::vector<std::pair<uint32_t, uint32_t>> token_spans; // offset, length in `output`
    bool eos = false;                 // the last counted token is EOS (not in `output`)
    int decision_token = -1;          // index of the first token after "<think>\n" (raw), or -1
    std::string decision_alternative; // the token the model did not choose there
    int open_token = -1;              // raw: 0, the token that leads into <think> or not; else -1
    bool open_chosen = false;         // the model took the path into <think>
    double open_p = 0;                // probability of the token on that path
    std::string open_alternative;     // the first token the model did not choose
    uint64_t seed = 0;                // per-response seed for logprobs
    Decisions decisions;
};

// Extra effects the server layers on a response.
struct GenerateOptions {
    int sighting = 0;               // earlier sightings of this content (0 = first)
    size_t prompt_index = 0;        // which prompt of a completions batch
    std::string_view inject_markup; // markup fault: inserted near the start of the text
};

// Generate the response to `request` from `profile` and what `bank` knows.
Generation generate(const Profile& profile, const QuestionBank& bank, const ParsedRequest& request,
                    const GenerateOptions& options);

// Convenience for tests: parse `body` for `endpoint` (it must be valid; an
// invalid body gives an empty generation with finish_reason "error") and
// generate its first prompt at `sighting`.
Generation generate(const Profile& profile, const QuestionBank& bank, const nlohmann::json& body,
                    Endpoint endpoint, int sighting);

} // namespace diffeval::sim
