// Verdict colouring: whole words only, and nothing at all off a terminal or
// under NO_COLOR.
#include <harness/cli/colour.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

namespace diffeval::cli {
namespace {

TEST(ColourVerdicts, WrapsWholeWordsOnly) {
    EXPECT_EQ(colour_verdicts("PASS: all 3 checks passed"),
              "\033[1;32mPASS\033[0m: all 3 checks passed");
    EXPECT_EQ(colour_verdicts("raw/256: worse by 8.7 points"),
              "raw/256: \033[31mworse\033[0m by 8.7 points");
    // Parts of longer words stay plain.
    EXPECT_EQ(colour_verdicts("PASSED betterment FAILURE"), "PASSED betterment FAILURE");
    EXPECT_EQ(colour_verdicts("no-worse"), "no-worse");
    // The gate writes an inconclusive margin check "FAIL (inconclusive)".
    EXPECT_EQ(colour_verdicts("FAIL (inconclusive)"),
              "\033[1;31mFAIL\033[0m (\033[33minconclusive\033[0m)");
}

TEST(ColourVerdicts, PlainTextHasNoEscapes) {
    const std::string plain = "no detectable difference: [-1.2, +0.8] points";
    EXPECT_EQ(colour_verdicts(plain), plain);
}

TEST(ForTerminal, NoColourOffATerminalOrUnderNoColor) {
    std::FILE* file = std::tmpfile();
    ASSERT_NE(file, nullptr);
    EXPECT_FALSE(colour_enabled(file));
    EXPECT_EQ(for_terminal("FAIL", file), "FAIL");
    std::fclose(file);
    setenv("NO_COLOR", "1", 1);
    EXPECT_FALSE(colour_enabled(stdout));
    unsetenv("NO_COLOR");
}

} // namespace
} // namespace diffeval::cli
