// `diffeval sim`: run the simulated vLLM server in the foreground, so the
// demo, the tests and users without a GPU have a server to evaluate. It
// prints one line with the address (useful with --port 0) and serves until
// SIGINT or SIGTERM.
#include <harness/cli/commands.hpp>
#include <harness/cli/util.hpp>

#include <datasets/dataset.hpp>
#include <harness/engine/config.hpp>
#include <harness/sim/server.hpp>

#include <fmt/format.h>

#include <csignal>
#include <iostream>
#include <optional>
#include <pthread.h>

namespace diffeval::cli {

namespace {

struct SimFlags {
    int port = 0;
    std::string host = "127.0.0.1";
    std::string dataset = "sample";
    std::string fewshot_from;
    std::string profile = "default";
    std::string model = std::string(sim::k_default_model_id);
    // Overrides of the profile's [latency] and [faults] keys.
    std::optional<int> ttft_ms;
    std::optional<int> per_token_ms;
    std::optional<double> http_500;
    std::optional<double> http_503;
    std::optional<double> http_429;
    std::optional<int> retry_after_s;
    std::optional<double> reset_before_body;
    std::optional<double> reset_during_body;
    std::optional<double> stall;
    std::optional<int> stall_ms;
    std::optional<double> malformed_json;
    std::optional<double> stream_error;
    std::optional<double> markup;
};

template <typename T> void override_with(T& field, const std::optional<T>& flag) {
    if (flag) {
        field = *flag;
    }
}

// A number flag outside the range its profile key takes (sim/profile.cpp),
// said as every command's number flags say it: "--port 70000: must be
// between 0 and 65535". Checked here rather than by CLI11's Range, whose
// "Value abc not in range 0 to 65535" also answered text that is no number
// at all, which the parser now names as such ("expected a whole number").
util::Result<void> check_ranges(const SimFlags& f) {
    struct Bound {
        const char* flag;
        std::optional<double> value;
        double lo, hi;
    };
    auto real = [](const std::optional<int>& v) {
        return v ? std::optional<double>(*v) : std::nullopt;
    };
    const Bound bounds[] = {{"--port", f.port, 0, 65535},
                            {"--ttft-ms", real(f.ttft_ms), 0, 600000},
                            {"--per-token-ms", real(f.per_token_ms), 0, 60000},
                            {"--fault-http-500", f.http_500, 0, 1},
                            {"--fault-http-503", f.http_503, 0, 1},
                            {"--fault-http-429", f.http_429, 0, 1},
                            {"--retry-after-s", real(f.retry_after_s), 0, 3600},
                            {"--fault-reset-before-body", f.reset_before_body, 0, 1},
                            {"--fault-reset-during-body", f.reset_during_body, 0, 1},
                            {"--fault-stall", f.stall, 0, 1},
                            {"--stall-ms", real(f.stall_ms), 0, 3600000},
                            {"--fault-malformed-json", f.malformed_json, 0, 1},
                            {"--fault-stream-error", f.stream_error, 0, 1},
                            {"--fault-markup", f.markup, 0, 1}};
    for (const auto& b : bounds) {
        if (b.value) {
            if (auto r = engine::check_range(b.flag, *b.value, b.lo, b.hi); !r) {
                return r;
            }
        }
    }
    return {};
}

int sim_command(const SimFlags& f) {
    // 0. Every number within its range.
    if (auto r = check_ranges(f); !r) {
        return report(r.error());
    }

    // 1. Read the profile and apply the flags that override it.
    auto profile = sim::load_profile(f.profile);
    if (!profile) {
        return report(profile.error());
    }
    override_with(profile->latency.ttft_ms, f.ttft_ms);
    override_with(profile->latency.per_token_ms, f.per_token_ms);
    sim::Faults& faults = profile->faults;
    override_with(faults.http_500, f.http_500);
    override_with(faults.http_503, f.http_503);
    override_with(faults.http_429, f.http_429);
    override_with(faults.retry_after_s, f.retry_after_s);
    override_with(faults.reset_before_body, f.reset_before_body);
    override_with(faults.reset_during_body, f.reset_during_body);
    override_with(faults.stall, f.stall);
    override_with(faults.stall_ms, f.stall_ms);
    override_with(faults.malformed_json, f.malformed_json);
    override_with(faults.stream_error, f.stream_error);
    override_with(faults.markup, f.markup);

    // 2. Load the questions the simulated model knows.
    auto dataset = datasets::open_dataset(f.dataset, f.fewshot_from);
    if (!dataset) {
        return report(dataset.error());
    }

    // 3. Block SIGINT and SIGTERM before any server thread exists, so only
    //    the wait below receives them.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    // 4. Start serving and say where.
    sim::SimConfig config;
    config.host = f.host;
    config.port = f.port;
    config.model_id = f.model;
    config.dataset = std::move(*dataset);
    std::string name = profile->name;
    config.profile = std::move(*profile);
    auto server = sim::Server::start(std::move(config));
    if (!server) {
        return report(server.error());
    }
    std::cout << fmt::format("diffeval sim: profile {} listening on {}", name,
                             (*server)->base_url())
              << std::endl;

    // 5. Serve until asked to stop.
    int received = 0;
    sigwait(&signals, &received);
    (*server)->stop();
    return k_exit_ok;
}

} // namespace

void add_sim_command(CLI::App& root, Dispatch& dispatch) {
    auto f = std::make_shared<SimFlags>();
    auto* cmd = root.add_subcommand("sim", "Run a simulated vLLM server (see docs/simulator.md)");
    cmd->add_option("--port", f->port,
                    "Port to listen on (0 to 65535); 0 picks a free one (printed)");
    cmd->add_option("--host", f->host, "Address to listen on")->capture_default_str();
    cmd->add_option("--dataset", f->dataset, "Questions the model knows: sample, gsm8k or PATH")
        ->capture_default_str();
    cmd->add_option("--fewshot-from", f->fewshot_from, "Few-shot JSONL for a --dataset PATH");
    cmd->add_option("--profile", f->profile,
                    "Server profile: default, deepgemm, no-deepgemm or a .toml PATH")
        ->capture_default_str();
    cmd->add_option("--model", f->model, "Served model id")->capture_default_str();
    // The ranges (check_ranges) are those of the profile's keys.
    cmd->add_option("--ttft-ms", f->ttft_ms, "Simulated time to first token (0 to 600000)");
    cmd->add_option("--per-token-ms", f->per_token_ms,
                    "Simulated time per generated token (0 to 60000)");
    cmd->add_option("--fault-http-500", f->http_500, "Share of requests answered 500 (0 to 1)");
    cmd->add_option("--fault-http-503", f->http_503, "Share of requests answered 503 (0 to 1)");
    cmd->add_option("--fault-http-429", f->http_429,
                    "Share answered 429 with Retry-After (0 to 1)");
    cmd->add_option("--retry-after-s", f->retry_after_s,
                    "Retry-After seconds of a 429 (0 to 3600)");
    cmd->add_option("--fault-reset-before-body", f->reset_before_body,
                    "Share of connections closed before any response byte (0 to 1)");
    cmd->add_option("--fault-reset-during-body", f->reset_during_body,
                    "Share of connections closed halfway through the body (0 to 1)");
    cmd->add_option("--fault-stall", f->stall, "Share of requests that stall (0 to 1)");
    cmd->add_option("--stall-ms", f->stall_ms, "How long a stalled request waits (0 to 3600000)");
    cmd->add_option("--fault-malformed-json", f->malformed_json,
                    "Share of responses with truncated JSON (0 to 1)");
    cmd->add_option("--fault-stream-error", f->stream_error,
                    "Share of streams with an error event mid-stream (0 to 1)");
    cmd->add_option("--fault-markup", f->markup,
                    "Share of responses with HTML/JS markup in text (0 to 1)");
    dispatch[cmd] = [f] { return sim_command(*f); };
}

} // namespace diffeval::cli
