// libFuzzer target: every built-in scorer (regexes, number normalisation,
// Python int parsing) and the outcome classifier on arbitrary model text.
#include <scorers/classify.hpp>
#include <scorers/registry.hpp>
#include <scorers/score_text.hpp>

#include <cstdint>
#include <string_view>

using namespace diffeval::scorers;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    for (const Scorer* s : all_scorers()) {
        (void)s->score(select_scored_text(text, ScoreText::full), "6 * 7 = 42\n#### 42");
        (void)s->score(select_scored_text(text, ScoreText::after_think), text);
    }
    ClassifyInput in;
    in.text = text;
    in.finish_reason = "stop";
    (void)classify(in);
    return 0;
}
