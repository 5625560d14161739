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
    EXPECT_EQ(server_identity("http://gpu1:8000", "m", R"({"version": {"version": "0.11.0"}})", "")
                  .version,
              "0.11.0");
    EXPECT_EQ(server_identity("http://gpu1:8000", "m", R"({"version": "1.2"})", "").version, "1.2");
    EXPECT_EQ(server_identity("http://gpu1:8000", "m", R"({"version": {"build": 7}})", "").version,
              R"({"build":7})");
    EXPECT_EQ(server_identity("http://gpu1:8000", "m", R"({"models": []})", "").version, "");
    EXPECT_EQ(server_identity("http://gpu1:8000", "m", "not json", "").version, "");
}

TEST(ServerIdentity, TheModelThenTheVersionThenEachFactIsCompared) {
    const ServerIdentity a{.model = "qwen",
                           .version = "0.11.0",
                           .facts_json = facts("vllm", R"("attention_backend": "FLASH_ATTN")")};
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
    const ServerIdentity vllm{.facts_json = facts("vllm", R"("quantization": "fp8")")};
    const ServerIdentity sglang{.facts_json = facts("sglang", R"("kv_cache_dtype": "auto")")};
    EXPECT_EQ(differs(vllm, sglang), "engine: vllm / sglang");
    const ServerIdentity props_only{.facts_json = facts("", R"("slots": "4")")};
    EXPECT_EQ(differs(vllm, props_only), "");
}

// Answers imported from an lm-eval samples file are not a live server's,
// whatever else the two rows leave unsaid.
TEST(ServerIdentity, AnImportIsNotALiveServer) {
    const auto imported = server_identity("lm-eval:/runs/samples_gsm8k.jsonl", "",
                                          R"({"imported_from": "/runs/samples_gsm8k.jsonl"})", "");
    const auto live = server_identity("http://gpu1:8000", "qwen", "{}", "");
    EXPECT_EQ(imported.origin, "lm-eval import");
    EXPECT_EQ(live.origin, "live server");
    EXPECT_EQ(differs(imported, live), "origin: lm-eval import / live server");
    EXPECT_EQ(differs(imported, server_identity("lm-eval:/other.jsonl", "", "{}", "")), "");
    EXPECT_EQ(differs(live, server_identity("http://gpu2:9000", "qwen", "{}", "")), "");
}

TEST(ServerIdentity, WhatOnlyOneSideKnowsIsNoDifference) {
    const ServerIdentity a{.model = "qwen",
                           .version = "0.11.0",
                           .facts_json = facts("vllm", R"("quantization": "fp8")")};
    EXPECT_EQ(differs(a, ServerIdentity{}), "");
    EXPECT_EQ(differs(ServerIdentity{}, a), "");
    const ServerIdentity other_facts{.facts_json = facts("vllm", R"("kv_cache_dtype": "fp8")")};
    EXPECT_EQ(differs(a, other_facts), "");
    EXPECT_EQ(
        differs(a, ServerIdentity{.model = "qwen", .version = "0.11.0", .facts_json = "not json"}),
        "");
}

TEST(ServerIdentity, AFactStoredInTheServersWordsIsTheSameFactInItsOneForm) {
    const ServerIdentity old_row{.facts_json =
                                     facts("llamacpp", R"x("engine_version": "11669 (Debian)")x")};
    const ServerIdentity new_row{.facts_json =
                                     facts("llamacpp", R"x("engine_version": "b11669-Debian")x")};
    EXPECT_EQ(differs(old_row, new_row), "");
    const ServerIdentity newer{.facts_json =
                                   facts("llamacpp", R"x("engine_version": "b11700-Debian")x")};
    EXPECT_EQ(differs(old_row, newer),
              "fingerprint fact engine_version: b11669-Debian / b11700-Debian");
}

} // namespace

// A launched server's command is part of what it is; the URL's port may
// change between runs, and only where the command names it as the port is
// it written {port}: another flag of the same value (`-c 8192` beside
// `--port 8192`) changing with it was accepted unseen (an audit).
TEST(LaunchIdentity, OnlyThePortWhereItIsNamedAsOneIsMasked) {
    using diffeval::store::launch_identity;
    EXPECT_EQ(launch_identity({{"PORT", "8192"}, {"CTX", "8192"}},
                              {"llama-server", "--port", "8192", "-c", "8192", "--host=h:8192"},
                              "8192"),
              (std::vector<std::string>{"PORT={port}", "CTX=8192", "llama-server", "--port",
                                        "{port}", "-c", "8192", "--host=h:{port}"}));
    EXPECT_EQ(
        launch_identity({}, {"vllm serve m --port=8192 --max-model-len 8192 -p 81920"}, "8192"),
        (std::vector<std::string>{"vllm serve m --port={port} --max-model-len 8192 -p "
                                  "81920"}));
    // Two commands that differ only in the port are one launch; in another
    // flag, two.
    EXPECT_EQ(launch_identity({}, {"s", "--port", "1"}, "1"),
              launch_identity({}, {"s", "--port", "2"}, "2"));
    EXPECT_NE(launch_identity({}, {"s", "--port", "1", "-c", "1"}, "1"),
              launch_identity({}, {"s", "--port", "2", "-c", "2"}, "2"));
    const auto d =
        diffeval::store::launch_difference({"s", "--port", "{port}", "-c", "4096"},
                                           {"s", "--port", "{port}", "-c", "4096", "-ctk", "q4_0"});
    ASSERT_TRUE(d);
    EXPECT_EQ(d->first, "... 4096");
    EXPECT_EQ(d->second, "... 4096 -ctk q4_0");
}

// The simulator's answers resumed by a live server that is not it (a real
// vLLM answers /version with the same version; the model may be configured
// alike) are another server's: refused one way, stored simulator against a
// probed server that names none. A row written before the simulator named
// itself may be one, and a server not asked (--no-preflight) said nothing.
TEST(ServerIdentity, TheSimulatorsAnswersAreNotALiveServersOfTheSameName) {
    const auto sim = server_identity(
        "http://127.0.0.1:8000", "qwen",
        R"({"models": [], "version": {"version": "0.28.0", "diffeval_simulator": "deepgemm"}})",
        "");
    ASSERT_EQ(sim.simulator, "deepgemm");
    EXPECT_EQ(sim.version, "0.28.0");
    const auto vllm =
        server_identity("http://gpu1:8000", "qwen", R"({"models": [], "version": "0.28.0"})", "");
    const auto llama = server_identity("http://gpu1:8080", "qwen", R"({"models": []})", "");
    const auto unasked = server_identity("http://gpu1:8000", "qwen", "{}", "");
    EXPECT_EQ(differs(sim, vllm), "");
    for (const auto* now : {&vllm, &llama}) {
        auto d = simulator_difference(sim, *now);
        ASSERT_TRUE(d.has_value());
        EXPECT_EQ(d->what, "origin");
        EXPECT_EQ(d->a, "diffeval's simulator (profile deepgemm)");
        EXPECT_EQ(d->b, "a live server whose /version names no simulator");
    }
    EXPECT_FALSE(simulator_difference(sim, unasked).has_value());
    EXPECT_FALSE(simulator_difference(vllm, sim).has_value());
    // Another profile is the same simulator behaving otherwise: a profile
    // resumed by another stands for a server that changed.
    auto other = sim;
    other.simulator = "default";
    EXPECT_FALSE(simulator_difference(sim, other).has_value());
}
