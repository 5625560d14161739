// Loading framing files and rendering request bodies from them.
#include <harness/framing/framing.hpp>

#include <harness/util/embedded.hpp>
#include <harness/util/file.hpp>
#include <harness/util/names.hpp>
#include <harness/util/toml_json.hpp>

#include <fmt/format.h>
#include <toml++/toml.h>

#include <filesystem>
#include <set>

namespace diffeval::framing {

using util::ErrorKind;
using util::make_error;

namespace {

constexpr std::string_view k_builtin_dir = "prompts/";

std::string where(const std::string& origin, const toml::node& node) {
    return fmt::format("{}:{}", origin, node.source().begin.line);
}

util::Result<Framing> parse(std::string_view text, const std::string& origin, std::string name) {
    auto parsed = util::parse_toml(text, origin);
    if (!parsed) {
        return parsed.error();
    }
    const toml::table& tbl = *parsed;
    static const std::set<std::string> k_keys = {"version",
                                                 "description",
                                                 "endpoint",
                                                 "kind",
                                                 "fewshot",
                                                 "example_template",
                                                 "question_template",
                                                 "user_template",
                                                 "assistant_template",
                                                 "body",
                                                 "model",
                                                 "probe_marker",
                                                 "probe_chain",
                                                 "fields"};
    for (const auto& [k, v] : tbl) {
        if (!k_keys.count(std::string(k.str()))) {
            return make_error(ErrorKind::usage, fmt::format("{}: unknown key '{}' in framing",
                                                            where(origin, v), k.str()));
        }
    }
    Framing f;
    f.name = std::move(name);
    f.origin = origin;
    f.version = static_cast<int>(tbl["version"].value_or(int64_t{1}));
    f.description = tbl["description"].value_or(std::string{});
    f.endpoint = tbl["endpoint"].value_or(std::string{});
    auto kind = tbl["kind"].value_or(std::string{"completion"});
    if (kind != "completion" && kind != "chat") {
        return make_error(
            ErrorKind::usage,
            fmt::format("{}: kind must be \"completion\" or \"chat\", not \"{}\"", origin, kind));
    }
    f.kind = kind == "chat" ? Kind::chat : Kind::completion;
    f.fewshot = static_cast<int>(tbl["fewshot"].value_or(int64_t{5}));
    f.example_template = tbl["example_template"].value_or(std::string{});
    f.question_template = tbl["question_template"].value_or(std::string{});
    f.user_template = tbl["user_template"].value_or(std::string{});
    f.assistant_template = tbl["assistant_template"].value_or(std::string{});
    auto model = tbl["model"].value_or(std::string{"if-configured"});
    if (model != "always" && model != "if-configured") {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: model must be \"always\" or \"if-configured\"", origin));
    }
    f.model = model == "always" ? ModelField::always : ModelField::if_configured;
    f.probe_marker = tbl["probe_marker"].value_or(std::string{"<think>"});
    f.probe_chain = tbl["probe_chain"].value_or(std::string{kind == "chat" ? "" : " "});
    if (f.probe_marker.empty()) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: probe_marker must not be empty", origin));
    }
    if (auto* body = tbl["body"].as_array()) {
        for (const auto& v : *body) {
            f.body_order.push_back(v.value_or(std::string{}));
        }
    }
    if (auto* fields = tbl["fields"].as_table()) {
        f.fields = util::toml_to_json(*fields);
    } else {
        f.fields = nlohmann::ordered_json::object();
    }
    if (f.endpoint.empty() || f.endpoint[0] != '/') {
        return make_error(
            ErrorKind::usage,
            fmt::format("{}: endpoint must be a path such as \"/v1/completions\"", origin));
    }
    const bool chat = f.kind == Kind::chat;
    if ((chat && f.user_template.empty()) || (!chat && f.question_template.empty())) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: a {} framing needs {}", origin, kind,
                                      chat ? "user_template" : "question_template"));
    }
    const std::string content_key = chat ? "messages" : "prompt";
    if (std::find(f.body_order.begin(), f.body_order.end(), content_key) == f.body_order.end()) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: body must list \"{}\"", origin, content_key));
    }
    for (const auto& key : f.body_order) {
        if (key != content_key && key != "max_tokens" && key != "model" &&
            !f.fields.contains(key)) {
            return make_error(
                ErrorKind::usage,
                fmt::format("{}: body lists \"{}\" but [fields] has no value for it", origin, key));
        }
    }
    return f;
}

} // namespace

