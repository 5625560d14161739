// Framing files are input like any other: a number no integer can hold, a
// value of the wrong type or an unknown choice is one usage error naming the
// key, never a silent default.
#include <harness/framing/framing.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace diffeval;

namespace {

std::string framing_file(const std::string& text) {
    auto path = std::filesystem::temp_directory_path() /
                ("diffeval-framing-" + std::to_string(::getpid()) + ".toml");
    std::ofstream(path) << text;
    return path.string();
}

const char* k_valid = R"(endpoint = "/v1/completions"
kind = "completion"
question_template = "Question: {question}\nAnswer:"
body = ["prompt", "max_tokens"]
)";

} // namespace

TEST(FramingFile, AValidFileLoads) {
    auto path = framing_file(k_valid);
    auto f = framing::load_framing(path);
    ASSERT_TRUE(f) << f.error().message;
    EXPECT_EQ(f->fewshot, 5);
    EXPECT_EQ(f->probe_chain, " ");
    std::filesystem::remove(path);
}

TEST(FramingFile, BadValuesAreUsageErrorsNamingTheKey) {
    const std::pair<std::string, std::string> cases[] = {
        {"fewshot = 1e30\n", "'fewshot' must be an integer"},
        {"fewshot = -1\n", "'fewshot' must be an integer"},
        {"fewshot = \"five\"\n", "'fewshot' must be an integer"},
        {"fewshot = 4294967301\n", "'fewshot' must be an integer"},
        {"fewshot_seed = 1e300\n", "'fewshot_seed' must be an integer"},
        {"description = 5\n", "'description' must be a string"},
        {"fewshot_as = \"pairs\"\n", "fewshot_as must be \"turns\" or \"one-message\""},
        {"model = true\n", "'model' must be a string"},
        {"optional = [\"seed\", 3]\n", "'optional' must be a list of strings"},
        {"fields = 3\n", "'fields' must be a table"},
    };
    for (const auto& [line, expected] : cases) {
        auto path = framing_file(line + k_valid);
        auto f = framing::load_framing(path);
        ASSERT_FALSE(f) << line;
        EXPECT_EQ(f.error().kind, util::ErrorKind::usage);
        EXPECT_NE(f.error().message.find(expected), std::string::npos)
            << line << ": " << f.error().message;
        std::filesystem::remove(path);
    }
}
