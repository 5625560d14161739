// Request validation in the order vLLM applies it: JSON decoding, field
// checks of the request model, the served-model check, then the token
// budget. Messages follow vLLM's wording so clients that match on them
// (and users reading a log) see what a real server would say.
#include <harness/sim/request.hpp>

#include <harness/sim/tokenizer.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace diffeval::sim {

namespace {

// Fields that only say how the answer is delivered, left out of the
// content hash.
constexpr std::array<std::string_view, 7> k_transport_keys = {
    "echo", "logprobs", "request_id", "stream", "stream_options", "top_logprobs", "user"};

std::string_view endpoint_prefix(Endpoint endpoint) {
    return endpoint == Endpoint::chat ? "chat:" : "completions:";
}

// nlohmann's serializer output, hashed instead of stored.
class HashingOutput : public nlohmann::detail::output_adapter_protocol<char> {
public:
    explicit HashingOutput(util::Hash64Stream& hash) : m_hash(hash) {}
    void write_character(char c) override { m_hash.add(c); }
    void write_characters(const char* s, std::size_t length) override {
        m_hash.add(std::string_view(s, length));
    }

private:
    util::Hash64Stream& m_hash;
};

using json = nlohmann::json;

ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt) {
    return ApiError{400, "BadRequestError", std::move(message), std::move(param)};
}

// The text of a message's content: a string, or the text parts of a list.
std::string content_text(const json& content) {
    if (content.is_string()) {
        return content.get<std::string>();
    }
    std::string out;
    if (content.is_array()) {
        for (const auto& part : content) {
            if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
                part["text"].is_string()) {
                out += part["text"].get<std::string>();
            }
        }
    }
    return out;
}

std::optional<ApiError> read_stop(const json& body, ParsedRequest& r) {
    auto it = body.find("stop");
    if (it == body.end() || it->is_null()) {
        return std::nullopt;
    }
    if (it->is_string()) {
        if (!it->get_ref<const std::string&>().empty()) {
            r.stop.push_back(it->get<std::string>());
        }
        return std::nullopt;
    }
    if (it->is_array()) {
        for (const auto& s : *it) {
            if (!s.is_string()) {
                return bad_request("stop: Input should be a valid string", "stop");
            }
            if (!s.get_ref<const std::string&>().empty()) {
                r.stop.push_back(s.get<std::string>());
            }
        }
        return std::nullopt;
    }
    return bad_request("stop: Input should be a valid string or list of strings", "stop");
}

// An optional integer field; `error` when present with another type.
std::optional<ApiError> read_int(const json& body, const char* key, std::optional<int64_t>& out) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) {
        return std::nullopt;
    }
    if (!it->is_number_integer()) {
        return bad_request(fmt::format("{}: Input should be a valid integer", key), key);
    }
    out = it->get<int64_t>();
    return std::nullopt;
}

std::optional<ApiError> read_bool(const json& body, const char* key, bool& out) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) {
        return std::nullopt;
    }
    if (!it->is_boolean()) {
        return bad_request(fmt::format("{}: Input should be a valid boolean", key), key);
    }
    out = it->get<bool>();
    return std::nullopt;
}

std::optional<ApiError> read_completion_prompts(const json& body, ParsedRequest& r) {
    auto it = body.find("prompt");
    auto empty =
        bad_request("Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
    if (it == body.end() || it->is_null()) {
        return empty;
    }
    auto add = [&r](std::string text) {
        PromptItem p;
        p.tokens = count_tokens(text);
        p.question = extract_question(text);
        p.text = std::move(text);
        r.prompts.push_back(std::move(p));
    };
    if (it->is_string()) {
        if (it->get_ref<const std::string&>().empty()) {
            return empty;
        }
        add(it->get<std::string>());
        return std::nullopt;
    }
    if (it->is_array() && !it->empty()) {
        if ((*it)[0].is_number_integer()) {
            // Token ids: the model sees a prompt it cannot read as a question.
            std::string ids;
            for (const auto& t : *it) {
                if (!t.is_number_integer() || t.get<int64_t>() < 0) {
                    return bad_request("prompt: token ids must be non-negative integers", "prompt");
                }
                ids += std::to_string(t.get<int64_t>()) + " ";
            }
            PromptItem p;
            p.tokens = static_cast<int>(it->size());
            p.question = ids;
            p.text = ids;
            r.prompts.push_back(std::move(p));
            return std::nullopt;
        }
        for (const auto& p : *it) {
            if (!p.is_string()) {
                return bad_request("prompt: Input should be a valid string or list of strings",
                                   "prompt");
            }
            add(p.get<std::string>());
        }
        return std::nullopt;
    }
    return empty;
}

std::optional<ApiError> read_chat(const json& body, ParsedRequest& r) {
    auto it = body.find("messages");
    if (it == body.end() || it->is_null()) {
        return bad_request("messages: Field required", "messages");
    }
    if (!it->is_array()) {
        return bad_request("messages: Input should be a valid list", "messages");
    }
    std::string last_user;
    for (const auto& m : *it) {
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
            return bad_request("messages: each message needs a string 'role'", "messages");
        }
        if (m["role"] == "user") {
            last_user = content_text(m.value("content", json()));
        }
    }
    if (auto kw = body.find("chat_template_kwargs"); kw != body.end() && kw->is_object()) {
        if (auto et = kw->find("enable_thinking"); et != kw->end() && et->is_boolean()) {
            r.thinking = et->get<bool>();
        }
    }
    PromptItem p;
    p.text = render_chat_prompt(*it, r.thinking ? Thinking::on : Thinking::off);
    p.tokens = count_tokens(p.text);
    p.question = extract_question(last_user);
    r.prompts.push_back(std::move(p));
    return std::nullopt;
}

