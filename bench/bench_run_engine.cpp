// Benchmark: how fast `diffeval run` stores responses from a zero-latency
// simulated server, and its peak memory. A figure to read, never a pass/fail
// test. Run with `make bench` (or build/bench_run_engine); set
// BENCH_DATASET=path/to/test.jsonl (with train.jsonl beside it) to use the
// official set.
#include <datasets/dataset.hpp>
#include <harness/engine/run.hpp>
#include <harness/sim/server.hpp>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <sys/resource.h>

using namespace diffeval;

namespace {

void BM_RunEngine(benchmark::State& state) {
    const char* env = std::getenv("BENCH_DATASET");
    std::string spec = env && *env ? env : "sample";
    auto dataset = datasets::open_dataset(spec);
    if (!dataset) {
        state.SkipWithError(dataset.error().message.c_str());
        return;
    }
    auto profile = sim::load_profile("default");
    sim::SimConfig sc;
    sc.profile = *profile;
    sc.dataset = *dataset;
    auto server = sim::Server::start(std::move(sc));
    if (!server) {
        state.SkipWithError(server.error().message.c_str());
        return;
    }
    const int repeats = static_cast<int>(state.range(0));
    auto db = std::filesystem::temp_directory_path() / "diffeval_bench.sqlite";
    int64_t stored = 0;
    for (auto _ : state) {
        state.PauseTiming();
        for (const char* suffix : {"", "-wal", "-shm"}) {
            std::filesystem::remove(db.string() + suffix);
        }
        engine::RunConfig config;
        config.servers = {
            engine::ServerSpec{"bench", (*server)->base_url(), std::nullopt, "", {}, {}}};
        config.framings = {"raw", "chat"};
        config.max_tokens = {256, 1024};
        config.repeats = repeats;
        config.dataset = spec;
        config.db = db.string();
        engine::RunOptions options;
        options.progress = engine::ProgressStyle::none;
        std::ostringstream log;
        state.ResumeTiming();
        auto r = engine::run(config, options, log);
        if (!r) {
            state.SkipWithError(r.error().message.c_str());
            return;
        }
        stored += r->succeeded + r->failed;
    }
    (*server)->stop();
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    state.counters["responses_per_s"] =
        benchmark::Counter(static_cast<double>(stored), benchmark::Counter::kIsRate);
    state.counters["peak_rss_MiB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}

} // namespace

BENCHMARK(BM_RunEngine)
    ->Arg(1)
    ->Arg(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

BENCHMARK_MAIN();
