// analysis::compare: which errors a caller that compares many pairs (a
// report) may pass over, told by the error's kind rather than its words.
#include <harness/analysis/compare.hpp>

#include <gtest/gtest.h>

namespace {

using namespace diffeval;

// Servers a (framing raw) and b (framing chat), 4 questions each.
analysis::Results two_framings() {
    analysis::Results r;
    r.servers = {"a", "b"};
    r.framings = {"chat", "raw"}; // sorted, as load_results gives them
    r.datasets = {"sample"};
    r.scorers = {"s0"};
    r.score_text = "full";
    int64_t id = 1;
    for (int server = 0; server < 2; ++server) {
        for (int q = 0; q < 4; ++q) {
            analysis::ResultRow row;
            row.response_id = id++;
            row.server = server;
            row.framing = server == 0 ? 1 : 0;
            row.max_tokens = 256;
            row.question_idx = q;
            row.ok = true;
            row.outcome = scorers::Outcome::finished;
            row.correct.set(0, q != 0);
            row.valid.set(0, true);
            r.rows.push_back(row);
        }
    }
    return r;
}

TEST(AnalysisCompare, NoPairOfGroupsIsANoMatchErrorListingTheGroups) {
    const auto r = two_framings();
    auto cmp = analysis::compare(r, {"a", {}, {}}, {"b", {}, {}}, 0);
    ASSERT_FALSE(cmp.ok());
    EXPECT_EQ(cmp.error().kind, util::ErrorKind::no_match);
    EXPECT_EQ(cmp.error().message,
              "no pair of groups matches a and b; groups: a/raw/256, b/chat/256");
    // Naming the framing pairs them.
    EXPECT_TRUE(analysis::compare(r, {"a", {}, {}}, {"b", std::string("chat"), {}}, 0).ok());
}

// With nothing set apart, every group would be compared with itself: said so,
// where it said that no pair of groups matches (the group it named is there).
TEST(AnalysisCompare, SelectingTheSameGroupsTwiceIsAUsageErrorSayingSo) {
    const auto r = two_framings();
    for (const auto& [a, b] : std::vector<std::pair<analysis::Selector, analysis::Selector>>{
             {{"a", {}, {}}, {"a", {}, {}}},
             {{"a", std::string("raw"), {}}, {"a", {}, {}}},
             {{"a", std::string("raw"), 256}, {"a", std::string("raw"), 256}}}) {
        auto cmp = analysis::compare(r, a, b, 0);
        ASSERT_FALSE(cmp.ok());
        EXPECT_EQ(cmp.error().kind, util::ErrorKind::usage);
        EXPECT_EQ(cmp.error().message,
                  a.text() + " and " + b.text() +
                      " select the same groups, so each would be compared with itself: name "
                      "another server, framing or token limit for one of them");
    }
}

TEST(AnalysisCompare, AnUnknownServerIsAUsageErrorNotANoMatch) {
    auto cmp = analysis::compare(two_framings(), {"a", {}, {}}, {"nosuch", {}, {}}, 0);
    ASSERT_FALSE(cmp.ok());
    EXPECT_EQ(cmp.error().kind, util::ErrorKind::usage) << cmp.error().message;
}

} // namespace
