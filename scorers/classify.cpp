// Outcome classification. The order of the rules matters: a failed request
// is an error whatever else it says, and a response is only "finished" when
// the model itself ended it after writing an answer.
#include <scorers/classify.hpp>

#include <scorers/python.hpp>
#include <scorers/score_text.hpp>

#include <array>

namespace diffeval::scorers {

namespace {

constexpr std::array<std::pair<Outcome, std::string_view>, k_outcome_count> k_names = {{
    {Outcome::finished, "finished"},
    {Outcome::stop_truncated, "stop_truncated"},
    {Outcome::length_truncated, "length_truncated"},
    {Outcome::other, "other"},
    {Outcome::error, "error"},
    {Outcome::unrecorded, "unrecorded"},
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

std::string_view stop_cause_name(StopCause cause) {
    switch (cause) {
    case StopCause::eos:
        return "eos";
    case StopCause::stop_string:
        return "stop_string";
    case StopCause::stop_token:
        return "stop_token";
    case StopCause::unknown:
        return "unknown";
    case StopCause::none:
        break;
    }
    return "";
}

namespace {

// What stopped a response that stopped, from the field the server named it
// in, else from the text, else unknown.
StopCause find_stop_cause(const ClassifyInput& input) {
    if (input.stop_field == "finish_reason") {
        return input.finish_reason == "stop_sequence" ? StopCause::stop_string : StopCause::eos;
    }
    if (!input.stop_field.empty()) {
        if (std::holds_alternative<std::string>(input.stop_reason)) {
            return StopCause::stop_string;
        }
        if (std::holds_alternative<int64_t>(input.stop_reason)) {
            return StopCause::stop_token;
        }
        return StopCause::eos;
    }
    // A server that keeps the stop string in the text shows it at the end.
    for (const auto& stop : input.stop_strings) {
        if (!stop.empty() && input.text.ends_with(stop)) {
            return StopCause::stop_string;
        }
    }
    return StopCause::unknown;
}

} // namespace

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
    // TGI before 2.2 said how it stopped in finish_reason itself.
    const bool tgi_stop =
        input.stop_field == "finish_reason" && (finish == "eos_token" || finish == "stop_sequence");
    if (input.failed || finish == "abort" || finish == "error") {
        c.outcome = Outcome::error;
    } else if (finish.empty() && input.finish_unrecorded) {
        c.outcome = Outcome::unrecorded;
    } else if (finish == "length") {
        c.outcome = Outcome::length_truncated;
    } else if (finish == "stop" || tgi_stop) {
        // A stop string the model wrote before any answer (vLLM's "Question"
        // inside reasoning) ends the response without one; so does EOS inside
        // an unclosed block. An empty answer is the model finishing only when
        // the server says it ended by EOS or a stop token: when it does not
        // say (llama.cpp), the empty answer is not counted as finished.
        c.stop_cause = find_stop_cause(input);
        const bool no_answer = blank(block.answer);
        const bool cut =
            c.stop_cause == StopCause::stop_string || c.stop_cause == StopCause::unknown;
        c.outcome = (c.opened && !c.closed) || (cut && no_answer) ? Outcome::stop_truncated
                                                                  : Outcome::finished;
    } else {
        c.outcome = Outcome::other;
    }
    return c;
}

} // namespace diffeval::scorers
