// The questions the simulated model "knows": every test and few-shot item of
// a dataset, looked up by exact question text, with the per-question
// latents that the behaviour model shares across profiles.
//
// Sharing latents is what makes the profiles look like one set of weights
// served three ways: a question is reasoned on by a profile when its latent
// falls below that profile's rate, so the questions a higher-rate profile
// reasons on contain, up to noise, those of a lower-rate one.
#pragma once

#include <datasets/dataset.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace diffeval::sim {

// Uniform latents in [0, 1) that depend only on the question text.
struct Latents {
    double reason = 0;
    double wrong = 0;
    double verbose = 0;
    double loop = 0;
    double no_think = 0;
    double no_hash = 0;
};

// What the model knows about one question.
struct QuestionFacts {
    std::string_view question;
    std::string_view answer; // worked solution ending in "#### N"; empty when unknown
    uint64_t key = 0;        // hash of the question text
    Latents latents;
};

class QuestionBank {
public:
    // Index the test and few-shot items of `dataset` (test items win when a
    // question appears in both).
    explicit QuestionBank(datasets::Dataset dataset);

    // The facts for `question` (whitespace at the ends ignored; runs of
    // inner whitespace matched loosely when the exact text is unknown). An
    // unknown question gets facts with an empty answer.
    QuestionFacts find(std::string_view question) const;

    // A question/answer pair chosen by `seed`, for the text a base model
    // writes after finishing an answer.
    const datasets::Sample& pick(uint64_t seed) const;

    const datasets::Dataset& dataset() const { return m_dataset; }

private:
    datasets::Dataset m_dataset;
    std::unordered_map<std::string_view, const datasets::Sample*> m_exact;
    std::unordered_map<std::string, const datasets::Sample*> m_loose;
};

// The latents of `question` (see Latents).
Latents latents_of(uint64_t question_key);

} // namespace diffeval::sim
