// python_strip: Python's str.strip() on UTF-8 text.
#include <scorers/python.hpp>

#include <gtest/gtest.h>

namespace diffeval::scorers {
namespace {

TEST(PythonStrip, RemovesAsciiWhitespaceAtBothEnds) {
    EXPECT_EQ(python_strip(" \t\n72\r\n"), "72");
    EXPECT_EQ(python_strip("7 2"), "7 2");
    EXPECT_EQ(python_strip("   "), "");
    EXPECT_EQ(python_strip(""), "");
}

TEST(PythonStrip, RemovesWhatPythonCountsAsSpace) {
    // File separators and Unicode spaces are whitespace to str.isspace().
    EXPECT_EQ(python_strip("\x1c"
                           "5\u00a0\u3000"),
              "5");
    EXPECT_EQ(python_strip("\u2028"
                           "5\u0085"),
              "5");
}

TEST(PythonStrip, KeepsOtherCharacters) {
    EXPECT_EQ(python_strip("\u200b5"), "\u200b5"); // zero-width space is not whitespace
    EXPECT_EQ(python_strip("5\u00e9"), "5\u00e9");
    // Stray bytes are never whitespace, even when they look like U+0085.
    EXPECT_EQ(python_strip("\x85"
                           "5"),
              "\x85"
              "5");
    EXPECT_EQ(python_strip("5\xc2"), "5\xc2");
}

} // namespace
} // namespace diffeval::scorers
