// Cutting a body at its question's parts; see body_template.hpp.
#include <harness/framing/body_template.hpp>

#include <harness/util/pyjson.hpp>

#include <string_view>

namespace diffeval::framing {

namespace {

// Printable ASCII that escapes to itself and appears in no dataset.
constexpr std::string_view k_question = "@@diffeval-question-5f1c@@";
constexpr std::string_view k_answer = "@@diffeval-answer-5f1c@@";
// A token limit no framing writes anywhere else; the template requires it
// to appear exactly as often as a real limit would (checked below).
constexpr int k_max_tokens = 918273645;

} // namespace

std::optional<BodyTemplate> BodyTemplate::make(const Render& render) {
    const datasets::Sample probe{0, std::string(k_question), std::string(k_answer)};
    const std::string body = render(probe, k_max_tokens);
    const std::string limit = std::to_string(k_max_tokens);
    BodyTemplate t;
    size_t from = 0;
    while (true) {
        size_t best = std::string::npos;
        Slot slot = Slot::question;
        size_t width = 0;
        for (auto [s, text] : {std::pair{Slot::question, std::string_view(k_question)},
                               std::pair{Slot::answer, std::string_view(k_answer)},
                               std::pair{Slot::max_tokens, std::string_view(limit)}}) {
            const size_t at = body.find(text, from);
            if (at < best) {
                best = at;
                slot = s;
                width = text.size();
            }
        }
        if (best == std::string::npos) {
            break;
        }
        t.m_text.push_back(body.substr(from, best - from));
        t.m_slots.push_back(slot);
        from = best + width;
    }
    t.m_text.push_back(body.substr(from));
    for (const auto& text : t.m_text) {
        t.m_text_bytes += text.size();
    }
    // The second question is one the slow path escapes in every way it can.
    const datasets::Sample awkward{
        1, "Tom's \"book\" costs $5\\n.\nHow much, \xc3\xa9t\xc3\xa9? \xf0\x9f\x98\x80\t<&>",
        "It is 5.\n#### 5"};
    if (t.render(awkward, 77) != render(awkward, 77) || t.render(probe, 1) != render(probe, 1)) {
        return std::nullopt;
    }
    return t;
}

std::string BodyTemplate::render(const datasets::Sample& sample, int max_tokens) const {
    std::string out;
    out.reserve(m_text_bytes + sample.question.size() + sample.question.size() / 8 +
                sample.answer.size() + 16);
    for (size_t i = 0; i < m_slots.size(); ++i) {
        out += m_text[i];
        switch (m_slots[i]) {
        case Slot::question:
            util::append_json_escaped(out, sample.question, util::JsonStringStyle::python);
            break;
        case Slot::answer:
            util::append_json_escaped(out, sample.answer, util::JsonStringStyle::python);
            break;
        case Slot::max_tokens:
            out += std::to_string(max_tokens);
            break;
        }
    }
    out += m_text.back();
    return out;
}

} // namespace diffeval::framing
