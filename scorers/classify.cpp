// Outcome classification. The order of the rules matters: a failed request
// is an error whatever else it says, and a response is only "finished" when
// the model itself ended it after writing an answer.
#include <scorers/classify.hpp>

#include <scorers/python.hpp>
#include <scorers/score_text.hpp>

#include <array>

namespace diffeval::scorers {

namespace {

constexpr std::array<std::pair<Outcome, std::string_view>, 5> k_names = {{
    {Outcome::finished, "finished"},
    {Outcome::stop_truncated, "stop_truncated"},
    {Outcome::length_truncated, "length_truncated"},
    {Outcome::other, "other"},
    {Outcome::error, "error"},
}};

bool blank(std::string_view text) {
    return python_strip(text).empty();
}

// Where the think block sits inside `text`.
struct ThinkBlock {
    bool opened = false;        // the text (or the prompt) opened a block
    bool closed = false;        // a `</think>` follows the opening
    std::string_view reasoning; // between the opening and `</think>`, or to the end
    std::string_view answer;    // what follows the last `</think>`; all of `text` if no block
};

ThinkBlock find_think_block(std::string_view text, bool prompt_opened) {
    ThinkBlock block;
    size_t begin = 0;
    if (opens_with_think(text)) {
        begin = text.find(k_think_open) + k_think_open.size();
    } else if (!prompt_opened) {
        block.answer = text;
        return block;
    }
    block.opened = true;
    const size_t close = text.find(k_think_close, begin);
    if (close == std::string_view::npos) {
        block.reasoning = text.substr(begin);
        return block;
    }
    block.closed = true;
    block.reasoning = text.substr(begin, close - begin);
    block.answer = text.substr(text.rfind(k_think_close) + k_think_close.size());
    return block;
}

} // namespace

std::string_view outcome_name(Outcome outcome) {
    for (const auto& [value, name] : k_names) {
        if (value == outcome) {
            return name;
        }
    }
    return "error";
}

std::optional<Outcome> outcome_from_name(std::string_view name) {
    for (const auto& [value, known] : k_names) {
        if (known == name) {
            return value;
        }
    }
    return std::nullopt;
}

bool never_finished(Outcome outcome) {
    return outcome == Outcome::stop_truncated || outcome == Outcome::length_truncated ||
           outcome == Outcome::other;
}

Classification classify(const ClassifyInput& input) {
    const ThinkBlock block = find_think_block(input.text, input.prompt_opened_think);
    // A server with a reasoning parser moves the block into `reasoning`; it
    // is closed once the model has written something after it.
    const bool split = !input.reasoning.empty();

    Classification c;
    c.opened = block.opened || split;
    c.closed = (block.opened && block.closed) || (split && !input.text.empty());
    c.reasoning_started = c.opened && (!blank(block.reasoning) || !blank(input.reasoning));

    const std::string_view finish = input.finish_reason;
    if (input.failed || finish == "abort" || finish == "error") {
        c.outcome = Outcome::error;
    } else if (finish == "length") {
        c.outcome = Outcome::length_truncated;
    } else if (finish == "stop") {
        // A stop string the model wrote before any answer (vLLM's "Question"
        // inside reasoning) ends the response without one; so does EOS inside
        // an unclosed block.
        const bool stop_string = input.stop_reason.kind == StopReason::Kind::string;
        const bool no_answer = blank(block.answer);
        c.outcome = (c.opened && !c.closed) || (stop_string && no_answer) ? Outcome::stop_truncated
                                                                          : Outcome::finished;
    } else {
        c.outcome = Outcome::other;
    }
    return c;
}

} // namespace diffeval::scorers
