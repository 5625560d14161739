// The decision-point probe's requests (docs/probe.md): for every question,
// server and framing, extra requests with the framing's prompt bytes,
// `max_tokens` 1 and the engine's log-probability options, beside the
// measured requests (which stay byte-identical to the reference harnesses).
// A completion framing with a chain whitespace gets a second request whose
// prompt ends with it. Probe requests are stored in their own tables (schema
// v8), resumed like every request, and never counted as answers.
#pragma once

#include <datasets/dataset.hpp>
#include <harness/engine/response_parse.hpp>
#include <harness/framing/framing.hpp>
#include <harness/store/store.hpp>
#include <harness/util/result.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace diffeval::engine {

// The one probe diffeval knows: does the answer open the framing's marker.
inline constexpr std::string_view k_think_open_probe = "think-open";
// Alternatives asked for at the first position: vLLM's default
// --max-logprobs and OpenAI's top_logprobs limit are both 20.
inline constexpr int k_probe_top_logprobs = 20;
// Probes per question and configuration at least: two let the analysis
// measure a configuration against itself (the A/A spread).
inline constexpr int k_min_probe_repeats = 2;

// An unknown probe name is a usage error naming the known one.
util::Result<void> validate_probe(const std::string& name);

// What a probe response is read for.
struct ProbeTarget {
    std::string marker; // the framing's probe_marker
    std::string chain;  // the framing's probe_chain ("" for none)
};

// What a probe request sends beside `extra` under framing `f`: the engine's
// log-probability options.
nlohmann::ordered_json probe_options(const framing::Framing& f,
                                     const nlohmann::ordered_json& extra);

// Probe requests per question under framing `f` with `repeats` (at least
// k_min_probe_repeats each): one step, or two when the framing chains.
int64_t probe_requests_per_question(const framing::Framing& f, int repeats);

// Probe requests per question and repeat under framing `f`: one step, or
// two when the framing chains (a completion framing with a probe_chain).
int probe_steps(const framing::Framing& f);

// The body of question `sample`'s probe request at `step` under `renderer`'s
// framing: the measured body with a token limit of 1 and `options`
// (probe_options(...)), its prompt followed by the chain at step 1. `model`
// is what the measured requests name.
std::string probe_body(const framing::Renderer& renderer, const datasets::Sample& sample, int step,
                       const std::optional<std::string>& model,
                       const nlohmann::ordered_json& options);

// The request rows of probe `probe` for server `server` under framing
// `framing` for question `q` of dataset `dataset`: each step's body of
// `bodies` (probe_body, one per step), `repeats` times (at least
// k_min_probe_repeats). The first row of each body carries it.
std::vector<store::RequestRow> plan_probe_question(const std::string& probe,
                                                   const std::string& server,
                                                   const std::string& framing,
                                                   const std::string& dataset, size_t q,
                                                   int repeats, std::vector<std::string> bodies);

// The key of probe `probe`'s request at `step`, repeat `repeat` and question
// `q` for `server` under `framing`, whose body hashes to `body_sha256`.
std::string probe_request_key(const std::string& probe, int step, const std::string& server,
                              const std::string& framing, int repeat, int64_t q,
                              const std::string& body_sha256);

// Fill `row` from a probe's HTTP 2xx `body`: ok with its reading; ok without
// a reading (error_kind "no-logprobs") when the engine ignored the logprobs
// options, since sending again would not change that; error_kind "parse"
// when the body is not an answer: not JSON, not an object, an error object,
// no choice (retried like any cut body).
void parse_probe_body(const std::string& body, const ProbeTarget& target, store::ResponseRow& row);

} // namespace diffeval::engine
