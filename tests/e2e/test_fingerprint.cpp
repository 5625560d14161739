// `diffeval fingerprint LOGFILE` on the bug report's log: the facts each
// layer logged, and the contradiction between the auto-disable warning and
// the MoE backend it chose anyway.
#include "e2e.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
