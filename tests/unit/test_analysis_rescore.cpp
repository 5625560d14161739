// The scorer a run and the scoring stage share (analysis::ResponseScorer):
// what it remembers of texts it scored never changes a score.
#include <harness/analysis/rescore.hpp>
#include <scorers/registry.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace diffeval::analysis {
namespace {

store::ResponseToScore response(int64_t question, const std::string& gold,
                                const std::string& text) {
    store::ResponseToScore r;
    r.dataset = "gsm8k";
    r.question_idx = question;
    r.answer = "Some working.\n#### " + gold;
    r.text = text;
    r.finish_reason = "stop";
    r.stop_field = "stop";
    r.ok = true;
    return r;
}

// Every scorer's (extracted, correct) for each response, scored in order.
std::vector<std::vector<std::pair<std::string, bool>>>
scores(size_t memo_bytes, const std::vector<store::ResponseToScore>& responses) {
    const auto registry = scorers::Registry::builtin();
    EXPECT_TRUE(registry);
    ResponseScorer scorer(registry->all(), scorers::ScoreText::full, memo_bytes);
    std::vector<std::vector<std::pair<std::string, bool>>> out;
    for (const auto& r : responses) {
        auto& row = out.emplace_back();
        for (const auto& s : scorer.derive(r, {}).scores) {
            row.emplace_back(s.extracted, s.correct);
        }
    }
    return out;
}

TEST(ResponseScorer, TheSameTextUnderAnotherQuestionIsScoredAgainstThatQuestionsGold) {
    // Questions 0 and 1 take turns with the same answer text: right for
    // question 0 only, however often the memory starts over (a memory of
    // 0 bytes starts over at every response, freeing every gold it held).
    std::vector<store::ResponseToScore> responses;
    for (int i = 0; i < 40; ++i) {
        responses.push_back(
            response(i % 2, i % 2 == 0 ? "72" : "18", "So the answer is 72.\n#### 72"));
        responses.push_back(response(2 + i, std::to_string(i), "#### " + std::to_string(i)));
    }
    const auto remembered = scores(ResponseScorer::k_pass_memo_bytes, responses);
    for (const size_t bytes : {size_t{0}, size_t{200}, ResponseScorer::k_run_memo_bytes}) {
        EXPECT_EQ(scores(bytes, responses), remembered) << bytes;
    }
    ASSERT_FALSE(remembered.front().empty());
    for (size_t i = 0; i < responses.size(); ++i) {
        // Question 1's gold is 18; everything else answers its own gold.
        const bool right = responses[i].question_idx != 1;
        EXPECT_EQ(remembered[i].front().second, right) << i;
    }
}

} // namespace
} // namespace diffeval::analysis
