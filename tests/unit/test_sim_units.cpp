// The simulator's building blocks: profile loading and its errors, the
// tokenizer's rules, GSM8K arithmetic and slips, question extraction (the
// rest of request reading is in test_sim_request.cpp).
#include <harness/sim/arithmetic.hpp>
#include <harness/sim/generate.hpp>
#include <harness/sim/profile.hpp>
#include <harness/sim/question_bank.hpp>
#include <harness/sim/request.hpp>
#include <harness/sim/tokenizer.hpp>
#include <harness/sim/writer.hpp>

#include <datasets/dataset.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace diffeval::sim {
namespace {

using nlohmann::json;

TEST(SimProfile, BuiltInProfilesLoad) {
    EXPECT_EQ(builtin_profile_names(),
              (std::vector<std::string>{"deepgemm", "default", "no-deepgemm"}));
    auto def = load_profile("default");
    auto deep = load_profile("deepgemm");
    auto none = load_profile("no-deepgemm");
    ASSERT_TRUE(def.ok() && deep.ok() && none.ok());
    EXPECT_EQ(def->name, "default");
    EXPECT_EQ(def->server.vllm_version, "0.28.0");
    EXPECT_GT(deep->behaviour.reasoning_rate, def->behaviour.reasoning_rate);
    EXPECT_LT(none->behaviour.reasoning_rate, def->behaviour.reasoning_rate);
}

TEST(SimProfile, UnknownNameListsTheKnownOnes) {
    auto p = load_profile("deepgem");
    ASSERT_FALSE(p.ok());
    for (const char* known : {"default", "deepgemm", "no-deepgemm"}) {
        EXPECT_NE(p.error().message.find(known), std::string::npos) << p.error().message;
    }
}

TEST(SimProfile, UnknownKeysAndBadValuesNameFileAndLine) {
    auto unknown =
        parse_profile("version = 1\nname = \"x\"\n[behaviour]\nreasoning_rat = 0.1\n", "my.toml");
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(unknown.error().message.find("my.toml:4"), std::string::npos)
        << unknown.error().message;
    EXPECT_NE(unknown.error().message.find("reasoning_rat"), std::string::npos);

    auto range = parse_profile("version = 1\nname = \"x\"\n[faults]\nhttp_500 = 1.5\n", "f.toml");
    ASSERT_FALSE(range.ok());
    EXPECT_NE(range.error().message.find("f.toml:4"), std::string::npos);

    auto section = parse_profile("version = 1\nname = \"x\"\n[falts]\n", "s.toml");
    ASSERT_FALSE(section.ok());
    EXPECT_NE(section.error().message.find("[falts]"), std::string::npos);

    EXPECT_FALSE(parse_profile("name = \"x\"\n", "v.toml").ok());
    EXPECT_FALSE(parse_profile("version = 2\nname = \"x\"\n", "v.toml").ok());
    EXPECT_FALSE(
        parse_profile("version = 1\nname = \"x\"\n[server]\nreasoning_parser = \"x\"\n", "p.toml")
            .ok());
}

TEST(SimProfile, LoadsFromAPath) {
    auto path = std::filesystem::temp_directory_path() / "diffeval_sim_profile_test.toml";
    {
        std::ofstream out(path);
        out << "version = 1\nname = \"mine\"\n[latency]\nttft_ms = 5\n[server]\n"
               "reasoning_field = \"both\"\n";
    }
    auto p = load_profile(path.string());
    std::filesystem::remove(path);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->name, "mine");
    EXPECT_EQ(p->latency.ttft_ms, 5);
    EXPECT_EQ(p->server.reasoning_field, ReasoningField::both);
    EXPECT_EQ(p->behaviour.reasoning_rate, Behaviour{}.reasoning_rate);
}

TEST(SimTokenizer, FollowsTheDocumentedRules) {
    auto t = [](std::string_view s) {
        std::vector<std::string> out;
        for (auto v : tokenize(s)) {
            out.emplace_back(v);
        }
        return out;
    };
    using V = std::vector<std::string>;
    EXPECT_EQ(t("Question"), V{"Question"});
    EXPECT_EQ(t(" Question:"), (V{" Question", ":"}));
    EXPECT_EQ(t("reasoning"), (V{"reasonin", "g"}));
    EXPECT_EQ(t("130000"), (V{"130", "000"}));
    EXPECT_EQ(t("#### 72"), (V{"####", " ", "72"}));
    EXPECT_EQ(t("=$<<48/2"), (V{"=$<<", "48", "/", "2"}));
    EXPECT_EQ(t(" <think>\n</think>"), (V{" ", "<think>", "\n", "</think>"}));
    EXPECT_EQ(t("a<think>"), (V{"a", "<think>"}));
    EXPECT_EQ(t(">><|im_end|>"), (V{">>", "<|im_end|>"}));
    EXPECT_EQ(t("Janet\xE2\x80\x99s"), (V{"Janet", "\xE2\x80\x99", "s"}));
    EXPECT_EQ(t("a  b"), (V{"a", " ", " b"}));
    // Special tokens end a run of punctuation and keep a space apart.
    EXPECT_EQ(t(" <think>x"), (V{" ", "<think>", "x"}));
    EXPECT_EQ(t(" <<"), (V{" <<"}));
    EXPECT_EQ(t("<<think>"), (V{"<", "<think>"}));
    EXPECT_EQ(t("=<|im_end|>"), (V{"=", "<|im_end|>"}));
    EXPECT_EQ(t(" ==>>>"), (V{" ==>>", ">"}));
    EXPECT_EQ(t(" 12"), (V{" ", "12"}));
    // Bytes of no valid UTF-8 sequence are a token each.
    EXPECT_EQ(t("a\xFF"
                "b"),
              (V{"a", "\xFF", "b"}));
    EXPECT_EQ(t("\xE2\x80"
                "x"),
              (V{"\xE2", "\x80", "x"}));
    EXPECT_EQ(t("\x7F\x01 \n"), (V{"\x7F", "\x01", " ", "\n"}));
}

