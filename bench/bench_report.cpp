// Benchmark: `diffeval report` (report.md, report.html and summary.json)
// against one full scan of the responses table (SELECT of every text), the
// yardstick issue 5 sets, and the report's peak memory. Figures to read,
// never a pass/fail test. Run with `make bench` (or build/bench_report).
//
// BENCH_REPORT_DB=path reports on an existing database, e.g. the one
// `diffeval demo` writes on the official set (47,484 responses). Without it
// the benchmark runs the demo's matrix (two simulated profiles, both
// framings, 256 and 1,024 tokens, 3 repeats) on the dataset in
// BENCH_DATASET (default: the sample set) into a temporary database first.
#include <datasets/dataset.hpp>
#include <harness/engine/run.hpp>
#include <harness/sim/server.hpp>
#include <harness/store/store.hpp>
#include <reports/report.hpp>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <sstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace diffeval;
namespace fs = std::filesystem;

namespace {

// The database to report on: BENCH_REPORT_DB, or one made here once.
const std::string& bench_db() {
    static const std::string path = [] {
        if (const char* env = std::getenv("BENCH_REPORT_DB"); env && *env) {
            return std::string(env);
        }
        const auto db = (fs::temp_directory_path() / "diffeval_bench_report.sqlite").string();
        for (const char* suffix : {"", "-wal", "-shm"}) {
            fs::remove(db + suffix);
        }
        const char* env = std::getenv("BENCH_DATASET");
        const std::string spec = env && *env ? env : "sample";
        auto dataset = datasets::open_dataset(spec);
        if (!dataset) {
            return std::string();
        }
        engine::RunConfig config;
        std::vector<std::unique_ptr<sim::Server>> servers;
        for (const char* name : {"default", "deepgemm"}) {
            sim::SimConfig sc;
            sc.profile = *sim::load_profile(name);
            sc.dataset = *dataset;
            auto server = sim::Server::start(std::move(sc));
            if (!server) {
                return std::string();
            }
            config.servers.push_back(
                engine::ServerSpec{name, (*server)->base_url(), std::nullopt, "", {}, {}});
            servers.push_back(std::move(*server));
        }
        config.framings = {"raw", "chat"};
        config.max_tokens = {256, 1024};
        config.repeats = 3;
        config.dataset = spec;
        config.db = db;
        engine::RunOptions options;
        options.progress = engine::ProgressStyle::none;
        std::ostringstream log;
        auto run = engine::run(config, options, log);
        for (auto& s : servers) {
            s->stop();
        }
        return run ? db : std::string();
    }();
    return path;
}

std::unique_ptr<store::Store> open_or_skip(benchmark::State& state) {
    if (bench_db().empty()) {
        state.SkipWithError("could not build or find the benchmark database");
        return nullptr;
    }
    auto st = store::Store::open(bench_db(), store::Store::Mode::read_write);
    if (!st) {
        state.SkipWithError(st.error().message.c_str());
        return nullptr;
    }
    return std::move(*st);
}

// The yardstick: every response's text read once.
void BM_TextScan(benchmark::State& state) {
    auto st = open_or_skip(state);
    if (!st) {
        return;
    }
    int64_t rows = 0;
    int64_t bytes = 0;
    for (auto _ : state) {
        store::Statement s(st->handle(), "SELECT text FROM responses");
        while (s.step()) {
            bytes += static_cast<int64_t>(s.column_view(0).size());
            ++rows;
        }
    }
    state.counters["responses"] =
        static_cast<double>(rows) / static_cast<double>(state.iterations());
    state.SetBytesProcessed(bytes);
}

// The three reports, written to a temporary directory.
void BM_Report(benchmark::State& state) {
    auto st = open_or_skip(state);
    if (!st) {
        return;
    }
    const auto out = fs::temp_directory_path() / "diffeval_bench_report";
    for (auto _ : state) {
        auto r = reports::generate_reports(*st, "", *reports::load_layout(), out,
                                           reports::ReportFormats{});
        if (!r) {
            state.SkipWithError(r.error().message.c_str());
            return;
        }
    }
    state.counters["html_MiB"] =
        static_cast<double>(fs::file_size(out / "report.html")) / (1024.0 * 1024.0);
}

// Peak memory of `diffeval report` itself (the binary beside this one), so
// neither the database building nor the other benchmarks count.
void BM_ReportPeakMemory(benchmark::State& state) {
    if (bench_db().empty()) {
        state.SkipWithError("could not build or find the benchmark database");
        return;
    }
    const auto binary = fs::read_symlink("/proc/self/exe").parent_path() / "diffeval";
    const auto out = fs::temp_directory_path() / "diffeval_bench_report_cli";
    double peak_mib = 0;
    for (auto _ : state) {
        const pid_t child = fork();
        if (child == 0) {
            const int null = open("/dev/null", O_WRONLY);
            dup2(null, STDOUT_FILENO);
            execl(binary.c_str(), "diffeval", "report", "--db", bench_db().c_str(), "--out",
                  out.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
        int status = 0;
        rusage usage{};
        wait4(child, &status, 0, &usage);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            state.SkipWithError(("'" + binary.string() + " report' failed").c_str());
            return;
        }
        peak_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
    }
    state.counters["peak_rss_MiB"] = peak_mib;
}

} // namespace

BENCHMARK(BM_TextScan)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Report)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);
BENCHMARK(BM_ReportPeakMemory)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

BENCHMARK_MAIN();
