// util::with_commas: the simulator writes GSM8K answers with it ("1,319")
// and the reports write counts with it; both read it as GSM8K does. And
// util::printed_value, from which differences beside printed numbers come.
// And util::counted and util::noun, which every count printed with its noun
// goes through, and util::p_text, which every printed p-value goes through.
#include <harness/util/text.hpp>

#include <gtest/gtest.h>

#include <cmath>

using diffeval::util::unicode_dash_length;
using diffeval::util::with_commas;

TEST(UnicodeDashLength, NamesTheDashesAFlagsHyphenBecomes) {
    for (const char* dash :
         {"\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2015", "\u2212"}) {
        EXPECT_EQ(unicode_dash_length(std::string(dash) + "limit", 0), 3U) << dash;
        EXPECT_EQ(unicode_dash_length(std::string("-") + dash + "db", 1), 3U) << dash;
    }
    // An ASCII hyphen, the double vertical line after the dashes, a
    // quotation mark of the same lead bytes, and a dash cut short.
    for (const char* other : {"-limit", "\u2016x", "\u201Cx", "\xE2\x80"}) {
        EXPECT_EQ(unicode_dash_length(other, 0), 0U) << other;
    }
}

TEST(WithCommas, GroupsTheIntegerPartInThrees) {
    EXPECT_EQ(with_commas("0"), "0");
    EXPECT_EQ(with_commas("999"), "999");
    EXPECT_EQ(with_commas("1000"), "1,000");
    EXPECT_EQ(with_commas("1319"), "1,319");
    EXPECT_EQ(with_commas("1234567"), "1,234,567");
}

TEST(WithCommas, KeepsTheSignAndTheFractionApart) {
    EXPECT_EQ(with_commas("-1234"), "-1,234");
    EXPECT_EQ(with_commas("-123"), "-123");
    EXPECT_EQ(with_commas("12345.678"), "12,345.678");
    EXPECT_EQ(with_commas("-1000.5"), "-1,000.5");
    EXPECT_EQ(with_commas(".5"), ".5");
    EXPECT_EQ(with_commas("-"), "-");
    EXPECT_EQ(with_commas(""), "");
}

// A difference printed beside two printed numbers is computed from their
// printed values: 83.33 and 77.78 print as 83.3 and 77.8, 5.5 apart.
TEST(PrintedValue, IsTheNumberAsPrinted) {
    using diffeval::util::printed_value;
    EXPECT_DOUBLE_EQ(printed_value("-5.5"), -5.5);
    EXPECT_DOUBLE_EQ(printed_value("83.3") - printed_value("77.8"), 83.3 - 77.8);
    EXPECT_DOUBLE_EQ(printed_value("-0"), 0.0);
    EXPECT_DOUBLE_EQ(printed_value("+12"), 12.0);
}

TEST(Counted, IsSingularForOneAndPluralOtherwise) {
    EXPECT_EQ(diffeval::util::counted(1, "question"), "1 question");
    EXPECT_EQ(diffeval::util::counted(0, "question"), "0 questions");
    EXPECT_EQ(diffeval::util::counted(size_t{3}, "repeat"), "3 repeats");
    EXPECT_EQ(diffeval::util::counted(int64_t{1}, "response"), "1 response");
    EXPECT_EQ(diffeval::util::noun(2, "match", "matches"), "matches");
    EXPECT_EQ(diffeval::util::noun(1, "match", "matches"), "match");
}

TEST(Counted, TwoSidesRepeatsReadAsOneCountWhenEqual) {
    // "40 questions (1 repeat each)", never "(1 and 1 repeats)".
    EXPECT_EQ(diffeval::util::repeats_of_two(1, 1), "1 repeat each");
    EXPECT_EQ(diffeval::util::repeats_of_two(3, 3), "3 repeats each");
    EXPECT_EQ(diffeval::util::repeats_of_two(3, 1), "3 and 1 repeats");
}

