// Server limits; see capacity.hpp.
#include <harness/engine/capacity.hpp>

#include <harness/engine/config.hpp>
#include <harness/http/client.hpp>
#include <harness/util/text.hpp>
#include <harness/util/untrusted_json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace diffeval::engine {

namespace {

std::optional<int64_t> positive_int(const nlohmann::json& obj, const char* key) {
    if (!obj.is_object()) {
        return std::nullopt;
    }
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) {
        return std::nullopt;
    }
    return it->get<int64_t>();
}

http::Request json_request(const std::string& url, const std::vector<std::string>& headers,
                           std::chrono::milliseconds timeout, const nlohmann::json* body) {
    http::Request req;
    req.url = url;
    req.headers = headers;
    req.timeout = std::min(timeout, std::chrono::milliseconds{15'000});
    if (body) {
        req.method = "POST";
        req.body = std::make_shared<const std::string>(body->dump());
    }
    return req;
}

// The JSON object GET `path` (POST with `body`) answered with 200, or why
// there is none, in words for a line ("POST /tokenize answered HTTP 404").
util::Result<nlohmann::json> fetch_object(const std::string& base_url, const std::string& path,
                                          const std::vector<std::string>& headers,
                                          std::chrono::milliseconds timeout,
                                          const nlohmann::json* body = nullptr) {
    auto r = http::fetch(json_request(base_url + path, headers, timeout, body));
    const auto why = [&](const std::string& what) {
        return util::make_error(util::ErrorKind::io,
                                fmt::format("{} {} {}", body ? "POST" : "GET", path, what));
    };
    if (r.transport != http::Transport::ok) {
        return why(fmt::format("failed: {}", util::one_line(r.transport_error, 160)));
    }
    if (r.status != 200) {
        return why(fmt::format("answered HTTP {}", r.status));
    }
    auto j = util::parse_untrusted_json(r.body);
    if (!j.is_object()) {
        return why("answered no JSON object");
    }
    return j;
}

// Tokens in `body`'s prompt as the server counts them (llama.cpp: /tokenize,
// after /apply-template for chat; vLLM: /tokenize), or why it could not.
util::Result<int64_t> count_tokens(const std::string& base_url,
                                   const std::vector<std::string>& headers,
                                   const ServerLimits& limits, const nlohmann::ordered_json& body,
                                   const std::optional<std::string>& model,
                                   std::chrono::milliseconds timeout) {
    const auto unread = [](const std::string& path, const std::string& what) {
        return util::make_error(util::ErrorKind::io,
                                fmt::format("POST {} answered without {}", path, what));
    };
    const bool chat = body.contains("messages");
    if (limits.engine == "llamacpp") {
        std::string prompt;
        if (chat) {
            nlohmann::json req = {{"messages", body["messages"]}};
            if (body.contains("chat_template_kwargs")) {
                req["chat_template_kwargs"] = body["chat_template_kwargs"];
            }
            auto t = fetch_object(base_url, "/apply-template", headers, timeout, &req);
            if (!t) {
                return t.error();
            }
            if (!t->contains("prompt") || !(*t)["prompt"].is_string()) {
                return unread("/apply-template", "a prompt");
            }
            prompt = (*t)["prompt"].get<std::string>();
        } else {
            prompt = body["prompt"].get<std::string>();
        }
        nlohmann::json req = {{"content", prompt}, {"add_special", true}, {"parse_special", true}};
        auto t = fetch_object(base_url, "/tokenize", headers, timeout, &req);
        if (!t) {
            return t.error();
        }
        if (!t->contains("tokens") || !(*t)["tokens"].is_array()) {
            return unread("/tokenize", "a list of tokens");
        }
        return static_cast<int64_t>((*t)["tokens"].size());
    }
    nlohmann::json req = nlohmann::json::object();
    if (model) {
        req["model"] = *model;
    }
    if (chat) {
        req["messages"] = body["messages"];
    } else {
        req["prompt"] = body["prompt"];
    }
    auto t = fetch_object(base_url, "/tokenize", headers, timeout, &req);
    if (!t) {
        return t.error();
    }
    if (auto count = positive_int(*t, "count")) {
        return *count;
    }
    return unread("/tokenize", "a count");
}

// llama-server's sampling defaults (/props default_generation_settings
// .params) that change what a request at temperature 0 gets back.
constexpr std::array<const char*, 8> k_sampling_defaults = {
    "repeat_penalty", "repeat_last_n",   "presence_penalty", "frequency_penalty",
    "dry_multiplier", "xtc_probability", "mirostat",         "ignore_eos"};

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

} // namespace

ServerLimits read_limits(const std::string& base_url, const std::vector<std::string>& headers,
                         const nlohmann::json& models, std::chrono::milliseconds timeout) {
    ServerLimits out;
    // vLLM lists each model's max_model_len.
    if (models.is_array() && !models.empty()) {
        if (auto len = positive_int(models[0], "max_model_len")) {
            out.context = *len;
            out.context_source = "max_model_len in /v1/models";
        }
    }
    // llama.cpp's server describes itself at /props.
    const auto fetched = fetch_object(base_url, "/props", headers, timeout);
    if (!fetched) {
        return out;
    }
    const nlohmann::json& props = *fetched;
    out.props = nlohmann::json::object();
    // Past the most connections a run opens, a count is not one to follow.
    if (auto slots = positive_int(props, "total_slots");
        slots && *slots <= Limits::max_concurrency) {
        out.slots = static_cast<int>(*slots);
        out.props["total_slots"] = *slots;
    }
    if (props.contains("default_generation_settings")) {
        if (auto n_ctx = positive_int(props["default_generation_settings"], "n_ctx")) {
            out.context = *n_ctx;
            out.context_source = "/props n_ctx per slot";
            out.props["n_ctx"] = *n_ctx;
        }
    }
    for (const char* key : {"build_info", "model_path", "model_alias"}) {
        if (props.contains(key) && props[key].is_string()) {
            out.props[key] = props[key];
        }
    }
    // The server's defaults for what a request leaves unset, where they
    // change a greedy answer (the samplers before the temperature's, and
    // whether end-of-sequence ends it): `--repeat-penalty 1.5` changes every
    // text, and llama-server's log never says so.
    if (auto settings = props.find("default_generation_settings");
        settings != props.end() && settings->is_object()) {
        if (auto params = settings->find("params");
            params != settings->end() && params->is_object()) {
            for (const char* key : k_sampling_defaults) {
                auto v = params->find(key);
                if (v != params->end() && (v->is_number() || v->is_boolean())) {
                    out.props["sampling"][key] = *v;
                }
            }
        }
    }
    if (out.props.contains("build_info") || out.slots) {
        out.engine = "llamacpp";
    }
    return out;
}

size_t in_flight_limit(int concurrency, bool concurrency_auto, const ServerLimits& limits,
                       std::string& note) {
    note.clear();
    if (concurrency_auto) {
        if (limits.slots) {
            note = fmt::format("--concurrency auto: {} in flight (the server's /props "
                               "total_slots)",
                               *limits.slots);
            return static_cast<size_t>(*limits.slots);
        }
        note = fmt::format("--concurrency auto: the server publishes no capacity; {} in flight "
                           "(the default)",
                           k_default_concurrency);
        return k_default_concurrency;
    }
    if (limits.slots && *limits.slots < concurrency) {
        note = fmt::format("/props total_slots is {}: at most {} in flight instead of {}, so no "
                           "connection waits behind an idle one",
                           *limits.slots, *limits.slots, concurrency);
        return static_cast<size_t>(*limits.slots);
    }
    return static_cast<size_t>(concurrency);
}

util::Result<bool> check_context(const std::string& server_name, const std::string& base_url,
                                 const std::vector<std::string>& headers,
                                 const ServerLimits& limits,
                                 const std::vector<framing::Framing>& framings,
                                 const datasets::Dataset& dataset, size_t n_questions,
                                 int max_tokens, const std::optional<std::string>& model,
                                 std::chrono::milliseconds timeout, std::ostream& log) {
    if (!limits.context) {
        return false;
    }
    bool fits_alone = true;
    for (const auto& f : framings) {
        // The longest prompt of this framing, by bytes (the last of equals);
        // only its body is built.
        framing::Renderer renderer(f, dataset);
        std::optional<size_t> longest_q;
        size_t longest_bytes = 0;
        for (size_t q = 0; q < n_questions && q < dataset.test.size(); ++q) {
            if (auto n = renderer.prompt_bytes(dataset.test[q]); n >= longest_bytes) {
                longest_bytes = n;
                longest_q = q;
            }
        }
        if (!longest_q) {
            continue;
        }
        const auto longest = renderer.body(dataset.test[*longest_q], max_tokens, model,
                                           nlohmann::ordered_json::object());
        // A token stands for at least one byte of the text, so a body whose
        // bytes, with room for a chat template's markers, leave max_tokens
        // to spare fits without asking the server (the simulator has no
        // /tokenize, and its 262,144 tokens hold any prompt of a few KB).
        constexpr int64_t k_template_tokens = 256;
        if (static_cast<int64_t>(longest.dump().size()) + k_template_tokens + max_tokens <=
            *limits.context) {
            continue;
        }
        auto tokens = count_tokens(base_url, headers, limits, longest, model, timeout);
        if (!tokens) {
            // Said, not skipped in silence: a server without /tokenize (the
            // simulator) then answered every over-long request HTTP 400.
            fits_alone = false;
            log << fmt::format("server '{}': note: the {} prompts' length is not checked "
                               "against its context of {} tokens ({}) before sending: {}\n",
                               server_name, f.name, *limits.context, limits.context_source,
                               tokens.error().message);
            continue;
        }
        if (*tokens >= *limits.context) {
            return util::make_error(
                util::ErrorKind::usage,
                fmt::format("server '{}': the longest {} prompt (question {}) is {} tokens and "
                            "does not fit its context of {} tokens ({}); start the server with "
                            "a larger context per request or use fewer questions",
                            server_name, f.name, *longest_q, *tokens, *limits.context,
                            limits.context_source));
        }
        if (*tokens + max_tokens > *limits.context) {
            fits_alone = false;
            log << fmt::format("server '{}': warning: the longest {} prompt (question {}) is {} "
                               "tokens; with max_tokens {} an answer can outgrow its context of "
                               "{} tokens ({})\n",
                               server_name, f.name, *longest_q, *tokens, max_tokens,
                               *limits.context, limits.context_source);
        }
    }
    return fits_alone;
}

bool permanent_error(long status, const std::string& body, bool fits_alone) {
    return error_answer(status, body, fits_alone) == ErrorAnswer::permanent;
}

ErrorAnswer error_answer(long status, const std::string& body, bool fits_alone) {
    if (status == 429 || status == 503) {
        return ErrorAnswer::transient; // busy: worth waiting for
    }
    auto j = util::parse_untrusted_json(body);
    std::string text = lower(body);
    if (j.is_object() && j.contains("error") && j["error"].is_object()) {
        const auto& e = j["error"];
        if (e.contains("type") && e["type"].is_string()) {
            text += " " + lower(e["type"].get<std::string>());
        }
    }
    // llama-server's answer that outgrew its context: a request that fits
    // alone met others in a cache they share.
    constexpr std::string_view k_outgrown = "context size has been exceeded";
    if (fits_alone && text.find(k_outgrown) != std::string::npos) {
        return ErrorAnswer::crowded;
    }
    // The messages and error types of llama.cpp, vLLM, SGLang and TGI for
    // requests that can never succeed as sent.
    static constexpr std::array<std::string_view, 9> k_permanent = {
        k_outgrown,
        "exceeds the available context size",
        "exceed_context_size_error",
        "maximum context length",
        "context length exceeded",
        "model_not_found",
        "does not exist",
        "invalid_request_error",
        "input validation error"};
    return std::any_of(k_permanent.begin(), k_permanent.end(),
                       [&](std::string_view p) { return text.find(p) != std::string::npos; })
               ? ErrorAnswer::permanent
               : ErrorAnswer::transient;
}

nlohmann::json limit_facts(const ServerLimits& limits) {
    nlohmann::json facts = nlohmann::json::object();
    if (!limits.props.is_object()) {
        return facts;
    }
    if (limits.props.contains("build_info")) {
        facts["engine_version"] = limits.props["build_info"];
    }
    if (limits.slots) {
        facts["slots"] = std::to_string(*limits.slots);
    }
    if (limits.props.contains("n_ctx")) {
        facts["context_per_slot"] = std::to_string(limits.props["n_ctx"].get<int64_t>());
    }
    if (auto sampling = limits.props.find("sampling");
        sampling != limits.props.end() && sampling->is_object()) {
        for (const auto& [key, value] : sampling->items()) {
            facts["default_" + key] = value.dump();
        }
    }
    // The file served, in the words of the log's "loading model '...'" line:
    // /v1/models names the model by its alias (`--alias`), which two GGUF
    // files can share.
    if (limits.props.contains("model_path") &&
        !limits.props["model_path"].get<std::string>().empty()) {
        facts["model"] = limits.props["model_path"];
    }
    return facts;
}

} // namespace diffeval::engine
