// GSM8K-format datasets: the test questions to ask and the train items the
// few-shot examples come from.
//
// Three sources share one shape: the official files in the cache directory
// (`gsm8k`), any pair of JSONL files, and the project's own sample set, which
// is compiled into the binary so the demo and tests need nothing else.
#pragma once

#include <harness/util/result.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace diffeval::datasets {

// One GSM8K item: a question and its worked answer ending in `#### N`.
struct Sample {
    int index = 0; // position in its file, from 0
    std::string question;
    std::string answer;
};

// The questions to ask and the pool few-shot examples are drawn from.
struct Dataset {
    std::string name;   // "gsm8k", "sample", or the test file's path
    std::string source; // where it was read from, for messages
    std::vector<Sample> test;
    std::vector<Sample> fewshot;
};

// No limit on the samples read.
inline constexpr size_t k_all_samples = static_cast<size_t>(-1);

// Parse GSM8K JSONL `text` read from `origin` (a path, for messages). Lines
// starting with '#' and blank lines are skipped, as vLLM's script does. A
// malformed line is an error naming `origin` and the line number. With
// `limit`, parsing stops after that many samples: what follows is not read.
util::Result<std::vector<Sample>> parse_jsonl(const std::string& text, const std::string& origin,
                                              size_t limit = k_all_samples);

// Read and parse the JSONL file at `path`; with `limit`, the file is read only
// as far as its first `limit` samples.
util::Result<std::vector<Sample>> load_jsonl(const std::filesystem::path& path,
                                             size_t limit = k_all_samples);

// The cache directory: $DIFFEVAL_DATA, else $XDG_CACHE_HOME/diffeval, else
// ~/.cache/diffeval.
std::filesystem::path cache_dir();

// The few-shot file a test file at `test_path` takes by default: train.jsonl
// in its directory.
std::filesystem::path fewshot_beside(const std::string& test_path);

// Resolve a `--dataset` value: "sample", "gsm8k" (from the cache), or a path
// to a test JSONL file; `fewshot_from` overrides the few-shot file ("" keeps
// the default: the dataset's own train file, or the sample set's examples).
// With `fewshot_limit`, only the few-shot file's first examples are read
// (a run whose framings all take the first N: the official train set is
// 7,473 lines, 16 ms of a run's start to read and parse whole); with 0,
// none, and no few-shot file is needed.
util::Result<Dataset> open_dataset(const std::string& spec, const std::string& fewshot_from = "",
                                   size_t fewshot_limit = k_all_samples);

// Resolve a `--dataset` value as open_dataset does, reading its test questions
// only (`fewshot` stays empty): what `import lm-eval` checks documents against.
util::Result<Dataset> open_test_set(const std::string& spec);

// A worked `answer` as a message names it: its final answer (the text after
// its last `####`, "18"), else its first 40 characters; quoted when it holds
// a space or is empty.
std::string answer_shown(std::string_view answer);

// The sample set's raw JSONL texts, compiled into the binary.
const std::string& sample_test_jsonl();
const std::string& sample_train_jsonl();

// Official GSM8K file names and their sha256.
struct OfficialFile {
    const char* name;
    const char* sha256;
};
inline constexpr OfficialFile k_gsm8k_files[] = {
    {"test.jsonl", "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"},
    {"train.jsonl", "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465"},
};
inline constexpr const char* k_gsm8k_url_base =
    "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data";

// Download the official files from `url_base` into cache_dir()/gsm8k,
// verifying sha256; a file already present with the right hash is kept.
// Progress and outcome lines go to `log` (one per file).
util::Result<std::filesystem::path> fetch_gsm8k(const std::string& url_base,
                                                std::vector<std::string>& log);

} // namespace diffeval::datasets
