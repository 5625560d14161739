// What a run is asked to do: servers, framings, token limits, repeats, and
// how to send. Filled from an experiment file (TOML) and then from flags,
// which override it.
#pragma once

#include <harness/framing/framing.hpp>
#include <harness/util/result.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace diffeval::engine {

struct ServerSpec {
    std::string name;
    std::string url; // base URL, without a trailing slash
    std::optional<std::string> model;
    std::string api_key_env;          // name of the variable holding the key
    std::vector<std::string> headers; // extra "Name: value" headers
    nlohmann::ordered_json extra_body = nlohmann::ordered_json::object();
    // Launched servers (experiment file only): diffeval starts and stops them.
    std::vector<std::string> launch; // argv, or one command string
    // Where the user names the launched program, for a message about it:
    // the experiment file's 'launch', or --vllm-config's --vllm-bin.
    std::string launch_named_by = "'launch'";
    bool launch_shell = false; // run the string with /bin/sh -c
    std::vector<std::pair<std::string, std::string>> env;
    std::string cwd;
    std::chrono::milliseconds ready_timeout{600'000};
    std::vector<std::string> health{"/health", "/v1/models"};
    std::string log_path;     // where its output goes; default beside the database
    std::string attached_log; // --server-log: an existing log to fingerprint
};

// One deterministic slice of the plan (--shard I/N): question q belongs to
// shard q mod N, so every server, framing and repeat of a question lands in
// the same shard.
struct Shard {
    int index = 0; // from 0
    int count = 1;
};

// Parse "I/N" with 0 <= I < N.
util::Result<Shard> parse_shard(const std::string& value);

// How many of the first `n` questions `shard` holds (all `n` without one).
size_t questions_in_shard(const std::optional<Shard>& shard, size_t n);

// Whether `shard` holds question `q` (every question without one).
bool in_shard(const std::optional<Shard>& shard, size_t q);

// The accepted range of every numeric setting, shared by flags and
// experiment keys: a value outside is refused, never replaced by a default.
struct Limits {
    static constexpr int64_t max_repeats = 1'000'000;
    static constexpr int64_t max_limit = INT32_MAX;
    static constexpr int64_t max_concurrency = 10'000;
    static constexpr int64_t max_retries = 100;
    static constexpr int64_t max_retry_backoff_ms = 3'600'000;
    static constexpr int64_t max_max_tokens = 10'000'000;
    static constexpr double max_timeout_s = 7 * 86'400.0;
    static constexpr int64_t min_response_bytes = 1024;
    static constexpr int64_t max_response_bytes = int64_t{4} << 30;
};

struct RunConfig {
    std::vector<ServerSpec> servers;
    std::optional<std::string> model; // global default
    std::vector<std::string> framings{"raw", "chat"};
    std::vector<int> max_tokens{256};
    int repeats = 1;
    std::optional<int> limit;
    int concurrency = 64; // in-flight requests per server (capped by published slots)
    // `--concurrency auto`: the server's published capacity (llama.cpp /props
    // total_slots), else the default.
    bool concurrency_auto = false;
    std::string db = "diffeval.sqlite";
    std::string dataset = "sample";
    std::string fewshot_from;
    std::string api_key_env; // global default
    std::chrono::milliseconds timeout{600'000};
    int retries = 3;
    std::chrono::milliseconds retry_backoff{500}; // first retry delay, doubled each time
    bool preflight = true;
    bool stream = false;                  // stream: true with usage; records time to first token
    bool keep_servers = false;            // leave launched servers running
    bool sequential_servers = false;      // one server at a time (one GPU, several configs)
    std::optional<std::string> probe;     // decision-point probe to send beside ("think-open")
    framing::Overrides framing_overrides; // --num-shots, --gen-prefix, --top-p, ...
    std::optional<Shard> shard;
    // Largest response body accepted, after decompression.
    int64_t max_response_bytes = int64_t{32} << 20;
    bool wait_lock = false; // wait for another run on the database instead of exiting
    // Users' own scorer files: stored in the database and used by every
    // scoring pass of it (the run's own, and later ones).
    std::vector<std::string> scorer_files;
};

// Read an experiment file into `config`. Unknown keys are errors naming the
// file and line.
util::Result<void> load_experiment(const std::string& path, RunConfig& config);

// Attach "NAME=PATH" (from --server-log) to the server called NAME.
util::Result<void> attach_server_log(const std::string& value, RunConfig& config);

// Parse "NAME=URL" (from --server).
util::Result<ServerSpec> parse_server_flag(const std::string& value);

// Check what no request can fix: names, URLs, numbers (each within Limits).
util::Result<void> validate(const RunConfig& config);
// The part of validate() that does not look at the servers: framings, token
// limits, numbers, the probe (what `demo` checks before it starts its own).
util::Result<void> validate_settings(const RunConfig& config);

// The flag that sets body field `field` of every framing
// (RunConfig::framing_overrides): "top_k" -> "--top-k".
std::string override_flag(std::string_view field);

// `value` of the setting called `what` (a flag such as "--repeats", or
// "FILE:LINE: 'repeats'") unless it lies outside [lo, hi] or is not finite:
// then a usage error naming both bounds.
util::Result<void> check_range(const std::string& what, double value, double lo, double hi);
// The same for a whole number, printed exactly.
util::Result<void> check_whole_range(const std::string& what, int64_t value, int64_t lo,
                                     int64_t hi);

// The configuration as JSON for the runs table (never holds secrets: only the
// names of the variables that do).
nlohmann::json to_json(const RunConfig& config);

} // namespace diffeval::engine