TEST(SimTokenizer, CountMatchesSplitAndRoundTrips) {
    std::string text = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n#### 18";
    auto tokens = tokenize(text);
    EXPECT_EQ(count_tokens(text), static_cast<int>(tokens.size()));
    std::string joined;
    for (auto v : tokens) {
        joined += v;
    }
    EXPECT_EQ(joined, text);
}

TEST(SimTokenizer, PrefixCounterCountsAsCountTokens) {
    auto ds = datasets::open_dataset("sample").value();
    std::string shots;
    for (size_t k = 0; k < 5; ++k) {
        shots +=
            "Question: " + ds.fewshot[k].question + "\nAnswer: " + ds.fewshot[k].answer + "\n\n";
    }
    std::vector<std::string> texts = {"", "\n", "a\n", "a\nb", "a\n", "a", "x <think>\n"};
    for (size_t i = 0; i < ds.test.size(); ++i) {
        const std::string question = "Question: " + ds.test[i].question + "\nAnswer:";
        texts.push_back(shots + question);
        texts.push_back(shots + question + " ");
        texts.push_back("<|im_start|>user\n" + shots + question + "<|im_end|>\n");
        texts.push_back(std::to_string(i) + "\n" + shots); // a family of its own each time
        texts.push_back(shots.substr(0, shots.size() - 1) + "x" + question);
    }
    PrefixTokenCounter counter;
    for (const auto& text : texts) {
        EXPECT_EQ(counter.count(text), count_tokens(text)) << text;
    }
}

TEST(SimArithmetic, EvaluatesAnnotations) {
    EXPECT_EQ(evaluate("16-3-4"), 9.0);
    EXPECT_EQ(evaluate("80000*1.5"), 120000.0);
    EXPECT_EQ(evaluate("(2+3)*4/2"), 10.0);
    EXPECT_EQ(evaluate("-2+5"), 3.0);
    EXPECT_FALSE(evaluate("4/0"));
    EXPECT_FALSE(evaluate("4+"));
    EXPECT_EQ(format_number(120000.0), "120000");
    EXPECT_EQ(format_number(2.5), "2.5");
    EXPECT_EQ(format_number(1.0 / 3.0), "0.33");
    auto steps = find_steps("a <<2*3=6>>6 b <<6+1=7>>7");
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps[1].expr, "6+1");
    EXPECT_EQ(steps[1].result, "7");
}

TEST(SimArithmetic, SlipPropagatesToTheFinalAnswer) {
    std::string answer = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
                         "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer's market.\n"
                         "#### 18";
    for (uint64_t seed = 0; seed < 50; ++seed) {
        std::string wrong = slip_answer(answer, seed);
        std::string fin = final_answer(wrong);
        EXPECT_NE(fin, "18") << wrong;
        EXPECT_FALSE(fin.empty());
        // The last step's result and the final line agree.
        auto steps = find_steps(wrong);
        ASSERT_EQ(steps.size(), 2u);
        EXPECT_EQ(steps.back().result, fin) << wrong;
    }
}

TEST(SimRequest, ExtractsTheLastQuestion) {
    EXPECT_EQ(extract_question("Question: a?\nAnswer: 1\n\nQuestion: How many?\nAnswer:"),
              "How many?");
    EXPECT_EQ(extract_question("Question: x  y?\nAnswer:"), "x  y?");
    EXPECT_EQ(extract_question("just text"), "just text");
}

// A chat body asking a question no dataset holds, without thinking.
json pets_question() {
    return {{"messages",
             {{{"role", "user"}, {"content", "Tom has 4 cats and 3 dogs. How many pets?"}}}},
            {"chat_template_kwargs", {{"enable_thinking", false}}},
            {"max_tokens", 200}};
}