std::vector<std::string> builtin_framings() {
    std::vector<std::string> out;
    for (const auto& p : util::embedded_files_under(k_builtin_dir)) {
        out.push_back(std::filesystem::path(p).stem().string());
    }
    return out;
}

util::Result<Framing> load_framing(const std::string& name_or_path) {
    if (auto text = util::embedded_file(fmt::format("{}{}.toml", k_builtin_dir, name_or_path))) {
        return parse(*text, fmt::format("prompts/{}.toml", name_or_path), name_or_path);
    }
    if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".toml")) {
        auto text = util::read_file(name_or_path);
        if (!text) {
            return make_error(ErrorKind::usage,
                              fmt::format("cannot read framing file {}", name_or_path));
        }
        return parse(*text, name_or_path, std::filesystem::path(name_or_path).stem().string());
    }
    auto known = builtin_framings();
    auto suggestion = util::closest_name(name_or_path, known);
    return make_error(
        ErrorKind::usage,
        fmt::format("unknown framing '{}'{}; known: {} (or a path to a .toml file)", name_or_path,
                    suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : "",
                    fmt::join(known, ", ")));
}

std::string render_template(const std::string& text, const datasets::Sample& sample) {
    std::string out;
    out.reserve(text.size() + sample.question.size() + sample.answer.size());
    for (size_t i = 0; i < text.size();) {
        if (text.compare(i, 10, "{question}") == 0) {
            out += sample.question;
            i += 10;
        } else if (text.compare(i, 8, "{answer}") == 0) {
            out += sample.answer;
            i += 8;
        } else {
            out += text[i++];
        }
    }
    return out;
}

Renderer::Renderer(Framing framing, const datasets::Dataset& dataset)
    : m_framing(std::move(framing)), m_history(nlohmann::ordered_json::array()) {
    const auto n = std::min<size_t>(static_cast<size_t>(std::max(m_framing.fewshot, 0)),
                                    dataset.fewshot.size());
    for (size_t i = 0; i < n; ++i) {
        const auto& ex = dataset.fewshot[i];
        if (m_framing.kind == Kind::completion) {
            m_prefix += render_template(m_framing.example_template, ex);
        } else {
            m_history.push_back(
                {{"role", "user"}, {"content", render_template(m_framing.user_template, ex)}});
            m_history.push_back({{"role", "assistant"},
                                 {"content", render_template(m_framing.assistant_template, ex)}});
        }
    }
}

nlohmann::ordered_json Renderer::body(const datasets::Sample& sample, int max_tokens,
                                      const std::optional<std::string>& model,
                                      const nlohmann::ordered_json& extra) const {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const auto& key : m_framing.body_order) {
        if (key == "prompt" && m_framing.kind == Kind::completion) {
            out["prompt"] = m_prefix + render_template(m_framing.question_template, sample);
        } else if (key == "messages" && m_framing.kind == Kind::chat) {
            auto messages = m_history;
            messages.push_back(
                {{"role", "user"}, {"content", render_template(m_framing.user_template, sample)}});
            out["messages"] = std::move(messages);
        } else if (key == "max_tokens") {
            out["max_tokens"] = max_tokens;
        } else if (key == "model") {
            if (model) {
                out["model"] = *model;
            } else if (m_framing.model == ModelField::always) {
                out["model"] = nullptr;
            }
        } else {
            out[key] = m_framing.fields[key];
        }
    }
    // Fixed fields the body order does not list still go out, after it.
    for (const auto& [k, v] : m_framing.fields.items()) {
        if (!out.contains(k)) {
            out[k] = v;
        }
    }
    for (const auto& [k, v] : extra.items()) {
        out[k] = v;
    }
    return out;
}

} // namespace diffeval::framing
