// Question lookup: one hash map on the exact text, one on a whitespace-
// collapsed form for clients that reflow the question.
#include <harness/sim/question_bank.hpp>

#include <harness/util/hash.hpp>
#include <harness/util/text.hpp>

namespace diffeval::sim {

namespace {

std::string collapse(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    bool space = false;
    for (char c : util::trim(s)) {
        bool ws = c == ' ' || c == '\t' || c == '\n' || c == '\r';
        if (ws) {
            space = true;
            continue;
        }
        if (space && !out.empty()) {
            out += ' ';
        }
        space = false;
        out += c;
    }
    return out;
}

} // namespace

Latents latents_of(uint64_t key) {
    auto u = [key](std::string_view name) { return util::unit_interval(util::hash64(name, key)); };
    return Latents{u("reason"), u("wrong"), u("verbose"), u("loop"), u("no-think"), u("no-hash")};
}

QuestionBank::QuestionBank(datasets::Dataset dataset) : m_dataset(std::move(dataset)) {
    auto add = [this](const datasets::Sample& s) {
        std::string_view q = util::trim(s.question);
        m_exact.emplace(q, &s);
        m_loose.emplace(collapse(q), &s);
    };
    for (const auto& s : m_dataset.test) {
        add(s);
    }
    for (const auto& s : m_dataset.fewshot) {
        add(s);
    }
}

QuestionFacts QuestionBank::find(std::string_view question) const {
    std::string_view q = util::trim(question);
    const datasets::Sample* hit = nullptr;
    if (auto it = m_exact.find(q); it != m_exact.end()) {
        hit = it->second;
    } else if (auto lit = m_loose.find(collapse(q)); lit != m_loose.end()) {
        hit = lit->second;
    }
    QuestionFacts f;
    if (hit) {
        f.question = util::trim(hit->question);
        f.answer = hit->answer;
    } else {
        f.question = q;
    }
    f.key = util::hash64(f.question);
    f.latents = latents_of(f.key);
    return f;
}

const datasets::Sample& QuestionBank::pick(uint64_t seed) const {
    static const datasets::Sample k_fallback{
        0, "A baker makes 12 muffins and sells 5 of them. How many muffins are left?",
        "The baker has 12 - 5 = <<12-5=7>>7 muffins left.\n#### 7"};
    const auto& pool = m_dataset.test.empty() ? m_dataset.fewshot : m_dataset.test;
    if (pool.empty()) {
        return k_fallback;
    }
    return pool[seed % pool.size()];
}

} // namespace diffeval::sim
