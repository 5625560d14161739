// The request bodies diffeval sends must be the reference clients' bytes:
// vLLM's GSM8K script for `raw` and `vllm-chat`, lm-eval's gsm8k chat task
// against local-chat-completions for `lm-eval-chat` (and its layout, with
// raw's shots, for `chat`). The sample-set goldens were written by Python's
// json.dumps from the reference logic (tests/golden/make_framing_goldens.py);
// the official set is pinned by sha256 (its text is not ours to copy into
// the repository).
#include <datasets/dataset.hpp>
#include <harness/framing/framing.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/pyjson.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace diffeval;

namespace {

std::string read_golden(const std::string& name) {
    std::ifstream in(std::string(DIFFEVAL_SOURCE_DIR) + "/tests/golden/" + name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string render(const std::string& framing_name, const datasets::Dataset& ds, int max_tokens,
                   std::optional<std::string> model, const framing::Overrides& overrides = {}) {
    auto f = framing::load_framing(framing_name);
    EXPECT_TRUE(f.ok());
    framing::Renderer r(framing::apply_overrides(*f, overrides), ds);
    return util::python_json_dumps(
        r.body(ds.test[0], max_tokens, model, nlohmann::ordered_json::object()));
}

std::optional<datasets::Dataset> official() {
    const char* dir = std::getenv("GSM8K_DIR");
    if (!dir || !*dir) {
        return std::nullopt;
    }
    auto ds =
        datasets::open_dataset(std::string(dir) + "/test.jsonl", std::string(dir) + "/train.jsonl");
    EXPECT_TRUE(ds.ok()) << ds.error().message;
    return ds ? std::optional(std::move(*ds)) : std::nullopt;
}

// A dataset of `n_train` distinct train items and `n_test` test items.
datasets::Dataset synthetic(int n_test, int n_train) {
    datasets::Dataset ds{"synthetic", "synthetic", {}, {}};
    for (int i = 0; i < n_test; ++i) {
        ds.test.push_back({i, fmt::format("test {}?", i), fmt::format("#### {}", i)});
    }
    for (int i = 0; i < n_train; ++i) {
        ds.fewshot.push_back({i, fmt::format("train {}?", i), fmt::format("#### {}", i)});
    }
    return ds;
}

} // namespace

TEST(FramingGolden, RawBodyForSampleMatchesVllmScriptBytes) {
    auto ds = datasets::open_dataset("sample");
    ASSERT_TRUE(ds.ok());
    EXPECT_EQ(render("raw", *ds, 256, std::nullopt), read_golden("raw_sample_q0_256.json"));
}

TEST(FramingGolden, ChatBodyForSampleMatchesLmEvalBytes) {
    auto ds = datasets::open_dataset("sample");
    ASSERT_TRUE(ds.ok());
    EXPECT_EQ(render("chat", *ds, 1024, "Qwen/Qwen3.5-35B-A3B-FP8"),
              read_golden("chat_sample_q0_1024.json"));
}

TEST(FramingGolden, RawBodyCarriesModelOnlyWhenConfigured) {
    auto ds = datasets::open_dataset("sample");
    ASSERT_TRUE(ds.ok());
    auto with = render("raw", *ds, 256, "m");
    EXPECT_NE(with.find(R"("seed": 42, "model": "m"})"), std::string::npos)
        << with.substr(with.size() - 80);
    EXPECT_EQ(render("raw", *ds, 256, std::nullopt).find("\"model\""), std::string::npos);
}

TEST(FramingGolden, OfficialGsm8kFirstQuestionBodies) {
    const char* dir = std::getenv("GSM8K_DIR");
    if (!dir || !*dir) {
        GTEST_SKIP() << "GSM8K_DIR not set: official GSM8K golden bodies not checked";
    }
    auto ds =
        datasets::open_dataset(std::string(dir) + "/test.jsonl", std::string(dir) + "/train.jsonl");
    ASSERT_TRUE(ds.ok()) << ds.error().message;
    ASSERT_EQ(ds->test.size(), 1319u);
    auto raw = render("raw", *ds, 256, std::nullopt);
    EXPECT_EQ(raw.size(), 2311u);
    EXPECT_EQ(util::sha256_hex(raw),
              "8d2637991dcbf527f8617c4ed70c13f098ef7832c3da638b3aa49d80d54d9a68");
    auto chat = render("chat", *ds, 256, "Qwen/Qwen3.5-35B-A3B-FP8");
    EXPECT_EQ(chat.size(), 2757u);
    EXPECT_EQ(util::sha256_hex(chat),
              "878b929048ab964a3da76c0935ef5d1c8eaf292412792507c49ac97b277474e9");
}

TEST(FramingGolden, VllmChatBodyForSampleMatchesVllmScriptBytes) {
    auto ds = datasets::open_dataset("sample");
    ASSERT_TRUE(ds.ok());
    EXPECT_EQ(render("vllm-chat", *ds, 256, std::nullopt),
              read_golden("vllm_chat_sample_q0_256.json"));
}

TEST(FramingGolden, VllmChatSendsScriptOptionsOnlyWhenSetInScriptOrder) {
    auto ds = datasets::open_dataset("sample");
    ASSERT_TRUE(ds.ok());
    framing::Overrides o;
    o.fewshot = 3;
    o.gen_prefix = " Let's think.";
    o.fields["temperature"] = 0.6;
    o.fields["top_p"] = 0.95;
    o.fields["top_k"] = 20;
    o.fields["reasoning_effort"] = "low";
    o.fields["chat_template_kwargs"] = {{"enable_thinking", false}};
    EXPECT_EQ(render("vllm-chat", *ds, 256, "m", o),
              read_golden("vllm_chat_sample_q0_256_options.json"));
}

TEST(FramingGolden, RawSendsTopPAndTopKAfterSeedOnlyWhenSet) {
    auto ds = datasets::open_dataset("sample");
    ASSERT_TRUE(ds.ok());
    framing::Overrides o;
    o.fields["top_p"] = 0.95;
    o.fields["top_k"] = 20;
    auto body = render("raw", *ds, 256, std::nullopt, o);
    EXPECT_NE(body.find(R"("seed": 42, "top_p": 0.95, "top_k": 20})"), std::string::npos)
        << body.substr(body.size() - 80);
}

TEST(FramingGolden, OfficialGsm8kFirstQuestionVllmChatAndLmEvalChatBodies) {
    auto ds = official();
    if (!ds) {
        GTEST_SKIP() << "GSM8K_DIR not set: official GSM8K golden bodies not checked";
    }
    // Values printed by tests/golden/make_framing_goldens.py.
    auto vllm_chat = render("vllm-chat", *ds, 256, std::nullopt);
    EXPECT_EQ(vllm_chat.size(), 2324u);
    EXPECT_EQ(util::sha256_hex(vllm_chat),
              "af51e031645c970718bf50d517e27f0d0a7533875395a99bf01f73adef39bbcd");
    auto lm_eval = render("lm-eval-chat", *ds, 256, "Qwen/Qwen3.5-35B-A3B-FP8");
    EXPECT_EQ(lm_eval.size(), 3790u);
    EXPECT_EQ(util::sha256_hex(lm_eval),
              "468a39aedb3bdb01548aab06c0975abec577942f83e6850b51225b9dd4f09079");
    // The first shot is train item 6374, the "Jen and Tyler" gymnasts.
    EXPECT_NE(lm_eval.find("Question: " + ds->fewshot[6374].question), std::string::npos);
    EXPECT_LT(lm_eval.find(ds->fewshot[6374].question), lm_eval.find(ds->fewshot[3610].question));
}

TEST(FramingGolden, LmEvalChatDrawsLmEvalShotsForFirstTwentyQuestions) {
    // Expected draws were printed by CPython (make_framing_goldens.py).
    std::ifstream in(std::string(DIFFEVAL_SOURCE_DIR) + "/tests/data/lm_eval_gsm8k_shots.txt");
    ASSERT_TRUE(in);
    auto f = framing::load_framing("lm-eval-chat");
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto ds = synthetic(30, 7473);
    framing::Renderer renderer(*f, ds);
    std::string line;
    int rows = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        std::stringstream ss(line);
        int q = 0;
        std::string list;
        ss >> q >> list;
        std::vector<uint32_t> expected;
        std::stringstream items(list);
        for (std::string item; std::getline(items, item, ',');) {
            expected.push_back(static_cast<uint32_t>(std::stoul(item)));
        }
        EXPECT_EQ(renderer.shots(q), expected) << "question " << q;
        // The body carries those shots, in that order, as user turns.
        auto body = renderer.body(ds.test[static_cast<size_t>(q)], 256, "m",
                                  nlohmann::ordered_json::object());
        ASSERT_EQ(body["messages"].size(), 11u);
        EXPECT_EQ(body["messages"][0]["content"],
                  "Question: " + ds.fewshot[expected[0]].question + "\nAnswer:");
        EXPECT_EQ(body["messages"][9]["content"], ds.fewshot[expected[4]].answer);
        ++rows;
    }
    EXPECT_EQ(rows, 20);
}

TEST(FramingGolden, LmEvalChatShotsDoNotDependOnWhichQuestionsAreAsked) {
    // --limit, --shard: a question gets the same shots whatever was asked
    // before it, because every earlier question's draw is made first.
    auto f = framing::load_framing("lm-eval-chat");
    ASSERT_TRUE(f.ok());
    auto ds = synthetic(30, 7473);
    framing::Renderer in_order(*f, ds);
    framing::Renderer skipping(*f, ds);
    auto late = skipping.body(ds.test[17], 256, "m", nlohmann::ordered_json::object());
    for (int q = 0; q < 17; ++q) {
        (void)in_order.body(ds.test[static_cast<size_t>(q)], 256, "m",
                            nlohmann::ordered_json::object());
    }
    EXPECT_EQ(util::python_json_dumps(late),
              util::python_json_dumps(
                  in_order.body(ds.test[17], 256, "m", nlohmann::ordered_json::object())));
}

TEST(FramingGolden, ChatKeepsRawShotsByDesign) {
    auto ds = synthetic(3, 7473);
    auto f = framing::load_framing("chat");
    ASSERT_TRUE(f.ok());
    framing::Renderer r(*f, ds);
    EXPECT_EQ(r.shots(2), (std::vector<uint32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(f->description.find("byte-identical"), std::string::npos);
}

TEST(Framing, BodyKeyWithoutValueMustBeDeclaredOptional) {
    auto path = std::filesystem::temp_directory_path() / "diffeval_optional.toml";
    std::ofstream(path) << "version = 1\nendpoint = \"/v1/completions\"\nfewshot = 0\n"
                           "question_template = \"{question}\"\n"
                           "body = [\"prompt\", \"top_p\"]\n";
    auto bad = framing::load_framing(path.string());
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("optional"), std::string::npos) << bad.error().message;
    std::ofstream(path) << "version = 1\nendpoint = \"/v1/completions\"\nfewshot = 0\n"
                           "question_template = \"{question}\"\n"
                           "body = [\"prompt\", \"top_p\"]\noptional = [\"top_p\"]\n";
    auto good = framing::load_framing(path.string());
    ASSERT_TRUE(good.ok()) << good.error().message;
    datasets::Dataset ds{"t", "t", {{0, "What?", "#### 1"}}, {}};
    framing::Renderer r(*good, ds);
    EXPECT_EQ(util::python_json_dumps(
                  r.body(ds.test[0], 8, std::nullopt, nlohmann::ordered_json::object())),
              R"({"prompt": "What?"})");
}

TEST(Framing, UnknownSamplerIsOneClearError) {
    auto path = std::filesystem::temp_directory_path() / "diffeval_sampler.toml";
    std::ofstream(path) << "version = 1\nendpoint = \"/v1/completions\"\n"
                           "question_template = \"{question}\"\nbody = [\"prompt\"]\n"
                           "fewshot_sampler = \"random\"\n";
    auto f = framing::load_framing(path.string());
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message.find("python-random"), std::string::npos) << f.error().message;
}

TEST(Framing, UnknownNameSuggestsClosest) {
    auto f = framing::load_framing("rwa");
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message.find("did you mean 'raw'"), std::string::npos) << f.error().message;
    EXPECT_NE(f.error().message.find("chat"), std::string::npos);
}

