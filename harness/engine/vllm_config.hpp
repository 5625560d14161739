// vLLM's GSM8K CI configurations (tests/evals/gsm8k/configs/*.yaml in
// vllm-project/vllm) as diffeval runs and gates, so a team switches without
// rewriting its configs or changing its thresholds.
//
// test_gsm8k_correctness.py reads model_name, accuracy_threshold,
// num_questions, num_fewshot, server_args (one shell-quoted string), env,
// startup_max_wait_seconds (default 600) and tolerance (default 0.08); it
// launches `vllm serve MODEL ARGS --trust-remote-code
// --disable-uvicorn-access-log --port P --seed 0` (tests/utils.py adds the
// last two) with VLLM_WORKER_MULTIPROC_METHOD=spawn under that environment,
// runs gsm8k_eval.py's
// completion prompts, and asserts accuracy >= threshold - tolerance.
#pragma once

#include <harness/engine/config.hpp>
#include <harness/util/result.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace diffeval::engine {

struct VllmConfig {
    std::string path;
    std::string name; // the file's stem: the server name in the store
    std::string model_name;
    double accuracy_threshold = 0;
    double tolerance = 0.08;
    int num_questions = 1319;
    int num_fewshot = 5;
    std::vector<std::string> server_args; // split as shlex.split does
    std::vector<std::pair<std::string, std::string>> env;
    std::chrono::seconds startup_max_wait{600};
};

// Read one config. Missing model_name or accuracy_threshold, a value of the
// wrong type, or YAML that does not parse are errors naming the file (and
// line); keys the CI does not read are ignored, as the CI ignores them.
util::Result<VllmConfig> load_vllm_config(const std::string& path);

// Read a `--vllm-config` value: a .yaml config, or a list file
// (models-small.txt style: one config per line, relative to the list's
// directory, blank lines and '#' comments skipped).
util::Result<std::vector<VllmConfig>> load_vllm_configs(const std::string& path);

// Add one launched server per config to `run`: `vllm_bin serve MODEL ARGS
// --trust-remote-code --disable-uvicorn-access-log --port P --seed 0` on a
// free loopback port with VLLM_WORKER_MULTIPROC_METHOD=spawn and the config's
// environment on top, the raw framing with
// num_fewshot shots, num_questions questions, 256 tokens, and one server at
// a time when there are several (one GPU).
util::Result<void> apply_vllm_configs(const std::vector<VllmConfig>& configs,
                                      const std::string& vllm_bin, RunConfig& run);

} // namespace diffeval::engine
