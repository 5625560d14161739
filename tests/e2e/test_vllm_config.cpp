// `diffeval run --vllm-config` and `diffeval gate --vllm-config` against a
// fake `vllm` executable found on PATH: it records its argv and environment,
// then serves with `diffeval sim`, so the test sees exactly what diffeval
// launched and what it sent, as vLLM's CI would.
#include "e2e.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

using e2e::query;

namespace {

// Writes DIR/bin/vllm: records argv (one per line) and env, then execs the
// simulator on the --port it was given.
std::filesystem::path fake_vllm(const std::filesystem::path& dir) {
    auto bin = dir / "bin";
    std::filesystem::create_directories(bin);
    auto script = bin / "vllm";
    std::ofstream(script) << "#!/bin/sh\n"
                             "printf '%s\\n' \"$@\" > \"$FAKE_VLLM_OUT/argv.txt\"\n"
                             "env > \"$FAKE_VLLM_OUT/env.txt\"\n"
                             "echo \"$2\" >> \"$FAKE_VLLM_OUT/models.txt\"\n"
                             "port=''; prev=''\n"
                             "for a in \"$@\"; do\n"
                             "  [ \"$prev\" = --port ] && port=\"$a\"\n"
                             "  prev=\"$a\"\n"
                             "done\n"
                             "exec \"$DIFFEVAL_BIN\" sim --port \"$port\" --dataset sample "
                             "--model \"$2\"\n";
    chmod(script.c_str(), 0755);
    return bin;
}

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
        out.push_back(l);
    }
    return out;
}

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
        ++n;
    }
    return n;
}

} // namespace

