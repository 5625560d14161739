// `diffeval run`: send the experiment's requests and store every response.
#include <harness/analysis/rescore.hpp>
#include <harness/cli/commands.hpp>
#include <harness/cli/util.hpp>
#include <harness/engine/run.hpp>
#include <harness/engine/vllm_config.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <optional>

namespace diffeval::cli {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_kill{false};

// The first signal stops the run cleanly; a second kills its launched
// servers at once rather than wait out their grace period.
extern "C" void on_stop_signal(int) {
    if (g_stop.exchange(true)) {
        g_kill.store(true);
    }
}

struct RunFlags {
    std::string config;
    std::vector<std::string> servers;
    std::string model;
    std::vector<std::string> framings;
    std::vector<std::string> max_tokens;
    // Numbers are read wide and checked against engine::Limits, so nothing
    // out of range wraps or falls back to a default.
    std::optional<int64_t> repeats;
    std::optional<int64_t> limit;
    std::string concurrency; // a number or "auto"
    std::string db;
    std::string dataset;
    std::string fewshot_from;
    std::string api_key_env;
    std::optional<double> timeout;
    std::optional<int64_t> retries;
    std::optional<int64_t> retry_backoff_ms;
    std::optional<int64_t> max_response_bytes;
    bool wait_lock = false;
    bool no_preflight = false;
    bool stream = false;
    bool keep_servers = false;
    bool sequential_servers = false;
    std::string probe;
    std::vector<std::string> scorer_files;
    std::vector<std::string> server_logs;
    bool quiet = false;
    std::string shard;
    std::string vllm_config;
    std::string vllm_bin = "vllm";
    // vLLM gsm8k_eval.py's options; each is sent only when given.
    std::optional<int> num_shots;
    std::optional<std::string> gen_prefix;
    std::optional<double> temperature;
    std::optional<double> top_p;
    std::optional<int> top_k;
    std::optional<std::string> reasoning_effort;
    std::string chat_template_kwargs;
};

// The script options in `f` as framing overrides.
util::Result<framing::Overrides> script_overrides(const RunFlags& f) {
    framing::Overrides o;
    o.fewshot = f.num_shots;
    o.gen_prefix = f.gen_prefix;
    if (f.temperature)
        o.fields["temperature"] = *f.temperature;
    if (f.top_p)
        o.fields["top_p"] = *f.top_p;
    if (f.top_k)
        o.fields["top_k"] = *f.top_k;
    if (f.reasoning_effort)
        o.fields["reasoning_effort"] = *f.reasoning_effort;
    if (!f.chat_template_kwargs.empty()) {
        auto j = nlohmann::ordered_json::parse(f.chat_template_kwargs, nullptr, false);
        if (!j.is_object()) {
            return util::make_error(
                util::ErrorKind::usage,
                fmt::format("--chat-template-kwargs '{}': expected a JSON object such as "
                            "'{{\"enable_thinking\": false}}'",
                            f.chat_template_kwargs));
        }
        o.fields["chat_template_kwargs"] = std::move(j);
    }
    if (f.num_shots && *f.num_shots < 0) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("--num-shots {}: expected 0 or more", *f.num_shots));
    }
    return o;
}

// Check every numeric flag against its range: one line naming the flag.
util::Result<void> check_number_flags(const RunFlags& f) {
    using L = engine::Limits;
    struct Check {
        const char* flag;
        std::optional<int64_t> value;
        int64_t lo, hi;
    };
    const Check checks[] = {
        {"--repeats", f.repeats, 1, L::max_repeats},
        {"--limit", f.limit, 1, L::max_limit},
        {"--retries", f.retries, 0, L::max_retries},
        {"--retry-backoff-ms", f.retry_backoff_ms, 0, L::max_retry_backoff_ms},
        {"--max-response-bytes", f.max_response_bytes, L::min_response_bytes,
         L::max_response_bytes},
    };
    for (const auto& c : checks) {
        if (c.value) {
            if (auto r = engine::check_whole_range(c.flag, *c.value, c.lo, c.hi); !r) {
                return r;
            }
        }
    }
    if (f.timeout) {
        if (auto r = engine::check_range("--timeout", *f.timeout, 0.001, L::max_timeout_s); !r) {
            return r;
        }
    }
    // Sent as they are: JSON has no nan or inf, and a body holding one is
    // refused by every server.
    const std::pair<const char*, std::optional<double>> sent[] = {{"--temperature", f.temperature},
                                                                  {"--top-p", f.top_p}};
    for (const auto& [flag, value] : sent) {
        if (value && !std::isfinite(*value)) {
            return util::make_error(
                util::ErrorKind::usage,
                fmt::format("{} {}: expected a finite number such as 0.6", flag, *value));
        }
    }
    return {};
}

