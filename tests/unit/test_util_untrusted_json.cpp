// Parsing JSON from servers: nesting beyond the bound is refused before the
// parser sees it, brackets inside strings do not count, and ordinary
// responses parse as before.
#include <harness/util/untrusted_json.hpp>

#include <gtest/gtest.h>

using diffeval::util::json_depth_within;
using diffeval::util::k_max_json_depth;
using diffeval::util::parse_untrusted_json;

TEST(UntrustedJson, DeepNestingIsRefusedWithoutRecursing) {
    const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
    EXPECT_FALSE(json_depth_within(deep));
    EXPECT_TRUE(parse_untrusted_json(deep).is_discarded());
}

TEST(UntrustedJson, TheBoundItselfIsAccepted) {
    const std::string at = std::string(k_max_json_depth, '[') + std::string(k_max_json_depth, ']');
    EXPECT_TRUE(json_depth_within(at));
    EXPECT_TRUE(parse_untrusted_json(at).is_array());
    EXPECT_FALSE(json_depth_within("[" + at + "]"));
}

TEST(UntrustedJson, BracketsInsideStringsDoNotCount) {
    const std::string text = R"({"content": ")" + std::string(1000, '[') + R"(\"[{"})";
    EXPECT_TRUE(json_depth_within(text));
    auto j = parse_untrusted_json(text);
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["content"].get<std::string>().size(), 1003u);
}

TEST(UntrustedJson, InvalidJsonIsDiscarded) {
    EXPECT_TRUE(parse_untrusted_json("{\"a\": ").is_discarded());
    EXPECT_EQ(parse_untrusted_json(R"({"choices":[{"text":"42"}]})")["choices"][0]["text"], "42");
}
