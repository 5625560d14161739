// Fingerprint rules read what a vLLM log says each layer runs, and flag the
// bug report's contradiction: DeepGEMM auto-disabled, yet the MoE layers run
// it. The logs in tests/data are written from vLLM's documented formats.
#include <harness/fingerprint/fingerprint.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace diffeval::fingerprint;

namespace {

std::string read_log(const std::string& name) {
    std::ifstream in(std::string(DIFFEVAL_SOURCE_DIR) + "/tests/data/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace

TEST(Fingerprint, BugReportLogYieldsEveryFactAndTheConflict) {
    auto fp = fingerprint_log(read_log("vllm-blackwell-moe-conflict.log"));
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(fp->engine, "vllm");
    EXPECT_EQ(fp->facts["engine_version"], "0.26.0");
    EXPECT_EQ(fp->facts["attention_backend"], "FLASH_ATTN");
    EXPECT_EQ(fp->facts["fp8_moe_backend"], "DEEPGEMM");
    EXPECT_EQ(fp->facts["fp8_linear_kernel"], "CutlassFp8BlockScaledMMKernel");
    EXPECT_EQ(fp->facts["deepgemm_e8m0"], "enabled");
    EXPECT_EQ(fp->facts["deepgemm_auto_disabled"], "qwen3_5_moe_text");
    EXPECT_EQ(fp->facts["quantization"], "fp8");
    EXPECT_EQ(fp->facts["kv_cache_dtype"], "auto");
    EXPECT_EQ(fp->facts["model"], "Qwen/Qwen3.6-35B-A3B-FP8");
    ASSERT_EQ(fp->conflicts.size(), 2u);
    EXPECT_EQ(fp->conflicts[0].name, "deepgemm-moe-despite-auto-disable");
    EXPECT_EQ(fp->conflicts[0].evidence,
              (std::vector<std::string>{"deepgemm_auto_disabled=qwen3_5_moe_text",
                                        "fp8_moe_backend=DEEPGEMM"}));
}

TEST(Fingerprint, ConsistentLogHasNoConflict) {
    auto fp = fingerprint_log(read_log("vllm-no-deepgemm.log"));
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(fp->facts["engine_version"], "0.28.0");
    EXPECT_EQ(fp->facts["fp8_moe_backend"], "FLASHINFER_TRTLLM");
    EXPECT_EQ(fp->facts["kv_cache_dtype"], "fp8_e4m3");
    EXPECT_EQ(fp->facts.count("deepgemm_auto_disabled"), 0u);
    EXPECT_TRUE(fp->conflicts.empty());
}

TEST(Fingerprint, RulesWithoutCaptureGroupAreRejectedWithFileAndLine) {
    auto r = Rules::parse("version = 1\n[[fact]]\nname = \"x\"\npattern = 'no group'\n", "my.toml");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("my.toml:2"), std::string::npos) << r.error().message;
    auto unknown = Rules::parse("version = 1\nfacts = []\n", "my.toml");
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(unknown.error().message.find("unknown key 'facts'"), std::string::npos);
}