// The experiment file, or vLLM's CI configs, under the run's settings.
util::Result<void> load_config_files(const RunFlags& f, engine::RunConfig& config) {
    if (!f.config.empty()) {
        if (auto r = engine::load_experiment(f.config, config); !r) {
            return r;
        }
    }
    if (!f.vllm_config.empty()) {
        // vLLM's CI configs: launched servers and the CI's settings, which
        // the flags may still change (--limit, --dataset ...).
        auto configs = engine::load_vllm_configs(f.vllm_config);
        if (!configs) {
            return configs.error();
        }
        if (auto r = engine::apply_vllm_configs(*configs, f.vllm_bin, config); !r) {
            return r;
        }
        config.dataset = "gsm8k";
    }
    return {};
}

// --max-tokens: comma-separated integers, each plain decimal text (stoll
// alone read " 256" and "+256") within its range.
util::Result<std::vector<int>> parse_max_tokens(const std::vector<std::string>& values) {
    std::vector<int> out;
    for (const auto& m : split_list(values)) {
        int64_t v = 0;
        try {
            if (!number_problem("INT", m).empty()) {
                throw std::invalid_argument(m);
            }
            v = std::stoll(m);
        } catch (const std::exception&) {
            return util::make_error(
                util::ErrorKind::usage,
                fmt::format("--max-tokens '{}': expected integers such as 256,1024", m));
        }
        if (auto r =
                engine::check_whole_range("--max-tokens", v, 1, engine::Limits::max_max_tokens);
            !r) {
            return r.error();
        }
        out.push_back(static_cast<int>(v));
    }
    return out;
}

// --concurrency: a number within its range, or "auto".
util::Result<void> apply_concurrency(const std::string& value, engine::RunConfig& config) {
    if (value == "auto") {
        config.concurrency_auto = true;
        return {};
    }
    // Plain decimal text, as every number flag: strtol alone read " 4" and "+4".
    const bool plain = number_problem("INT", value).empty();
    const long n = plain ? std::strtol(value.c_str(), nullptr, 10) : 0;
    if (!plain || n < 1 || n > engine::Limits::max_concurrency) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("--concurrency: '{}' is not a number from 1 to {} or "
                                            "'auto'",
                                            value, engine::Limits::max_concurrency));
    }
    config.concurrency = static_cast<int>(n);
    config.concurrency_auto = false;
    return {};
}

// The plain settings: each flag given replaces the file's value.
void apply_setting_flags(const RunFlags& f, engine::RunConfig& config) {
    if (!f.model.empty())
        config.model = f.model;
    if (!f.framings.empty())
        config.framings = split_list(f.framings);
    if (f.repeats)
        config.repeats = static_cast<int>(*f.repeats);
    if (f.limit)
        config.limit = static_cast<int>(*f.limit);
    if (!f.db.empty())
        config.db = f.db;
    if (!f.dataset.empty())
        config.dataset = f.dataset;
    if (!f.fewshot_from.empty())
        config.fewshot_from = f.fewshot_from;
    if (!f.api_key_env.empty())
        config.api_key_env = f.api_key_env;
    if (f.timeout)
        config.timeout = std::chrono::milliseconds(std::llround(*f.timeout * 1000));
    if (f.retries)
        config.retries = static_cast<int>(*f.retries);
    if (f.retry_backoff_ms)
        config.retry_backoff = std::chrono::milliseconds(*f.retry_backoff_ms);
    if (f.max_response_bytes)
        config.max_response_bytes = *f.max_response_bytes;
    if (f.wait_lock)
        config.wait_lock = true;
    if (f.no_preflight)
        config.preflight = false;
    if (f.stream)
        config.stream = true;
    if (f.keep_servers)
        config.keep_servers = true;
    if (f.sequential_servers)
        config.sequential_servers = true;
    if (!f.probe.empty())
        config.probe = f.probe;
    if (!f.scorer_files.empty())
        config.scorer_files = f.scorer_files;
}

