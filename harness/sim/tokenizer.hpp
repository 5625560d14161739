// The simulator's tokenizer: a simple, documented, deterministic stand-in
// for a model's BPE tokenizer, so usage counts, `max_tokens` cuts, logprobs
// and streamed chunks are all consistent with the text.
//
// A token is, at each position, the first of these that matches:
//   - a special token: <think>, </think>, <|im_start|>, <|im_end|>, <|endoftext|>;
//   - a newline;
//   - an optional single space followed by a run of 1 to 8 ASCII letters;
//   - a run of 1 to 3 ASCII digits ("130000" is "130", "000");
//   - an optional single space followed by a run of 1 to 4 ASCII punctuation
//     characters (printable, not letter, digit or space), stopping before a
//     special token: "####", "<<", "=$" and " **" are one token each, as BPE
//     merges them;
//   - one other character: a space, a control byte, or one UTF-8 code point.
// Concatenating the tokens of a text gives the text back.
#pragma once

#include <harness/sim/recent_prefixes.hpp>

#include <string_view>
#include <vector>

namespace diffeval::sim {

// The end-of-sequence token of the simulated model (counted, never shown).
inline constexpr std::string_view k_eos_token = "<|im_end|>";

// The tokens of `text`, as views into it.
std::vector<std::string_view> tokenize(std::string_view text);

// The number of tokens in `text` (same as tokenize(text).size(), no allocation).
int count_tokens(std::string_view text);

// Token counts of texts that mostly begin alike (recent_prefixes.hpp). A
// newline is always a token of its own and no token before it depends on
// what follows, so the count resumes after the last newline a text shares
// with a recent one: count(text) == count_tokens(text).
class PrefixTokenCounter {
public:
    int count(std::string_view text);

private:
    RecentPrefixes<int> m_recent;
};

// Length in bytes of the token starting at `text[pos]` (`pos` < text.size()).
size_t token_length(std::string_view text, size_t pos);

// True when `token` is one of the special tokens.
bool is_special_token(std::string_view token);

} // namespace diffeval::sim
