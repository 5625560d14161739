// The run engine; see run.hpp.
//
// One thread drives the network (http::MultiClient), one writes to SQLite. The plan
// is read as it is sent, a part at a time, and each part's request rows are
// inserted before any of them is sent, so the store always knows what was
// asked even if the process dies; a response row is written only when an
// outcome is final, so a killed run resumes by resending what has none.
//
// `run` is the list of passes; each pass below takes what it reads and
// changes as parameters. Asking servers is in preflight.cpp, planning in
// plan.cpp, the event loop in send.cpp, the retry policy in retry.cpp.
#include <harness/engine/run.hpp>

#include <harness/analysis/rescore.hpp>
#include <harness/analysis/summary.hpp>
#include <harness/engine/run_parts.hpp>
#include <harness/fingerprint/fingerprint.hpp>
#include <harness/store/lock.hpp>
#include <harness/store/readers.hpp>
#include <harness/util/file.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <sys/statvfs.h>

namespace diffeval::engine {

using util::ErrorKind;
using util::make_error;

namespace {

// The key of runs.config_json recording the sha256 of the few-shot pool a
// run's framings drew shots from (record_run).
constexpr std::string_view k_fewshot_pool_key = "fewshot_pool_sha256";

// Refuse a plan whose database would not fit on its disk before sending any
// of it. The plan itself is read as it is sent (plan.cpp), so memory does
// not grow with it; what grows is the database: the official demo stores
// about 2.7 KiB per request (its row, its share of a body, its response),
// so 2 KiB is a floor.
constexpr int64_t k_stored_bytes_per_request = 2048;

// `stored`: requests of the database answered already under this run's
// servers (0 for a new database), which a resumed run does not store again:
// counted in full, a run stopped by a full disk was refused the space its
// own answers took, and told to lower --limit.
util::Result<void> check_plan_size(const RunConfig& c, size_t n_questions, int64_t stored = 0) {
    // Saturating products: the factors come from flags and may be huge.
    long double planned =
        static_cast<long double>(c.servers.size()) * static_cast<long double>(c.framings.size()) *
        static_cast<long double>(c.max_tokens.size()) * static_cast<long double>(c.repeats) *
        static_cast<long double>(n_questions);
    const long double to_store = std::max<long double>(planned - stored, 0);
    auto dir = std::filesystem::path(c.db).parent_path();
    struct statvfs fs {};
    // No such directory, or a filesystem of no blocks (proc, sysfs), whose
    // free space is no measure: opening the database says what is wrong.
    if (statvfs(dir.empty() ? "." : dir.c_str(), &fs) != 0 || fs.f_blocks == 0) {
        return {};
    }
    const long double free_bytes = static_cast<long double>(fs.f_bavail) * fs.f_frsize;
    const long double need = to_store * k_stored_bytes_per_request;
    if (need <= free_bytes) {
        return {};
    }
    // Sizes in the unit that shows them: "0.0 GiB free" said nothing.
    const auto size = [](long double bytes) {
        return bytes >= (1 << 30)
                   ? fmt::format("{:.1f} GiB", static_cast<double>(bytes / (1 << 30)))
               : bytes >= (1 << 20)
                   ? fmt::format("{:.1f} MiB", static_cast<double>(bytes / (1 << 20)))
                   : fmt::format("{:.0f} KiB", static_cast<double>(bytes / (1 << 10)));
    };
    const std::string plan = fmt::format(
        "the plan has {:.0f} requests ({} x {} x {} x {} x {})", static_cast<double>(planned),
        util::counted(c.servers.size(), "server"), util::counted(c.framings.size(), "framing"),
        util::counted(c.max_tokens.size(), "token limit"), util::counted(c.repeats, "repeat"),
        util::counted(n_questions, "question"));
    if (stored > 0) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}, {} of them answered in {} already; the other {:.0f} "
                                      "need at least {} once stored, more than the {} free "
                                      "beside it; free space, or lower --repeats or --limit",
                                      plan, stored, c.db, static_cast<double>(to_store), size(need),
                                      size(free_bytes)));
    }
    return make_error(ErrorKind::usage,
                      fmt::format("{}, at least {} once stored, more than the {} free beside {}; "
                                  "lower --repeats or --limit, or split the run",
                                  plan, size(need), size(free_bytes), c.db));
}

// Refuse shots asked for (--num-shots, a vLLM config's num_fewshot, or a
// framing's own `fewshot`, 5 in the built-in ones) that the few-shot pool
// cannot give: the renderer would send as many as the pool holds (8 of the
// sample set's for --num-shots 100), while the run records the number
// asked for.
util::Result<void> check_shots(const RunConfig& c, const datasets::Dataset& dataset,
                               const std::vector<framing::Framing>& framings) {
    const size_t pool = dataset.fewshot.size();
    const auto from = c.fewshot_from.empty()
                          ? fmt::format("dataset '{}' has {} (its train set)", dataset.name,
                                        util::counted(pool, "few-shot example"))
                          : fmt::format("--fewshot-from {} has {}", c.fewshot_from,
                                        util::counted(pool, "example"));
    const auto& asked = c.framing_overrides.fewshot;
    if (asked && *asked >= 0 && static_cast<size_t>(*asked) > pool) {
        return make_error(ErrorKind::usage,
                          fmt::format("--num-shots {}: {}; pass --num-shots {} or fewer, or "
                                      "--fewshot-from a file with {} or more examples",
                                      *asked, from, pool, *asked));
    }
    for (const auto& f : framings) {
        if (f.fewshot > 0 && static_cast<size_t>(f.fewshot) > pool) {
            return make_error(ErrorKind::usage,
                              fmt::format("framing '{}' asks for {} shots, but {}; pass "
                                          "--num-shots {} or fewer, or --fewshot-from a file "
                                          "with {} or more examples",
                                          f.name, f.fewshot, from, pool, f.fewshot));
        }
    }
    return {};
}

} // namespace

