// `diffeval demo`: the article's experiment, offline. Starts the three
// simulated server profiles in-process, runs both framings at 256 and 1,024
// tokens with 3 repeats and the decision-point probe, and prints the two
// harness verdicts, the probe, the breakdown
// that explains them, and where to look next.
#include <harness/cli/colour.hpp>
#include <harness/cli/commands.hpp>
#include <harness/cli/util.hpp>

#include <datasets/dataset.hpp>
#include <harness/analysis/compare.hpp>
#include <harness/analysis/summary.hpp>
#include <harness/engine/run.hpp>
#include <harness/sim/server.hpp>
#include <harness/store/lock.hpp>
#include <harness/store/readers.hpp>
#include <harness/util/file.hpp>
#include <harness/util/text.hpp>
#include <reports/report.hpp>
#include <reports/tables.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

namespace diffeval::cli {

namespace {

namespace fs = std::filesystem;

struct DemoFlags {
    std::string out = "diffeval-demo";
    std::string dataset;
    std::optional<int> limit; // none: all questions
    int repeats = 3;
};

constexpr const char* k_profiles[] = {"default", "deepgemm", "no-deepgemm"};

// The database the demo writes into --out.
constexpr const char* k_db_file = "diffeval-demo.sqlite";

// The dataset: the official set when cached, else our sample.
util::Result<datasets::Dataset> choose_dataset(const DemoFlags& f, std::string& spec) {
    spec = f.dataset;
    if (spec.empty()) {
        std::error_code ec; // a cache this process may not read is none
        spec = fs::exists(datasets::cache_dir() / "gsm8k" / "test.jsonl", ec) ? "gsm8k" : "sample";
    }
    // The demo has no --fewshot-from, which open_dataset's words for a test
    // file with no train.jsonl beside it suggest.
    std::error_code ec;
    if (spec != "sample" && spec != "gsm8k" && fs::is_regular_file(spec, ec) &&
        !fs::exists(datasets::fewshot_beside(spec), ec)) {
        const auto dir = fs::path(spec).parent_path();
        return util::make_error(
            util::ErrorKind::usage,
            fmt::format("--dataset {}: the demo's framings take their few-shot examples from "
                        "train.jsonl beside it, and {} holds none; put one there (GSM8K's "
                        "train.jsonl, or any in its format)",
                        spec, dir.empty() ? std::string(".") : dir.string()));
    }
    auto dataset = datasets::open_dataset(spec);
    if (!dataset) {
        return dataset.error();
    }
    std::cout << fmt::format(
        "dataset: {} ({}{}){}\n", dataset->name, util::counted(dataset->test.size(), "question"),
        f.limit ? fmt::format(", first {} used", *f.limit) : "",
        spec == "sample" && f.dataset.empty()
            ? "; official GSM8K is not cached, run 'diffeval data fetch gsm8k' "
              "for the full experiment"
            : "");
    return dataset;
}

// The three simulated servers on free loopback ports, added to `config`.
util::Result<std::vector<std::unique_ptr<sim::Server>>>
start_servers(const datasets::Dataset& dataset, engine::RunConfig& config) {
    std::vector<std::unique_ptr<sim::Server>> servers;
    for (const char* name : k_profiles) {
        auto profile = sim::load_profile(name);
        if (!profile) {
            return profile.error();
        }
        sim::SimConfig sc;
        sc.profile = std::move(*profile);
        sc.dataset = dataset;
        auto server = sim::Server::start(std::move(sc));
        if (!server) {
            return server.error();
        }
        config.servers.push_back(
            engine::ServerSpec{name, (*server)->base_url(), std::nullopt, "", {}, {}});
        std::cout << fmt::format("simulated server '{}' on {}\n", name, (*server)->base_url());
        servers.push_back(std::move(*server));
    }
    return servers;
}

// Whether --out can take the demo's database and reports: checked before
// anything starts, since the whole experiment runs before they are written.
util::Result<void> check_out(const DemoFlags& f) {
    std::vector<std::string> files = {k_db_file};
    for (auto& name : reports::report_files(reports::ReportFormats{})) {
        files.push_back(std::move(name));
    }
    return check_output_dir("--out", f.out, files,
                            "the demo writes its database and reports into it");
}

// The experiment's settings, checked as a run checks them, before anything
// starts. All questions is --limit's absence: 0 is refused as -1 is (it
// once meant all, 83,097 requests on the official set).
util::Result<engine::RunConfig> demo_settings(const DemoFlags& f) {
    engine::RunConfig config;
    config.framings = {"raw", "chat"};
    config.max_tokens = {256, 1024};
    config.repeats = f.repeats;
    config.probe = "think-open"; // beside the measured requests (docs/probe.md)
    config.limit = f.limit;
    if (auto r = engine::validate_settings(config); !r) {
        return r.error();
    }
    return config;
}

// A fresh database under --out for `config`.
util::Result<void> set_up_db(const DemoFlags& f, engine::RunConfig& config) {
    std::error_code ec;
    fs::create_directories(f.out, ec);
    if (ec) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("cannot create {}: {}", f.out, ec.message()));
    }
    config.db = (fs::path(f.out) / k_db_file).string();
    // Another demo (or a run) writing this --out's database keeps it: the
    // file is removed only under its lock, which the run then takes again.
    auto lock = store::RunLock::acquire(config.db, "demo", store::RunLock::Wait::no, nullptr,
                                        "wait for it to finish, or give another --out");
    if (!lock) {
        return lock.error();
    }
    // Only the demo's own database is replaced: one holding other servers'
    // results (a run into this file) or another program's file is kept.
    if (fs::exists(config.db, ec)) {
        const auto keep = [&](const std::string& why) {
            return util::make_error(util::ErrorKind::usage,
                                    fmt::format("{} {}; the demo replaces only its own database, "
                                                "so it was left as it is: give another --out",
                                                config.db, why));
        };
        auto names = store::servers_named_in(config.db);
        if (!names) {
            return keep("is not a database the demo wrote");
        }
        std::vector<std::string> others;
        for (const auto& name : *names) {
            if (std::find(std::begin(k_profiles), std::end(k_profiles), name) ==
                std::end(k_profiles)) {
                others.push_back(name);
            }
        }
        if (!others.empty()) {
            return keep(fmt::format("holds results of servers the demo does not run ({})",
                                    fmt::join(others, ", ")));
        }
    }
    store::remove_with_sidecars(config.db);
    return {};
}

