// facts.hpp: the report's "What actually ran" table compares what each
// server runs, not how it was asked for.
#include <harness/analysis/facts.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

using namespace diffeval;

namespace {

analysis::ServerFacts server(const std::string& name, const std::string& log) {
    analysis::ServerFacts s;
    s.name = name;
    auto fp = fingerprint::fingerprint_log(log);
    if (fp.ok()) {
        s.fingerprinted = true;
        s.fingerprint = *fp;
    }
    return s;
}

const analysis::FactRow* row_named(const std::vector<analysis::FactRow>& rows,
                                   const std::string& name) {
    for (const auto& r : rows) {
        if (r.name == name) {
            return &r;
        }
    }
    return nullptr;
}

} // namespace

// One llama-server started with `-fa auto` (resolved to enabled), one with
// `-fa on`: both run flash attention, so the table does not flag them; one
// whose auto resolved to disabled differs.
TEST(FactRows, FlashAttentionComparesWhatTheServerResolved) {
    const std::string build = "common_params_print_info: build 11669 (Debian) with GNU\n";
    auto auto_on = server("auto", build + "llama_context: flash_attn            = auto\n"
                                          "resolve_fused_ops: Flash Attention enabled\n");
    auto on = server("on", build + "llama_context: flash_attn            = enabled\n");
    auto auto_off = server(
        "auto-off", build + "llama_context: flash_attn            = auto\n"
                            "resolve_fused_ops: Flash Attention not supported, set to disabled\n");
    auto rows = analysis::fact_rows({auto_on, on});
    const auto* fa = row_named(rows, "flash_attention");
    ASSERT_NE(fa, nullptr);
    EXPECT_EQ(fa->values, (std::vector<std::string>{"enabled", "enabled"}));
    EXPECT_FALSE(fa->differs);
    // The request is recorded beside the fact, never compared.
    EXPECT_EQ(auto_on.fingerprint.stated.at("flash_attention"), "auto");
    EXPECT_EQ(row_named(rows, "flash_attention_requested"), nullptr);

    auto apart = analysis::fact_rows({auto_on, auto_off});
    fa = row_named(apart, "flash_attention");
    ASSERT_NE(fa, nullptr);
    EXPECT_TRUE(fa->differs);
    EXPECT_EQ(fa->values, (std::vector<std::string>{"enabled", "disabled"}));
}

// What a server stated rides beside its value, never in it: the table shows
// it and `differs` ignores it; a fact a server only stated (a log cut before
// flash attention was resolved) still gets its row.
TEST(FactRows, StatedWordsRideBesideTheValue) {
    const std::string build = "common_params_print_info: build 11669 (Debian) with GNU\n";
    auto auto_on = server("auto", build + "llama_context: flash_attn            = auto\n"
                                          "resolve_fused_ops: Flash Attention enabled\n");
    auto on = server("on", "llama_context: flash_attn            = enabled\n");
    auto rows = analysis::fact_rows({auto_on, on});
    const auto* fa = row_named(rows, "flash_attention");
    ASSERT_NE(fa, nullptr);
    EXPECT_EQ(fa->stated, (std::vector<std::string>{"auto", ""}));
    EXPECT_FALSE(fa->differs);
    const auto* build_row = row_named(rows, "engine_version");
    ASSERT_NE(build_row, nullptr);
    EXPECT_EQ(build_row->values, (std::vector<std::string>{"b11669-Debian", ""}));
    EXPECT_EQ(build_row->stated, (std::vector<std::string>{"11669 (Debian)", ""}));
    // The rows every server has say nothing stated.
    EXPECT_EQ(row_named(rows, "version")->stated, (std::vector<std::string>{"", ""}));

    auto cut = server("cut", "llama_context: flash_attn            = auto\n"
                             "load_model: initializing, n_slots = 1, n_ctx_slot = 512\n");
    auto only_stated = analysis::fact_rows({cut});
    fa = row_named(only_stated, "flash_attention");
    ASSERT_NE(fa, nullptr);
    EXPECT_EQ(fa->values, std::vector<std::string>{""});
    EXPECT_EQ(fa->stated, std::vector<std::string>{"auto"});
}

