// What a real llama-server showed diffeval getting wrong, each against the
// server launched by diffeval: idle keep-alive connections starving its small
// HTTP thread pool, errors retried that no retry can fix, a prompt longer than
// the context sent anyway, and a log no fingerprint rules recognised.
#include "engine.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

using e2e::query;

namespace {

std::string q(const std::string& s) {
    return nlohmann::json(s).dump();
}

// Settings for the outcome questions in `dir` (raw framing only).
std::string outcome_settings(const std::filesystem::path& dir, const std::string& more) {
    auto test = engine_test::write_outcome_dataset(dir);
    return "framings = [\"raw\"]\ndataset = " + q(test.string()) +
           "\nfewshot_from = " + q((dir / "train.jsonl").string()) + "\n" + more;
}

// `diffeval run` of the first `limit` questions of `test` (few-shots from
// `dir`/train.jsonl) against `server` under the name "llama", into `db`.
e2e::Outcome run_as_llama(const engine_test::RunningServer& server,
                          const std::filesystem::path& dir, const std::filesystem::path& test,
                          const std::filesystem::path& db, const std::string& limit) {
    return e2e::run({"run", "--server", "llama=" + server.url(), "--framing", "raw", "--max-tokens",
                     "8", "--limit", limit, "--dataset", test.string(), "--fewshot-from",
                     (dir / "train.jsonl").string(), "--db", db.string(), "--quiet"});
}

} // namespace

// At concurrency 64, 48 requests against a server with 2 slots (4 HTTP
// threads) used to wait behind idle keep-alive connections for the server's
// 5 s keep-alive timeout (11 of 48 did, 6.3 s for the run instead of 1.4 s);
// now at most the slots are in flight, so no request waits for anything but
// the model.
TEST(EngineConnections, HighConcurrencyNeverWaitsBehindIdleConnections) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-connections");
    engine_test::Server server;
    server.slots = 2;
    auto config = dir / "experiment.toml";
    std::ofstream(config) << engine_test::experiment(
        root, {server}, outcome_settings(dir, "max_tokens = [64]\nrepeats = 8\nconcurrency = 64"));
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--config", config.string(), "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    EXPECT_NE(o.err.find("/props total_slots is 2: at most 2 in flight instead of 64"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), "48");
    // The keep-alive timeout is 5 s; a request that waited for it shows it.
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE latency_ms > 4000"), "0")
        << query(db, "SELECT max(latency_ms) FROM v_responses");
}

TEST(EngineConnections, ConcurrencyAutoReadsTheServersSlots) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-auto");
    engine_test::Server server;
    server.slots = 3;
    server.context = 3 * 2048;
    auto config = dir / "experiment.toml";
    std::ofstream(config) << engine_test::experiment(
        root, {server}, outcome_settings(dir, "max_tokens = [8]\nconcurrency = \"auto\""));
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--config", config.string(), "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    EXPECT_NE(o.err.find("--concurrency auto: 3 in flight (the server's /props total_slots)"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(query(db, "SELECT json_extract(config_json, '$.concurrency') FROM runs"), "auto");
}

// Four slots sharing one KV cache of 512 cells (-kvu), four answers of up to
// 300 tokens at once: llama-server answers HTTP 500 "Context size has been
// exceeded." That is stored at once, not retried three times.
TEST(EngineErrors, ContextExceededIsStoredAtOnceNotRetried) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-context-500");
    engine_test::Server server;
    server.slots = 4;
    server.context = 512;
    server.extra_args = {"-kvu"};
    auto config = dir / "experiment.toml";
    std::ofstream(config) << engine_test::experiment(
        root, {server},
        outcome_settings(dir, "max_tokens = [300]\nrepeats = 4\nlimit = 5\nconcurrency = 4"));
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--config", config.string(), "--db", db.string(), "--quiet",
                       "--retry-backoff-ms", "200"});
    ASSERT_EQ(o.exit_code, 1) << o.err << o.out; // some requests failed
    EXPECT_NE(query(db, "SELECT count(*) FROM v_responses WHERE error LIKE "
                        "'HTTP 500: Context size has been exceeded%'"),
              "0");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE error LIKE "
                        "'HTTP 500: Context size has been exceeded%' AND attempts > 1"),
              "0");
}

