// vLLM GSM8K CI configs: every field the CI reads is read, list files
// resolve relative to themselves, and mistakes name the file and line.
#include <harness/engine/vllm_config.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace diffeval;

namespace {

std::filesystem::path dir() {
    auto d = std::filesystem::temp_directory_path() / "diffeval_vllm_config";
    std::filesystem::create_directories(d);
    return d;
}

std::string write(const std::string& name, const std::string& text) {
    auto p = dir() / name;
    std::ofstream(p) << text;
    return p.string();
}

} // namespace

TEST(VllmConfig, ReadsEveryFieldTheCiReads) {
    auto path = write("DeepSeek-R1-DP.yaml",
                      "model_name: \"deepseek-ai/DeepSeek-R1\"\n"
                      "accuracy_threshold: 0.95\n"
                      "tolerance: 0.03\n"
                      "num_questions: 200\n"
                      "num_fewshot: 3\n"
                      "server_args: >-\n"
                      "  --enforce-eager\n"
                      "  --max-model-len 4096\n"
                      "  --speculative-config '{\"method\":\"mtp\",\"num_speculative_tokens\":1}'\n"
                      "env:\n"
                      "  VLLM_USE_DEEP_GEMM: \"0\"\n"
                      "  VLLM_ALL2ALL_BACKEND: deepep_low_latency\n"
                      "startup_max_wait_seconds: 1200\n");
    auto c = engine::load_vllm_config(path);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->name, "DeepSeek-R1-DP");
    EXPECT_EQ(c->model_name, "deepseek-ai/DeepSeek-R1");
    EXPECT_DOUBLE_EQ(c->accuracy_threshold, 0.95);
    EXPECT_DOUBLE_EQ(c->tolerance, 0.03);
    EXPECT_EQ(c->num_questions, 200);
    EXPECT_EQ(c->num_fewshot, 3);
    EXPECT_EQ(c->server_args,
              (std::vector<std::string>{"--enforce-eager", "--max-model-len", "4096",
                                        "--speculative-config",
                                        "{\"method\":\"mtp\",\"num_speculative_tokens\":1}"}));
    ASSERT_EQ(c->env.size(), 2u);
    EXPECT_EQ(c->env[0], (std::pair<std::string, std::string>{"VLLM_USE_DEEP_GEMM", "0"}));
    EXPECT_EQ(c->env[1].second, "deepep_low_latency");
    EXPECT_EQ(c->startup_max_wait, std::chrono::seconds(1200));
}

TEST(VllmConfig, DefaultsAreTheCisDefaults) {
    auto c =
        engine::load_vllm_config(write("Small.yaml", "model_name: m\naccuracy_threshold: 0.375\n"));
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_DOUBLE_EQ(c->tolerance, 0.08);
    EXPECT_EQ(c->startup_max_wait, std::chrono::seconds(600));
    EXPECT_TRUE(c->server_args.empty());
    EXPECT_TRUE(c->env.empty());
}

TEST(VllmConfig, ListFileResolvesRelativeToItselfAndSkipsComments) {
    write("A.yaml", "model_name: a\naccuracy_threshold: 0.5\n");
    write("B.yaml", "model_name: b\naccuracy_threshold: 0.6\n");
    auto list = write("models-small.txt", "# small models\nA.yaml\n\n  B.yaml  \n");
    auto cs = engine::load_vllm_configs(list);
    ASSERT_TRUE(cs.ok()) << cs.error().message;
    ASSERT_EQ(cs->size(), 2u);
    EXPECT_EQ((*cs)[1].model_name, "b");
    engine::RunConfig run;
    ASSERT_TRUE(engine::apply_vllm_configs(*cs, "vllm", run).ok());
    ASSERT_EQ(run.servers.size(), 2u);
    EXPECT_TRUE(run.sequential_servers);
    EXPECT_EQ(run.framings, (std::vector<std::string>{"raw"}));
    EXPECT_EQ(run.servers[0].launch[0], "vllm");
    EXPECT_EQ(run.servers[0].launch[2], "a");
    EXPECT_NE(run.servers[0].url, run.servers[1].url);
}

