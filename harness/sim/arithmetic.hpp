// The arithmetic inside GSM8K worked solutions: the `<<48/2=24>>`
// calculator annotations, an evaluator for their expressions, and the
// "arithmetic slip" that turns a correct solution into a plausible wrong one.
//
// A wrong answer from a real model is rarely a random number: one step is
// off (a dropped zero, an off-by-one, swapped digits) and every later step
// that uses it carries the error to `#### N`. Re-evaluating the annotated
// steps reproduces exactly that.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::sim {

// One calculator annotation `<<expr=result>>` in a solution.
struct Step {
    size_t begin = 0; // offset of "<<"
    size_t end = 0;   // offset just past ">>"
    std::string expr;
    std::string result;
};

// The annotations of `solution`, in order.
std::vector<Step> find_steps(std::string_view solution);

// The value of the arithmetic expression `expr` (numbers, + - * /,
// parentheses), or nullopt when it does not parse or divides by zero.
std::optional<double> evaluate(std::string_view expr);

// `x` written as GSM8K writes numbers: an integer without a decimal point,
// else at most two decimals with trailing zeros removed.
std::string format_number(double x);

// The text after the last "####" of a GSM8K answer, trimmed ("" if none).
std::string final_answer(std::string_view answer);

// The answer without its final "#### N" line, trailing whitespace removed.
std::string solution_body(std::string_view answer);

// A wrong version of a GSM8K `answer` (with its "#### N" line): one step's
// result slipped, the change propagated through later steps, and the final
// line rewritten. `seed` picks the step and the kind of slip. The returned
// answer's final number always differs from the original's.
std::string slip_answer(std::string_view answer, uint64_t seed);

} // namespace diffeval::sim