// Four slots sharing one KV cache of 1,024 cells (-kvu), as a default
// llama-server shares 4,096 among four: every request (a prompt of at most
// 436 tokens and 64 to answer) fits it alone, four at once do not, and
// llama-server answers some HTTP 500 "Context size has been exceeded." as
// their answers grow. Those are retried with fewer in flight, and every
// request ends answered (before: 16 of 20 stored as failed, each a wrong
// answer in every accuracy).
TEST(EngineErrors, ContextExceededInACacheSharedByRequestsThatFitAloneIsRetried) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-context-shared");
    engine_test::Server server;
    server.slots = 4;
    server.context = 1024;
    server.extra_args = {"-kvu"};
    auto config = dir / "experiment.toml";
    std::ofstream(config) << engine_test::experiment(
        root, {server},
        outcome_settings(dir, "max_tokens = [64]\nrepeats = 4\nlimit = 5\nconcurrency = 4"));
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--config", config.string(), "--db", db.string(), "--quiet",
                       "--retry-backoff-ms", "50"});
    EXPECT_EQ(o.exit_code, 0) << o.err << o.out;
    EXPECT_NE(o.err.find("server 'llama': an answer outgrew the context its requests share "
                         "(HTTP 500 \"Context size has been exceeded.\"); retried, with at most "
                         "3 in flight from now on"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), "20");
    EXPECT_NE(query(db, "SELECT count(*) FROM v_responses WHERE attempts > 1"), "0");
}

// A context of 256 tokens (llama-server's smallest) cannot hold a 5-shot
// prompt of this byte-level model: one line before anything is sent, exit 2,
// no response stored.
TEST(EngineErrors, PreflightRefusesAPromptLongerThanTheContext) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-context-preflight");
    engine_test::Server server;
    server.context = 256;
    auto config = dir / "experiment.toml";
    std::ofstream(config) << engine_test::experiment(root, {server},
                                                     outcome_settings(dir, "max_tokens = [8]"));
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--config", config.string(), "--db", db.string(), "--quiet"});
    EXPECT_EQ(o.exit_code, 2) << o.err << o.out;
    EXPECT_NE(o.err.find("does not fit its context of 256 tokens (/props n_ctx per slot)"),
              std::string::npos)
        << o.err;
    size_t errors = 0;
    for (size_t at = o.err.find("diffeval: "); at != std::string::npos;
         at = o.err.find("diffeval: ", at + 1)) {
        ++errors;
    }
    EXPECT_EQ(errors, 1u) << o.err;
    // Refused before anything was sent: the database it created goes.
    EXPECT_FALSE(std::filesystem::exists(db));
}

// The launched server's log and /props name llama.cpp, its build and its
// settings; `diffeval fingerprint` on the log names the engine.
TEST(EngineFingerprint, LlamaServerIsRecognisedWithItsBuildSlotsAndKvCache) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-fingerprint");
    engine_test::Server server;
    server.slots = 2;
    server.extra_args = {"-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on", "-lv", "4"};
    auto config = dir / "experiment.toml";
    std::ofstream(config) << engine_test::experiment(root, {server},
                                                     outcome_settings(dir, "max_tokens = [8]"));
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--config", config.string(), "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    auto fact = [&](const std::string& name) {
        return query(db, "SELECT json_extract(facts_json, '$.facts." + name + "') FROM servers");
    };
    EXPECT_EQ(query(db, "SELECT json_extract(facts_json, '$.engine') FROM servers"), "llamacpp");
    // The log's "build 11669 (Debian)" as /props writes it, so a launched and
    // an attached server of one build are one build.
    EXPECT_EQ(fact("engine_version"), "b11669-Debian");
    EXPECT_EQ(query(db, "SELECT json_extract(facts_json, '$.stated.engine_version') FROM servers"),
              "11669 (Debian)");
    EXPECT_EQ(fact("kv_cache_type_k"), "q8_0");
    EXPECT_EQ(fact("flash_attention"), "enabled");
    EXPECT_EQ(fact("slots"), "2");
    EXPECT_EQ(fact("threads"), "1");
    EXPECT_EQ(query(db, "SELECT json_extract(info_json, '$.props.build_info') FROM servers"),
              "b11669-Debian");
    auto fp = e2e::run({"fingerprint", (dir / "r-logs" / "llama.log").string()});
    EXPECT_EQ(fp.exit_code, 0) << fp.err;
    EXPECT_NE(fp.out.find("llama.cpp server (llamacpp rules)"), std::string::npos) << fp.out;
    // The same model under the same name with another KV cache type is
    // another server: the run resumed with it stops once it is up, and the
    // database still says what gave its responses.
    server.extra_args = {"-ctk", "f16", "-ctv", "f16", "-fa", "on", "-lv", "4"};
    std::ofstream(config) << engine_test::experiment(root, {server},
                                                     outcome_settings(dir, "max_tokens = [8]"));
    const auto responses = query(db, "SELECT count(*) FROM responses");
    o = e2e::run({"run", "--config", config.string(), "--db", db.string(), "--quiet"});
    EXPECT_EQ(o.exit_code, 2) << o.err << o.out;
    EXPECT_NE(o.err.find("has fingerprint fact kv_cache_type_k f16, but the responses"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(fact("kv_cache_type_k"), "q8_0");
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), responses);
}

