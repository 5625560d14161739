// Experiment files and framings with numbers no integer can hold: found by
// fuzz_experiment_toml, where toml++ converted 1E024 to an integer with
// undefined behaviour. Each must be one usage error naming the line.
#include <harness/engine/config.hpp>
#include <harness/framing/framing.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace diffeval;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
    auto path = std::filesystem::temp_directory_path() /
                ("diffeval-unit-" + std::to_string(::getpid()) + "-" + name);
    std::ofstream(path) << text;
    return path.string();
}

} // namespace

TEST(ExperimentFile, HugeFloatForAnIntegerIsAUsageErrorNamingTheLine) {
    for (const char* value : {"1E024", "-1e300", "9.3e18", "inf", "nan", "2.5"}) {
        auto path = write_temp("huge.toml", std::string("version = 1\nmax_tokens = [256, ") +
                                                value + "]\n");
        engine::RunConfig config;
        auto r = engine::load_experiment(path, config);
        ASSERT_FALSE(r) << value;
        EXPECT_EQ(r.error().kind, util::ErrorKind::usage) << value;
        EXPECT_NE(r.error().message.find(":2:"), std::string::npos) << r.error().message;
        std::filesystem::remove(path);
    }
}

TEST(ExperimentFile, IntegralFloatIsTheSameInteger) {
    auto path = write_temp("integral.toml", "version = 1\nmax_tokens = [512.0]\nrepeats = 3.0\n");
    engine::RunConfig config;
    ASSERT_TRUE(engine::load_experiment(path, config));
    EXPECT_EQ(config.max_tokens, std::vector<int>{512});
    EXPECT_EQ(config.repeats, 3);
    std::filesystem::remove(path);
}

TEST(FramingFile, FewshotOutsideItsRangeIsAUsageError) {
    for (const char* value : {"1e30", "-1", "\"five\"", "4294967301"}) {
        auto path = write_temp("framing.toml", std::string("kind = \"completion\"\nfewshot = ") +
                                                   value + "\n");
        auto r = framing::load_framing(path);
        ASSERT_FALSE(r) << value;
        EXPECT_NE(r.error().message.find("'fewshot' must be an integer"), std::string::npos)
            << r.error().message;
        std::filesystem::remove(path);
    }
}
