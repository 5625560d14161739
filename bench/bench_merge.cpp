// Benchmark: `diffeval merge` of four shard databases into one, and merging
// them again (everything already there). Figures to read, never a pass/fail
// test. Run with build/bench_merge.
//
// The shards are synthetic: BENCH_MERGE_REQUESTS requests in all (default
// 20,000), each with a 2.3 KB body and a 0.7 KB response, about what a raw
// GSM8K request and a vLLM completion weigh, and as many probe requests
// (`--probe think-open`'s first step), split by question as
// `diffeval run --shard I/4` splits them.
#include <harness/store/merge.hpp>
#include <harness/store/store.hpp>
#include <harness/util/hash.hpp>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

using namespace diffeval;
namespace fs = std::filesystem;

namespace {

constexpr int k_shards = 4;

int total_requests() {
    const char* env = std::getenv("BENCH_MERGE_REQUESTS");
    return env && *env ? std::atoi(env) : 20'000;
}

void remove_db(const std::string& path) {
    for (const char* suffix : {"", "-wal", "-shm", ".merge-tmp"}) {
        fs::remove(path + suffix);
    }
}

// The shard databases, written once.
const std::vector<std::string>& shards() {
    static const std::vector<std::string> paths = [] {
        std::vector<std::string> out;
        const int n = total_requests();
        const std::string body(2'300, 'q');
        const std::string response(700, 'r');
        for (int s = 0; s < k_shards; ++s) {
            auto path =
                (fs::temp_directory_path() / fmt::format("diffeval_bench_shard{}.sqlite", s))
                    .string();
            remove_db(path);
            auto st = store::Store::open(path, store::Store::Mode::read_write);
            if (!st) {
                std::abort();
            }
            auto run = (*st)->begin_run(fmt::format("{{\"shard\": \"{}/4\"}}", s), "gsm8k");
            (void)(*st)->put_server({"default", "http://127.0.0.1:8000", "m", "{}"});
            std::vector<store::RequestRow> requests;
            std::vector<store::ResponseRow> responses;
            for (int i = s; i < n; i += k_shards) {
                const auto b = fmt::format("{}{}", i, body);
                // Two repeats of each question, each its own place.
                store::RequestRow row{"", "default",          "raw", 256, i % 2, i / 2, "gsm8k",
                                      b,  util::sha256_hex(b)};
                row.key = util::sha256_hex(fmt::format("{}\n{}", i, row.body_sha256));
                store::ResponseRow r;
                r.key = row.key;
                r.run_id = *run;
                r.ok = true;
                r.status = 200;
                r.response_json = response;
                r.text = response;
                r.attempts = 1;
                r.started_at = "2026-01-01T00:00:00.000Z";
                store::RequestRow probe = row;
                probe.probe = "think-open";
                probe.probe_step = 0;
                probe.key = util::sha256_hex(fmt::format("probe {}", row.key));
                store::ResponseRow p = r;
                p.key = probe.key;
                p.probe = true;
                requests.push_back(std::move(row));
                responses.push_back(std::move(r));
                requests.push_back(std::move(probe));
                responses.push_back(std::move(p));
            }
            auto planned = (*st)->put_requests(requests);
            if (!planned) {
                std::abort();
            }
            for (size_t i = 0; i < responses.size(); ++i) {
                responses[i].request_id = (*planned)[i].id;
            }
            (void)(*st)->write_batch(responses);
            out.push_back(path);
        }
        return out;
    }();
    return paths;
}

void BM_MergeFourShards(benchmark::State& state) {
    const auto& in = shards();
    const auto out = (fs::temp_directory_path() / "diffeval_bench_merged.sqlite").string();
    for (auto _ : state) {
        state.PauseTiming();
        remove_db(out);
        state.ResumeTiming();
        auto r = store::merge(out, in);
        if (!r) {
            state.SkipWithError(r.error().message.c_str());
            return;
        }
    }
    state.counters["requests"] = total_requests();
    state.counters["requests_per_s"] =
        benchmark::Counter(total_requests(), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MergeFourShards)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_MergeAgainAddsNothing(benchmark::State& state) {
    const auto& in = shards();
    const auto out = (fs::temp_directory_path() / "diffeval_bench_merged.sqlite").string();
    remove_db(out);
    if (!store::merge(out, in)) {
        state.SkipWithError("first merge failed");
        return;
    }
    for (auto _ : state) {
        auto r = store::merge(out, in);
        if (!r || r->requests_added != 0) {
            state.SkipWithError("a repeated merge added rows");
            return;
        }
    }
}
BENCHMARK(BM_MergeAgainAddsNothing)->Unit(benchmark::kMillisecond)->Iterations(3);

} // namespace

BENCHMARK_MAIN();
