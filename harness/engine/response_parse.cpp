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

// The stop a choice names, and the field that named it: vLLM's stop_reason
// (null for EOS), SGLang's matched_stop (a string or a token id), TGI's
// finish_reason eos_token / stop_sequence (before TGI 2.2), llama.cpp's own
// `__verbose` object of the response `body` (only from a server started with
// --verbose: stop_type "word" with its stopping_word, "eos", "limit"). A field
// that is absent leaves `field` as it was.
void read_stop(const nlohmann::json& body, const nlohmann::json& choice, store::Value& stop,
               std::string& field) {
    for (const char* key : {"stop_reason", "matched_stop"}) {
        auto it = choice.find(key);
        if (it == choice.end()) {
            continue;
        }
        field = key;
        if (it->is_string()) {
            stop = it->get<std::string>();
        } else if (it->is_number_integer()) {
            stop = it->get<int64_t>();
        }
        return;
    }
    if (auto fr = string_field(choice, "finish_reason");
        fr && (*fr == "eos_token" || *fr == "stop_sequence")) {
        field = "finish_reason";
        return;
    }
    auto verbose = body.find("__verbose");
    if (verbose == body.end() || !verbose->is_object()) {
        return;
    }
    auto type = string_field(*verbose, "stop_type");
    if (type == "word") {
        field = "__verbose.stop_type";
        stop = string_field(*verbose, "stopping_word").value_or("");
    } else if (type == "eos") {
        field = "__verbose.stop_type";
    }
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
    read_stop(j, choice, row.stop_reason, row.stop_field);
    if (auto usage = j.find("usage"); usage != j.end() && usage->is_object()) {
        row.prompt_tokens = int_field(*usage, "prompt_tokens");
        row.completion_tokens = int_field(*usage, "completion_tokens");
    }
    row.ok = true;
    row.error.clear();
    row.error_kind.clear();
}

void StreamAccumulator::on_event(const std::string& data, double at_ms) {
    if (!m_error.empty() || m_done) {
        return;
    }
    if (data == "[DONE]") {
        m_done = true;
        return;
    }
    auto j = nlohmann::json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        m_error = "a stream event is not valid JSON";
        return;
    }
    if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
        m_error = "the server sent an error mid-stream: " + error_message(data);
        return;
    }
    if (auto usage = j.find("usage"); usage != j.end() && usage->is_object()) {
        m_prompt_tokens = int_field(*usage, "prompt_tokens");
        m_completion_tokens = int_field(*usage, "completion_tokens");
    }
    auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array() || choices->empty() ||
        !(*choices)[0].is_object()) {
        return; // e.g. the final usage-only chunk
    }
    m_any_choice = true;
    const auto& choice = (*choices)[0];
    std::string piece;
    if (m_endpoint == Endpoint::completion) {
        piece = string_field(choice, "text").value_or("");
        m_text += piece;
    } else if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
        auto content = string_field(*delta, "content").value_or("");
        auto reasoning = string_field(*delta, "reasoning");
        if (!reasoning) {
            reasoning = string_field(*delta, "reasoning_content");
        }
        if (reasoning) {
            m_has_reasoning = true;
            m_reasoning += *reasoning;
            piece += *reasoning;
        }
        m_text += content;
        piece += content;
    }
    if (!piece.empty()) {
        if (!m_first_token_ms) {
            m_first_token_ms = at_ms;
        } else {
            m_gaps_ms.push_back(at_ms - m_last_token_ms);
        }
        m_last_token_ms = at_ms;
    }
    if (auto fr = string_field(choice, "finish_reason")) {
        m_finish_reason = fr;
    }
    read_stop(j, choice, m_stop_reason, m_stop_field);
}

void StreamAccumulator::finish(store::ResponseRow& row) const {
    row.streamed = true;
    row.text = m_text;
    if (m_has_reasoning) {
        row.reasoning = m_reasoning;
    }
    row.finish_reason = m_finish_reason;
    row.stop_reason = m_stop_reason;
    row.stop_field = m_stop_field;
    row.prompt_tokens = m_prompt_tokens;
    row.completion_tokens = m_completion_tokens;
    row.ttft_ms = m_first_token_ms;
    row.token_gaps_json = nlohmann::json(m_gaps_ms).dump();
    if (!m_error.empty()) {
        row.ok = false;
        row.error_kind = "stream";
        row.error = m_error;
    } else if (!m_any_choice) {
        row.ok = false;
        row.error_kind = "parse";
        row.error = "the stream carried no choices";
    } else {
        row.ok = true;
    }
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