// The two harness verdicts, the breakdown, the latency, the paired
// comparison and the probe, from the report's own analysis.
void print_tables(const reports::ReportData& data) {
    const auto& summary = data.summary;
    std::cout << "Harness verdicts (accuracy %, mean (min-max) over repeats)\n"
                 "  vLLM's check = framing raw, scorer vllm; lm-eval's = framing chat, scorer "
                 "lm-eval-strict\n\n";
    std::cout << reports::verdict_table(summary, reports::Style::text) << "\n";
    std::cout << "Where the responses went (mean per run of the questions; accuracy by vllm)\n\n";
    std::cout << reports::breakdown_table(summary, "vllm", reports::Style::text) << "\n";
    std::cout << "Latency and tokens (simulated servers answer at once unless a profile sets "
                 "latency)\n\n";
    std::cout << reports::latency_table(summary, reports::Style::text) << "\n";
    for (const auto& c : data.comparisons) {
        if (c.scorer == "vllm" && c.a.text() == "default/raw/256" &&
            c.b.text() == "deepgemm/raw/256") {
            std::cout << for_terminal(reports::comparison_text(c, reports::Style::text, 3), stdout)
                      << "\n";
        }
    }
    for (const auto& p : data.probes) {
        if (p.b == "deepgemm" && p.framing == "raw") {
            std::cout << "Decision-point probe (docs/probe.md)\n\n"
                      << analysis::probe_line(p) << "\n\n";
        }
    }
}

int demo_command(const DemoFlags& f) {
    // 0. The experiment's settings, and where its results go.
    auto settings = demo_settings(f);
    if (!settings) {
        return report(settings.error());
    }
    if (auto r = check_out(f); !r) {
        return report(r.error());
    }
    engine::RunConfig& config = *settings;
    // 1. Choose the dataset.
    auto dataset = choose_dataset(f, config.dataset);
    if (!dataset) {
        return report(dataset.error());
    }
    // 2. Start the three simulated servers.
    auto servers = start_servers(*dataset, config);
    if (!servers) {
        return report(servers.error());
    }
    // 3. Run the experiment into a fresh database, and score it.
    if (auto r = set_up_db(f, config); !r) {
        return report(r.error());
    }
    engine::RunOptions options;
    options.progress = stderr_is_tty() ? engine::ProgressStyle::bar : engine::ProgressStyle::lines;
    auto run = engine::run(config, options, std::cerr);
    for (auto& s : *servers) {
        s->stop();
    }
    if (!run) {
        return report(run.error());
    }
    if (auto r = score_stored(config.db); !r) {
        return report(r.error());
    }
    std::cout << fmt::format("stored {} in {} ({:.1f}s)\n\n", engine::stored_words(*run),
                             util::controls_as_spaces(config.db), run->seconds);

    // 4. The three reports, and from the same analysis the tables.
    auto st = store::Store::open(config.db, store::Store::Mode::read_only);
    if (!st) {
        return report(st.error());
    }
    auto layout = reports::load_layout();
    if (!layout) {
        return report(layout.error());
    }
    reports::ReportData data;
    auto written =
        reports::generate_reports(**st, "default", *layout, f.out, reports::ReportFormats{}, &data);
    if (!written) {
        return report(written.error());
    }
    print_tables(data);

    // 5. Where to look next: the reports, then commands to dig further.
    for (const auto& p : written->written) {
        std::cout << fmt::format("report: {}\n", util::controls_as_spaces(p.string()));
    }
    std::cout << fmt::format(
        "Next:\n  diffeval summary --db {0}\n  diffeval diff --db {0} default/raw "
        "deepgemm/raw\n  diffeval diff --db {0} default/chat deepgemm/chat --scorer "
        "lm-eval-strict\n  sqlite3 {0} 'SELECT * FROM v_responses LIMIT 3'\n",
        util::controls_as_spaces(config.db));
    return k_exit_ok;
}

} // namespace

void add_demo_command(CLI::App& root, Dispatch& dispatch) {
    auto flags = std::make_shared<DemoFlags>();
    auto* cmd =
        root.add_subcommand("demo", "Run the DeepGEMM experiment against simulated servers");
    cmd->add_option("--out", flags->out, "Output directory (default ./diffeval-demo)");
    cmd->add_option("--dataset", flags->dataset,
                    "sample, gsm8k or a .jsonl path (default: gsm8k if cached)");
    cmd->add_option("--limit", flags->limit, "Only the first N questions (default: all)");
    cmd->add_option("--repeats", flags->repeats, "Repeats (default 3)");
    dispatch[cmd] = [flags] { return demo_command(*flags); };
}

} // namespace diffeval::cli
