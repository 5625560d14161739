// Redaction: the key disappears in every spelling a server may echo it in,
// short values are left alone, and the caller learns whether anything
// was replaced.
#include <harness/util/redact.hpp>

#include <gtest/gtest.h>

using diffeval::util::Redactor;
using diffeval::util::TextEnd;

TEST(Redactor, ReplacesEveryOccurrenceAndSaysSo) {
    Redactor r;
    r.add("sk-abc/def+123456");
    std::string text = "Authorization: Bearer sk-abc/def+123456 and again sk-abc/def+123456";
    EXPECT_TRUE(r.apply(text));
    EXPECT_EQ(text, "Authorization: Bearer [REDACTED] and again [REDACTED]");
    std::string clean = "nothing to see";
    EXPECT_FALSE(r.apply(clean));
    EXPECT_EQ(clean, "nothing to see");
}

TEST(Redactor, ReplacesTheJsonEscapedSpelling) {
    Redactor r;
    r.add("sk-abc/def\"12345");
    std::string body = R"({"echo": "Bearer sk-abc\/def\"12345"})";
    EXPECT_TRUE(r.apply(body));
    EXPECT_EQ(body, R"({"echo": "Bearer [REDACTED]"})");
}

// A key with characters beyond ASCII, echoed by an encoder that writes
// ASCII only (Python's json.dumps by default), in either case of hex.
TEST(Redactor, ReplacesTheAsciiEscapedSpelling) {
    Redactor r;
    r.add("sk-\u20ac/clé-12345");
    std::string lower = R"({"echo": "Bearer sk-\u20ac/cl\u00e9-12345"})";
    EXPECT_TRUE(r.apply(lower));
    EXPECT_EQ(lower, R"({"echo": "Bearer [REDACTED]"})");
    std::string upper = R"({"echo": "sk-\u20AC\/cl\u00E9-12345"})";
    EXPECT_TRUE(r.apply(upper));
    EXPECT_EQ(upper, R"({"echo": "[REDACTED]"})");
}

TEST(Redactor, ShortValuesAreNotSecrets) {
    Redactor r;
    r.add("EMPTY");
    EXPECT_TRUE(r.empty());
    std::string text = "The answer is EMPTY";
    EXPECT_FALSE(r.apply(text));
}

TEST(RedactorFind, GivesEachSecretsRangeInOrder) {
    Redactor r;
    r.add("sk-live-AbCdEf");
    EXPECT_TRUE(r.find("nothing here").empty());
    const std::string text = "a sk-live-AbCdEf b sk-live-AbCdEf";
    auto spans = r.find(text);
    ASSERT_EQ(spans.size(), 2u);
    EXPECT_EQ(spans[0].begin, 2u);
    EXPECT_EQ(spans[0].end, 16u);
    EXPECT_EQ(spans[1].begin, 19u);
    EXPECT_EQ(spans[1].end, text.size());
}

// A key that overlaps itself: one mark for the whole run, no piece left
// beside it (replacing the first occurrence alone left "ab" behind).
TEST(RedactorFind, MergesOverlappingOccurrences) {
    Redactor r;
    r.add("abababab");
    auto spans = r.find("xababababab");
    ASSERT_EQ(spans.size(), 1u);
    EXPECT_EQ(spans[0].begin, 1u);
    EXPECT_EQ(spans[0].end, 11u);
    std::string text = "xabababababy";
    EXPECT_TRUE(r.apply(text));
    EXPECT_EQ(text, "x[REDACTED]y");
    // Back to back they stay two.
    std::string twice = "abababab abababab";
    EXPECT_TRUE(r.apply(twice));
    EXPECT_EQ(twice, "[REDACTED] [REDACTED]");
}

// A text cut short (a body a timeout stopped) that ends in a key's first
// characters holds a piece of it; a whole text, or fewer than 4 characters,
// does not count.
TEST(RedactorFind, ACutTextLosesTheKeysStartItEndsIn) {
    Redactor r;
    r.add("sk-live-AbCdEf0123456789");
    std::string cut = "The key is sk-live-AbC";
    EXPECT_FALSE(r.apply(cut));
    EXPECT_TRUE(r.apply(cut, TextEnd::cut));
    EXPECT_EQ(cut, "The key is [REDACTED]");
    Redactor e;
    e.add("sk-live-\xC3\xA9tAbCdEf0123456789");
    std::string both = "key sk-live-\\u00e9tAbCd";
    EXPECT_TRUE(e.apply(both, TextEnd::cut));
    EXPECT_EQ(both, "key [REDACTED]");
    std::string common = "The answer is";
    EXPECT_FALSE(r.apply(common, TextEnd::cut));
    std::string three = "call sk-";
    EXPECT_FALSE(r.apply(three, TextEnd::cut));
    // The whole key and then its start again: both go.
    std::string twice = "sk-live-AbCdEf0123456789 sk-live";
    EXPECT_TRUE(r.apply(twice, TextEnd::cut));
    EXPECT_EQ(twice, "[REDACTED] [REDACTED]");
}