TEST(VllmConfig, RunLaunchesVllmServeAsTheCiDoesAndGateAppliesItsRule) {
    auto dir = e2e::scratch("vllm-config");
    auto bin = fake_vllm(dir);
    auto config = dir / "Qwen3-0.6B-FP8.yaml";
    std::ofstream(config)
        << "model_name: \"Qwen/Qwen3-0.6B-FP8\"\n"
           "accuracy_threshold: 0.80\n"
           "tolerance: 0.05\n"
           "num_questions: 6\n"
           "num_fewshot: 3\n"
           "server_args: >-\n"
           "  --enforce-eager --max-model-len 4096\n"
           "  --speculative-config '{\"method\":\"mtp\",\"num_speculative_tokens\":1}'\n"
           "env:\n"
           "  VLLM_USE_DEEP_GEMM: \"0\"\n"
           "startup_max_wait_seconds: 30\n";
    auto db = dir / "r.sqlite";
    const std::vector<std::string> env = {"PATH=" + bin.string() + ":" + std::getenv("PATH"),
                                          "FAKE_VLLM_OUT=" + dir.string()};
    auto o = e2e::run({"run", "--vllm-config", config.string(), "--dataset", "sample", "--db",
                       db.string(), "--quiet"},
                      env);
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;

    // The launch: vllm serve MODEL ARGS plus the CI's standard arguments,
    // then the port and seed its launcher (tests/utils.py) adds.
    auto argv = lines(e2e::slurp(dir / "argv.txt"));
    ASSERT_EQ(argv.size(), 13u) << e2e::slurp(dir / "argv.txt");
    const std::vector<std::string> expected = {"serve",
                                               "Qwen/Qwen3-0.6B-FP8",
                                               "--enforce-eager",
                                               "--max-model-len",
                                               "4096",
                                               "--speculative-config",
                                               "{\"method\":\"mtp\",\"num_speculative_tokens\":1}",
                                               "--trust-remote-code",
                                               "--disable-uvicorn-access-log",
                                               "--port"};
    EXPECT_EQ(std::vector<std::string>(argv.begin(), argv.begin() + 10), expected);
    EXPECT_GT(std::stoi(argv[10]), 0); // the free port diffeval chose
    EXPECT_EQ(argv[11], "--seed");
    EXPECT_EQ(argv[12], "0");
    auto env_text = e2e::slurp(dir / "env.txt");
    EXPECT_NE(env_text.find("\nVLLM_USE_DEEP_GEMM=0\n"), std::string::npos) << env_text;
    EXPECT_NE(env_text.find("\nVLLM_WORKER_MULTIPROC_METHOD=spawn\n"), std::string::npos)
        << env_text;

    // What was sent: num_questions raw prompts with num_fewshot shots, no model.
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), "6");
    EXPECT_EQ(query(db, "SELECT DISTINCT server || '/' || framing || '/' || max_tokens FROM "
                        "requests"),
              "Qwen3-0.6B-FP8/raw/256");
    auto body = query(db, "SELECT request_json FROM v_requests WHERE question_idx = 0");
    EXPECT_EQ(count(body, "Question: "), 4u) << body; // 3 shots and the question
    EXPECT_EQ(body.find("\"model\""), std::string::npos) << body;
    EXPECT_NE(body.find("\"seed\": 42}"), std::string::npos) << body;
    EXPECT_EQ(query(db, "SELECT model FROM servers"), "Qwen/Qwen3-0.6B-FP8");
    EXPECT_NE(query(db, "SELECT log_text FROM servers"), "");

    // gate --vllm-config applies the CI's rule, accuracy >= threshold -
    // tolerance, to the config's group: just inside the tolerance passes,
    // just outside fails.
    auto gate_with = [&](double threshold, const std::string& extra_dir) {
        auto d = dir / extra_dir;
        std::filesystem::create_directories(d);
        std::ofstream(d / "Qwen3-0.6B-FP8.yaml")
            << "model_name: \"Qwen/Qwen3-0.6B-FP8\"\naccuracy_threshold: " << threshold
            << "\ntolerance: 0.05\n";
        auto json_path = d / "v.json";
        auto g = e2e::run({"gate", "--db", db.string(), "--vllm-config",
                           (d / "Qwen3-0.6B-FP8.yaml").string(), "--json", json_path.string()});
        return std::pair{g, nlohmann::json::parse(e2e::slurp(json_path))};
    };
    auto [probe, probe_json] = gate_with(0.0, "probe");
    ASSERT_EQ(probe.exit_code, 0) << probe.err << probe.out;
    ASSERT_EQ(probe_json["checks"].size(), 1u);
    EXPECT_EQ(probe_json["checks"][0]["kind"], "vllm_ci");
    const double accuracy = probe_json["checks"][0]["measured"].get<double>() / 100;
    auto [pass, pass_json] = gate_with(accuracy + 0.04, "pass");
    EXPECT_EQ(pass.exit_code, 0) << pass.out;
    EXPECT_NE(pass.out.find("PASS  vllm-ci Qwen3-0.6B-FP8/raw/256"), std::string::npos) << pass.out;
    auto [fail, fail_json] = gate_with(accuracy + 0.06, "fail");
    EXPECT_EQ(fail.exit_code, 1) << fail.out;
    EXPECT_NE(fail.out.find("FAIL  vllm-ci Qwen3-0.6B-FP8/raw/256"), std::string::npos) << fail.out;
    // A threshold given as a percentage is named where it stands, not in
    // the words of flags nobody gave.
    std::ofstream(dir / "percent.yaml") << "model_name: m\naccuracy_threshold: 85\n";
    auto percent =
        e2e::run({"gate", "--db", db.string(), "--vllm-config", (dir / "percent.yaml").string()});
    EXPECT_EQ(percent.exit_code, 2);
    EXPECT_NE(percent.err.find("percent.yaml:2: accuracy_threshold is 85: a proportion from 0 to "
                               "1 (0.82 for 82%)"),
              std::string::npos)
        << percent.err;
    EXPECT_EQ(percent.err.find("--expect"), std::string::npos) << percent.err;
    // A config whose server the database does not hold is named as such,
    // not as a --group nobody gave.
    std::ofstream(dir / "Other.yaml") << "model_name: m\naccuracy_threshold: 0.5\n";
    auto other =
        e2e::run({"gate", "--db", db.string(), "--vllm-config", (dir / "Other.yaml").string()});
    EXPECT_EQ(other.exit_code, 2);
    EXPECT_NE(other.err.find("no raw group of the server 'Other'"), std::string::npos) << other.err;
    EXPECT_NE(other.err.find("present: Qwen3-0.6B-FP8/raw/256"), std::string::npos) << other.err;
    EXPECT_EQ(other.err.find("--group"), std::string::npos) << other.err;
    // Next to diffeval's own checks: --require-complete runs too.
    auto both = e2e::run({"gate", "--db", db.string(), "--vllm-config",
                          (dir / "pass" / "Qwen3-0.6B-FP8.yaml").string(), "--require-complete"});
    EXPECT_EQ(both.exit_code, 0) << both.out;
    EXPECT_NE(both.out.find("2 checks"), std::string::npos) << both.out;
}