TEST(Framing, UserFramingFileWithUnknownKeyNamesFileAndLine) {
    auto path = std::filesystem::temp_directory_path() / "diffeval_bad_framing.toml";
    std::ofstream(path)
        << "version = 1\nendpoint = \"/v1/completions\"\nquestion_template = \"Q\"\n"
           "body = [\"prompt\"]\nstpo = [\"x\"]\n";
    auto f = framing::load_framing(path.string());
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message.find(path.string() + ":5"), std::string::npos) << f.error().message;
    EXPECT_NE(f.error().message.find("stpo"), std::string::npos);
}

TEST(Framing, UserFramingFileRendersItsOwnTemplate) {
    auto path = std::filesystem::temp_directory_path() / "diffeval_qa.toml";
    std::ofstream(path) << "version = 1\nendpoint = \"/v1/completions\"\nfewshot = 1\n"
                           "example_template = \"Q: {question}\\nA: {answer}\\n\\n\"\n"
                           "question_template = \"Q: {question}\\nA:\"\n"
                           "body = [\"prompt\", \"max_tokens\"]\n[fields]\nseed = 7\n";
    auto f = framing::load_framing(path.string());
    ASSERT_TRUE(f.ok()) << f.error().message;
    datasets::Dataset ds{"t", "t", {{0, "What?", "#### 1"}}, {{0, "Ex?", "#### 2"}}};
    framing::Renderer r(*f, ds);
    EXPECT_EQ(util::python_json_dumps(
                  r.body(ds.test[0], 8, std::nullopt, nlohmann::ordered_json::object())),
              R"({"prompt": "Q: Ex?\nA: #### 2\n\nQ: What?\nA:", "max_tokens": 8, "seed": 7})");
}

// The context check picks the longest prompt by Renderer::prompt_bytes and
// builds only that body: it must count what the body holds (completion: the
// prompt; chat: every message's content) for every built-in framing.
TEST(FramingGolden, PromptBytesCountWhatTheBodyHolds) {
    auto ds = datasets::open_dataset("sample");
    ASSERT_TRUE(ds);
    for (const char* name : {"raw", "chat", "lm-eval-chat", "vllm-chat"}) {
        auto f = framing::load_framing(name);
        ASSERT_TRUE(f) << name;
        framing::Renderer r(*f, *ds);
        for (const auto& s : ds->test) {
            auto body = r.body(s, 256, "m", nlohmann::ordered_json::object());
            size_t held = 0;
            if (body.contains("prompt")) {
                held = body["prompt"].get_ref<const std::string&>().size();
            } else {
                for (const auto& m : body["messages"]) {
                    held += m["content"].get_ref<const std::string&>().size();
                }
            }
            ASSERT_EQ(r.prompt_bytes(s), held) << name << " question " << s.index;
        }
    }
}
