// libFuzzer target: every built-in scorer (regexes, number normalisation,
// Python int parsing) and the outcome classifier on arbitrary model text.
// Differential too: a scorer taking the last match finds it with one forward
// search per match or per stride of up to eight matches (scorer.cpp, `ahead`
// and `stride`); the same scorer with its pattern behind an empty `\Q\E`
// (the same language, but the plain findall loop) must extract exactly what
// it does.
#include <scorers/classify.hpp>
#include <scorers/registry.hpp>
#include <scorers/score_text.hpp>

#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

using namespace diffeval::scorers;

namespace {

// Each built-in scorer that takes the last match, with its plain twin.
const std::vector<std::pair<const Scorer*, Scorer>>& twins() {
    static const auto out = [] {
        std::vector<std::pair<const Scorer*, Scorer>> pairs;
        for (const Scorer* s : all_scorers()) {
            if (s->definition().extract.match != MatchPick::last) {
                continue;
            }
            ScorerDefinition plain = s->definition();
            plain.extract.pattern = "\\Q\\E" + plain.extract.pattern;
            auto twin = Scorer::create(std::move(plain));
            if (!twin) {
                std::abort(); // the built-in patterns compile with the prefix
            }
            pairs.emplace_back(s, std::move(*twin));
        }
        return pairs;
    }();
    return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    for (const Scorer* s : all_scorers()) {
        (void)s->score(select_scored_text(text, ScoreText::full), "6 * 7 = 42\n#### 42");
        (void)s->score(select_scored_text(text, ScoreText::after_think), text);
    }
    for (const auto& [fast, plain] : twins()) {
        const auto a = fast->score(text, "#### 42");
        const auto b = plain.score(text, "#### 42");
        if (a.extracted != b.extracted || a.valid != b.valid || a.correct != b.correct) {
            std::abort();
        }
    }
    ClassifyInput in;
    in.text = text;
    in.finish_reason = "stop";
    (void)classify(in);
    return 0;
}
