// Benchmark: the built-in scorers on GSM8K-shaped text, one scorer at a time,
// and preparing each one's gold. Figures to read, never a pass/fail test; the
// run's scoring pass (a writer thread scoring each response as it is stored)
// and `diffeval rescore` spend their scoring time here. Run with `make bench`
// (or build/bench_scoring).
//
// The texts are the official test set's own answers when GSM8K_DIR is set
// (calculator annotations, many numbers, "#### N" at the end: what a model
// trained on the train split writes), else the built-in sample set's.
#include <datasets/dataset.hpp>
#include <scorers/registry.hpp>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

using namespace diffeval;

namespace {

// The answers scored: each with a short reasoning prefix like the
// simulator's, so the scorers read what a response holds.
const std::vector<std::string>& texts() {
    static const std::vector<std::string> out = [] {
        const char* dir = std::getenv("GSM8K_DIR");
        const std::string source = dir && *dir ? std::string(dir) + "/test.jsonl" : "sample";
        auto dataset = datasets::open_dataset(source);
        std::vector<std::string> answers;
        if (!dataset) {
            return answers;
        }
        for (const auto& s : dataset->test) {
            answers.push_back(" <think>\n</think>\n\n" + s.answer + "\n\n");
        }
        return answers;
    }();
    return out;
}

const scorers::Scorer* scorer(const std::string& name) {
    static const auto registry = scorers::Registry::builtin();
    return registry ? *registry->find(name) : nullptr;
}

void score(benchmark::State& state, const std::string& name) {
    const auto* s = scorer(name);
    const auto& all = texts();
    if (s == nullptr || all.empty()) {
        state.SkipWithError("no scorer or no texts");
        return;
    }
    std::vector<scorers::Gold> golds;
    for (const auto& t : all) {
        golds.push_back(s->prepare_gold(t));
    }
    size_t i = 0;
    int64_t correct = 0;
    for (auto _ : state) {
        correct += s->score(all[i], golds[i]).correct ? 1 : 0;
        i = i + 1 == all.size() ? 0 : i + 1;
    }
    benchmark::DoNotOptimize(correct);
    state.SetItemsProcessed(state.iterations());
}

void gold(benchmark::State& state, const std::string& name) {
    const auto* s = scorer(name);
    const auto& all = texts();
    if (s == nullptr || all.empty()) {
        state.SkipWithError("no scorer or no texts");
        return;
    }
    size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(s->prepare_gold(all[i]));
        i = i + 1 == all.size() ? 0 : i + 1;
    }
    state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(score, vllm, std::string("vllm"));
BENCHMARK_CAPTURE(score, lm_eval_flexible, std::string("lm-eval-flexible"));
BENCHMARK_CAPTURE(score, lm_eval_strict, std::string("lm-eval-strict"));
BENCHMARK_CAPTURE(gold, vllm, std::string("vllm"));
BENCHMARK_CAPTURE(gold, lm_eval_flexible, std::string("lm-eval-flexible"));
BENCHMARK_CAPTURE(gold, lm_eval_strict, std::string("lm-eval-strict"));

} // namespace

BENCHMARK_MAIN();