// The flags that need parsing: servers, token limits, concurrency, attached
// logs, the shard and the framing overrides (flags win over --vllm-config's).
util::Result<void> apply_parsed_flags(const RunFlags& f, engine::RunConfig& config) {
    if (!f.servers.empty()) {
        config.servers.clear();
        for (const auto& s : f.servers) {
            auto spec = engine::parse_server_flag(s);
            if (!spec) {
                return spec.error();
            }
            config.servers.push_back(std::move(*spec));
        }
    }
    if (!f.max_tokens.empty()) {
        auto m = parse_max_tokens(f.max_tokens);
        if (!m) {
            return m.error();
        }
        config.max_tokens = std::move(*m);
    }
    if (!f.concurrency.empty()) {
        if (auto r = apply_concurrency(f.concurrency, config); !r) {
            return r;
        }
    }
    for (const auto& s : f.server_logs) {
        if (auto r = engine::attach_server_log(s, config); !r) {
            return r;
        }
    }
    if (!f.shard.empty()) {
        auto shard = engine::parse_shard(f.shard);
        if (!shard) {
            return shard.error();
        }
        config.shard = *shard;
    }
    auto overrides = script_overrides(f);
    if (!overrides) {
        return overrides.error();
    }
    auto& merged = config.framing_overrides;
    if (overrides->fewshot)
        merged.fewshot = overrides->fewshot;
    if (overrides->gen_prefix)
        merged.gen_prefix = overrides->gen_prefix;
    for (const auto& [k, v] : overrides->fields.items())
        merged.fields[k] = v;
    return {};
}

// The run's configuration: the experiment file, then flags on top of it.
util::Result<engine::RunConfig> build_config(const RunFlags& f) {
    engine::RunConfig config;
    if (auto r = check_number_flags(f); !r) {
        return r.error();
    }
    if (auto r = load_config_files(f, config); !r) {
        return r.error();
    }
    apply_setting_flags(f, config);
    if (auto r = apply_parsed_flags(f, config); !r) {
        return r.error();
    }
    return config;
}

// What was stored and what to do next; the exit code.
int report_outcome(const engine::RunSummary& s, const std::string& db) {
    // An earlier run's plan this one did not cover: rerunning this command
    // sends none of it.
    for (const auto& [group, n] : s.unsent_by_others) {
        std::cout << fmt::format(
            "note: {} also holds {} an earlier run planned and no run sent (it asked for more "
            "questions or repeats than this one); they count as failed: run the command that "
            "asked for them again\n",
            group, util::counted(n, "request"));
    }
    std::cout << fmt::format(
        "stored {} in {} ({} ok, {} failed, {}, {} skipped as already stored) in {:.1f}s\n",
        engine::stored_words(s), util::controls_as_spaces(db), s.succeeded, s.failed,
        util::counted(s.retries, "retry", "retries"), s.skipped, s.seconds);
    if (!s.crashed.empty()) {
        std::cout << fmt::format(
            "server(s) {} crashed; their unanswered requests are kept for the next run: run "
            "the same command again to send them\n",
            fmt::join(s.crashed, ", "));
        return k_exit_failed;
    }
    if (s.interrupted) {
        std::cout << "interrupted: run the same command again to send the rest\n";
        return k_exit_interrupted;
    }
    if (s.failed) {
        std::cout << fmt::format("{} {} no successful response; run the same command again to "
                                 "retry {}\n",
                                 util::counted(s.failed, "request"), s.failed == 1 ? "has" : "have",
                                 s.failed == 1 ? "it" : "them");
        // Why, most frequent first: the whole story is in the database.
        std::vector<std::pair<int64_t, std::string>> why;
        for (const auto& [what, n] : s.failures) {
            why.emplace_back(n, what);
        }
        std::sort(why.begin(), why.end(), [](const auto& x, const auto& y) {
            return x.first != y.first ? x.first > y.first : x.second < y.second;
        });
        for (size_t i = 0; i < why.size() && i < 3; ++i) {
            std::cout << fmt::format("  {} x {}\n", why[i].first, why[i].second);
        }
        if (why.size() > 3) {
            // Requests, as the lines above count them, and how many
            // messages they carry.
            int64_t others = 0;
            for (size_t i = 3; i < why.size(); ++i) {
                others += why[i].first;
            }
            std::cout << fmt::format("  and {} more ({}; SELECT error_kind, error FROM "
                                     "responses WHERE ok = 0)\n",
                                     others, util::counted(why.size() - 3, "other message"));
        }
        return k_exit_failed;
    }
    return k_exit_ok;
}

