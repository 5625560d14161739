// The simulator reproduces the article's phenomenon statistically: run the
// behaviour model directly (no HTTP) over every question, in raw completion
// framing at 256 and 1,024 tokens and in chat framing with thinking off, and
// check the shapes the article reports for its three servers.
#include <harness/sim/generate.hpp>
#include <harness/sim/profile.hpp>
#include <harness/sim/question_bank.hpp>

#include <datasets/dataset.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>

namespace diffeval::sim {
namespace {

using nlohmann::json;

// vLLM's GSM8K script: the last run of digits after removing commas.
std::optional<long long> vllm_extract(const std::string& text) {
    std::string s;
    for (char c : text) {
        if (c != ',') {
            s += c;
        }
    }
    std::optional<long long> last;
    for (size_t i = 0; i < s.size();) {
        if (std::isdigit(static_cast<unsigned char>(s[i]))) {
            size_t j = i;
            while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
                ++j;
            }
            std::string digits = s.substr(i, std::min<size_t>(j - i, 18));
            last = std::stoll(digits);
            i = j;
        } else {
            ++i;
        }
    }
    return last;
}

// lm-eval's strict match: "#### N".
std::optional<std::string> strict_extract(const std::string& text) {
    static const std::regex k_re(R"(#### (\-?[0-9\.\,]+))");
    std::smatch m;
    if (!std::regex_search(text, m, k_re)) {
        return std::nullopt;
    }
    std::string v = m[1];
    v.erase(std::remove(v.begin(), v.end(), ','), v.end());
    while (!v.empty() && v.back() == '.') {
        v.pop_back();
    }
    return v;
}

struct Shape {
    int reasoning = 0;
    int never_finished = 0;
    int finished = 0;
    int finished_correct = 0;
    int vllm_correct = 0;
    int n = 0;
    double finished_accuracy() const { return finished ? double(finished_correct) / finished : 0; }
    double score() const { return n ? 100.0 * vllm_correct / n : 0; }
};

std::string raw_prompt(const std::vector<datasets::Sample>& train, const std::string& question) {
    std::string p;
    for (size_t i = 0; i < 5 && i < train.size(); ++i) {
        p += "Question: " + train[i].question + "\nAnswer: " + train[i].answer + "\n\n";
    }
    return p + "Question: " + question + "\nAnswer:";
}

Shape raw_shape(const Profile& profile, const QuestionBank& bank, int max_tokens, int sighting) {
    Shape s;
    const auto& ds = bank.dataset();
    for (const auto& q : ds.test) {
        json body = {{"prompt", raw_prompt(ds.fewshot, q.question)},
                     {"max_tokens", max_tokens},
                     {"stop", {"Question", "Assistant:", "<|separator|>"}},
                     {"temperature", 0.0},
                     {"seed", 42}};
        Generation g = generate(profile, bank, body, Endpoint::completions, sighting);
        const std::string& t = g.text;
        size_t open = t.find("<think>");
        bool opened = open != std::string::npos;
        size_t close = t.find("</think>");
        bool closed = opened && close != std::string::npos;
        std::string inside = opened
                                 ? t.substr(open + 7, closed ? close - open - 7 : std::string::npos)
                                 : std::string();
        bool started = inside.find_first_not_of(" \n") != std::string::npos;
        bool finished = g.finish_reason == "stop" && (!opened || closed);
        auto gold = vllm_extract(q.answer);
        bool correct = vllm_extract(t) == gold;
        s.n++;
        s.reasoning += started;
        s.never_finished += !finished;
        s.finished += finished;
        s.finished_correct += finished && correct;
        s.vllm_correct += correct;
    }
    return s;
}

double chat_score(const Profile& profile, const QuestionBank& bank, int max_tokens) {
    int correct = 0;
    const auto& ds = bank.dataset();
    for (const auto& q : ds.test) {
        json messages = json::array();
        for (size_t i = 0; i < 5 && i < ds.fewshot.size(); ++i) {
            messages.push_back({{"role", "user"},
                                {"content", "Question: " + ds.fewshot[i].question + "\nAnswer:"}});
            messages.push_back({{"role", "assistant"}, {"content", ds.fewshot[i].answer}});
        }
        messages.push_back(
            {{"role", "user"}, {"content", "Question: " + q.question + "\nAnswer:"}});
        json body = {{"messages", messages},
                     {"model", std::string(k_default_model_id)},
                     {"max_tokens", max_tokens},
                     {"temperature", 0.0},
                     {"stop", {"Question:", "</s>", "<|im_end|>"}},
                     {"seed", 1234},
                     {"chat_template_kwargs", {{"enable_thinking", false}}}};
        Generation g = generate(profile, bank, body, Endpoint::chat, 0);
        auto got = strict_extract(g.content.value_or(""));
        auto gold = strict_extract(q.answer);
        correct += got && gold && *got == *gold;
    }
    return 100.0 * correct / static_cast<double>(ds.test.size());
}

struct Profiles {
    Profile def = load_profile("default").value();
    Profile deep = load_profile("deepgemm").value();
    Profile none = load_profile("no-deepgemm").value();
};

void print(const char* name, int max_tokens, const Shape& s) {
    std::cout << name << " @" << max_tokens << ": reasoning " << s.reasoning << ", never finished "
              << s.never_finished << ", finished accuracy " << s.finished_accuracy()
              << ", lucky unfinished " << s.vllm_correct - s.finished_correct << ", vllm score "
              << s.score() << "\n";
}

TEST(SimShape, OfficialGsm8kReproducesTheArticle) {
    const char* dir = std::getenv("GSM8K_DIR");
    if (!dir || !*dir) {
        GTEST_SKIP() << "GSM8K_DIR not set";
    }
    auto test = datasets::load_jsonl(std::filesystem::path(dir) / "test.jsonl");
    auto train = datasets::load_jsonl(std::filesystem::path(dir) / "train.jsonl");
    ASSERT_TRUE(test.ok()) << test.error().message;
    ASSERT_TRUE(train.ok()) << train.error().message;
    ASSERT_EQ(test->size(), 1319u);
    QuestionBank bank(datasets::Dataset{"gsm8k", dir, *test, *train});
    Profiles p;

    for (int max_tokens : {256, 1024}) {
        Shape def = raw_shape(p.def, bank, max_tokens, 0);
        Shape deep = raw_shape(p.deep, bank, max_tokens, 0);
        Shape none = raw_shape(p.none, bank, max_tokens, 0);
        print("default", max_tokens, def);
        print("deepgemm", max_tokens, deep);
        print("no-deepgemm", max_tokens, none);

        // DeepGEMM starts reasoning in 120 to 150 more responses; without
        // DeepGEMM slightly fewer than default.
        EXPECT_GE(deep.reasoning - def.reasoning, 110);
        EXPECT_LE(deep.reasoning - def.reasoning, 160);
        EXPECT_GE(def.reasoning - none.reasoning, 3);
        EXPECT_LE(def.reasoning - none.reasoning, 40);
        for (const Shape* s : {&def, &deep, &none}) {
            // Finished answers are 96-97% correct on every server.
            EXPECT_GE(s->finished_accuracy(), 0.955);
            EXPECT_LE(s->finished_accuracy(), 0.98);
            if (max_tokens == 256) {
                // At 256 tokens at least ~65 answers fail to finish without reasoning.
                EXPECT_GE(s->never_finished - s->reasoning, 60);
            } else {
                // At 1,024 tokens the two counts nearly match.
                EXPECT_LE(std::abs(s->never_finished - s->reasoning), 25);
            }
        }
        // DeepGEMM costs 8-10 points with vLLM's scorer at both limits.
        EXPECT_GE(def.score() - deep.score(), 7.5);
        EXPECT_LE(def.score() - deep.score(), 11.0);
        if (max_tokens == 256) {
            EXPECT_GE(def.score(), 80.0);
            EXPECT_LE(def.score(), 85.0);
        }
    }

    // Chat framing with thinking off hides the difference.
    for (int max_tokens : {256, 1024}) {
        double d = chat_score(p.def, bank, max_tokens);
        double g = chat_score(p.deep, bank, max_tokens);
        double n = chat_score(p.none, bank, max_tokens);
        std::cout << "chat @" << max_tokens << ": default " << d << ", deepgemm " << g
                  << ", no-deepgemm " << n << "\n";
        for (double s : {d, g, n}) {
            EXPECT_GE(s, 92.5);
            EXPECT_LE(s, 96.5);
        }
        EXPECT_LE(std::max({d, g, n}) - std::min({d, g, n}), 1.0);
    }
}

TEST(SimShape, RepeatsSpreadLittle) {
    const char* dir = std::getenv("GSM8K_DIR");
    if (!dir || !*dir) {
        GTEST_SKIP() << "GSM8K_DIR not set";
    }
    auto test = datasets::load_jsonl(std::filesystem::path(dir) / "test.jsonl");
    auto train = datasets::load_jsonl(std::filesystem::path(dir) / "train.jsonl");
    ASSERT_TRUE(test.ok() && train.ok());
    QuestionBank bank(datasets::Dataset{"gsm8k", dir, *test, *train});
    Profile def = load_profile("default").value();
    Shape first = raw_shape(def, bank, 256, 0);
    Shape second = raw_shape(def, bank, 256, 1);
    // Repeats differ, but far less than the kernel's effect.
    EXPECT_NE(first.reasoning, second.reasoning);
    EXPECT_LE(std::abs(first.reasoning - second.reasoning), 30);
    EXPECT_LE(std::abs(first.score() - second.score()), 2.5);
}

TEST(SimShape, SampleSetKeepsTheDirection) {
    auto ds = datasets::open_dataset("sample");
    ASSERT_TRUE(ds.ok()) << ds.error().message;
    QuestionBank bank(std::move(*ds));
    Profiles p;
    Shape def = raw_shape(p.def, bank, 256, 0);
    Shape deep = raw_shape(p.deep, bank, 256, 0);
    Shape none = raw_shape(p.none, bank, 256, 0);
    print("sample default", 256, def);
    print("sample deepgemm", 256, deep);
    print("sample no-deepgemm", 256, none);
    EXPECT_GT(deep.reasoning, def.reasoning);
    EXPECT_GE(def.reasoning + 2, none.reasoning);
    EXPECT_GE(def.score(), deep.score());
    for (const Shape* s : {&def, &deep, &none}) {
        EXPECT_GE(s->finished_accuracy(), 0.85);
        EXPECT_GE(s->never_finished, s->reasoning);
    }
}

} // namespace
} // namespace diffeval::sim