// A server diffeval does not launch and whose log it never sees still has
// its engine version recorded, from /props.
TEST(EngineFingerprint, VersionOfAnAttachedServerComesFromProps) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-version");
    auto test = engine_test::write_outcome_dataset(dir);
    engine_test::RunningServer server(root, engine_test::Server{}, dir / "llama.log");
    ASSERT_TRUE(server.healthy()) << e2e::slurp(dir / "llama.log");
    auto db = dir / "attached.sqlite";
    auto o = e2e::run({"run", "--server", "llama=" + server.url(), "--framing", "raw",
                       "--max-tokens", "8", "--dataset", test.string(), "--fewshot-from",
                       (dir / "train.jsonl").string(), "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    EXPECT_EQ(query(db, "SELECT json_extract(facts_json, '$.facts.engine_version') FROM servers"),
              "b11669-Debian");
    EXPECT_EQ(query(db, "SELECT json_extract(facts_json, '$.engine') FROM servers"), "llamacpp");
    // Each response names the build too (its system_fingerprint): the report
    // says what answered, not only what /props said at the start.
    auto r = e2e::run({"report", "--db", db.string(), "--out", (dir / "report").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto md = e2e::slurp(dir / "report" / "report.md");
    EXPECT_NE(md.find("| system fingerprint | b11669-Debian |"), std::string::npos) << md;
    EXPECT_EQ(md.find("MIXED"), std::string::npos) << md;
}

// An attached log the server's /props contradicts is another server's (an
// audit's report showed the other server's model, slots and KV cache for
// this one, and no conflict): refused before anything is sent. The server's
// own log is taken.
TEST(EngineFingerprint, AnAttachedLogTheServerContradictsIsRefused) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-other-log");
    auto test = engine_test::write_outcome_dataset(dir);
    engine_test::RunningServer server(root, engine_test::Server{}, dir / "llama.log");
    ASSERT_TRUE(server.healthy()) << e2e::slurp(dir / "llama.log");
    auto run = [&](const std::string& log, const std::string& db) {
        return e2e::run({"run", "--server", "llama=" + server.url(), "--server-log", "llama=" + log,
                         "--framing", "raw", "--max-tokens", "8", "--limit", "2", "--dataset",
                         test.string(), "--fewshot-from", (dir / "train.jsonl").string(), "--db",
                         (dir / db).string(), "--quiet"});
    };
    // Two slots of 2048 tokens, another model file, a q8_0 cache.
    const auto other = std::string(DIFFEVAL_SOURCE_DIR) + "/tests/data/llamacpp-b11669-lv4.log";
    auto o = run(other, "other.sqlite");
    EXPECT_EQ(o.exit_code, 2) << o.err << o.out;
    EXPECT_NE(o.err.find("--server-log llama=" + other + ": the log says "), std::string::npos)
        << o.err;
    EXPECT_NE(o.err.find("where the server's /props says"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("it is another server's log"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("diffeval:"), o.err.rfind("diffeval:")) << "one line: " << o.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "other.sqlite")) << "a refused run leaves no file";
    o = run((dir / "llama.log").string(), "own.sqlite");
    EXPECT_EQ(o.exit_code, 0) << o.err << o.out;
    EXPECT_EQ(
        query(dir / "own.sqlite", "SELECT json_extract(facts_json, '$.conflicts') FROM servers"),
        "[]");
    // Resumed without --server-log, the run keeps the log and facts stored
    // with the first answers and says it cannot check them: it overwrote
    // them with /props' few facts, so nothing told that a server restarted
    // with another KV-cache type had given the later answers (engine audit).
    const auto stored = "SELECT log_path || ' ' || length(log_text) || ' ' || facts_json FROM "
                        "servers";
    const auto before = query(dir / "own.sqlite", stored);
    o = e2e::run({"run", "--server", "llama=" + server.url(), "--framing", "raw", "--max-tokens",
                  "8", "--limit", "4", "--dataset", test.string(), "--fewshot-from",
                  (dir / "train.jsonl").string(), "--db", (dir / "own.sqlite").string(),
                  "--quiet"});
    EXPECT_EQ(o.exit_code, 0) << o.err << o.out;
    EXPECT_EQ(query(dir / "own.sqlite", "SELECT count(*) FROM responses"), "4");
    EXPECT_EQ(query(dir / "own.sqlite", stored), before);
    EXPECT_NE(before.find("llama.log"), std::string::npos) << before;
    EXPECT_NE(o.err.find("warning: server 'llama' has no --server-log in this run, so what it "
                         "runs now is not checked against the log an earlier run stored for it"),
              std::string::npos)
        << o.err;
}

// llama-server names its model by `--alias` in /v1/models, so another GGUF
// behind the same alias looks like the same model there. Restarted with it
// under the same name, the attached server is refused before anything is
// sent: /props model_path says which file gives the answers.
TEST(EngineFingerprint, AnotherModelBehindTheSameAliasIsAnotherServer) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-alias");
    auto test = engine_test::write_outcome_dataset(dir);
    auto db = dir / "r.sqlite";
    auto run = [&](const engine_test::RunningServer& server, const std::string& limit) {
        return run_as_llama(server, dir, test, db, limit);
    };
    engine_test::Server spec;
    spec.extra_args = {"--alias", "tiny"};
    {
        engine_test::RunningServer first(root, spec, dir / "first.log");
        ASSERT_TRUE(first.healthy()) << e2e::slurp(dir / "first.log");
        auto o = run(first, "3");
        ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    }
    spec.model = "/opt/diffeval/models/random.gguf";
    engine_test::RunningServer second(root, spec, dir / "second.log");
    ASSERT_TRUE(second.healthy()) << e2e::slurp(dir / "second.log");
    auto o = run(second, "6");
    EXPECT_EQ(o.exit_code, 2) << o.err << o.out;
    EXPECT_NE(o.err.find("has fingerprint fact model /opt/diffeval/models/random.gguf, but the "
                         "responses"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "3");
    EXPECT_EQ(query(db, "SELECT json_extract(info_json, '$.props.model_path') FROM servers"),
              "/opt/diffeval/models/outcomes.gguf");
}

// diffeval's simulator serving the same model name as a real llama-server
// (which has no /version, and whose log is not attached): the simulator's
// answers under a name are not resumed by the real server, whose /version
// does not name the simulator, nothing is sent, and the stored answers stay.
TEST(EngineFingerprint, TheSimulatorsAnswersAreNotResumedByARealServer) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-after-sim");
    auto test = engine_test::write_outcome_dataset(dir);
    auto db = dir / "r.sqlite";
    {
        e2e::Sim sim({"--model", "tiny", "--dataset", test.string(), "--fewshot-from",
                      (dir / "train.jsonl").string()});
        auto o =
            e2e::run({"run", "--server", "llama=" + sim.url(), "--framing", "raw", "--max-tokens",
                      "8", "--limit", "3", "--dataset", test.string(), "--fewshot-from",
                      (dir / "train.jsonl").string(), "--db", db.string(), "--quiet"});
        ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    }
    engine_test::Server spec;
    spec.extra_args = {"--alias", "tiny"};
    engine_test::RunningServer server(root, spec, dir / "llama.log");
    ASSERT_TRUE(server.healthy()) << e2e::slurp(dir / "llama.log");
    auto o = run_as_llama(server, dir, test, db, "6");
    EXPECT_EQ(o.exit_code, 2) << o.err << o.out;
    EXPECT_NE(o.err.find("server 'llama' has origin a live server whose /version names no "
                         "simulator, but the responses " +
                         db.string() +
                         " holds under that name came from one with origin diffeval's simulator "
                         "(profile default)"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "3");
}

// A server-side sampling default that no request overrides changes greedy
// answers: with --repeat-penalty 1.5 every text of the tiny model's first
// questions differs. llama-server states it only in /props, never in its
// log; restarted with it under the same name, the server is refused.
TEST(EngineFingerprint, ServerSamplingDefaultsBelongToTheServer) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-sampling-defaults");
    auto test = engine_test::write_outcome_dataset(dir);
    auto db = dir / "r.sqlite";
    auto run = [&](const engine_test::RunningServer& server, const std::string& limit) {
        return run_as_llama(server, dir, test, db, limit);
    };
    engine_test::Server spec;
    {
        engine_test::RunningServer first(root, spec, dir / "first.log");
        ASSERT_TRUE(first.healthy()) << e2e::slurp(dir / "first.log");
        auto o = run(first, "3");
        ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    }
    EXPECT_EQ(query(db, "SELECT json_extract(facts_json, '$.facts.default_repeat_penalty') FROM "
                        "servers"),
              "1.0");
    spec.extra_args = {"--repeat-penalty", "1.5"};
    engine_test::RunningServer second(root, spec, dir / "second.log");
    ASSERT_TRUE(second.healthy()) << e2e::slurp(dir / "second.log");
    auto o = run(second, "6");
    EXPECT_EQ(o.exit_code, 2) << o.err << o.out;
    EXPECT_NE(o.err.find("has fingerprint fact default_repeat_penalty 1.5, but the responses"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "3");
}
