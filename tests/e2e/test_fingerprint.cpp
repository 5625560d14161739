// `diffeval fingerprint LOGFILE` on the bug report's log: the facts each
// layer logged, and the contradiction between the auto-disable warning and
// the MoE backend it chose anyway.
#include "e2e.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace {

std::string log_path(const std::string& name) {
    return std::string(DIFFEVAL_SOURCE_DIR) + "/tests/data/" + name;
}

} // namespace

TEST(FingerprintCli, BugReportLogShowsTheConflict) {
    auto o = e2e::run({"fingerprint", log_path("vllm-blackwell-moe-conflict.log")});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("fp8_moe_backend          DEEPGEMM"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("fp8_linear_kernel        CutlassFp8BlockScaledMMKernel"),
              std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("CONFLICT deepgemm-moe-despite-auto-disable"), std::string::npos) << o.out;
    auto strict = e2e::run(
        {"fingerprint", log_path("vllm-blackwell-moe-conflict.log"), "--fail-on-conflict"});
    EXPECT_EQ(strict.exit_code, 1);
    auto json =
        e2e::run({"fingerprint", log_path("vllm-blackwell-moe-conflict.log"), "--format", "json"});
    auto j = nlohmann::json::parse(json.out);
    EXPECT_EQ(j["schema"], "diffeval.fingerprint/1");
    EXPECT_EQ(j["facts"]["deepgemm_auto_disabled"], "qwen3_5_moe_text");
    EXPECT_EQ(j["conflicts"][0]["name"], "deepgemm-moe-despite-auto-disable");
}

TEST(FingerprintCli, ConsistentLogPassesAndMissingFileIsUsage) {
    auto ok = e2e::run({"fingerprint", log_path("vllm-no-deepgemm.log"), "--fail-on-conflict"});
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_EQ(ok.out.find("CONFLICT"), std::string::npos) << ok.out;
    auto missing = e2e::run({"fingerprint", "/no/such.log"});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_NE(missing.err.find("cannot read log file /no/such.log"), std::string::npos)
        << missing.err;
}

// Rules named with --rules that find no fact recognise no engine, as the
// best match does not: a vLLM log read with llama.cpp's rules was called a
// "llama.cpp server", and JSON's engine was "llamacpp", not null.
TEST(FingerprintCli, RulesThatFindNothingRecogniseNoEngine) {
    const auto log = log_path("vllm-no-deepgemm.log");
    auto text = e2e::run({"fingerprint", log, "--rules", "llamacpp"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find(log + ": no engine recognised (the rules of --rules llamacpp found no "
                                  "known fact"),
              std::string::npos)
        << text.out;
    EXPECT_EQ(text.out.find("llama.cpp server"), std::string::npos) << text.out;
    auto json = e2e::run({"fingerprint", log, "--rules", "llamacpp", "--format", "json"});
    ASSERT_EQ(json.exit_code, 0) << json.err;
    EXPECT_TRUE(nlohmann::json::parse(json.out)["engine"].is_null()) << json.out;
    // The same log with its own rules is vLLM's.
    auto own = e2e::run({"fingerprint", log, "--rules", "vllm", "--format", "json"});
    EXPECT_EQ(nlohmann::json::parse(own.out)["engine"], "vllm") << own.out;
}

// llama-server started with `-fa auto` (its default): the facts are what it
// runs, the log's own words beside them.
TEST(FingerprintCli, LlamaServerShowsWhatAutoResolvedToAndWhatWasStated) {
    auto o = e2e::run({"fingerprint", log_path("llamacpp-b11669-fa-auto.log")});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("engine_version           b11669-Debian (stated: 11669 (Debian))"),
              std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("flash_attention          enabled (stated: auto)"), std::string::npos)
        << o.out;
    auto json =
        e2e::run({"fingerprint", log_path("llamacpp-b11669-fa-auto.log"), "--format", "json"});
    auto j = nlohmann::json::parse(json.out);
    EXPECT_EQ(j["facts"]["flash_attention"], "enabled");
    EXPECT_EQ(j["stated"]["flash_attention"], "auto");
    EXPECT_EQ(j["facts"]["engine_version"], "b11669-Debian");
}