TEST(VllmConfig, ListFileRunsEachConfigInTurn) {
    auto dir = e2e::scratch("vllm-config-list");
    auto bin = fake_vllm(dir);
    auto configs = dir / "configs";
    std::filesystem::create_directories(configs);
    std::ofstream(configs / "Small-A.yaml")
        << "model_name: org/a\naccuracy_threshold: 0.1\nnum_questions: 3\nnum_fewshot: 5\n";
    std::ofstream(configs / "Small-B.yaml")
        << "model_name: org/b\naccuracy_threshold: 0.1\nnum_questions: 3\nnum_fewshot: 5\n";
    std::ofstream(configs / "models-small.txt")
        << "# two small models\nSmall-A.yaml\nSmall-B.yaml\n";
    auto db = dir / "r.sqlite";
    const std::vector<std::string> env = {"PATH=" + bin.string() + ":" + std::getenv("PATH"),
                                          "FAKE_VLLM_OUT=" + dir.string()};
    auto o = e2e::run({"run", "--vllm-config", (configs / "models-small.txt").string(), "--dataset",
                       "sample", "--db", db.string(), "--quiet"},
                      env);
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    EXPECT_EQ(lines(e2e::slurp(dir / "models.txt")), (std::vector<std::string>{"org/a", "org/b"}));
    EXPECT_EQ(e2e::query_rows(db, "SELECT server, count(*) FROM requests GROUP BY server"),
              (std::vector<std::string>{"Small-A|3", "Small-B|3"}));
    auto g = e2e::run(
        {"gate", "--db", db.string(), "--vllm-config", (configs / "models-small.txt").string()});
    EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
    EXPECT_NE(g.out.find("vllm-ci Small-A/raw/256"), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("vllm-ci Small-B/raw/256"), std::string::npos) << g.out;
}

TEST(VllmConfig, ScriptOptionsAsRunFlagsReachTheBodyInScriptOrder) {
    auto dir = e2e::scratch("script-options");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run",
                       "--server",
                       "s=" + sim.url(),
                       "--framing",
                       "raw,vllm-chat",
                       "--limit",
                       "2",
                       "--num-shots",
                       "2",
                       "--gen-prefix",
                       " Let's see.",
                       "--top-p",
                       "0.95",
                       "--top-k",
                       "20",
                       "--reasoning-effort",
                       "low",
                       "--chat-template-kwargs",
                       "{\"enable_thinking\": false}",
                       "--db",
                       db.string(),
                       "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto raw = query(db, "SELECT request_json FROM v_requests WHERE framing = 'raw' AND "
                         "question_idx = 0");
    EXPECT_EQ(count(raw, "Question: "), 3u) << raw; // 2 shots and the question
    EXPECT_EQ(count(raw, "Answer: Let's see. "), 2u) << raw;
    EXPECT_NE(raw.find("\\nAnswer: Let's see.\", \"max_tokens\""), std::string::npos) << raw;
    // raw sends what the script's completions call sends: top_p and top_k
    // after the seed, and none of the chat-only fields.
    EXPECT_NE(raw.find("\"seed\": 42, \"top_p\": 0.95, \"top_k\": 20}"), std::string::npos) << raw;
    auto chat = query(db, "SELECT request_json FROM v_requests WHERE framing = 'vllm-chat' AND "
                          "question_idx = 0");
    EXPECT_NE(chat.find("\"seed\": 42, \"top_p\": 0.95, \"top_k\": 20, \"reasoning_effort\": "
                        "\"low\", \"chat_template_kwargs\": {\"enable_thinking\": false}}"),
              std::string::npos)
        << chat;
    auto bad = e2e::run({"run", "--server", "s=" + sim.url(), "--chat-template-kwargs", "[1]",
                         "--db", db.string()});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--chat-template-kwargs '[1]': expected a JSON object"),
              std::string::npos)
        << bad.err;
}

