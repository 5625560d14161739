// Synthetic log-probabilities for generated tokens: deterministic, greedy
// (the chosen token is always the most likely), and meaningful at the one
// place that matters for the article: the first token after the model's own
// "<think>\n", whose alternatives carry the probability of closing the think
// block at once versus starting to reason.
#pragma once

#include <harness/sim/generate.hpp>

#include <string>
#include <vector>

namespace diffeval::sim {

struct TopLogprob {
    std::string token;
    double logprob = 0;
};

struct TokenLogprob {
    std::string token; // the token's text; the EOS token is "<|im_end|>"
    double logprob = 0;
    std::vector<TopLogprob> top; // `top_n` most likely tokens, the chosen one first
};

// Logprobs of the tokens [`begin`, `end`) of `gen` (indices into its counted
// tokens, EOS last), each with `top_n` alternatives.
std::vector<TokenLogprob> token_logprobs(const Generation& gen, size_t begin, size_t end,
                                         int top_n);

} // namespace diffeval::sim
