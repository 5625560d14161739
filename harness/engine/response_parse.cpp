// Response parsing for completions and chat completions (vLLM, SGLang,
// llama.cpp server and TGI all answer in the OpenAI shapes; the reasoning
// field is `reasoning` in current vLLM and `reasoning_content` before).
#include <harness/engine/response_parse.hpp>

#include <nlohmann/json.hpp>

namespace diffeval::engine {

namespace {

std::optional<std::string> string_field(const nlohmann::json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string()) {
        return std::nullopt;
    }
    return it->get<std::string>();
}

std::optional<int64_t> int_field(const nlohmann::json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_integer()) {
        return std::nullopt;
    }
    return it->get<int64_t>();
}

} // namespace

void parse_success_body(const std::string& body, Endpoint endpoint, store::ResponseRow& row) {
    auto fail = [&](std::string why) {
        row.ok = false;
        row.error_kind = "parse";
        row.error = std::move(why);
    };
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded()) {
        return fail("the response body is not valid JSON");
    }
    if (!j.is_object()) {
        return fail("the response body is not a JSON object");
    }
    if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
        return fail("the server answered with an error object: " + error_message(body));
    }
    auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array() || choices->empty() ||
        !(*choices)[0].is_object()) {
        return fail("the response has no choices");
    }
    const auto& choice = (*choices)[0];
    if (endpoint == Endpoint::completion) {
        row.text = string_field(choice, "text");
        if (!row.text) {
            return fail("the completion choice has no text");
        }
    } else {
        auto msg = choice.find("message");
        if (msg == choice.end() || !msg->is_object()) {
            return fail("the chat choice has no message");
        }
        // content may be null when everything went to reasoning.
        row.text = string_field(*msg, "content").value_or("");
        row.reasoning = string_field(*msg, "reasoning");
        if (!row.reasoning) {
            row.reasoning = string_field(*msg, "reasoning_content");
        }
    }
    row.finish_reason = string_field(choice, "finish_reason");
    if (auto sr = choice.find("stop_reason"); sr != choice.end()) {
        if (sr->is_string()) {
            row.stop_reason = sr->get<std::string>();
        } else if (sr->is_number_integer()) {
            row.stop_reason = sr->get<int64_t>();
        }
    }
    if (auto usage = j.find("usage"); usage != j.end() && usage->is_object()) {
        row.prompt_tokens = int_field(*usage, "prompt_tokens");
        row.completion_tokens = int_field(*usage, "completion_tokens");
    }
    row.ok = true;
    row.error.clear();
    row.error_kind.clear();
}

std::string error_message(const std::string& body) {
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_object()) {
        if (auto e = j.find("error"); e != j.end()) {
            if (e->is_object()) {
                if (auto m = string_field(*e, "message")) {
                    return *m;
                }
            } else if (e->is_string()) {
                return e->get<std::string>();
            }
        }
        if (auto m = string_field(j, "message")) {
            return *m;
        }
        if (auto d = string_field(j, "detail")) {
            return *d;
        }
    }
    constexpr size_t k_max = 300;
    std::string cut = body.substr(0, k_max);
    if (body.size() > k_max) {
        cut += "...";
    }
    return cut.empty() ? "(empty body)" : cut;
}

} // namespace diffeval::engine
