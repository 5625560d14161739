// Two rows of one server name: what a resumed run and merge compare before
// they put a server's answers with those stored under its name.
#include <harness/store/server_identity.hpp>

#include <gtest/gtest.h>

using namespace diffeval::store;

namespace {

std::string facts(const std::string& engine, const std::string& members) {
    return R"({"engine": ")" + engine + R"(", "facts": {)" + members + R"(}, "conflicts": []})";
}

std::string differs(const ServerIdentity& a, const ServerIdentity& b) {
    auto d = first_difference(a, b);
    return d ? d->what + ": " + d->a + " / " + d->b : "";
}

TEST(ServerIdentity, TheVersionIsWhatGetVersionAnswered) {
    EXPECT_EQ(server_identity("m", R"({"version": {"version": "0.11.0"}})", "").version, "0.11.0");
    EXPECT_EQ(server_identity("m", R"({"version": "1.2"})", "").version, "1.2");
    EXPECT_EQ(server_identity("m", R"({"version": {"build": 7}})", "").version, R"({"build":7})");
    EXPECT_EQ(server_identity("m", R"({"models": []})", "").version, "");
    EXPECT_EQ(server_identity("m", "not json", "").version, "");
}

TEST(ServerIdentity, TheModelThenTheVersionThenEachFactIsCompared) {
    const ServerIdentity a{"qwen", "0.11.0", facts("vllm", R"("attention_backend": "FLASH_ATTN")")};
    EXPECT_EQ(differs(a, a), "");
    auto b = a;
    b.model = "llama";
    b.version = "0.12.0";
    EXPECT_EQ(differs(a, b), "model: qwen / llama");
    b.model = a.model;
    EXPECT_EQ(differs(a, b), "version: 0.11.0 / 0.12.0");
    b.version = a.version;
    b.facts_json = facts("vllm", R"("attention_backend": "TRITON_ATTN")");
    EXPECT_EQ(differs(a, b), "fingerprint fact attention_backend: FLASH_ATTN / TRITON_ATTN");
    EXPECT_EQ(differs(b, a), "fingerprint fact attention_backend: TRITON_ATTN / FLASH_ATTN");
}

TEST(ServerIdentity, AnotherEngineIsAnotherServerWhateverFactsTheyShare) {
    const ServerIdentity vllm{"", "", facts("vllm", R"("quantization": "fp8")")};
    const ServerIdentity sglang{"", "", facts("sglang", R"("kv_cache_dtype": "auto")")};
    EXPECT_EQ(differs(vllm, sglang), "engine: vllm / sglang");
    const ServerIdentity props_only{"", "", facts("", R"("slots": "4")")};
    EXPECT_EQ(differs(vllm, props_only), "");
}

TEST(ServerIdentity, WhatOnlyOneSideKnowsIsNoDifference) {
    const ServerIdentity a{"qwen", "0.11.0", facts("vllm", R"("quantization": "fp8")")};
    EXPECT_EQ(differs(a, ServerIdentity{}), "");
    EXPECT_EQ(differs(ServerIdentity{}, a), "");
    const ServerIdentity other_facts{"", "", facts("vllm", R"("kv_cache_dtype": "fp8")")};
    EXPECT_EQ(differs(a, other_facts), "");
    EXPECT_EQ(differs(a, ServerIdentity{"qwen", "0.11.0", "not json"}), "");
}

TEST(ServerIdentity, AFactStoredInTheServersWordsIsTheSameFactInItsOneForm) {
    const ServerIdentity old_row{"", "",
                                 facts("llamacpp", R"x("engine_version": "11669 (Debian)")x")};
    const ServerIdentity new_row{"", "",
                                 facts("llamacpp", R"x("engine_version": "b11669-Debian")x")};
    EXPECT_EQ(differs(old_row, new_row), "");
    const ServerIdentity newer{"", "", facts("llamacpp", R"x("engine_version": "b11700-Debian")x")};
    EXPECT_EQ(differs(old_row, newer),
              "fingerprint fact engine_version: b11669-Debian / b11700-Debian");
}

} // namespace
