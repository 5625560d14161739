// The decision-point probe's arithmetic: from a response with top
// log-probabilities at its first generated position, the probability that
// the answer opens a think block (docs/probe.md).
//
// Engines return log-probabilities in two shapes: vLLM's legacy completions
// shape (`logprobs.tokens`, `token_logprobs`, `top_logprobs` as one dict per
// position) and the chat shape that llama-server also uses on
// /v1/completions (`logprobs.content[]`, each with a `top_logprobs[]` list).
// Both are read here; nothing else in diffeval parses log-probabilities.
//
// Tokenizers differ in how the marker arrives. Where the marker is a special
// token, a raw prompt ending "Answer:" is continued by a whitespace token and
// only then the marker, so the probability is a chain:
//   P(open) = P(marker-led token | prompt) + P(ws | prompt) x P(marker | prompt + ws),
// the last factor read from a second probe whose prompt ends with `ws`.
// Where a token already starts with the marker after leading whitespace, the
// first term alone carries it.
#pragma once

#include <harness/util/result.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::probe {

// One token the engine listed at a position, with its log-probability.
struct Alternative {
    std::string token;
    double logprob = 0;
};

// The first generated position of a response: the token chosen there and the
// alternatives the engine returned (the chosen one included once).
struct FirstPosition {
    std::string chosen;
    std::vector<Alternative> top; // most likely first
    // Tokens listed without a usable log-probability (missing, not a
    // number, above 0): their probability is unknown (the first 64 kept).
    std::vector<std::string> unreadable;
    // More alternatives were listed than are kept (1,000): first_position
    // refuses such a position, so a returned one never has it set.
    bool cut = false;
};

// Read the first generated position from a 2xx response `body` in either
// shape. Fails with a message when the body has no log-probabilities (the
// engine ignored the request's logprobs options), is not JSON, or lists what
// no distribution over the next token is: probabilities summing above 1, or
// more than 1,000 alternatives (the probe asks for 20). Tokens listed twice in
// one list with their own numbers are distinct token ids that decode alike,
// and their probabilities add up.
util::Result<FirstPosition> first_position(std::string_view body);

// The same read with nlohmann's DOM parser alone. first_position reads with
// simdjson and comes here only for what simdjson refuses (a number out of
// double's range, nesting past its depth limit); fuzz_response checks that
// the two agree.
util::Result<FirstPosition> first_position_nlohmann(std::string_view body);

// What one probe response says about the marker and the chain whitespace.
struct Reading {
    double p_marker = 0;        // mass of listed tokens that start with the marker after
                                // leading whitespace
    bool marker_listed = false; // some listed token carried the marker
    double p_whitespace = 0;    // mass of the listed token equal to the chain whitespace
    bool whitespace_listed = false;
    double floor = 0;   // the smallest listed probability: an unlisted token has at most this
    std::string chosen; // the token the engine chose
    std::vector<Alternative> top;
    // Why the position neither measures nor bounds P(open), when it does
    // not: a marker-led or whitespace token listed without a usable
    // log-probability, or (the marker unlisted) a listed token that is the
    // marker's start, which the marker may follow. Empty when usable.
    std::string unusable;
};

// Read `position` for `marker` (e.g. "<think>") and the chain `whitespace`
// (e.g. " "). A token carries the marker when it starts with it after leading
// whitespace: ASCII, Unicode (no-break, ideographic, ...) or a tokenizer's
// own space sign (SentencePiece's U+2581, byte-level BPE's U+0120).
Reading read(const FirstPosition& position, std::string_view marker, std::string_view whitespace);

// The probability of opening, combined from the first request's reading and,
// when the framing chains, the reading after the whitespace.
struct Estimate {
    double p_open = 0;
    // True when neither path was fully listed: `p_open` is then only an upper
    // bound (the smallest listed probability), not a measurement.
    bool bounded = false;
    double p_direct = 0;           // first request: marker-led tokens
    double p_whitespace = 0;       // first request: the chain whitespace
    double p_after_whitespace = 0; // second request: the marker after the whitespace
};

// Combine `first` with `after_whitespace` (nullopt when the framing does not
// chain or its second probe has no usable reading), as the v_probes view
// does: bounded when no listed path reaches the marker, or when the
// whitespace was listed and the reading after it lists no marker.
Estimate combine(const Reading& first, const std::optional<Reading>& after_whitespace);

// log(p / (1 - p)) with p kept inside [1e-9, 1 - 1e-9], so a probability the
// engine rounded to 0 or 1 still has a finite logit.
double logit(double p);

// `top` as a compact JSON array of [token, logprob] pairs, for the store.
std::string top_json(const std::vector<Alternative>& top);

} // namespace diffeval::probe
