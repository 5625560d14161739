// Reading an OpenAI-compatible request body the way vLLM's server does:
// validation with vLLM's error statuses and messages, default values, the
// prompt the model would see (a Qwen-style chat template for chat), the
// question being asked, and the content hash every simulated decision is
// seeded from.
//
// Bodies are read with simdjson, with the semantics of nlohmann's parser,
// which the simulator's behaviour was defined with (duplicate keys resolve
// to the last; the few bodies simdjson refuses and nlohmann takes are
// rewritten by nlohmann first): parsing was a sixth of the simulator's CPU
// per request with nlohmann's DOM.
#pragma once

#include <harness/sim/profile.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace diffeval::sim {

enum class Endpoint { completions, chat };

// The served model id the simulator answers to by default: the article's
// checkpoint.
inline constexpr std::string_view k_default_model_id = "Qwen/Qwen3.5-35B-A3B-FP8";

// An error response in vLLM's shape {"error": {message, type, param, code}}.
struct ApiError {
    int status = 400;
    std::string type = "BadRequestError";
    std::string message;
    std::optional<std::string> param;
};

// One prompt of a request, as the model sees it.
struct PromptItem {
    std::string text;     // completions: the prompt; chat: the rendered template
    int tokens = 0;       // tokens of `text` (see tokenizer.hpp)
    std::string question; // the question asked (see extract_question)
};

// A validated request.
struct ParsedRequest {
    Endpoint endpoint = Endpoint::completions;
    std::vector<PromptItem> prompts; // one per prompt of a completions batch; one for chat
    bool thinking = true;            // chat: chat_template_kwargs.enable_thinking (default on)
    int max_tokens = 16;
    std::vector<std::string> stop;
    bool include_stop_str_in_output = false;
    int n = 1;
    bool echo = false;
    bool stream = false;
    bool include_usage = false;
    std::optional<int> logprobs; // completions: top-N per token; chat: top_logprobs
    std::string model;           // as sent ("" when absent)
    uint64_t content_hash = 0;   // hash of the body's content (see parse_request)
};

// Parse and validate `body` sent to `endpoint` of a server serving
// `model_id` with `profile`. The request's content hash is util::hash64 of
// "completions:" or "chat:" and the body without its transport-only fields
// (stream, stream_options, logprobs, top_logprobs, echo, user, request_id)
// as nlohmann::json's compact dump() writes it: keys sorted, strings escaped
// its way, numbers in its format. So requests that differ only in key
// order, whitespace or how the answer is delivered get the same answer.
std::variant<ParsedRequest, ApiError> parse_request(std::string_view body, Endpoint endpoint,
                                                    const Profile& profile,
                                                    const std::string& model_id);

// The question in a prompt: the text after the last "Question: " up to a
// trailing "Answer:" (whitespace trimmed); the whole text when there is no
// "Question: ".
std::string extract_question(std::string_view prompt);

// Whether the chat template lets the model think (Qwen's enable_thinking).
enum class Thinking { off, on };

// One chat message as the template sees it.
struct ChatMessage {
    std::string_view role;
    std::string content; // a string content, or the text parts of a list joined
};

// The Qwen-style rendering of chat `messages` that the model continues,
// ending with the assistant header and an open "<think>\n" (Thinking::on)
// or a closed "<think>\n\n</think>\n\n".
std::string render_chat_prompt(const std::vector<ChatMessage>& messages, Thinking thinking);

// `error` as a JSON body.
std::string error_body(const ApiError& error);

} // namespace diffeval::sim