std::optional<ApiError> read_logprobs(const json& body, ParsedRequest& r) {
    if (r.endpoint == Endpoint::completions) {
        std::optional<int64_t> lp;
        if (auto e = read_int(body, "logprobs", lp)) {
            return e;
        }
        if (lp && *lp < 0) {
            return bad_request("`logprobs` must be a positive value or -1.", "logprobs");
        }
        if (lp) {
            r.logprobs = static_cast<int>(std::min<int64_t>(*lp, 20));
        }
        return std::nullopt;
    }
    bool want = false;
    if (auto e = read_bool(body, "logprobs", want)) {
        return e;
    }
    std::optional<int64_t> top;
    if (auto e = read_int(body, "top_logprobs", top)) {
        return e;
    }
    if (top && (*top < 0 || *top > 20)) {
        return bad_request("`top_logprobs` must be a value between 0 and 20.", "top_logprobs");
    }
    if (top && *top > 0 && !want) {
        return bad_request("when using `top_logprobs`, `logprobs` must be set to true.",
                           "top_logprobs");
    }
    if (want) {
        r.logprobs = static_cast<int>(top.value_or(0));
    }
    return std::nullopt;
}

} // namespace

std::string extract_question(std::string_view prompt) {
    constexpr std::string_view k_marker = "Question: ";
    size_t pos = prompt.rfind(k_marker);
    std::string_view q =
        pos == std::string_view::npos ? prompt : prompt.substr(pos + k_marker.size());
    q = util::trim(q);
    constexpr std::string_view k_answer = "Answer:";
    if (q.size() >= k_answer.size() && q.substr(q.size() - k_answer.size()) == k_answer) {
        q = util::trim(q.substr(0, q.size() - k_answer.size()));
    }
    return std::string(q);
}

std::string render_chat_prompt(const json& messages, Thinking thinking) {
    std::string out;
    for (const auto& m : messages) {
        if (!m.is_object()) {
            continue;
        }
        out += "<|im_start|>";
        out += m.value("role", "user");
        out += "\n";
        out += content_text(m.value("content", json()));
        out += "<|im_end|>\n";
    }
    out += "<|im_start|>assistant\n";
    out += thinking == Thinking::on ? "<think>\n" : "<think>\n\n</think>\n\n";
    return out;
}

std::string canonical_body(const json& body, Endpoint endpoint) {
    json copy = body;
    if (copy.is_object()) {
        for (std::string_view key : k_transport_keys) {
            copy.erase(std::string(key));
        }
    }
    return std::string(endpoint_prefix(endpoint)) +
           copy.dump(-1, ' ', false, json::error_handler_t::replace);
}

uint64_t canonical_hash(const json& body, Endpoint endpoint) {
    // The bytes canonical_body would build, fed to the hash as nlohmann's
    // serializer writes them (compact dump: `{"key":value,...}`, keys
    // sorted). Hashing request contents was a fifth of the simulator's CPU.
    util::Hash64Stream h;
    h.add(endpoint_prefix(endpoint));
    nlohmann::detail::serializer<json> out(std::make_shared<HashingOutput>(h), ' ',
                                           json::error_handler_t::replace);
    if (!body.is_object()) {
        out.dump(body, false, false, 0);
        return h.value();
    }
    h.add('{');
    bool first = true;
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (std::find(k_transport_keys.begin(), k_transport_keys.end(), it.key()) !=
            k_transport_keys.end()) {
            continue;
        }
        if (!first) {
            h.add(',');
        }
        first = false;
        out.dump(json(it.key()), false, false, 0);
        h.add(':');
        out.dump(it.value(), false, false, 0);
    }
    h.add('}');
    return h.value();
}

std::string error_body(const ApiError& error) {
    nlohmann::ordered_json j;
    j["error"]["message"] = error.message;
    j["error"]["type"] = error.type;
    j["error"]["param"] = error.param ? nlohmann::ordered_json(*error.param) : nullptr;
    j["error"]["code"] = error.status;
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::variant<ParsedRequest, ApiError> parse_request(std::string_view body, Endpoint endpoint,
                                                    const Profile& profile,
                                                    const std::string& model_id) {
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) {
        return bad_request("JSON decode error: the request body is not valid JSON");
    }
    return parse_request_json(j, endpoint, profile, model_id);
}