int run_command(const RunFlags& f) {
    // 1. The experiment file, then flags on top of it.
    auto config = build_config(f);
    if (!config) {
        return report(config.error());
    }
    // The user's scorer files are checked before anything is sent, so a bad
    // one costs no run.
    auto added = analysis::read_scorer_files(config->scorer_files);
    if (!added) {
        return report(added.error());
    }

    // 2. Run with Ctrl-C wired to a clean stop.
    g_stop.store(false);
    g_kill.store(false);
    auto old_int = std::signal(SIGINT, on_stop_signal);
    auto old_term = std::signal(SIGTERM, on_stop_signal);
    // A closed terminal or ssh session (SIGHUP) stops the run as Ctrl-C
    // does: its answers are stored and what was in flight is named.
    auto old_hup = std::signal(SIGHUP, on_stop_signal);
    engine::RunOptions options;
    options.progress = f.quiet           ? engine::ProgressStyle::none
                       : stderr_is_tty() ? engine::ProgressStyle::bar
                                         : engine::ProgressStyle::lines;
    options.stop_requested = &g_stop;
    options.kill_requested = &g_kill;
    auto result = engine::run(*config, options, std::cerr);
    const auto restore = [&] {
        std::signal(SIGINT, old_int);
        std::signal(SIGTERM, old_term);
        std::signal(SIGHUP, old_hup);
    };
    if (!result) {
        restore();
        return report(result.error());
    }
    // Stopped before the run was recorded (waiting for the lock, in
    // preflight): nothing is stored, and nothing is to be scored; the
    // scoring stage created an empty database, and the run said to "send
    // the rest" of a plan it never made (reliability audit).
    if (result->interrupted && result->run_id == 0) {
        restore();
        std::cout << fmt::format("interrupted after {:.1f}s, before anything was stored in {}; "
                                 "run the same command again\n",
                                 result->seconds, util::controls_as_spaces(config->db));
        return k_exit_interrupted;
    }
    // 3. Classify and score what was stored, so the database's views are
    // complete when the run returns (also after an interruption); a user
    // scorer new to the database, or changed, scores everything stored.
    // The stage is one transaction: a signal now lets it end (the default
    // action killed the process without a word, exit 143 for SIGTERM, with
    // a --scorer-file left unstored).
    auto scored = score_stored(config->db, *added);
    restore();
    if (!scored) {
        return report(scored.error());
    }
    std::cout << stored_scorer_lines(*scored, config->db);
    // 4. Say what was stored and what to do next. A signal once the run
    // had sent all it planned (stopping a launched server, scoring) only
    // hurried it: every request was answered (cli.md).
    return report_outcome(*result, config->db);
}

} // namespace