// A p-value past a double's range is never printed as 0 (stats audit: the
// exact mid-p of 1,313 questions against none, 2^-1312, printed "0").
TEST(PText, GivesSignificantDigitsAndABoundBelowADoublesRange) {
    EXPECT_EQ(diffeval::util::p_text(0.021484375), "0.0215");
    EXPECT_EQ(diffeval::util::p_text(0.021484375, 2), "0.021");
    EXPECT_EQ(diffeval::util::p_text(1.0), "1");
    EXPECT_EQ(diffeval::util::p_text(1.09e-29), "1.09e-29");
    EXPECT_EQ(diffeval::util::p_text(0.0), "< 1e-300");
    EXPECT_EQ(diffeval::util::p_text(std::ldexp(1.0, -1050)), "< 1e-300");
}

// A p exactly halfway between two printed values rounds up, not to even:
// the sign-flip p of four questions all one way, 1/16, is "0.063", as a
// reader dividing by hand gets it (outside audit: it printed "0.062").
TEST(PText, RoundsATieUp) {
    EXPECT_EQ(diffeval::util::p_text(0.0625, 2), "0.063");
    EXPECT_EQ(diffeval::util::p_text(0.125, 2), "0.13");
    EXPECT_EQ(diffeval::util::p_text(0.0625), "0.0625");
    EXPECT_EQ(diffeval::util::p_text(0.05, 2), "0.05");
}

// What JSON output may hold (RFC 3629): names and paths that fail it are
// refused or replaced before nlohmann's dump() would throw on them.
TEST(IsUtf8, AcceptsUtf8AndRefusesWhatJsonCannotHold) {
    using diffeval::util::is_utf8;
    EXPECT_TRUE(is_utf8(""));
    EXPECT_TRUE(is_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
    EXPECT_FALSE(is_utf8("caf\xe9"));                   // Latin-1
    EXPECT_FALSE(is_utf8("\xc0\xaf"));                  // overlong '/'
    EXPECT_FALSE(is_utf8("\xed\xa0\x80"));              // a surrogate
    EXPECT_FALSE(is_utf8("\xf4\x90\x80\x80"));          // past U+10FFFF
    EXPECT_FALSE(is_utf8("\xe2\x82"));                  // cut short
    EXPECT_FALSE(is_utf8(std::string_view("\x80", 1))); // a stray continuation byte
}

// A server's words printed as one line: a byte that is no UTF-8 reached the
// terminal raw (an audit: an HTTP 400 body of "\x9b2J", the 8-bit CSI, which
// a terminal reading 8-bit controls acts on) and was stored as no UTF-8.
TEST(Text, OneLineReplacesBytesThatAreNoUtf8) {
    EXPECT_EQ(diffeval::util::one_line("\x9b"
                                       "2J\x9b"
                                       "31mALL OK\xff",
                                       100),
              "\xEF\xBF\xBD"
              "2J\xEF\xBF\xBD"
              "31mALL OK\xEF\xBF\xBD");
    EXPECT_TRUE(diffeval::util::is_utf8(
        diffeval::util::one_line("a\xc0\xaf z \xed\xa0\x80 \xf4\x90\x80\x80", 100)));
    // Valid text is untouched: a 4-byte sequence, a no-break space.
    EXPECT_EQ(diffeval::util::one_line("ok \xf0\x9f\x99\x82 \xc2\xa0.", 100),
              "ok \xf0\x9f\x99\x82 \xc2\xa0.");
    // An overlong '/', a surrogate, a cut sequence: one U+FFFD a byte.
    EXPECT_EQ(diffeval::util::one_line("\xc0\xaf", 100), "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(diffeval::util::one_line("\xed\xa0\x80", 100),
              "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(diffeval::util::one_line("x\xe2\x82", 100), "x\xEF\xBF\xBD\xEF\xBF\xBD");
}
