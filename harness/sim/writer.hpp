// The texts the simulated model writes: reasoning blocks, terse and verbose
// answers, repetition loops, and a plausible answer for a question it does
// not know.
//
// Reasoning looks like the article's example: markdown bullets restating
// the quantities of the question, then the calculation, then rounds of
// re-checking. So a response cut anywhere inside it ends on a number taken
// from the question or a partial result, which a "last number" scorer reads
// as a plausible but usually wrong answer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace diffeval::sim {

// Where a reasoning block writes the word "Question" (a stop string of
// vLLM's GSM8K script), as a share of its length; a value >= 1 means never.
struct ReasoningPlan {
    int target_tokens = 2000;
    double question_at = 1.0;
    uint64_t seed = 0;
};

// A reasoning block about `question` whose calculation follows `answer`
// (a GSM8K solution ending in "#### N"), about `plan.target_tokens` long. It
// ends with a newline and has no think tags.
std::string write_reasoning(std::string_view question, std::string_view answer,
                            const ReasoningPlan& plan);

// `answer` explained at length: about `target_tokens` tokens, ending in
// "#### N".
std::string write_verbose(std::string_view question, std::string_view answer, int target_tokens);

// A degenerate answer that repeats one line of `answer` until it is at
// least `min_tokens` tokens long.
std::string write_loop(std::string_view answer, int min_tokens);

// `answer` with its final "#### N" line replaced by "The answer is N.".
std::string without_hash(std::string_view answer);

// A short deterministic solution for a question the model does not know,
// using the numbers in it and ending in "#### N".
std::string synthetic_answer(std::string_view question);

} // namespace diffeval::sim