// Pass 1: check the configuration and load everything that can be wrong
// before anything is sent: dataset, framings, the plan's size.
util::Result<Inputs> load_inputs(const RunConfig& config) {
    if (auto r = validate(config); !r) {
        return r.error();
    }
    // A launch that cannot start is found before the database is opened:
    // found at its phase, it left a failed run and a logs directory behind.
    // So is a port taken now by the first phase's servers (all of them, or
    // the first with --sequential-servers); a later phase's port may be its
    // predecessor's, free by then, and is checked when its phase starts.
    for (size_t i = 0; i < config.servers.size(); ++i) {
        const auto& spec = config.servers[i];
        if (spec.launch.empty()) {
            continue;
        }
        if (auto r = check_launchable(spec); !r) {
            return r.error();
        }
        if (i == 0 || !config.sequential_servers) {
            if (auto r = check_port_free(spec); !r) {
                return r.error();
            }
        }
    }
    Inputs in;
    for (const auto& name : config.framings) {
        auto f = framing::load_framing(name);
        if (!f) {
            return f.error();
        }
        if (auto problem = util::name_problem(f->name)) {
            return make_error(ErrorKind::usage, fmt::format("--framing {}: its name '{}' {}", name,
                                                            util::one_line(f->name, 80), *problem));
        }
        // The name is the group's: two framings of one name would fill
        // one group with two bodies per question.
        for (const auto& earlier : in.framings) {
            if (earlier.name == f->name) {
                return make_error(ErrorKind::usage,
                                  fmt::format("--framing {}: its name '{}' is that of another "
                                              "framing of this run; give the file another name",
                                              name, f->name));
            }
        }
        in.framings.push_back(framing::apply_overrides(std::move(*f), config.framing_overrides));
    }
    // An experiment's body may not replace what a framing writes either
    // (config.cpp refuses the fields every framing and the run write): a
    // group still called a/raw/256 asked with other stop strings, or
    // another temperature, than the raw framing's (an audit's `stop`).
    for (const auto& server : config.servers) {
        for (const auto& f : in.framings) {
            for (const auto& [key, value] : server.extra_body.items()) {
                if (!f.fields.contains(key)) {
                    continue;
                }
                // A flag's field (--top-k) is written into every framing:
                // named as the flag's, not the framing's (an audit).
                if (config.framing_overrides.fields.contains(key)) {
                    return make_error(ErrorKind::usage,
                                      fmt::format("server '{}': its body sets '{}', which {} "
                                                  "writes too; give one of the two",
                                                  server.name, key, override_flag(key)));
                }
                return make_error(
                    ErrorKind::usage,
                    fmt::format("server '{}': its body sets '{}', which framing '{}' writes; "
                                "leave it out of body, or give the run a framing file that "
                                "sets it (docs/framings.md)",
                                server.name, key, f.name));
            }
        }
    }
    // Framings that all take the first N shots need only the few-shot
    // file's first N examples; one that draws shots needs them all. Framings
    // that take none (--num-shots 0) need no few-shot file at all: a test
    // file with no train.jsonl beside it was refused, asking for one.
    size_t shots_read = 0;
    for (const auto& f : in.framings) {
        if (f.fewshot <= 0) {
            continue;
        }
        shots_read = f.sampler == framing::FewshotSampler::first_n
                         ? std::max(shots_read, static_cast<size_t>(f.fewshot))
                         : datasets::k_all_samples;
        if (shots_read == datasets::k_all_samples) {
            break;
        }
    }
    auto dataset = datasets::open_dataset(config.dataset, config.fewshot_from, shots_read);
    if (!dataset) {
        return dataset.error();
    }
    in.dataset = std::move(*dataset);
    if (auto r = check_shots(config, in.dataset, in.framings); !r) {
        return r.error();
    }
    in.n_questions = in.dataset.test.size();
    if (config.limit) {
        in.n_questions = std::min(in.n_questions, static_cast<size_t>(*config.limit));
    }
    // A database that exists is checked once open, against what it holds.
    std::error_code ec;
    if (!std::filesystem::exists(config.db, ec)) {
        if (auto r = check_plan_size(config, in.n_questions); !r) {
            return r.error();
        }
    }
    return in;
}

