// A request body with its question's parts cut out, so a plan's bodies are
// pasted together instead of built and serialised one by one.
//
// With fixed shots (the first_n sampler) a framing's body depends on the
// question only through the question's and answer's text, escaped where the
// templates place them, and the token limit. The template is found by
// rendering the body once with sentinel values and cutting at each sentinel;
// it is kept only when it then reproduces the slow path's bytes for a second,
// awkward question (quotes, escapes, non-ASCII, an emoji), so a framing it
// cannot describe (random shots) falls back to rendering every body.
#pragma once

#include <datasets/dataset.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace diffeval::framing {

class BodyTemplate {
public:
    // The bytes of a body for `sample` with `max_tokens`, the slow way.
    using Render = std::function<std::string(const datasets::Sample& sample, int max_tokens)>;

    // The template of `render`'s bodies, or nothing when they depend on the
    // question in another way.
    static std::optional<BodyTemplate> make(const Render& render);

    // The bytes `render` gives for `sample` and `max_tokens`.
    std::string render(const datasets::Sample& sample, int max_tokens) const;

    // The bytes every rendered body starts with.
    const std::string& leading_text() const { return m_text.front(); }

private:
    enum class Slot { question, answer, max_tokens };
    std::vector<std::string> m_text; // the text before each slot, and after the last
    std::vector<Slot> m_slots;
    size_t m_text_bytes = 0;
};

} // namespace diffeval::framing
