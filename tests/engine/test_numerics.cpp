// Same weights, different answers, on a real engine: the random-weights model
// served twice by llama-server, once with an f16 KV cache and once with q4_0,
// as one experiment; the texts differ and diffeval's diff finds the changes.
#include "engine.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

using e2e::query;

TEST(EngineNumerics, KvCacheTypeChangesTheTextsOfTheSameWeights) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-numerics");
    auto test = engine_test::write_outcome_dataset(dir);
    engine_test::Server f16;
    f16.name = "kv-f16";
    f16.model = "/opt/diffeval/models/random.gguf";
    auto q4 = f16;
    q4.name = "kv-q4_0";
    q4.extra_args = {"-ctk", "q4_0"};
    auto config = dir / "experiment.toml";
    std::ofstream(config) << engine_test::experiment(
        root, {f16, q4},
        "framings = [\"raw\"]\nmax_tokens = [48]\ndataset = " +
            nlohmann::json(test.string()).dump() +
            "\nfewshot_from = " + nlohmann::json((dir / "train.jsonl").string()).dump());
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--config", config.string(), "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    // Each server's texts are its own: the same prompt, another KV cache.
    EXPECT_NE(query(db, "SELECT count(*) FROM v_responses a JOIN v_responses b ON "
                        "a.question_idx = b.question_idx AND a.server = 'kv-f16' AND b.server = "
                        "'kv-q4_0' WHERE a.text <> b.text"),
              "0");
    EXPECT_EQ(query(db, "SELECT json_extract(facts_json, '$.facts.context_per_slot') FROM servers "
                        "WHERE name = 'kv-q4_0'"),
              "4096");
    auto diff = e2e::run({"diff", "--db", db.string(), "kv-f16", "kv-q4_0"});
    EXPECT_EQ(diff.exit_code, 0) << diff.err;
    EXPECT_NE(diff.out.find("6 questions (1 repeat each)"), std::string::npos) << diff.out;
}
