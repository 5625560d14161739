// util::xml_escape: one escaper for report.html and the gate's JUnit XML.
#include <harness/util/escape.hpp>

#include <gtest/gtest.h>

using diffeval::util::xml_escape;

TEST(XmlEscape, EscapesMarkup) {
    EXPECT_EQ(xml_escape("<a href=\"x\">'&'</a>"),
              "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    EXPECT_EQ(xml_escape("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");
}

// XML 1.0 holds no control character but tab and line ends, not even as a
// reference: a JUnit file with one (a --db path with a terminal escape, in
// the gate's <error>) was no XML, and a CI's parser refused it whole.
TEST(XmlEscape, ControlCharactersXmlCannotHoldBecomeSpaces) {
    EXPECT_EQ(xml_escape("a\x1b[2Jb\x07\x7f"), "a [2Jb  ");
    EXPECT_EQ(xml_escape("a\tb\nc\rd"), "a\tb\nc\rd");
}

TEST(XmlEscape, BytesThatAreNotUtf8BecomeReplacementCharacters) {
    EXPECT_EQ(xml_escape("b\xff<"), "b\xef\xbf\xbd&lt;");
}