TEST(VllmConfig, MistakesNameFileAndLine) {
    auto missing = engine::load_vllm_config(write("NoModel.yaml", "accuracy_threshold: 0.5\n"));
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("no model_name"), std::string::npos)
        << missing.error().message;
    auto typed = engine::load_vllm_config(
        write("BadType.yaml", "model_name: m\naccuracy_threshold: high\n"));
    ASSERT_FALSE(typed.ok());
    EXPECT_NE(typed.error().message.find("BadType.yaml:2: accuracy_threshold must be a number"),
              std::string::npos)
        << typed.error().message;
    auto broken = engine::load_vllm_config(write("Broken.yaml", "model_name: [unclosed\n"));
    ASSERT_FALSE(broken.ok());
    EXPECT_NE(broken.error().message.find("not valid YAML"), std::string::npos)
        << broken.error().message;
    // vLLM's test launcher sets the port and the seed, and refuses a
    // config that gives either: so do we, before anything starts.
    for (const std::string word : {"--seed 1", "--port 8000", "-p 8000"}) {
        auto set = engine::load_vllm_config(write(
            "Seeded.yaml",
            "model_name: m\naccuracy_threshold: 0.5\nserver_args: --enforce-eager " + word + "\n"));
        ASSERT_FALSE(set.ok()) << word;
        EXPECT_NE(set.error().message.find("Seeded.yaml:3: server_args gives " +
                                           word.substr(0, word.find(' '))),
                  std::string::npos)
            << set.error().message;
    }
    // The env's own setting of the launcher's variable wins, as env_dict
    // updates the launcher's environment.
    auto own = engine::load_vllm_configs(write("Fork.yaml",
                                               "model_name: m\naccuracy_threshold: 0.5\nenv:\n"
                                               "  VLLM_WORKER_MULTIPROC_METHOD: fork\n"));
    ASSERT_TRUE(own.ok()) << own.error().message;
    engine::RunConfig run;
    ASSERT_TRUE(engine::apply_vllm_configs(*own, "vllm", run).ok());
    ASSERT_FALSE(run.servers[0].env.empty());
    EXPECT_EQ(run.servers[0].env.back(),
              (std::pair<std::string, std::string>{"VLLM_WORKER_MULTIPROC_METHOD", "fork"}));
    auto list = engine::load_vllm_configs(write("list.txt", "Nope.yaml\n"));
    ASSERT_FALSE(list.ok());
    EXPECT_NE(list.error().message.find("list.txt:1: no config"), std::string::npos)
        << list.error().message;
}

// vLLM's gsm8k_eval.py asks min(num_questions, 1319) questions, so 0 asks
// none and the CI check of their accuracy (NaN) always fails: the config is
// refused naming the field, not run or reported as a `--limit 0` the user
// never typed.
// Interop audit #10: a count past an int's range was "not an integer",
// though more than the test split asks for all of it; a negative startup
// wait was accepted and reported as "within -5s".
TEST(VllmConfig, AHugeCountIsAllQuestionsAndANegativeWaitIsRefused) {
    auto huge = engine::load_vllm_config(
        write("Huge.yaml", "model_name: m\naccuracy_threshold: 0.5\nnum_questions: 99999999999\n"));
    ASSERT_TRUE(huge.ok()) << huge.error().message;
    EXPECT_GE(huge->num_questions, 1319);
    auto wait = engine::load_vllm_config(write(
        "Wait.yaml", "model_name: m\naccuracy_threshold: 0.5\nstartup_max_wait_seconds: -5\n"));
    ASSERT_FALSE(wait.ok());
    EXPECT_NE(wait.error().message.find("Wait.yaml:3: startup_max_wait_seconds is -5: give the "
                                        "seconds the server may take to start, 1 or more"),
              std::string::npos)
        << wait.error().message;
}

TEST(VllmConfig, NoQuestionsIsRefusedAsTheCiWouldFailIt) {
    for (const char* n : {"0", "-3"}) {
        auto c = engine::load_vllm_config(
            write("Zero.yaml",
                  fmt::format("model_name: m\naccuracy_threshold: 0.5\nnum_questions: {}\n", n)));
        ASSERT_FALSE(c.ok()) << n;
        EXPECT_EQ(c.error().kind, util::ErrorKind::usage);
        EXPECT_NE(c.error().message.find(fmt::format("Zero.yaml:3: num_questions is {}: vLLM's "
                                                     "gsm8k_eval.py then asks no questions",
                                                     n)),
                  std::string::npos)
            << c.error().message;
        EXPECT_EQ(c.error().message.find("--limit"), std::string::npos) << c.error().message;
    }
    // More than the test split asks for all of it, there and here.
    auto all = engine::load_vllm_config(
        write("All.yaml", "model_name: m\naccuracy_threshold: 0.5\nnum_questions: 5000\n"));
    ASSERT_TRUE(all.ok()) << all.error().message;
    engine::RunConfig run;
    ASSERT_TRUE(engine::apply_vllm_configs({*all}, "vllm", run).ok());
    EXPECT_EQ(run.limit, 5000);
}