// A server attached without a log: the engine row shows the engine the
// server names as its model's owner (llama-server's "llamacpp" beside its
// build), not a proxy's owner, and never over the engine a log named.
TEST(LoadServerFacts, TheEngineIsTheOwnerAServerNamesWhenNoLogNamesOne) {
    const auto path = std::filesystem::temp_directory_path() / "diffeval_test_facts_owner.sqlite";
    for (const char* side : {"", "-wal", "-shm"}) {
        std::filesystem::remove(path.string() + side);
    }
    auto st = store::Store::open(path.string(), store::Store::Mode::read_write);
    ASSERT_TRUE(st.ok()) << st.error().message;
    const auto info = [](const std::string& owner) {
        return nlohmann::json{{"models", {{{"id", "m"}, {"owned_by", owner}}}},
                              {"props", {{"build_info", "b11669-Debian"}}}}
            .dump();
    };
    ASSERT_TRUE((*st)->put_server({"llama", "http://127.0.0.1:1", "m", info("llamacpp")}).ok());
    ASSERT_TRUE((*st)->put_server({"proxy", "http://127.0.0.1:2", "m", info("openai")}).ok());
    ASSERT_TRUE((*st)->put_server({"logged", "http://127.0.0.1:3", "m", info("vllm")}).ok());
    ASSERT_TRUE((*st)
                    ->put_server_log("logged", "l.log", "",
                                     R"({"engine": "sglang", "facts": {"tp_size": "1"}})")
                    .ok());
    auto facts = analysis::load_server_facts(**st, {"llama", "proxy", "logged"});
    ASSERT_TRUE(facts.ok()) << facts.error().message;
    const auto rows = analysis::fact_rows(*facts);
    const auto* engine = row_named(rows, "engine");
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(engine->values, (std::vector<std::string>{"llamacpp", "", "sglang"}));
    EXPECT_EQ((*facts)[0].version, "b11669-Debian");
}

// diffeval's simulator names itself in /version: its record gets a
// "simulated" row and a sentence that no model ran there, beside the vLLM
// version it imitates; a real server's record gets neither (a demo report
// showed "vllm 0.28.0" and an FP8 model with no word that none had run).
TEST(LoadServerFacts, TheSimulatorIsSaidToBeOne) {
    const auto path = std::filesystem::temp_directory_path() / "diffeval_test_facts_sim.sqlite";
    for (const char* side : {"", "-wal", "-shm"}) {
        std::filesystem::remove(path.string() + side);
    }
    auto st = store::Store::open(path.string(), store::Store::Mode::read_write);
    ASSERT_TRUE(st.ok()) << st.error().message;
    const auto info = [](const nlohmann::json& version) {
        return nlohmann::json{{"models", {{{"id", "m"}, {"owned_by", "vllm"}}}},
                              {"version", version}}
            .dump();
    };
    ASSERT_TRUE(
        (*st)
            ->put_server({"sim", "http://127.0.0.1:1", "m",
                          info({{"version", "0.28.0"}, {"diffeval_simulator", "deepgemm"}})})
            .ok());
    ASSERT_TRUE(
        (*st)->put_server({"real", "http://127.0.0.1:2", "m", info({{"version", "0.28.0"}})}).ok());
    auto facts = analysis::load_server_facts(**st, {"sim", "real"});
    ASSERT_TRUE(facts.ok()) << facts.error().message;
    EXPECT_EQ((*facts)[0].version, "0.28.0");
    const auto rows = analysis::fact_rows(*facts);
    const auto* simulated = row_named(rows, "simulated");
    ASSERT_NE(simulated, nullptr);
    EXPECT_EQ(simulated->values, (std::vector<std::string>{"diffeval sim, profile deepgemm", ""}));
    EXPECT_EQ(analysis::simulated_sentence(*facts),
              "sim is diffeval's simulator, not an inference engine: no model ran there, and its "
              "answers, engine, version and model are what its profile imitates; the other "
              "server's are its own.");

    auto real_only = analysis::load_server_facts(**st, {"real"});
    ASSERT_TRUE(real_only.ok());
    EXPECT_EQ(row_named(analysis::fact_rows(*real_only), "simulated"), nullptr);
    EXPECT_EQ(analysis::simulated_sentence(*real_only), "");
}
