// The request bodies diffeval sends must be the reference clients' bytes:
// vLLM's GSM8K script for `raw`, lm-eval's local-chat-completions for
// `chat`. The sample-set goldens were written by Python's json.dumps from
// the reference logic; the official set is pinned by sha256 (its text is
// not ours to copy into the repository).
#include <datasets/dataset.hpp>
#include <harness/framing/framing.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/pyjson.hpp>

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
                   std::optional<std::string> model) {
    auto f = framing::load_framing(framing_name);
    EXPECT_TRUE(f.ok());
    framing::Renderer r(*f, ds);
    return util::python_json_dumps(
        r.body(ds.test[0], max_tokens, model, nlohmann::ordered_json::object()));
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
