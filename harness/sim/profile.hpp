// Simulator profiles: the data that makes one simulated server behave like
// one real server configuration (vLLM version, reasoning parser, how often
// the model starts reasoning, latency, injected faults).
//
// Profiles are TOML files with a `version`, read by small generic code, so a
// new server configuration needs no recompile. Three are built in
// (harness/sim/profiles/*.toml): "default", "deepgemm" and "no-deepgemm",
// after the three servers of the article the simulator reproduces. Every key
// is documented in docs/simulator.md.
#pragma once

#include <harness/util/result.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::sim {

// Where chat responses put the separated reasoning text.
enum class ReasoningField { reasoning, reasoning_content, both };

// What the server reports about itself.
struct ServerInfo {
    std::string vllm_version = "0.28.0";
    int max_model_len = 262144;
    int64_t created = 1767225600; // fixed `created` of every response, for byte-identical replies
    std::string reasoning_parser = "qwen3"; // "" = no parser: reasoning stays inline in content
    ReasoningField reasoning_field = ReasoningField::reasoning;
};

// The behaviour model; see docs/simulator.md for how each share is used.
struct Behaviour {
    double think_tag_rate = 0.99;          // raw framing: share of responses that open <think>
    double reasoning_rate = 0.11;          // raw framing: share of questions that start reasoning
    double reasoning_jitter = 0.02;        // half-width of the per-request noise on that decision
    double reasoning_median_tokens = 2000; // lognormal length of a complete reasoning block
    double reasoning_sigma = 0.5;
    double reasoning_question_rate = 0.45; // share of reasoning blocks that write "Question"
    double verbose_rate = 0.05;            // answers that explain at length (300..950 tokens)
    int verbose_min_tokens = 300;
    int verbose_max_tokens = 950;
    double loop_rate = 0.006;              // answers that repeat a line until the limit
    double error_rate = 0.035;             // finished answers with an arithmetic slip
    double chat_missing_hash_rate = 0.015; // chat answers that end without "#### N"
    double answer_noise = 0.01; // share of requests whose per-question choices are redrawn
    double repeat_noise = 0.3;  // share of decisions redrawn on each later sighting
};

// Simulated time to first token and per generated token.
struct Latency {
    int ttft_ms = 0;
    int per_token_ms = 0;
};

// Shares in [0, 1] of generation requests that get each fault.
struct Faults {
    double http_500 = 0;
    double http_503 = 0;
    double http_429 = 0;
    int retry_after_s = 1; // Retry-After header of a 429
    double reset_before_body = 0;
    double reset_during_body = 0;
    double stall = 0;
    int stall_ms = 30000; // how long a stalled request waits before answering
    double malformed_json = 0;
    double stream_error = 0;
    double markup = 0;
};

struct Profile {
    int version = 1;
    std::string name;
    std::string description;
    ServerInfo server;
    Behaviour behaviour;
    Latency latency;
    Faults faults;
};

// Load the built-in profile called `name_or_path` ("default", "deepgemm",
// "no-deepgemm"), else the TOML file at that path. Unknown keys, wrong types
// and out-of-range values are errors naming the file and line; an unknown
// name lists the known ones.
util::Result<Profile> load_profile(std::string_view name_or_path);

// Parse profile TOML `text` read from `origin` (a path, for messages).
util::Result<Profile> parse_profile(std::string_view text, const std::string& origin);

// Names of the built-in profiles, sorted.
std::vector<std::string> builtin_profile_names();

} // namespace diffeval::sim