// A log is the server's words: a model path with terminal escapes and 5,000
// bytes reaches the terminal as one bounded line without the escapes, and
// --format json keeps it whole.
TEST(FingerprintCli, ALogsEscapesAndLongValuesReachTheTerminalAsOneBoundedLine) {
    auto dir = e2e::scratch("fingerprint-hostile");
    const std::string model = "/opt/" + std::string(5000, 'x') + "\x1b[31mred\x1b]0;title\x07.gguf";
    {
        std::ofstream log(dir / "server.log");
        log << "0.00.012.227 I srv    load_model: loading model '" << model << "'\n"
            << "0.00.023.848 I srv  llama_server: model loaded\n";
    }
    auto o = e2e::run({"fingerprint", (dir / "server.log").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out.find('\x1b'), std::string::npos);
    EXPECT_EQ(o.out.find('\x07'), std::string::npos);
    EXPECT_NE(o.out.find("  model                    /opt/xxx"), std::string::npos) << o.out;
    EXPECT_LT(o.out.size(), 1200U);
    auto json = e2e::run({"fingerprint", (dir / "server.log").string(), "--format", "json"});
    ASSERT_EQ(json.exit_code, 0) << json.err;
    EXPECT_EQ(nlohmann::json::parse(json.out)["facts"]["model"], model);
}

// A log a server was restarted into (`>>`), too long to keep whole: what
// ran is the last launch's, not the first's (engine audit: a 2-slot, 8192-
// token first launch's facts were stated for the running 1-slot, 4096-token
// server, and a resumed run against it was refused as another server).
TEST(FingerprintCli, ALongLogARestartedServerAppendedToStatesItsLastLaunch) {
    auto dir = e2e::scratch("fingerprint-restarted");
    const auto first = e2e::slurp(log_path("llamacpp-b11669-lv4.log"));
    auto second = first;
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"n_ctx                 = 4096", "n_ctx                 = 8192"},
             {"n_slots = 2", "n_slots = 1"}}) {
        const auto at = second.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        second.replace(at, from.size(), to);
    }
    auto log = dir / "server.log";
    {
        std::ofstream out(log);
        out << first;
        // The first launch served requests: 3 MiB of lines, past what is kept.
        for (int i = 0; i < 40'000; ++i) {
            out << "0.01.000.000 D slot process_toke: id  0 | task " << i
                << " | n_gen = 66, n_remaining = 190, next token:  1331 ' build'\n";
        }
        out << second;
    }
    ASSERT_GT(std::filesystem::file_size(log), size_t{3} << 20);
    auto o = e2e::run({"fingerprint", log.string(), "--format", "json"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto j = nlohmann::json::parse(o.out);
    EXPECT_EQ(j["facts"]["context"], "8192") << o.out;
    EXPECT_EQ(j["facts"]["slots"], "1") << o.out;
    EXPECT_EQ(j["launches"], 2) << o.out;
    // The text says the log holds two and whose facts it shows (engine
    // audit: an earlier launch with another KV-cache type went unsaid).
    auto text = e2e::run({"fingerprint", log.string()});
    EXPECT_NE(text.out.find("2 launches in this log (a server restarted into it): the facts "
                            "below are the last one's"),
              std::string::npos)
        << text.out;
    auto one = e2e::run({"fingerprint", log_path("llamacpp-b11669-lv4.log")});
    EXPECT_EQ(one.out.find("launches"), std::string::npos) << one.out;
}

// vLLM states its version twice per launch, start-up facts between the two:
// a long log of one launch keeps them (review: the later line was taken as
// the launch's start, and the DeepGEMM conflict of a 3 MiB log was lost).
TEST(FingerprintCli, ALongLogOfOneVllmLaunchKeepsItsStartUpFacts) {
    auto dir = e2e::scratch("fingerprint-long-vllm");
    auto log = dir / "vllm.log";
    {
        std::ofstream out(log);
        out << e2e::slurp(log_path("vllm-blackwell-moe-conflict.log"));
        for (int i = 0; i < 40'000; ++i) {
            out << "(APIServer pid=1) INFO 03-18 13:40:00 [loggers.py:123] Engine 000: Avg prompt "
                   "throughput: 1200.0 tokens/s, request "
                << i << "\n";
        }
    }
    ASSERT_GT(std::filesystem::file_size(log), size_t{3} << 20);
    auto o = e2e::run({"fingerprint", log.string(), "--fail-on-conflict"});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("CONFLICT"), std::string::npos) << o.out;
}