TEST(SimGenerate, UnknownQuestionsGetAPlausibleAnswer) {
    datasets::Dataset empty;
    QuestionBank bank(empty);
    Profile p = load_profile("default").value();
    json body = pets_question();
    Generation g = generate(p, bank, body, Endpoint::chat, 0);
    EXPECT_FALSE(g.decisions.known_question);
    EXPECT_EQ(g.finish_reason, "stop");
    ASSERT_TRUE(g.content);
    EXPECT_NE(g.content->find("#### 7"), std::string::npos) << *g.content;
}

// vLLM checks the stop strings after each token, in list order, for one that
// ends in the characters that token added; the first found cuts the text
// where it starts. The simulator's cut is checked here against that rule
// written out plainly, one search per token and stop string, on the same
// answer generated without stop strings.
TEST(SimGenerate, StopStringsCutWhereThePerTokenCheckWould) {
    datasets::Dataset empty;
    QuestionBank bank(empty);
    Profile p = load_profile("default").value();
    json body = pets_question();
    const Generation whole = generate(p, bank, body, Endpoint::chat, 0);
    ASSERT_EQ(whole.finish_reason, "stop");
    ASSERT_GT(whole.token_spans.size(), 10u);
    const std::string_view out = whole.output;
    const std::vector<std::vector<std::string>> lists = {
        {"7"},       {"#### 7", "7"}, {"7", "#### 7"},  {"4", "3"},         {"3", "4"},
        {" ", "a"},  {"ss", "s"},     {"<<4+3", "+"},   {"amounts", "two"}, {"zzz"},
        {"#", "##"}, {"\n", "s"},     {"=7>>7", "7>>"},
    };
    int stopped = 0;
    for (const auto& stops : lists) {
        // The rule: after token k (characters [begin, end)), the first stop
        // string in list order found in out[0, end) at or after the first
        // place from which it could end past `begin`.
        std::optional<std::pair<std::string, size_t>> expected;
        size_t tokens = 0;
        for (const auto& [offset, length] : whole.token_spans) {
            ++tokens;
            const size_t begin = offset;
            const size_t end = offset + length;
            for (const auto& s : stops) {
                const size_t from = begin + 1 > s.size() ? begin + 1 - s.size() : 0;
                if (size_t at = out.substr(0, end).find(s, from); at != std::string_view::npos) {
                    expected = {s, at};
                    break;
                }
            }
            if (expected) {
                break;
            }
        }
        body["stop"] = stops;
        const Generation g = generate(p, bank, body, Endpoint::chat, 0);
        const std::string list = json(stops).dump();
        if (!expected) {
            EXPECT_EQ(g.text, whole.text) << list;
            EXPECT_TRUE(g.stop_reason.is_null()) << list;
            continue;
        }
        ++stopped;
        EXPECT_EQ(g.finish_reason, "stop") << list;
        EXPECT_EQ(g.stop_reason, expected->first) << list;
        EXPECT_EQ(g.text, std::string(out.substr(0, expected->second))) << list;
        EXPECT_EQ(static_cast<size_t>(g.completion_tokens), tokens) << list;
    }
    EXPECT_EQ(stopped, static_cast<int>(lists.size()) - 1) << out; // all but "zzz" stop it
}

TEST(SimGenerate, ProfilesShareTheQuestionLatents) {
    // deepgemm reasons on (nearly) every question default reasons on.
    auto ds = datasets::open_dataset("sample");
    ASSERT_TRUE(ds.ok());
    QuestionBank bank(*ds);
    Profile def = load_profile("default").value();
    Profile deep = load_profile("deepgemm").value();
    int both = 0;
    int only_default = 0;
    for (const auto& q : ds->test) {
        json body = {{"prompt", "Question: " + q.question + "\nAnswer:"}, {"max_tokens", 64}};
        bool a = generate(def, bank, body, Endpoint::completions, 0).decisions.reasoning;
        bool b = generate(deep, bank, body, Endpoint::completions, 0).decisions.reasoning;
        both += a && b;
        only_default += a && !b;
    }
    EXPECT_GE(both, 1);
    EXPECT_LE(only_default, 1);
}

TEST(SimWriter, ReasoningWritesQuestionOnlyWhenPlanned) {
    std::string q = "Tom has 4 cats and 3 dogs. How many pets does he have?";
    std::string a = "He has 4+3=<<4+3=7>>7 pets.\n#### 7";
    ReasoningPlan never{800, 1.0, 1};
    EXPECT_EQ(write_reasoning(q, a, never).find("Question"), std::string::npos);
    ReasoningPlan early{800, 0.1, 1};
    std::string text = write_reasoning(q, a, early);
    EXPECT_NE(text.find("- **Question:**"), std::string::npos);
    EXPECT_GE(count_tokens(text), 800);
    EXPECT_NE(write_verbose(q, a, 400).find("#### 7"), std::string::npos);
    EXPECT_GE(count_tokens(write_loop(a, 300)), 300);
}

} // namespace
} // namespace diffeval::sim