namespace {

// Ctrl-C before the run row exists: nothing was sent or stored. Its time
// is the command's since `began`: the wait it cut short (for the database's
// lock, for a server's preflight answer) is what the user waited.
RunSummary interrupted_early(Clock::time_point began) {
    RunSummary s;
    s.interrupted = true;
    s.seconds = std::chrono::duration<double>(Clock::now() - began).count();
    return s;
}

// Pass 2: one run per database. The lock is taken before anything is sent,
// so a second run sends nothing; nullopt when Ctrl-C stopped the wait.
util::Result<std::optional<store::RunLock>> lock_database(const RunContext& ctx) {
    auto lock = store::RunLock::acquire(ctx.config.db, "run",
                                        ctx.config.wait_lock ? store::RunLock::Wait::yes
                                                             : store::RunLock::Wait::no,
                                        ctx.options.stop_requested);
    if (!lock) {
        if (ctx.stopped()) {
            return std::optional<store::RunLock>{};
        }
        return lock.error();
    }
    return std::optional<store::RunLock>{std::move(*lock)};
}

// What a server publishes (`info`) sets `server`'s in-flight limit and is
// checked against the longest prompt.
util::Result<void> apply_limits(const RunContext& ctx, size_t si, const ServerInfo& info,
                                ServerState& server) {
    const auto& config = ctx.config;
    const auto& spec = config.servers[si];
    std::string note;
    server.limit = in_flight_limit(config.concurrency, config.concurrency_auto, info.limits, note);
    if (!note.empty()) {
        ctx.log << fmt::format("server '{}': {}\n", spec.name, note);
    }
    const auto model = ctx.configured_model(si);
    auto fits = check_context(spec.name, spec.url, server.headers, info.limits, ctx.inputs.framings,
                              ctx.inputs.dataset, ctx.inputs.n_questions,
                              *std::max_element(config.max_tokens.begin(), config.max_tokens.end()),
                              model ? model : info.served_model, config.timeout, ctx.log);
    if (!fits) {
        return fits.error();
    }
    server.fits_alone = *fits;
    return {};
}

// Whether the run goes on after a pass, or stops (interrupted, or the
// store failed).
enum class Next { go_on, stop };

// Preflight server `si` into `info`, then apply its limits.
util::Result<Next> preflight_one(const RunContext& ctx, size_t si, ServerInfo& info,
                                 ServerState& server) {
    const auto& spec = ctx.config.servers[si];
    auto got = preflight(spec, server.headers, ctx.configured_model(si), ctx.config.timeout,
                         ctx.options.stop_requested);
    if (!got) {
        if (ctx.stopped()) {
            return Next::stop;
        }
        return ctx.redacted(got.error());
    }
    info = std::move(*got);
    // The served model's id goes into every request body and the servers
    // table; one that holds the API key (a server echoing it) must not.
    if (info.served_model && !ctx.configured_model(si)) {
        if (auto id = *info.served_model; ctx.inputs.redactor.apply(id)) {
            return make_error(ErrorKind::usage,
                              fmt::format("server '{}': the model id it serves holds the API key; "
                                          "diffeval would send and store it with every request, "
                                          "so nothing was sent; name the model with --model",
                                          spec.name));
        }
    }
    if (auto r = apply_limits(ctx, si, info, server); !r) {
        return r.error();
    }
    return Next::go_on;
}

// Every framing whose bodies always name the model has one for each server:
// configured, served (preflight), or to be asked of a launched server once
// it is up. The message is the planner's (body_model_for in plan.cpp).
util::Result<void> check_body_models(const RunContext& ctx, const std::vector<ServerInfo>& infos) {
    for (size_t si = 0; si < ctx.config.servers.size(); ++si) {
        const auto& spec = ctx.config.servers[si];
        const bool asked_later = ctx.config.preflight && !spec.launch.empty();
        if (ctx.configured_model(si) || infos[si].served_model || asked_later) {
            continue;
        }
        for (const auto& f : ctx.inputs.framings) {
            if (f.model == framing::ModelField::always) {
                return make_error(ErrorKind::usage,
                                  fmt::format("framing '{}' needs a model name for server '{}': "
                                              "pass --model (preflight is off, and {} stores "
                                              "no model for '{}')",
                                              f.name, spec.name, ctx.config.db, spec.name));
            }
        }
    }
    return {};
}

// Without preflight, the model the database stores for each server's name
// (the one an earlier run's preflight read, or its --model) stands for the
// one preflight would read: later runs are checked against it as the same
// server. A rerun of a finished run whose server is gone was told to pass
// --no-preflight, then --model for the chat framing, which then named the
// model in the raw framing's bodies too, and was refused (reliability audit).
void take_stored_models(const RunContext& ctx, std::vector<ServerInfo>& infos) {
    std::error_code ec;
    if (ctx.config.preflight || !std::filesystem::is_regular_file(ctx.config.db, ec)) {
        return;
    }
    auto st = store::Store::open(ctx.config.db, store::Store::Mode::read_only);
    if (!st) {
        return; // what is wrong with the file is said once the run opens it
    }
    std::vector<std::string> names;
    for (const auto& spec : ctx.config.servers) {
        names.push_back(spec.name);
    }
    auto records = store::server_records(**st, names);
    if (!records) {
        return;
    }
    for (size_t si = 0; si < names.size(); ++si) {
        const auto& r = (*records)[si];
        if (!infos[si].served_model && r.found && !r.model.empty()) {
            infos[si].served_model = r.model;
        }
    }
}

// Pass 3: read the attached logs into `attached_logs` and preflight the
// servers diffeval does not launch, into `infos`: fail fast. Launched ones
// are checked once they are healthy, in their phase.
util::Result<Next> preflight_servers(const RunContext& ctx, std::vector<ServerState>& servers,
                                     std::vector<ServerInfo>& infos,
                                     std::vector<std::string>& attached_logs) {
    for (size_t i = 0; i < servers.size(); ++i) {
        const auto& spec = ctx.config.servers[i];
        if (!spec.attached_log.empty()) {
            auto text = read_server_log(spec.attached_log);
            if (!text) {
                return make_error(ErrorKind::usage, fmt::format("--server-log: cannot read {}",
                                                                text.error().message));
            }
            attached_logs[i] = std::move(*text);
        }
        if (ctx.config.preflight && spec.launch.empty()) {
            auto r = preflight_one(ctx, i, infos[i], servers[i]);
            if (!r || *r == Next::stop) {
                return r;
            }
        }
    }
    return Next::go_on;
}

// Pass 4: mark runs left `running` by a dead process killed, record the run
// and its questions in `db`; the run's id.
util::Result<int64_t> record_run(const RunContext& ctx, store::Store& db) {
    if (auto killed = db.mark_stale_runs_killed(); !killed) {
        return killed.error();
    } else if (*killed > 0) {
        ctx.log << fmt::format("note: {} {} still marked running though {} process is gone; "
                               "marked killed\n",
                               util::counted(*killed, "earlier run"), *killed == 1 ? "was" : "were",
                               *killed == 1 ? "its" : "their");
    }
    // The questions first: when they cannot be stored (a full disk), no run
    // row is left `running` for the next run to call killed.
    const auto& dataset = ctx.inputs.dataset;
    std::vector<std::pair<std::string, std::string>> qa;
    qa.reserve(dataset.test.size());
    for (const auto& s : dataset.test) {
        qa.emplace_back(s.question, s.answer);
    }
    auto changed = db.put_questions(dataset.name, qa);
    if (!changed) {
        return changed.error();
    }
    if (const auto& was = *changed) {
        const auto& now = dataset.test[static_cast<size_t>(was->question_idx)];
        // A question no request asked yet is still the file's: the database
        // keeps every question of it, and pairs groups by them.
        auto asked = db.asked(dataset.name, was->question_idx);
        if (!asked) {
            return asked.error();
        }
        return make_error(
            ErrorKind::usage,
            fmt::format("{} holds question {} of dataset {} {}: the file changed since this "
                        "database stored its questions (or the database itself was changed), and "
                        "{}; restore the file, or run it into another --db",
                        ctx.config.db, was->question_idx, dataset.name,
                        was->question != now.question
                            ? std::string("with another text than the dataset now has")
                            : fmt::format("with gold answer {}, but the dataset now gives it {}",
                                          datasets::answer_shown(was->answer),
                                          datasets::answer_shown(now.answer)),
                        *asked ? "the responses stored for it would be counted as the new "
                                 "question's"
                               : "though no request asked it yet, the database keeps each "
                                 "question as first stored, so an answer to the new one would "
                                 "be stored as the old one's"));
    }
    // A framing that draws each question's shots from the whole few-shot
    // pool: the pool is recorded, and another refused. A group's stored
    // bodies are checked at their places (check_stored_groups), but an
    // edited example that only new questions draw changed none of them,
    // and the group mixed two pools without a word.
    auto config = to_json(ctx.config);
    const bool draws = std::any_of(
        ctx.inputs.framings.begin(), ctx.inputs.framings.end(), [](const framing::Framing& f) {
            return f.fewshot > 0 && f.sampler != framing::FewshotSampler::first_n;
        });
    if (draws) {
        std::string pool;
        for (const auto& s : dataset.fewshot) {
            pool += s.question;
            pool += '\0';
            pool += s.answer;
            pool += '\0';
        }
        const auto pool_sha256 = util::sha256_hex(pool);
        auto before = db.latest_run_recording(dataset.name, std::string(k_fewshot_pool_key));
        if (!before) {
            return before.error();
        }
        if (*before && (*before)->second != pool_sha256) {
            return make_error(
                ErrorKind::usage,
                fmt::format("the few-shot examples of dataset {} ({}) differ from those run {} "
                            "of {} drew its questions' shots from: a group would mix two pools; "
                            "restore the few-shot file, or run it into another --db",
                            dataset.name,
                            ctx.config.fewshot_from.empty()
                                ? std::string("its train set")
                                : "--fewshot-from " + ctx.config.fewshot_from,
                            (*before)->first, ctx.config.db));
        }
        config[std::string(k_fewshot_pool_key)] = pool_sha256;
    }
    return db.begin_run(ctx.inputs.redactor.redacted(config.dump()), dataset.name);
}

// The conflict of a log whose facts the server's /props contradicts.
constexpr std::string_view k_log_contradicts = "log-contradicts-server";

// The facts fingerprinting finds in `log_text`, with those /props gave
// (`limits`) where the log says nothing; nullopt when there are none. Where
// both speak and disagree, the log is another server's or another launch's
// (an attached log of the wrong file), and the server answering now is what
// /props says: its value is the fact, and the disagreement a conflict
// (k_log_contradicts).
std::optional<fingerprint::Fingerprint> server_fingerprint(const std::string& log_text,
                                                           const ServerLimits& limits) {
    std::optional<fingerprint::Fingerprint> fp;
    if (auto found = fingerprint::fingerprint_log(log_text); found && !found->facts.empty()) {
        fp = std::move(*found);
    }
    const auto props_facts = limit_facts(limits);
    if (!props_facts.empty() && !fp) {
        fp = fingerprint::Fingerprint{limits.engine, {}, {}, {}};
    }
    for (const auto& [k, v] : props_facts.items()) {
        const auto value = v.is_string() ? v.get<std::string>() : v.dump();
        auto [it, added] = fp->facts.emplace(k, value);
        if (added || it->second == value) {
            continue;
        }
        fp->conflicts.push_back(
            {std::string(k_log_contradicts),
             fmt::format("the log says {} {} where the server's /props says {}: it is another "
                         "server's log, or another launch's",
                         k, it->second, value),
             {fmt::format("{}={} (log)", k, it->second), fmt::format("{}={} (/props)", k, value)}});
        it->second = value;
    }
    return fp;
}

// The conflict saying `fp`'s log contradicts /props, or null.
const fingerprint::Conflict* log_contradiction(const std::optional<fingerprint::Fingerprint>& fp) {
    if (fp) {
        for (const auto& c : fp->conflicts) {
            if (c.name == k_log_contradicts) {
                return &c;
            }
        }
    }
    return nullptr;
}

// What record_server stores of server `si`: its row, from preflight
// (`info`), and the fingerprint of its log with what /props said (`fp`), as
// stored (`facts_json`, "" for none); redacted. Built once per log text: an
// attached server's is checked before the run and recorded in its phase.
struct ServerRecord {
    store::ServerRow row;
    std::optional<fingerprint::Fingerprint> fp;
    std::string facts_json;
};

// The scripts a launch command names, each with the sha256 of what it
// holds: the same command runs another server once a script it runs
// changed, and neither the command nor, often, the server's log says so. A
// token names a script where it is a file (or the value of a
// `--flag=value`), from the directory the server starts in, that is
// executable or ends in .sh, .bash or .py, of 1 to 1 MiB bytes: not a
// model's weights or a program, and not a log or an output file the server
// writes, which would differ on every run (an audit's `2>> own.log` refused
// every resume). A shell command's words are split at spaces. At most 16.
nlohmann::json launch_files(const ServerSpec& spec) {
    namespace fs = std::filesystem;
    constexpr std::uintmax_t k_max_bytes = std::uintmax_t{1} << 20;
    constexpr size_t k_max_files = 16;
    // A pseudo-file (/proc, /sys, tracefs: size 0, and a read that may never
    // end, as an audit's trace_pipe held the run past SIGTERM) is no script,
    // and neither is a file that grew or shrank while it was read.
    const auto script_text = [&](const fs::path& at) -> std::optional<std::string> {
        std::error_code ec;
        const auto status = fs::status(at, ec);
        if (ec || !fs::is_regular_file(status)) {
            return std::nullopt;
        }
        const auto ext = at.extension().string();
        const bool executable =
            (status.permissions() & (fs::perms::owner_exec | fs::perms::group_exec |
                                     fs::perms::others_exec)) != fs::perms::none;
        if (!executable && ext != ".sh" && ext != ".bash" && ext != ".py") {
            return std::nullopt;
        }
        const auto size = fs::file_size(at, ec);
        if (ec || size == 0 || size > k_max_bytes) {
            return std::nullopt;
        }
        auto text = util::read_input(at, static_cast<size_t>(size));
        if (!text || text->size() != size) {
            return std::nullopt;
        }
        return std::move(*text);
    };
    std::vector<std::string> words;
    for (const auto& token : spec.launch) {
        if (!spec.launch_shell) {
            words.push_back(token);
            continue;
        }
        for (size_t at = 0; at < token.size();) {
            const size_t end = std::min(token.find_first_of(" \t\n", at), token.size());
            if (end > at) {
                words.push_back(token.substr(at, end - at));
            }
            at = end + 1;
        }
    }
    nlohmann::json out = nlohmann::json::object();
    for (auto word : words) {
        if (word.starts_with("-") && word.find('=') != std::string::npos) {
            word = word.substr(word.find('=') + 1);
        }
        if (word.empty() || out.size() >= k_max_files || out.contains(word)) {
            continue;
        }
        const fs::path p(word);
        const fs::path at = p.is_relative() && !spec.cwd.empty() ? fs::path(spec.cwd) / p : p;
        if (auto text = script_text(at)) {
            out[word] = util::sha256_hex(*text);
        }
    }
    return out;
}

// `scripts`: what launch_files read before the server started (null for a
// server diffeval attached to).
ServerRecord server_record(const RunContext& ctx, size_t si, const ServerInfo& info,
                           const std::string& log_text, const nlohmann::json& scripts = {}) {
    const auto& spec = ctx.config.servers[si];
    const auto& redactor = ctx.inputs.redactor;
    // A launched server's command is part of what it is: the same name
    // launched with another KV-cache type (`-ctk q4_0`) answers otherwise,
    // though at its default verbosity neither its log nor /props says so.
    auto info_json = info.info;
    if (!spec.launch.empty()) {
        const auto hp = http::host_port(spec.url);
        info_json["launch"] = store::launch_identity(spec.env, spec.launch, hp ? hp->port : "");
        if (scripts.is_object() && !scripts.empty()) {
            info_json["launch_files"] = scripts;
        }
    }
    ServerRecord r{{spec.name, redactor.redacted(spec.url),
                    ctx.configured_model(si).value_or(info.served_model.value_or("")),
                    redactor.redacted(info_json.dump())},
                   server_fingerprint(log_text, info.limits),
                   ""};
    if (r.fp) {
        r.facts_json = redactor.redacted(fingerprint::to_json(*r.fp).dump());
    }
    return r;
}

// A usage error when `db` holds responses under the name of server `now`
// from another server (store::first_difference, as merge compares them: its
// origin, model, version, fingerprint engine or a fact both know). Resumed,
// the run would count this server's answers with theirs in one group, and
// the database would say the newer server gave them all.
util::Result<void> check_same_server(const RunContext& ctx, const ServerRecord& now,
                                     store::Store& db) {
    const auto& name = now.row.name;
    auto stored = db.answered_server(name);
    if (!stored) {
        return stored.error();
    }
    if (!*stored) {
        return {};
    }
    const auto identity =
        store::server_identity(now.row.url, now.row.model, now.row.info_json, now.facts_json);
    auto d = store::first_difference(**stored, identity);
    if (!d) {
        d = store::simulator_difference(**stored, identity);
    }
    // Compared here, not by merge: shards run on other machines launch
    // their servers from other paths.
    if (!d && !(*stored)->launch.empty() && !identity.launch.empty()) {
        if (auto l = store::launch_difference((*stored)->launch, identity.launch)) {
            d = store::ServerDifference{"launch command", l->first, l->second};
        } else {
            d = store::launch_file_difference(**stored, identity);
        }
    }
    if (!d) {
        return {};
    }
    return make_error(ErrorKind::usage,
                      fmt::format("server '{}' has {} {}, but the responses {} holds under that "
                                  "name came from one with {} {}; counting its answers with "
                                  "theirs would mix two servers in one group: give it another "
                                  "name, or another --db",
                                  name, d->what, util::one_line(d->b, 200), ctx.config.db, d->what,
                                  util::one_line(d->a, 200)));
}

// Records server `r` in `db` with its log (`log_path`, `log_text`), and
// prints the conflicts among its facts.
util::Result<void> record_server(const RunContext& ctx, const ServerRecord& r, store::Store& db,
                                 const std::string& log_path, const std::string& log_text) {
    if (auto put = db.put_server(r.row); !put) {
        return put;
    }
    if (r.fp) {
        for (const auto& c : r.fp->conflicts) {
            // One line: a log-contradicts-server message quotes the log.
            ctx.log << fmt::format("server '{}': CONFLICT {}: {}\n", r.row.name, c.name,
                                   util::one_line(c.message, 400));
        }
    }
    // A resume attached without --server-log overwrote the log an earlier
    // run stored, and its facts: the database then could not tell that its
    // first answers came from another KV-cache type (engine audit). They are
    // kept, and the run says it cannot check them, also for a server with
    // no /props to read facts from (vLLM).
    const auto put = db.put_server_log(r.row.name, log_path, ctx.inputs.redactor.redacted(log_text),
                                       r.facts_json);
    if (!put) {
        return put.error();
    }
    if (!*put) {
        ctx.log << fmt::format("warning: server '{}' has no --server-log in this "
                               "run, so what it runs now is not checked against the log an "
                               "earlier run stored for it, which is kept with its facts; pass "
                               "--server-log {}=FILE to check\n",
                               r.row.name, r.row.name);
    }
    return util::Result<void>{};
}

// The phases: all servers at once, or one at a time (--sequential-servers).
std::vector<std::vector<size_t>> phases_of(const RunConfig& config) {
    std::vector<std::vector<size_t>> phases;
    for (size_t i = 0; i < config.servers.size(); ++i) {
        if (config.sequential_servers || phases.empty()) {
            phases.emplace_back();
        }
        phases.back().push_back(i);
    }
    return phases;
}

// What the phases share: the servers, what preflight learned, the launched
// processes, the store and its writer, the sender, the counts.
struct RunState {
    std::vector<ServerState>& servers;
    std::vector<ServerInfo>& infos;
    const std::vector<std::string>& attached_logs;
    // The record of each server diffeval does not launch (checked before
    // the run); nullopt for a launched one.
    const std::vector<std::optional<ServerRecord>>& attached;
    Launched& launched;
    store::Store& db;
    store::Writer& writer;
    Sender& sender;
    int64_t run_id;
    RunSummary& summary;
};

// Start `phase`'s servers that diffeval launches into `launched`, logging
// beside the database unless a log path is given.
util::Result<void> launch_servers(const RunContext& ctx, const std::vector<size_t>& phase,
                                  Launched& launched) {
    const auto& db_path = std::filesystem::path(ctx.config.db);
    const auto log_dir = db_path.parent_path() / (db_path.stem().string() + "-logs");
    for (size_t si : phase) {
        const auto& spec = ctx.config.servers[si];
        if (spec.launch.empty()) {
            continue;
        }
        auto path = spec.log_path.empty() ? log_dir / (spec.name + ".log")
                                          : std::filesystem::path(spec.log_path);
        auto scripts = launch_files(spec);
        // A kept server must outlive the run; any other goes with it.
        auto ls =
            LaunchedServer::start(spec, path, ctx.config.keep_servers ? Outlive::yes : Outlive::no);
        if (!ls) {
            return ls.error();
        }
        ctx.log << fmt::format("starting server '{}' (log: {})\n", spec.name, path.string());
        launched.servers[si] = std::move(*ls);
        launched.scripts[si] = std::move(scripts);
    }
    return {};
}

// Wait until `phase`'s launched servers are healthy, then preflight them.
util::Result<Next> check_launched(const RunContext& ctx, const std::vector<size_t>& phase,
                                  RunState& st) {
    for (size_t si : phase) {
        if (!st.launched.servers[si]) {
            continue;
        }
        if (auto r = st.launched.servers[si]->wait_healthy(ctx.options.stop_requested); !r) {
            if (ctx.stopped()) {
                return Next::stop;
            }
            return ctx.redacted(r.error());
        }
        if (ctx.config.preflight) {
            auto r = preflight_one(ctx, si, st.infos[si], st.servers[si]);
            if (!r || *r == Next::stop) {
                return r;
            }
        }
        if (auto r = check_same_server(ctx,
                                       server_record(ctx, si, st.infos[si],
                                                     st.launched.servers[si]->log_text(),
                                                     st.launched.scripts[si]),
                                       st.db);
            !r) {
            // Not recorded on the way out: the database goes on saying
            // what the server its responses came from was. Ending the
            // object stops the server, unless it is to be kept.
            if (ctx.config.keep_servers) {
                st.launched.servers[si]->release();
            }
            st.launched.servers[si].reset();
            return r.error();
        }
    }
    return Next::go_on;
}

// The phase's servers, by name, when the run has several phases.
std::string phase_names(const RunContext& ctx, const std::vector<size_t>& phase, size_t n_phases) {
    if (n_phases < 2) {
        return "";
    }
    std::vector<std::string> names;
    for (size_t si : phase) {
        names.push_back(ctx.config.servers[si].name);
    }
    return fmt::format(" ({})", fmt::join(names, ", "));
}

// Record `phase`'s attached servers and give each its planner; prints and
// returns how many requests the phase's plan holds.
util::Result<int64_t> plan_phase(const RunContext& ctx, const std::vector<size_t>& phase,
                                 size_t n_phases, RunState& st) {
    int64_t planned = 0;
    for (size_t si : phase) {
        if (!st.launched.servers[si]) {
            if (auto r = record_server(ctx, *st.attached[si], st.db,
                                       ctx.config.servers[si].attached_log, st.attached_logs[si]);
                !r) {
                return r.error();
            }
        }
        auto planner = Planner::create(ctx, si, st.infos[si]);
        if (!planner) {
            return planner.error();
        }
        if (auto r = (*planner)->check_stored_groups(st.db); !r) {
            return r.error();
        }
        planned += (*planner)->total();
        st.servers[si].planner = std::move(*planner);
    }
    ctx.log << fmt::format("diffeval run: {} planned{}; those already stored are skipped as the "
                           "plan is read\n",
                           util::counted(planned, "request"), phase_names(ctx, phase, n_phases));
    return planned;
}

// What the phase read of its plan (`total` requests), found stored and sent.
void print_phase_counts(const RunContext& ctx, const std::vector<size_t>& phase, size_t n_phases,
                        const RunState& st, const RunSummary& before, int64_t total) {
    const auto& s = st.summary;
    const int64_t dropped = s.dropped_in_flight - before.dropped_in_flight;
    const int64_t unreached = s.unreached - before.unreached;
    // A request whose every attempt was refused at connect was never sent:
    // "3 sent" to a port nothing listens on (reliability audit).
    const int64_t sent =
        s.succeeded + s.failed - before.succeeded - before.failed + dropped - unreached;
    const bool whole = std::all_of(phase.begin(), phase.end(),
                                   [&](size_t si) { return st.servers[si].planner->read_all(); });
    const int64_t read = s.planned - before.planned;
    // A stopped run's requests in flight were sent too: "11 sent" when the
    // server had 15 read as if the other 4 never left.
    ctx.log << fmt::format(
        "diffeval run: {} {} planned, {} already stored (skipped), {} sent{}{}{}\n",
        whole ? fmt::format("{}", read) : fmt::format("{} of {}", read, total),
        util::noun(whole ? read : total, "request"), s.skipped - before.skipped, sent,
        dropped > 0 ? fmt::format(" ({} of them unanswered when the run stopped: sent again by "
                                  "the next run)",
                                  dropped)
                    : std::string(),
        unreached > 0 ? fmt::format(", {} never sent (every attempt refused at connect; stored "
                                    "as failed)",
                                    unreached)
                      : std::string(),
        phase_names(ctx, phase, n_phases));
}

// A line per server of `phase` that sent bytes no request asked for on a
// connection (a response too many, from the server or a proxy before it):
// a request written there a moment before they came read them as its
// answer, and nothing tells the two apart; the connection was shut once they
// were seen (a hostile-server audit stored 5 of 10 answers from another
// request's response so, with no word).
void warn_unasked_bytes(const RunContext& ctx, const std::vector<size_t>& phase,
                        const RunSummary& summary) {
    for (size_t si : phase) {
        const auto& spec = ctx.config.servers[si];
        const auto it = summary.unasked_bytes.find(spec.name);
        if (it == summary.unasked_bytes.end()) {
            continue;
        }
        ctx.log << fmt::format(
            "diffeval run: WARNING: server '{}' sent bytes no request asked for on {} (a "
            "response too many, from the server or a proxy); an answer read on such a connection "
            "just before may be another request's: check its stored answers against their "
            "questions, and the server\n",
            spec.name, util::counted(it->second, "connection"));
    }
}

// Stop `phase`'s launched servers (unless kept) and record them with their logs.
void stop_launched(const RunContext& ctx, const std::vector<size_t>& phase, RunState& st) {
    for (size_t si : phase) {
        auto& ls = st.launched.servers[si];
        if (!ls) {
            continue;
        }
        if (!ctx.config.keep_servers) {
            // An interrupt while it stops kills it: the second of an
            // interrupted run, the first of one that ended.
            const bool interrupted = ctx.stopped();
            const auto hurry = [&] {
                return interrupted
                           ? ctx.options.kill_requested && ctx.options.kill_requested->load()
                           : ctx.stopped();
            };
            ls->stop(std::chrono::milliseconds{10'000}, hurry, [&] {
                ctx.log << fmt::format("diffeval run: waiting up to 10 s for server '{}' to stop "
                                       "(interrupt {}to kill it now)\n",
                                       ctx.config.servers[si].name, interrupted ? "again " : "");
            });
        }
        // A launch this run sent nothing (its requests all answered
        // already) keeps the record of the launch that answered them: its
        // log was replaced by one that served no request.
        bool keep_stored = false;
        if (st.servers[si].sent == 0) {
            const auto answered = st.db.answered_server(ctx.config.servers[si].name);
            keep_stored = answered && answered->has_value();
        }
        if (keep_stored) {
            ctx.log << fmt::format("diffeval run: server '{}' was sent nothing; the log stored "
                                   "with its responses is kept\n",
                                   ctx.config.servers[si].name);
        } else {
            const auto log_text = ls->log_text();
            (void)record_server(
                ctx, server_record(ctx, si, st.infos[si], log_text, st.launched.scripts[si]), st.db,
                ls->log_path().string(), log_text);
        }
        if (ctx.config.keep_servers) {
            // The object's end would stop it: a kept server was stopped
            // when diffeval exited, though cli.md says it is left running.
            ls->release();
        }
    }
}

// The requests `phase` plans when every one of them is answered in the
// database already, so that launching its servers would send nothing;
// nullopt otherwise, or when that cannot be known before a launch. A rerun
// of a finished experiment launched every server (a model load for vLLM)
// to send nothing, and a server that could not start (its port taken)
// failed a run with nothing to do (reliability audit). Only a phase whose
// servers are all launched, each with the launch command its stored
// responses came from, without the probe (whose places are counted
// elsewhere); the bodies are rendered with the model the database stores
// for the name, and checked against the stored ones as planning does.
std::optional<int64_t> all_answered(const RunContext& ctx, const std::vector<size_t>& phase,
                                    store::Store& db) {
    const auto& config = ctx.config;
    if (config.probe) {
        return std::nullopt;
    }
    int64_t total = 0;
    for (size_t si : phase) {
        const auto& spec = config.servers[si];
        if (spec.launch.empty()) {
            return std::nullopt;
        }
        auto stored = db.answered_server(spec.name);
        if (!stored || !*stored) {
            return std::nullopt;
        }
        const auto hp = http::host_port(spec.url);
        if (store::launch_difference(
                (*stored)->launch,
                store::launch_identity(spec.env, spec.launch, hp ? hp->port : ""))) {
            return std::nullopt;
        }
        ServerInfo info;
        if (!(*stored)->model.empty()) {
            info.served_model = (*stored)->model;
        }
        auto planner = Planner::create(ctx, si, info);
        if (!planner || !(*planner)->check_stored_groups(db)) {
            return std::nullopt;
        }
        int64_t answered = 0;
        for (const auto& f : ctx.inputs.framings) {
            for (int max_tokens : config.max_tokens) {
                auto n = db.answered_places(
                    spec.name, ctx.inputs.dataset.name, f.name, max_tokens, config.repeats,
                    static_cast<int64_t>(ctx.inputs.n_questions),
                    config.shard ? config.shard->index : 0, config.shard ? config.shard->count : 0);
                if (!n) {
                    return std::nullopt;
                }
                answered += *n;
            }
        }
        if (answered != (*planner)->total()) {
            return std::nullopt;
        }
        total += answered;
    }
    return total;
}

// Pass 5, per phase: launch and check its servers, plan, send and store,
// stop the launched servers. An error marks the run failed.
util::Result<Next> run_phase(const RunContext& ctx, const std::vector<size_t>& phase,
                             size_t n_phases, RunState& st) {
    const auto fail = [&](util::Error e) -> util::Result<Next> {
        stop_launched(ctx, phase, st);
        st.writer.close();
        (void)st.db.mark_run_failed(st.run_id);
        return e;
    };
    if (const auto answered = all_answered(ctx, phase, st.db)) {
        st.summary.planned += *answered;
        st.summary.skipped += *answered;
        std::vector<std::string> names;
        for (size_t si : phase) {
            names.push_back(fmt::format("'{}'", ctx.config.servers[si].name));
        }
        ctx.log << fmt::format("diffeval run: {} planned, {} already stored (skipped), 0 sent: "
                               "with nothing to send, server{} {} {} not launched{}\n",
                               util::counted(*answered, "request"), *answered,
                               names.size() == 1 ? "" : "s", fmt::join(names, ", "),
                               names.size() == 1 ? "was" : "were",
                               phase_names(ctx, phase, n_phases));
        return Next::go_on;
    }
    if (auto r = launch_servers(ctx, phase, st.launched); !r) {
        return fail(r.error());
    }
    auto healthy = check_launched(ctx, phase, st);
    if (!healthy) {
        return fail(healthy.error());
    }
    if (*healthy == Next::stop) {
        st.summary.interrupted = true;
        stop_launched(ctx, phase, st);
        return Next::stop;
    }
    // Planning refuses a request that would take another body's place: a
    // run that stored nothing then leaves no row, as exit 2 promises
    // nothing stored changes (its row would count the places it asked for
    // as never planned, and no rerun could plan them).
    const auto refused = [&](util::Error e) -> util::Result<Next> {
        if (e.kind != ErrorKind::usage) {
            return fail(std::move(e));
        }
        stop_launched(ctx, phase, st);
        st.writer.close();
        if (!st.db.forget_run(st.run_id)) {
            (void)st.db.mark_run_failed(st.run_id);
        }
        return e;
    };
    auto planned = plan_phase(ctx, phase, n_phases, st);
    if (!planned) {
        return refused(planned.error());
    }
    const RunSummary before = st.summary;
    auto stored = st.sender.send_phase(phase, st.servers, st.launched, st.db, st.writer, st.summary,
                                       *planned);
    if (!stored) {
        return refused(stored.error());
    }
    print_phase_counts(ctx, phase, n_phases, st, before, *planned);
    warn_unasked_bytes(ctx, phase, st.summary);
    for (size_t si : phase) {
        st.servers[si].planner.reset();
    }
    stop_launched(ctx, phase, st);
    return *stored && !st.summary.interrupted ? Next::go_on : Next::stop;
}

// What each response is classified and scored with as it is stored, as the
// scoring stage would score it: nothing when the run brings scorer files
// (storing them after the run scores everything). Stored scorers this
// diffeval cannot load refuse the run before anything is sent or recorded:
// the stage after the run refused them, with its responses stored unscored.
util::Result<std::unique_ptr<analysis::StoredScoring>> scoring_as_stored(const RunContext& ctx,
                                                                         store::Store& db) {
    if (ctx.config.scorer_files.empty()) {
        return analysis::StoredScoring::open(db);
    }
    if (auto registry = analysis::stored_registry(db); !registry) {
        return registry.error();
    }
    return std::unique_ptr<analysis::StoredScoring>();
}

// `row`'s classification and scores, as the scoring stage computes them from
// what is stored (the redacted text); left to the stage for probes, and when
// classifying needs the request's stop strings.
void derive(const datasets::Dataset& dataset, analysis::ResponseScorer& scorer,
            store::ResponseRow& row) {
    if (row.probe || row.question_idx < 0 ||
        static_cast<size_t>(row.question_idx) >= dataset.test.size()) {
        return;
    }
    const store::ResponseToScore r{0,
                                   dataset.name,
                                   row.question_idx,
                                   row.text.value_or(""),
                                   row.reasoning.value_or(""),
                                   row.finish_reason.value_or(""),
                                   row.stop_reason,
                                   row.ok,
                                   dataset.test[static_cast<size_t>(row.question_idx)].answer,
                                   row.stop_field,
                                   0,
                                   false};
    if (!analysis::ResponseScorer::needs_stop_strings(r)) {
        row.derived = scorer.derive(r, {});
    }
}

// "5 responses received were not stored": what a failed store lost.
std::string lost_words(int64_t lost) {
    return fmt::format("{} received {} not stored", util::counted(lost, "response"),
                       lost == 1 ? "was" : "were");
}

// The database file was deleted, renamed or replaced while the run wrote
// it. What the run stored is in the file it opened (the store copies its
// log there when it closes); the file now under the name is not written,
// not even by the scoring stage, which the error skips.
// `lost`: responses received and never stored, said as a full disk says
// them (a renamed database's run lost 2 to 7 without a word: reliability
// audit).
util::Result<RunSummary> moved_away(const RunContext& ctx, store::Store& db, int64_t run_id,
                                    int64_t lost) {
    (void)db.mark_run_failed(run_id);
    return make_error(ErrorKind::io,
                      fmt::format("{} {}; the run stopped sending at once and wrote nothing into "
                                  "the file now under that name{}. What it stored is in the file "
                                  "it opened: under its new name if that was renamed, else "
                                  "gone. Run the same command again to store into {}",
                                  ctx.config.db, store::k_moved,
                                  lost > 0 ? fmt::format(" ({})", lost_words(lost)) : std::string(),
                                  ctx.config.db));
}

// Pass 6: flush and close the writer, close the run with its status, and
// report a store failure with what it lost.
util::Result<RunSummary> finish(const RunContext& ctx, store::Store& db, store::Writer& writer,
                                int64_t pushed, Clock::time_point start, RunSummary summary) {
    writer.close();
    summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (db.moved() || (writer.error() && store::is_moved(*writer.error()))) {
        return moved_away(ctx, db, summary.run_id, pushed - writer.committed());
    }
    if (auto err = writer.error()) {
        const int64_t lost = pushed - writer.committed();
        const bool marked = db.mark_run_failed(summary.run_id);
        const bool full = store::is_disk_full(*err);
        return make_error(
            ErrorKind::io,
            fmt::format("writing responses to {} failed: {}; stopped sending at once. {}; "
                        "the run is {}. {}, then rerun the same command to send what has no "
                        "response",
                        ctx.config.db, full ? std::string(store::k_disk_full_words) : *err,
                        lost_words(lost),
                        marked ? "marked failed"
                               : "still marked running (the next run marks it killed)",
                        full ? "Free space" : "Free space or fix the file"));
    }
    (void)db.end_run(summary.run_id, summary.interrupted                          ? "interrupted"
                                     : summary.failed || !summary.crashed.empty() ? "incomplete"
                                                                                  : "complete");
    // What this run left unsent is its own to say (interrupted, crashed);
    // otherwise what is unsent in its servers' groups an earlier run planned.
    // Only a run that stopped early leaves such requests: the runs table
    // says whether one did, where completeness reads every request.
    const auto& servers = ctx.config.servers;
    const auto ours = [&](const store::GroupCompleteness& g) {
        return std::any_of(servers.begin(), servers.end(),
                           [&](const auto& s) { return s.name == g.server; });
    };
    if (summary.interrupted || !summary.crashed.empty()) {
        return summary;
    }
    if (const auto stopped = store::other_run_stopped_early(db, summary.run_id);
        stopped && *stopped) {
        if (auto groups = store::completeness(db)) {
            for (const auto& g : *groups) {
                if (g.unsent > 0 && ours(g)) {
                    summary.unsent_by_others.emplace_back(
                        analysis::group_label(g.server, g.framing, g.max_tokens), g.unsent);
                }
            }
        }
    }
    return summary;
}

// How far a run that stopped with an error got: its run row (0: none was
// recorded), and whether it reached its finish, whose message says all.
struct Recorded {
    int64_t run_id = 0;
    bool finished = false;
};

// A server diffeval attached to that restarted while the run sent (a launch
// in its --server-log past where the file ended when the run read it): its
// answers came from two launches. Said, and stored as conflict
// `restarted-mid-run` (which reports show and `gate --fail-on-conflict`
// fails) when a fact its log states changed: an engine audit's server
// restarted with `-ctk q4_0` mid-run was stored as the f16 server it had
// been, exit 0 and not a word.
void check_attached_restarts(const RunContext& ctx, store::Store& db,
                             const std::vector<std::optional<ServerRecord>>& attached,
                             const std::vector<std::optional<uint64_t>>& log_sizes) {
    for (size_t si = 0; si < attached.size(); ++si) {
        const auto& spec = ctx.config.servers[si];
        if (!attached[si] || spec.attached_log.empty() || !log_sizes[si]) {
            continue;
        }
        const auto launches = launch_offsets(spec.attached_log, *log_sizes[si]);
        if (launches.empty()) {
            continue;
        }
        // The first fact a later launch states otherwise.
        std::optional<fingerprint::FactDifference> changed;
        const auto& before = attached[si]->fp;
        for (size_t k = 0; k < launches.size() && before && !changed; ++k) {
            auto text = read_server_log(spec.attached_log, launches[k]);
            if (!text) {
                continue;
            }
            if (k + 1 < launches.size()) {
                text->resize(std::min<uint64_t>(text->size(), launches[k + 1] - launches[k]));
            }
            if (const auto now = fingerprint::fingerprint_log(*text)) {
                changed = fingerprint::first_fact_difference(*before, *now);
            }
        }
        const auto where =
            fmt::format("{} in {} after the run read it",
                        util::counted(launches.size(), "new launch"), spec.attached_log);
        if (!changed) {
            ctx.log << fmt::format("note: server '{}' restarted during the run ({}); {}\n",
                                   spec.name, where,
                                   before ? "the facts its log states read the same"
                                          : "its log stated no fact to compare");
            continue;
        }
        const auto& [fact, was, now] = *changed;
        auto fp = *before;
        fp.conflicts.push_back(
            {"restarted-mid-run",
             fmt::format("the server restarted during the run ({}) with {} {} where it had {}: "
                         "its answers came from both launches",
                         where, fact, now, was),
             {fmt::format("{}={}", fact, was), fmt::format("{}={}", fact, now)}});
        // The log stored at the start stays: only its facts gain the conflict.
        (void)db.put_server_facts(spec.name,
                                  ctx.inputs.redactor.redacted(fingerprint::to_json(fp).dump()));
        ctx.log << fmt::format("server '{}': CONFLICT restarted-mid-run: {}\n", spec.name,
                               util::one_line(fp.conflicts.back().message, 400));
    }
}

// Passes 4 to 6 on the open store `db`: record the run (into `recorded`),
// then per phase launch, plan, send and store, then finish.
util::Result<RunSummary> record_and_send(const RunContext& ctx, store::Store& db,
                                         std::vector<ServerState>& servers,
                                         std::vector<ServerInfo>& infos,
                                         const std::vector<std::string>& attached_logs,
                                         Recorded& recorded) {
    const auto& config = ctx.config;
    // The ids a run writes come from this database (a request's row, the
    // response just inserted, the run's row), so SQLite need not look each
    // up again; tests run PRAGMA foreign_key_check after killed and resumed
    // runs.
    if (auto r = db.check_references(false); !r) {
        return r.error();
    }
    // A server diffeval does not launch is what it is already: one that is
    // not the server whose responses its name holds is refused before the
    // run is recorded. A launched one is checked once it is up.
    std::vector<std::optional<ServerRecord>> attached(servers.size());
    // Where each attached log ends now: a launch past it is a restart.
    std::vector<std::optional<uint64_t>> log_sizes(servers.size());
    for (size_t si = 0; si < servers.size(); ++si) {
        if (config.servers[si].launch.empty()) {
            if (!config.servers[si].attached_log.empty()) {
                std::error_code ec;
                const auto size = std::filesystem::file_size(config.servers[si].attached_log, ec);
                if (!ec) {
                    log_sizes[si] = size;
                }
            }
            attached[si] = server_record(ctx, si, infos[si], attached_logs[si]);
            // An attached log the server contradicts is the wrong file:
            // stored, the report would say this server ran another's setup.
            if (const auto* c = log_contradiction(attached[si]->fp)) {
                return make_error(
                    ErrorKind::usage,
                    fmt::format("--server-log {}={}: {}; attach the log of the "
                                "server now at {}, or leave --server-log out",
                                config.servers[si].name, config.servers[si].attached_log,
                                util::one_line(c->message, 400),
                                ctx.inputs.redactor.redacted(config.servers[si].url)));
            }
            // A log whose last launch stopped is not of the server answering
            // at the URL: an audit's attached log of an f16 server that had
            // exited gave a q4_0 server's answers the f16 facts.
            if (attached[si]->fp && !attached[si]->fp->stopped.empty()) {
                return make_error(
                    ErrorKind::usage,
                    fmt::format("--server-log {}={}: the server that wrote it has stopped (its "
                                "last launch ends \"{}\"), and a server answers at {}: attach "
                                "the log of the server now running there, or leave "
                                "--server-log out",
                                config.servers[si].name, config.servers[si].attached_log,
                                util::one_line(attached[si]->fp->stopped, 120),
                                ctx.inputs.redactor.redacted(config.servers[si].url)));
            }
            if (auto r = check_same_server(ctx, *attached[si], db); !r) {
                return r.error();
            }
        }
    }
    auto scoring = scoring_as_stored(ctx, db);
    if (!scoring) {
        return scoring.error();
    }
    auto run_id = record_run(ctx, db);
    if (!run_id) {
        return run_id.error();
    }
    recorded.run_id = *run_id;
    // Per phase: launch and check servers, plan, send and store, stop them.
    RunSummary summary;
    summary.run_id = *run_id;
    store::Writer::Prepare prepare;
    if (*scoring) {
        prepare = [&ctx, &scorer = **scoring](store::ResponseRow& row) {
            derive(ctx.inputs.dataset, scorer.scorer(), row);
        };
    }
    store::Writer writer(db, std::move(prepare));
    Sender sender(ctx, *run_id);
    const auto start = Clock::now();
    Launched launched{std::vector<std::unique_ptr<LaunchedServer>>(servers.size()),
                      std::vector<bool>(servers.size(), false),
                      std::vector<nlohmann::json>(servers.size())};
    RunState st{servers, infos,  attached_logs, attached, launched,
                db,      writer, sender,        *run_id,  summary};
    // A shard that holds no question is recorded and sends nothing: its
    // servers are not launched.
    const auto phases = questions_in_shard(config.shard, ctx.inputs.n_questions) > 0
                            ? phases_of(config)
                            : std::vector<std::vector<size_t>>{};
    for (const auto& phase : phases) {
        if (ctx.stopped()) {
            summary.interrupted = true;
            break;
        }
        auto next = run_phase(ctx, phase, phases.size(), st);
        if (!next) {
            return next.error();
        } else if (*next == Next::stop) {
            break;
        }
    }
    // Finish: close the writer and the run, report a store failure.
    recorded.finished = true;
    auto done = finish(ctx, db, writer, sender.pushed(), start, summary);
    if (done) {
        check_attached_restarts(ctx, db, attached, log_sizes);
    }
    return done;
}

// The one line for a run stopped by a full disk before it could store what
// it planned (opening or migrating the database, recording the run,
// planning): what became of the database `store` (null: never opened),
// which the run `created` itself, and of its run row `run_id` (0: none).
// A database the run created that holds no response goes: everything in it
// (the schema, the dataset's questions, the plan) the next run writes again.
util::Error full_while_planning(const RunContext& ctx, std::unique_ptr<store::Store> store,
                                bool created, int64_t run_id) {
    const auto& db = ctx.config.db;
    std::string became;
    if (created && (!store || store->holds_no_responses())) {
        store.reset();
        store::remove_with_sidecars(db);
        became = fmt::format("{} held nothing yet and was removed", db);
    } else if (run_id > 0) {
        // The phase tried already, while the disk was as full as now.
        const bool marked = store->mark_run_failed(run_id);
        // A plan stored in parts is sent part by part: the run may have
        // stored answers, and its planned requests not sent yet read as
        // wrong answers meanwhile (a hostile-input audit: a group read 29.7%
        // where it had read 97.5%, and the line said nothing of it).
        const int64_t stored = store->run_responses(run_id);
        const auto kept =
            stored > 0
                ? fmt::format("what was stored before is kept, with the {} it stored "
                              "before it stopped; the requests it planned and did not "
                              "send count as wrong answers until they are sent ({})",
                              util::counted(stored, "response"), analysis::k_unanswered_counting)
                : std::string("what was stored before is kept");
        became = marked ? fmt::format("the run is marked failed and {}", kept)
                        : fmt::format("{}; the run is still marked running (the next run marks "
                                      "it killed)",
                                      kept);
    } else {
        became = "nothing stored in it changed";
    }
    return make_error(ErrorKind::io,
                      fmt::format("cannot write {}: {}, so the run stopped while planning its "
                                  "requests; {}. Free space, then run the same command again",
                                  db, store::k_disk_full_words, became));
}

} // namespace