namespace {

// stop, include_stop_str_in_output, stream, echo and stream_options.
std::optional<ApiError> read_output_flags(const json& body, Endpoint endpoint, ParsedRequest& r) {
    if (auto e = read_stop(body, r)) {
        return *e;
    }
    if (auto e = read_bool(body, "include_stop_str_in_output", r.include_stop_str_in_output)) {
        return *e;
    }
    if (auto e = read_bool(body, "stream", r.stream)) {
        return *e;
    }
    if (endpoint == Endpoint::completions) {
        if (auto e = read_bool(body, "echo", r.echo)) {
            return *e;
        }
    }
    if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
        if (!r.stream) {
            return bad_request("Stream options can only be defined when `stream=True`.",
                               "stream_options");
        }
        if (so->is_object()) {
            auto iu = so->find("include_usage");
            r.include_usage = iu == so->end() || (iu->is_boolean() && iu->get<bool>());
        }
    }
    return std::nullopt;
}

// n (1 to 16) and model (the served id, or a 404 as vLLM answers).
std::optional<ApiError> read_n_and_model(const json& body, const std::string& model_id,
                                         ParsedRequest& r) {
    std::optional<int64_t> n;
    if (auto e = read_int(body, "n", n)) {
        return *e;
    }
    if (n && (*n < 1 || *n > 16)) {
        return bad_request("n must be between 1 and 16.", "n");
    }
    r.n = static_cast<int>(n.value_or(1));
    if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
        if (!m->is_string()) {
            return bad_request("model: Input should be a valid string", "model");
        }
        r.model = m->get<std::string>();
        if (r.model != model_id) {
            return ApiError{404, "NotFoundError",
                            fmt::format("The model `{}` does not exist.", r.model), "model"};
        }
    }
    return std::nullopt;
}

// max_completion_tokens (chat) or max_tokens, checked against the context
// length as vLLM checks it; vLLM's defaults when absent.
std::optional<ApiError> read_max_tokens(const json& body, Endpoint endpoint, const Profile& profile,
                                        ParsedRequest& r) {
    std::optional<int64_t> max_tokens;
    if (endpoint == Endpoint::chat) {
        if (auto e = read_int(body, "max_completion_tokens", max_tokens)) {
            return *e;
        }
    }
    if (!max_tokens) {
        if (auto e = read_int(body, "max_tokens", max_tokens)) {
            return *e;
        }
    }
    const int64_t limit = profile.server.max_model_len;
    for (const auto& p : r.prompts) {
        if (p.tokens >= limit) {
            return bad_request(fmt::format("This model's maximum context length is {} tokens. "
                                           "However, your request has {} input tokens. Please "
                                           "reduce the length of the input messages.",
                                           limit, p.tokens),
                               "input_tokens");
        }
        if (max_tokens && *max_tokens + p.tokens > limit) {
            return bad_request(
                fmt::format("'max_tokens' or 'max_completion_tokens' is too large: {}. This "
                            "model's maximum context length is {} tokens and your request has {} "
                            "input tokens ({} > {} - {}).",
                            *max_tokens, limit, p.tokens, *max_tokens, limit, p.tokens),
                "max_tokens");
        }
    }
    if (max_tokens && *max_tokens < 1 && !(r.echo && *max_tokens == 0)) {
        return bad_request(fmt::format("max_tokens must be at least 1, got {}.", *max_tokens),
                           "max_tokens");
    }
    if (max_tokens) {
        r.max_tokens = static_cast<int>(*max_tokens);
    } else if (endpoint == Endpoint::completions) {
        r.max_tokens = 16; // vLLM's CompletionRequest default
    } else {
        r.max_tokens = static_cast<int>(limit - r.prompts.front().tokens);
    }
    return std::nullopt;
}

} // namespace

std::variant<ParsedRequest, ApiError> parse_request_json(const json& body, Endpoint endpoint,
                                                         const Profile& profile,
                                                         const std::string& model_id) {
    if (!body.is_object()) {
        return bad_request("Input should be a valid dictionary or object to extract fields from");
    }
    ParsedRequest r;
    r.endpoint = endpoint;
    if (auto e =
            endpoint == Endpoint::chat ? read_chat(body, r) : read_completion_prompts(body, r)) {
        return *e;
    }
    if (auto e = read_output_flags(body, endpoint, r)) {
        return *e;
    }
    if (auto e = read_logprobs(body, r)) {
        return *e;
    }
    if (auto e = read_n_and_model(body, model_id, r)) {
        return *e;
    }
    if (auto e = read_max_tokens(body, endpoint, profile, r)) {
        return *e;
    }
    r.content_hash = canonical_hash(body, endpoint);
    return r;
}

} // namespace diffeval::sim
