// Report layouts: the built-in file says what reports led with before it was
// data (vllm first, lm-eval-strict on chat); a user's file is checked like
// every other input file.
#include <reports/layout.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace diffeval;

namespace {

std::string layout_file(const std::string& text) {
    auto path = std::filesystem::temp_directory_path() /
                ("diffeval-layout-" + std::to_string(::getpid()) + ".toml");
    std::ofstream(path) << text;
    return path.string();
}

} // namespace

TEST(ReportLayout, BuiltInLeadsWithVllmThenLmEvalStrictOnChat) {
    auto l = reports::load_layout();
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_EQ(l->lead_scorer, "vllm");
    ASSERT_EQ(l->comparisons.size(), 2u);
    EXPECT_EQ(l->comparisons[0].scorer, "vllm");
    EXPECT_FALSE(l->comparisons[0].framing);
    EXPECT_TRUE(l->comparisons[0].required);
    EXPECT_EQ(l->comparisons[1].scorer, "lm-eval-strict");
    EXPECT_EQ(l->comparisons[1].framing, "chat");
    EXPECT_FALSE(l->comparisons[1].required);
}

TEST(ReportLayout, BadFilesAreUsageErrorsNamingTheProblem) {
    const std::pair<const char*, const char*> cases[] = {
        {"version = 1\nlead_scorer = \"vllm\"\n", "at least one [[comparisons]]"},
        {"version = 1\n[[comparisons]]\nscorer = \"vllm\"\n", "'lead_scorer'"},
        {"version = 2\nlead_scorer = \"vllm\"\n[[comparisons]]\nscorer = \"vllm\"\n",
         "'version = 1'"},
        {"version = 1e300\nlead_scorer = \"vllm\"\n[[comparisons]]\nscorer = \"vllm\"\n",
         "'version = 1'"},
        {"version = 1\nlead_scorer = \"vllm\"\n[[comparisons]]\nscorer = \"vllm\"\nframe = "
         "\"chat\"\n",
         ":5: unknown key 'frame'"},
        {"version = 1\nlead_scorer = \"vllm\"\n[[comparisons]]\nscorer = \"vllm\"\nrequired = "
         "\"no\"\n",
         "'required' must be true or false"},
        // Reports audit #3: a comparison made twice counted twice, in the
        // verdicts and the Holm family.
        {"version = 1\nlead_scorer = \"vllm\"\n[[comparisons]]\nscorer = \"vllm\"\nframing = "
         "\"raw\"\n[[comparisons]]\nscorer = \"vllm\"\n",
         ":6: this comparison (vllm on every framing) repeats one listed before it (vllm on "
         "framing raw), and would be counted twice; remove one"},
        {"version = 1\nlead_scorer = \"vllm\"\n[[comparisons]]\nscorer = \"vllm\"\n"
         "[[comparisons]]\nscorer = \"vllm\"\n",
         "repeats one listed before it"},
    };
    for (const auto& [text, expected] : cases) {
        auto path = layout_file(text);
        auto l = reports::load_layout(path);
        ASSERT_FALSE(l) << text;
        EXPECT_EQ(l.error().kind, util::ErrorKind::usage);
        EXPECT_NE(l.error().message.find(expected), std::string::npos) << l.error().message;
        std::filesystem::remove(path);
    }
    // One scorer on two framings, and two scorers on one: no repeat.
    auto path = layout_file("version = 1\nlead_scorer = \"vllm\"\n[[comparisons]]\nscorer = "
                            "\"vllm\"\nframing = \"raw\"\n[[comparisons]]\nscorer = \"vllm\"\n"
                            "framing = \"chat\"\n[[comparisons]]\nscorer = \"lm-eval-strict\"\n");
    auto l = reports::load_layout(path);
    EXPECT_TRUE(l) << l.error().message;
    std::filesystem::remove(path);
}
