// A fingerprint's JSON is written in one place and read in one place: what
// the run stores in servers.facts_json is what reports and the gate read back.
#include <harness/fingerprint/fingerprint.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>

using namespace diffeval;

TEST(FingerprintJson, WhatIsStoredReadsBackTheSame) {
    fingerprint::Fingerprint fp;
    fp.engine = "vllm";
    fp.facts = {{"fp8_moe_backend", "DEEPGEMM"}, {"engine_version", "0.26.0"}};
    fp.conflicts = {{"deepgemm_both", "DeepGEMM is both on and off", {"a=1", "b=2"}}};
    auto back = fingerprint::fingerprint_from_json(fingerprint::to_json(fp).dump());
    ASSERT_TRUE(back);
    EXPECT_EQ(back->engine, "vllm");
    EXPECT_EQ(back->facts, fp.facts);
    ASSERT_EQ(back->conflicts.size(), 1U);
    EXPECT_EQ(back->conflicts[0].name, "deepgemm_both");
    EXPECT_EQ(back->conflicts[0].message, "DeepGEMM is both on and off");
    EXPECT_EQ(back->conflicts[0].evidence, (std::vector<std::string>{"a=1", "b=2"}));
}

// Older diffevals stored /props values with their JSON types; a damaged row
// must not stop a report.
TEST(FingerprintJson, OlderAndDamagedRowsReadWhatTheyCan) {
    auto old = fingerprint::fingerprint_from_json(
        R"({"engine":"llamacpp","facts":{"slots":4,"n":{"a":1}},"conflicts":[1,{"name":"x","evidence":[2]}]})");
    ASSERT_TRUE(old);
    EXPECT_EQ(old->facts.at("slots"), "4");
    EXPECT_EQ(old->facts.at("n"), R"({"a":1})");
    ASSERT_EQ(old->conflicts.size(), 1U);
    EXPECT_EQ(old->conflicts[0].name, "x");
    EXPECT_EQ(old->conflicts[0].message, "");
    EXPECT_EQ(old->conflicts[0].evidence, std::vector<std::string>{"2"});

    auto typed = fingerprint::fingerprint_from_json(R"({"engine":5,"facts":[],"conflicts":{}})");
    ASSERT_TRUE(typed);
    EXPECT_EQ(typed->engine, "");
    EXPECT_TRUE(typed->facts.empty());
    EXPECT_TRUE(typed->conflicts.empty());

    EXPECT_FALSE(fingerprint::fingerprint_from_json("[1, 2]"));
    EXPECT_FALSE(fingerprint::fingerprint_from_json("{not json"));
}

// A database written before llama.cpp's build fact was rewritten holds it as
// the log writes it; it reads back as a newer diffeval writes it, the log's
// words as stated. A fact already in its one form, or another engine's
// version, reads as stored.
TEST(FingerprintJson, ALlamaCppBuildStoredInTheLogsWordsReadsInItsOneForm) {
    auto old = fingerprint::fingerprint_from_json(
        R"x({"engine":"llamacpp","facts":{"engine_version":"11669 (Debian)","slots":"2"}})x");
    ASSERT_TRUE(old);
    EXPECT_EQ(old->facts.at("engine_version"), "b11669-Debian");
    EXPECT_EQ(old->facts.at("slots"), "2");
    EXPECT_EQ(old->stated,
              (std::map<std::string, std::string>{{"engine_version", "11669 (Debian)"}}));

    auto written = fingerprint::fingerprint_log(
        "common_params_print_info: build 11669 (Debian) with GNU 16.2.0 for Linux x86_64\n"
        "load_model: initializing, n_slots = 2, n_ctx_slot = 4096\n");
    ASSERT_TRUE(written.ok());
    auto fresh = fingerprint::fingerprint_from_json(fingerprint::to_json(*written).dump());
    ASSERT_TRUE(fresh);
    EXPECT_EQ(fresh->facts.at("engine_version"), old->facts.at("engine_version"));
    EXPECT_EQ(fresh->stated, old->stated);

    auto other = fingerprint::fingerprint_from_json(
        R"x({"engine":"vllm","facts":{"engine_version":"11669 (Debian)"}})x");
    ASSERT_TRUE(other);
    EXPECT_EQ(other->facts.at("engine_version"), "11669 (Debian)");
    EXPECT_TRUE(other->stated.empty());
}

// A database written before llama.cpp's flash attention fact was what the
// server resolved holds what it was asked (`-fa auto` logs "flash_attn =
// auto"); it reads back as a newer diffeval writes that log: stated, the fact
// unknown, so it differs from no server's "enabled". A resolved value, and a
// fact no stated rule captures, read as stored.
TEST(FingerprintJson, AFlashAttentionStoredAsAskedReadsAsStatedNotAsTheFact) {
    auto old = fingerprint::fingerprint_from_json(
        R"x({"engine":"llamacpp","facts":{"flash_attention":"auto","slots":"2",)x"
        R"x("context_per_slot":"4096"}})x");
    ASSERT_TRUE(old);
    EXPECT_EQ(old->facts,
              (std::map<std::string, std::string>{{"context_per_slot", "4096"}, {"slots", "2"}}));
    EXPECT_EQ(old->stated, (std::map<std::string, std::string>{{"flash_attention", "auto"}}));

    auto cut =
        fingerprint::fingerprint_log("0.00.318.009 I llama_context: flash_attn            = auto\n"
                                     "load_model: initializing, n_slots = 2, n_ctx_slot = 4096\n");
    ASSERT_TRUE(cut.ok());
    auto fresh = fingerprint::fingerprint_from_json(fingerprint::to_json(*cut).dump());
    ASSERT_TRUE(fresh);
    EXPECT_EQ(fresh->facts, old->facts);
    EXPECT_EQ(fresh->stated, old->stated);

    auto resolved = fingerprint::fingerprint_from_json(
        R"x({"engine":"llamacpp","facts":{"flash_attention":"enabled"}})x");
    ASSERT_TRUE(resolved);
    EXPECT_EQ(resolved->facts.at("flash_attention"), "enabled");
    EXPECT_TRUE(resolved->stated.empty());

    auto other = fingerprint::fingerprint_from_json(
        R"x({"engine":"vllm","facts":{"flash_attention":"auto"}})x");
    ASSERT_TRUE(other);
    EXPECT_EQ(other->facts.at("flash_attention"), "auto");
}