std::string stored_words(const RunSummary& s) {
    const int64_t all = s.succeeded + s.failed;
    if (s.probe_readings == 0) {
        return util::counted(all, "response");
    }
    return fmt::format("{} and {}", util::counted(all - s.probe_readings, "response"),
                       util::counted(s.probe_readings, "probe response"));
}

util::Result<RunSummary> run(const RunConfig& config, const RunOptions& options,
                             std::ostream& log) {
    const auto began = Clock::now();
    // Load inputs: everything that can be wrong before anything is sent.
    auto inputs = load_inputs(config);
    if (!inputs) {
        return inputs.error();
    }
    auto servers = server_states(config);
    if (!servers) {
        return servers.error();
    }
    inputs->redactor = secrets_of(config);
    if (auto vars = unredactable_keys(config); !vars.empty()) {
        log << fmt::format("warning: the API key in {} is shorter than {} characters: it is sent, "
                           "but cannot be redacted from what is stored and printed\n",
                           fmt::join(vars, ", "), util::Redactor::k_min_secret);
    }
    const RunContext ctx{config, options, log, *inputs};
    // A CI matrix with more shards than questions is valid: the other
    // shards hold them. This one says so, and is still recorded, so that
    // its merged database shows the shard ran.
    if (config.shard && questions_in_shard(config.shard, inputs->n_questions) == 0) {
        log << fmt::format("diffeval run: shard {}/{} holds none of the {} (shard I/N holds each "
                           "question q with q mod N = I), so this run sends nothing and "
                           "launches no server; it is recorded as complete\n",
                           config.shard->index, config.shard->count,
                           util::counted(inputs->n_questions, "question"));
    }
    // Take the database lock: a second run sends nothing.
    auto lock = lock_database(ctx);
    if (!lock) {
        return lock.error();
    } else if (!*lock) {
        return interrupted_early(began);
    }
    // Preflight the servers diffeval does not launch.
    std::vector<ServerInfo> infos(servers->size());
    std::vector<std::string> attached_logs(servers->size());
    if (auto r = preflight_servers(ctx, *servers, infos, attached_logs); !r) {
        return r.error();
    } else if (*r == Next::stop) {
        return interrupted_early(began);
    }
    // A framing that always names the model needs one from --model,
    // preflight or the database: found out here, before the database is
    // written, not at planning with a failed run row and the questions
    // stored.
    take_stored_models(ctx, infos);
    if (auto r = check_body_models(ctx, infos); !r) {
        return r.error();
    }
    // Record the run: open the store, the run row, its questions, what is
    // answered; then send and store. A full disk is said in one line, with
    // what became of the database.
    std::error_code ec;
    const bool created = !std::filesystem::exists(std::filesystem::symlink_status(config.db, ec));
    auto store = store::Store::open(config.db, store::Store::Mode::read_write);
    if (!store) {
        return store::is_disk_full(store.error()) ? full_while_planning(ctx, nullptr, created, 0)
                                                  : store.error();
    }
    // The file this run created is locked too, whatever names it gets.
    if (auto r = (*lock)->hold_database_file(config.db); !r) {
        return r.error();
    }
    // Counting what is answered reads the requests: only when the whole
    // plan would not fit.
    if (!created && !check_plan_size(config, inputs->n_questions)) {
        std::vector<std::string> names;
        for (const auto& spec : config.servers) {
            names.push_back(spec.name);
        }
        auto stored = (*store)->answered_requests(names);
        if (!stored) {
            return stored.error();
        }
        if (auto r = check_plan_size(config, inputs->n_questions, *stored); !r) {
            return r.error();
        }
    }
    Recorded recorded;
    auto result = record_and_send(ctx, **store, *servers, infos, attached_logs, recorded);
    // Refused before anything was answered (an attached log of a stopped
    // server, another server under a stored name): a database this run
    // created goes, as one refused earlier never was (an engine audit
    // found it left, empty, with its lock file).
    if (!result && !recorded.finished && created && !store::is_disk_full(result.error()) &&
        (*store)->holds_no_responses()) {
        store->reset();
        store::remove_with_sidecars(config.db);
        return result;
    }
    if (result || recorded.finished || !store::is_disk_full(result.error())) {
        return result;
    }
    return full_while_planning(ctx, std::move(*store), created, recorded.run_id);
}

} // namespace diffeval::engine