void add_run_command(CLI::App& root, Dispatch& dispatch) {
    auto flags = std::make_shared<RunFlags>();
    auto* cmd =
        root.add_subcommand("run", "Send every request of the experiment and store the responses");
    cmd->add_option("--config", flags->config, "Experiment file (TOML); flags override it");
    // A list's captured default would show as "=[]": none is shown.
    cmd->add_option("--server", flags->servers,
                    "NAME=URL of an OpenAI-compatible server (repeatable)")
        ->default_str("");
    cmd->add_option("--model", flags->model, "Model name sent to every server");
    add_list_option(*cmd, "--framing", flags->framings,
                    "Framings, comma-separated: built-in names or TOML paths", "raw,chat");
    add_list_option(*cmd, "--max-tokens", flags->max_tokens, "Token limits, comma-separated",
                    "256");
    cmd->add_option("--repeats", flags->repeats, "Repeats of every request (default 1)");
    cmd->add_option("--limit", flags->limit, "Only the first N test questions (default all)");
    cmd->add_option("--concurrency", flags->concurrency,
                    "In-flight requests per server, or 'auto': the server's published "
                    "slots (default 64; never more than the slots a server publishes)");
    cmd->add_option("--db", flags->db, "SQLite results file (default diffeval.sqlite)");
    cmd->add_option("--dataset", flags->dataset, "sample, gsm8k, or a GSM8K-format .jsonl path")
        ->default_str("sample");
    cmd->add_option("--fewshot-from", flags->fewshot_from,
                    "JSONL file of few-shot examples (default: the dataset's train set)");
    cmd->add_option("--api-key-env", flags->api_key_env,
                    "Environment variable holding the API key");
    cmd->add_option("--timeout", flags->timeout, "Per-request timeout in seconds (default 600)");
    cmd->add_option("--retries", flags->retries,
                    "Retries on connection errors, timeouts, 429, 500, 502, 503, 504 and "
                    "unparsable answers (default 3)");
    cmd->add_option("--retry-backoff-ms", flags->retry_backoff_ms,
                    "First retry delay (default 500)");
    cmd->add_flag("--no-preflight", flags->no_preflight,
                  "Skip GET /v1/models, /version, /props and the context check");
    cmd->add_flag("--stream", flags->stream,
                  "Stream responses (SSE) and record time to first token");
    cmd->add_option("--server-log", flags->server_logs,
                    "NAME=PATH: fingerprint an existing log of a server diffeval does not launch")
        ->default_str("");
    cmd->add_flag("--keep-servers", flags->keep_servers, "Leave launched servers running");
    cmd->add_flag("--sequential-servers", flags->sequential_servers,
                  "Run one server configuration at a time (one GPU, several configurations)");
    cmd->add_option("--scorer-file", flags->scorer_files,
                    "A scorer file of your own (repeatable): stored in the database and used "
                    "by every scoring pass of it, this run's and later ones")
        ->default_str("");
    cmd->add_option("--probe", flags->probe,
                    "Also send the decision-point probe: think-open (docs/probe.md)");
    cmd->add_option("--max-response-bytes", flags->max_response_bytes,
                    "Largest response body accepted, after decompression (default 33554432)");
    cmd->add_flag("--wait-lock", flags->wait_lock,
                  "If another run is writing the database, wait for it instead of exiting");
    cmd->add_flag("--quiet", flags->quiet, "No progress output");
    cmd->add_option("--shard", flags->shard,
                    "I/N: only questions q with q mod N = I (0 <= I < N); merge the shards' "
                    "databases with 'diffeval merge'");
    cmd->add_option("--vllm-config", flags->vllm_config,
                    "vLLM GSM8K CI config (.yaml) or list file: launch 'vllm serve' as the CI "
                    "does and run its raw framing");
    cmd->add_option("--vllm-bin", flags->vllm_bin,
                    "The vllm executable for --vllm-config (default: vllm from PATH)");
    cmd->add_option("--num-shots", flags->num_shots,
                    "Few-shot examples per question (default: the framing's; at most as many "
                    "as the few-shot pool holds)");
    cmd->add_option("--gen-prefix", flags->gen_prefix,
                    "Text after \"Answer:\" ({gen_prefix} in framing templates; default empty)");
    cmd->add_option("--temperature", flags->temperature, "Send this temperature");
    cmd->add_option("--top-p", flags->top_p, "Send this top_p");
    cmd->add_option("--top-k", flags->top_k, "Send this top_k");
    cmd->add_option("--reasoning-effort", flags->reasoning_effort,
                    "Send this reasoning_effort (chat framings)");
    cmd->add_option("--chat-template-kwargs", flags->chat_template_kwargs,
                    "JSON object sent as chat_template_kwargs (chat framings)");
    dispatch[cmd] = [flags] { return run_command(*flags); };
}

} // namespace diffeval::cli