// More shots than the few-shot pool holds are refused before anything is
// sent: the sample set's 8 examples made --num-shots 100 send 8 while the
// run recorded num_shots 100. As many as the pool holds are sent.
TEST(VllmConfig, NumShotsBeyondThePoolAreRefusedNamingThePool) {
    auto dir = e2e::scratch("num-shots-pool");
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "s=http://127.0.0.1:9", "--dataset", "sample",
                       "--num-shots", "100", "--db", db.string(), "--quiet"});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_EQ(o.err, "diffeval: --num-shots 100: dataset 'sample' has 8 few-shot examples (its "
                     "train set); pass --num-shots 8 or fewer, or --fewshot-from a file with 100 "
                     "or more examples\n");
    EXPECT_FALSE(std::filesystem::exists(db));

    e2e::Sim sim;
    o = e2e::run({"run", "--server", "s=" + sim.url(), "--dataset", "sample", "--framing", "raw",
                  "--limit", "1", "--num-shots", "8", "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto raw = query(db, "SELECT request_json FROM v_requests");
    EXPECT_EQ(count(raw, "Question: "), 9u) << raw; // 8 shots and the question
    EXPECT_EQ(query(db, "SELECT json_extract(config_json, '$.num_shots') FROM runs"), "8");
}

// A framing's own count is held to the same rule: the built-in framings' 5
// shots from a 3-example --fewshot-from file sent 3 while the framing said
// 5. With --num-shots 3 the run goes ahead and sends 3.
TEST(VllmConfig, AFramingsOwnShotsBeyondThePoolAreRefusedNamingTheFraming) {
    auto dir = e2e::scratch("framing-shots-pool");
    auto pool = dir / "three.jsonl";
    {
        std::ofstream out(pool);
        for (int i = 0; i < 3; ++i) {
            out << "{\"question\": \"What is " << i << " + 1?\", \"answer\": \"" << i
                << " + 1 = " << i + 1 << "\\n#### " << i + 1 << "\"}\n";
        }
    }
    auto db = dir / "r.sqlite";
    auto o =
        e2e::run({"run", "--server", "s=http://127.0.0.1:9", "--dataset", "sample", "--framing",
                  "raw", "--fewshot-from", pool.string(), "--db", db.string(), "--quiet"});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_EQ(o.err, fmt::format("diffeval: framing 'raw' asks for 5 shots, but --fewshot-from {} "
                                 "has 3 examples; pass --num-shots 3 or fewer, or --fewshot-from "
                                 "a file with 5 or more examples\n",
                                 pool.string()));
    EXPECT_FALSE(std::filesystem::exists(db));

    e2e::Sim sim;
    o = e2e::run({"run", "--server", "s=" + sim.url(), "--dataset", "sample", "--framing", "raw",
                  "--fewshot-from", pool.string(), "--num-shots", "3", "--limit", "1", "--db",
                  db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto raw = query(db, "SELECT request_json FROM v_requests");
    EXPECT_EQ(count(raw, "Question: "), 4u) << raw; // 3 shots and the question
}

// The official set's 7,473 training questions give 100 shots.
TEST(VllmConfig, NumShotsFromTheOfficialTrainSet) {
    const char* gsm8k = std::getenv("GSM8K_DIR");
    if (!gsm8k || !*gsm8k) {
        GTEST_SKIP() << "GSM8K_DIR is not set; the official-set shots test needs it";
    }
    const std::string test = std::string(gsm8k) + "/test.jsonl";
    auto dir = e2e::scratch("num-shots-official");
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "s=http://127.0.0.1:9", "--dataset", test, "--num-shots",
                       "7474", "--db", db.string(), "--quiet"});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("has 7473 few-shot examples"), std::string::npos) << o.err;
    e2e::Sim sim({"--dataset", test});
    o = e2e::run({"run", "--server", "s=" + sim.url(), "--dataset", test, "--framing", "raw",
                  "--limit", "1", "--num-shots", "100", "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto raw = query(db, "SELECT request_json FROM v_requests");
    EXPECT_EQ(count(raw, "Question: "), 101u);
}

// Interop audit: the gate's vLLM CI rule passed where the CI's own
// assertion fails: 12/20 "at the floor" of 0.68 - 0.08, which float64 makes
// 0.6000000000000001; --scorer reached the CI's check; and a key given twice
// was read as its first value, where the CI's PyYAML takes the last.
TEST(VllmConfig, GateComparesAsTheCiDoes) {
    auto dir = e2e::scratch("vllm-config-exact");
    const auto dataset = (dir / "qa.jsonl").string();
    auto samples = dir / "samples_gsm8k_2026.jsonl";
    {
        std::ofstream data(dataset);
        std::ofstream out(samples);
        for (int i = 0; i < 20; ++i) {
            const int gold = i + 1;
            data << fmt::format("{{\"question\": \"Q{}\", \"answer\": \"A #### {}\"}}\n", i, gold);
            // The vllm scorer takes the last number; lm-eval-strict needs "#### ".
            out << fmt::format("{{\"doc_id\": {0}, \"doc\": {{\"question\": \"Q{0}\", \"answer\": "
                               "\"A #### {1}\"}}, \"resps\": [[\"The answer is {2}\"]]}}\n",
                               i, gold, i < 12 ? gold : 0);
        }
    }
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "Model-X", "--framing",
                       "raw", "--dataset", dataset, samples.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto config = dir / "Model-X.yaml";
    std::ofstream(config) << "model_name: \"org/Model-X\"\naccuracy_threshold: 0.68\n";
    auto g = e2e::run({"gate", "--db", db.string(), "--vllm-config", config.string()});
    EXPECT_EQ(g.exit_code, 1) << g.out << g.err;
    EXPECT_NE(g.out.find("FAIL  vllm-ci Model-X/raw/256"), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("below the floor by a float64's last bit: 0.6 < 0.68 - 0.08 = "
                         "0.60000000000000009"),
              std::string::npos)
        << g.out;
    // At 0.67 it passes, whatever --scorer the other checks use
    // (lm-eval-strict finds no answer here).
    std::ofstream(config, std::ios::trunc) << "model_name: \"org/Model-X\"\naccuracy_threshold: "
                                              "0.67\n";
    g = e2e::run({"gate", "--db", db.string(), "--vllm-config", config.string(), "--scorer",
                  "lm-eval-strict"});
    EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
    EXPECT_NE(g.out.find("PASS  vllm-ci Model-X/raw/256"), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("60.00%"), std::string::npos) << g.out;
    // A key given twice is refused where it stands.
    std::ofstream(config, std::ios::trunc)
        << "model_name: \"org/Model-X\"\naccuracy_threshold: 0.5\naccuracy_threshold: 0.9\n";
    g = e2e::run({"gate", "--db", db.string(), "--vllm-config", config.string()});
    EXPECT_EQ(g.exit_code, 2) << g.out << g.err;
    EXPECT_NE(g.err.find("Model-X.yaml:3: accuracy_threshold is given twice (vLLM's CI would "
                         "take the last, diffeval the first); keep one"),
              std::string::npos)
        << g.err;
    // What vLLM's CI would fail on passed here (an outside audit): PyYAML
    // reads a quoted threshold and 5e-1 (no dot) as text, and its check
    // raises a TypeError; it refuses a file of two documents; a variable
    // given twice under env: is the last one's value there.
    for (const auto& [body, says] : std::vector<std::pair<std::string, std::string>>{
             {"model_name: \"org/Model-X\"\naccuracy_threshold: \"0.5\"\n",
              "Model-X.yaml:2: accuracy_threshold 0.5 is text to vLLM's CI"},
             {"model_name: \"org/Model-X\"\naccuracy_threshold: 5e-1\n",
              "Model-X.yaml:2: accuracy_threshold 5e-1 is text to vLLM's CI"},
             {"model_name: \"org/Model-X\"\naccuracy_threshold: 0.5\ntolerance: '0.1'\n",
              "Model-X.yaml:3: tolerance 0.1 is text to vLLM's CI"},
             {"model_name: \"org/Model-X\"\naccuracy_threshold: 0.5\n---\nmodel_name: b\n",
              "Model-X.yaml: holds 2 YAML documents, and vLLM's CI reads one"},
             {"model_name: \"org/Model-X\"\naccuracy_threshold: 0.5\nenv:\n  A: 1\n  A: 2\n",
              "Model-X.yaml:5: A is given twice"}}) {
        std::ofstream(config, std::ios::trunc) << body;
        g = e2e::run({"gate", "--db", db.string(), "--vllm-config", config.string()});
        EXPECT_EQ(g.exit_code, 2) << body << g.out << g.err;
        EXPECT_NE(g.err.find(says), std::string::npos) << body << g.err;
        EXPECT_EQ(std::count(g.err.begin(), g.err.end(), '\n'), 1) << g.err;
    }
    // A plain number with a dot, or a whole one, is a number to both.
    for (const std::string threshold : {"0.5", ".5", "0", "1.0e-1"}) {
        std::ofstream(config, std::ios::trunc)
            << "model_name: \"org/Model-X\"\naccuracy_threshold: " << threshold << "\n";
        g = e2e::run({"gate", "--db", db.string(), "--vllm-config", config.string()});
        EXPECT_NE(g.exit_code, 2) << threshold << ": " << g.err;
    }
}
