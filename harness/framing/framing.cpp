// Loading framing files and rendering request bodies from them.
#include <harness/framing/framing.hpp>

#include <harness/util/embedded.hpp>
#include <harness/util/file.hpp>
#include <harness/util/names.hpp>
#include <harness/util/toml_json.hpp>

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>

namespace diffeval::framing {

using util::ErrorKind;
using util::make_error;

namespace {

constexpr std::string_view k_builtin_dir = "prompts/";

std::string where(const std::string& origin, const toml::node& node) {
    return util::toml_where(origin, node);
}

// The integer key `key` of `tbl`, `fallback` when absent; an error naming the
// line when it is not an integer within [lo, hi].
util::Result<int64_t> integer_key(const toml::table& tbl, const char* key, int64_t fallback,
                                  int64_t lo, int64_t hi, const std::string& origin) {
    const toml::node* node = tbl.get(key);
    if (node == nullptr) {
        return fallback;
    }
    auto v = util::toml_integer(*node);
    if (!v || *v < lo || *v > hi) {
        return make_error(ErrorKind::usage, fmt::format("{}: '{}' must be an integer from {} to {}",
                                                        where(origin, *node), key, lo, hi));
    }
    return *v;
}

// The string key `key` of `tbl`, `fallback` when absent; an error naming the
// line when it is not a string.
util::Result<std::string> string_key(const toml::table& tbl, const char* key,
                                     const std::string& fallback, const std::string& origin) {
    const toml::node* node = tbl.get(key);
    if (node == nullptr) {
        return fallback;
    }
    auto v = node->value<std::string>();
    if (!v) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: '{}' must be a string", where(origin, *node), key));
    }
    return *v;
}

// A string key that must be one of `choices` (the first is the default).
util::Result<std::string> choice_key(const toml::table& tbl, const char* key,
                                     const std::vector<std::string>& choices,
                                     const std::string& origin) {
    auto v = string_key(tbl, key, choices.front(), origin);
    if (!v) {
        return v;
    }
    if (std::find(choices.begin(), choices.end(), *v) == choices.end()) {
        return make_error(ErrorKind::usage, fmt::format("{}: {} must be \"{}\", not \"{}\"", origin,
                                                        key, fmt::join(choices, "\" or \""), *v));
    }
    return v;
}

// A list of strings, empty when absent.
util::Result<std::vector<std::string>> string_list_key(const toml::table& tbl, const char* key,
                                                       const std::string& origin) {
    std::vector<std::string> out;
    const toml::node* node = tbl.get(key);
    if (node == nullptr) {
        return out;
    }
    const auto* list = node->as_array();
    if (!list) {
        return make_error(ErrorKind::usage, fmt::format("{}: '{}' must be a list of strings",
                                                        where(origin, *node), key));
    }
    for (const auto& v : *list) {
        auto item = v.value<std::string>();
        if (!item) {
            return make_error(ErrorKind::usage, fmt::format("{}: '{}' must be a list of strings",
                                                            where(origin, v), key));
        }
        out.push_back(*item);
    }
    return out;
}

util::Result<void> check_framing_keys(const toml::table& tbl, const std::string& origin) {
    static const std::set<std::string> k_keys = {"version",
                                                 "description",
                                                 "endpoint",
                                                 "kind",
                                                 "fewshot",
                                                 "fewshot_sampler",
                                                 "fewshot_seed",
                                                 "fewshot_as",
                                                 "gen_prefix",
                                                 "optional",
                                                 "example_template",
                                                 "question_template",
                                                 "user_template",
                                                 "assistant_template",
                                                 "body",
                                                 "model",
                                                 "probe_marker",
                                                 "probe_chain",
                                                 "fields"};
    return util::check_known_keys(tbl, k_keys, origin, "framing");
}

// The numbers and choices: version, kind, few-shot settings, model field.
util::Result<void> read_settings(const toml::table& tbl, const std::string& origin, Framing& f) {
    auto version = integer_key(tbl, "version", 1, 1, 1'000'000, origin);
    auto fewshot = integer_key(tbl, "fewshot", 5, 0, 100'000, origin);
    auto seed = integer_key(tbl, "fewshot_seed", 1234, std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max(), origin);
    for (const auto* r : {&version, &fewshot, &seed}) {
        if (!*r) {
            return r->error();
        }
    }
    auto kind = choice_key(tbl, "kind", {"completion", "chat"}, origin);
    auto sampler = choice_key(tbl, "fewshot_sampler", {"first_n", "python-random"}, origin);
    auto layout = choice_key(tbl, "fewshot_as", {"turns", "one-message"}, origin);
    auto model = choice_key(tbl, "model", {"if-configured", "always"}, origin);
    for (const auto* r : {&kind, &sampler, &layout, &model}) {
        if (!*r) {
            return r->error();
        }
    }
    f.version = static_cast<int>(*version);
    f.fewshot = static_cast<int>(*fewshot);
    f.fewshot_seed = *seed;
    f.kind = *kind == "chat" ? Kind::chat : Kind::completion;
    f.sampler =
        *sampler == "python-random" ? FewshotSampler::python_random : FewshotSampler::first_n;
    f.layout = *layout == "one-message" ? FewshotLayout::one_message : FewshotLayout::turns;
    f.model = *model == "always" ? ModelField::always : ModelField::if_configured;
    return {};
}

// The texts: templates, endpoint, probe marker; the body's order and fields.
util::Result<void> read_texts(const toml::table& tbl, const std::string& origin, Framing& f) {
    const bool chat = f.kind == Kind::chat;
    const std::pair<const char*, std::string*> strings[] = {
        {"description", &f.description},
        {"endpoint", &f.endpoint},
        {"gen_prefix", &f.gen_prefix},
        {"example_template", &f.example_template},
        {"question_template", &f.question_template},
        {"user_template", &f.user_template},
        {"assistant_template", &f.assistant_template},
    };
    for (const auto& [key, field] : strings) {
        auto v = string_key(tbl, key, "", origin);
        if (!v) {
            return v.error();
        }
        *field = std::move(*v);
    }
    auto marker = string_key(tbl, "probe_marker", "<think>", origin);
    auto chain = string_key(tbl, "probe_chain", chat ? "" : " ", origin);
    auto optional = string_list_key(tbl, "optional", origin);
    auto body = string_list_key(tbl, "body", origin);
    if (!marker || !chain) {
        return (!marker ? marker : chain).error();
    }
    if (!optional || !body) {
        return (!optional ? optional : body).error();
    }
    f.probe_marker = std::move(*marker);
    f.probe_chain = std::move(*chain);
    f.optional = std::move(*optional);
    f.body_order = std::move(*body);
    if (const toml::node* fields = tbl.get("fields")) {
        if (!fields->is_table()) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: 'fields' must be a table", where(origin, *fields)));
        }
        auto json = util::toml_to_json(*fields, origin, "fields");
        if (!json) {
            return json.error();
        }
        f.fields = std::move(*json);
    } else {
        f.fields = nlohmann::ordered_json::object();
    }
    return {};
}

// What only makes sense together: an endpoint path, the template the layout
// needs, and a body whose every key has a value or may be left out.
util::Result<void> check_consistent(const Framing& f, const std::string& origin) {
    if (f.probe_marker.empty()) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: probe_marker must not be empty", origin));
    }
    if (f.endpoint.empty() || f.endpoint[0] != '/') {
        return make_error(
            ErrorKind::usage,
            fmt::format("{}: endpoint must be a path such as \"/v1/completions\"", origin));
    }
    const bool chat = f.kind == Kind::chat;
    const bool turns = chat && f.layout == FewshotLayout::turns;
    if ((turns && f.user_template.empty()) || (!turns && f.question_template.empty())) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: a {} framing{} needs {}", origin,
                                      chat ? "chat" : "completion",
                                      chat ? fmt::format(" with fewshot_as = \"{}\"",
                                                         turns ? "turns" : "one-message")
                                           : "",
                                      turns ? "user_template" : "question_template"));
    }
    const std::string content_key = chat ? "messages" : "prompt";
    if (std::find(f.body_order.begin(), f.body_order.end(), content_key) == f.body_order.end()) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: body must list \"{}\"", origin, content_key));
    }
    for (const auto& key : f.body_order) {
        const bool optional =
            std::find(f.optional.begin(), f.optional.end(), key) != f.optional.end();
        if (key != content_key && key != "max_tokens" && key != "model" && !optional &&
            !f.fields.contains(key)) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: body lists \"{}\" but [fields] has no value for it "
                                          "(list it in optional = [...] to send it only when set)",
                                          origin, key));
        }
    }
    return {};
}

util::Result<Framing> parse(std::string_view text, const std::string& origin, std::string name) {
    auto parsed = util::parse_toml(text, origin);
    if (!parsed) {
        return parsed.error();
    }
    Framing f;
    f.name = std::move(name);
    f.origin = origin;
    if (auto r = check_framing_keys(*parsed, origin); !r) {
        return r.error();
    }
    if (auto r = read_settings(*parsed, origin, f); !r) {
        return r.error();
    }
    if (auto r = read_texts(*parsed, origin, f); !r) {
        return r.error();
    }
    if (auto r = check_consistent(f, origin); !r) {
        return r.error();
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
        auto text = util::read_input(name_or_path, util::k_max_config_bytes);
        if (!text) {
            return make_error(ErrorKind::usage,
                              fmt::format("cannot read framing file {}", text.error().message));
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

std::string render_template(const std::string& text, const datasets::Sample& sample,
                            const std::string& gen_prefix) {
    std::string out;
    out.reserve(text.size() + sample.question.size() + sample.answer.size());
    for (size_t i = 0; i < text.size();) {
        if (text.compare(i, 12, "{gen_prefix}") == 0) {
            out += gen_prefix;
            i += 12;
        } else if (text.compare(i, 10, "{question}") == 0) {
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

Framing apply_overrides(Framing framing, const Overrides& overrides) {
    if (overrides.fewshot) {
        framing.fewshot = *overrides.fewshot;
    }
    if (overrides.gen_prefix) {
        framing.gen_prefix = *overrides.gen_prefix;
    }
    for (const auto& [k, v] : overrides.fields.items()) {
        // Chat-only fields stay off completion bodies, where vLLM's script
        // refuses them and /v1/completions does not define them.
        const bool chat_only = k == "reasoning_effort" || k == "chat_template_kwargs";
        if (chat_only && framing.kind == Kind::completion) {
            continue;
        }
        framing.fields[k] = v;
    }
    return framing;
}

Renderer::Renderer(Framing framing, const datasets::Dataset& dataset)
    : m_framing(std::move(framing)), m_pool(&dataset.fewshot) {
    m_count = static_cast<uint32_t>(
        std::min<size_t>(static_cast<size_t>(std::max(m_framing.fewshot, 0)), m_pool->size()));
    if (m_framing.sampler == FewshotSampler::python_random) {
        m_rng = std::make_unique<util::PyRandom>(m_framing.fewshot_seed);
    } else {
        m_first_n = render_shots(shots(0));
    }
}

std::vector<uint32_t> Renderer::shots(int question_idx) const {
    if (m_framing.sampler == FewshotSampler::first_n) {
        std::vector<uint32_t> out(m_count);
        for (uint32_t i = 0; i < m_count; ++i) {
            out[i] = i;
        }
        return out;
    }
    // One generator for the whole dataset, drawn in question order, as
    // lm-eval draws for each document in turn.
    const auto q = static_cast<size_t>(std::max(question_idx, 0));
    while (m_draws.size() <= q) {
        m_draws.push_back(m_rng->sample(static_cast<uint32_t>(m_pool->size()), m_count));
    }
    return m_draws[q];
}

Renderer::Shots Renderer::render_shots(const std::vector<uint32_t>& indices) const {
    Shots out;
    const bool turns = m_framing.kind == Kind::chat && m_framing.layout == FewshotLayout::turns;
    for (uint32_t i : indices) {
        const auto& ex = (*m_pool)[i];
        if (!turns) {
            out.prefix += render_template(m_framing.example_template, ex, m_framing.gen_prefix);
        } else {
            out.history.push_back(
                {{"role", "user"},
                 {"content", render_template(m_framing.user_template, ex, m_framing.gen_prefix)}});
            out.history.push_back({{"role", "assistant"},
                                   {"content", render_template(m_framing.assistant_template, ex,
                                                               m_framing.gen_prefix)}});
        }
    }
    return out;
}

const Renderer::Shots& Renderer::shots_for(const datasets::Sample& sample, Shots& drawn) const {
    if (m_framing.sampler != FewshotSampler::python_random) {
        return m_first_n;
    }
    drawn = render_shots(shots(sample.index));
    return drawn;
}

size_t Renderer::prompt_bytes(const datasets::Sample& sample) const {
    const auto& f = m_framing;
    const auto listed = [&](std::string_view key) {
        return std::find(f.body_order.begin(), f.body_order.end(), key) != f.body_order.end();
    };
    if (!listed(f.kind == Kind::completion ? "prompt" : "messages")) {
        return 0;
    }
    Shots drawn;
    const Shots& use = shots_for(sample, drawn);
    if (f.kind == Kind::chat && f.layout == FewshotLayout::turns) {
        size_t n = render_template(f.user_template, sample, f.gen_prefix).size();
        for (const auto& m : use.history) {
            n += m["content"].get_ref<const std::string&>().size();
        }
        return n;
    }
    return use.prefix.size() + render_template(f.question_template, sample, f.gen_prefix).size();
}

nlohmann::ordered_json Renderer::body(const datasets::Sample& sample, int max_tokens,
                                      const std::optional<std::string>& model,
                                      const nlohmann::ordered_json& extra) const {
    Shots drawn;
    const Shots& use = shots_for(sample, drawn);
    const auto& gp = m_framing.gen_prefix;
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const auto& key : m_framing.body_order) {
        if (key == "prompt" && m_framing.kind == Kind::completion) {
            out["prompt"] = use.prefix + render_template(m_framing.question_template, sample, gp);
        } else if (key == "messages" && m_framing.kind == Kind::chat) {
            if (m_framing.layout == FewshotLayout::one_message) {
                out["messages"] = nlohmann::ordered_json::array(
                    {{{"role", "user"},
                      {"content",
                       use.prefix + render_template(m_framing.question_template, sample, gp)}}});
            } else {
                auto messages = use.history;
                messages.push_back(
                    {{"role", "user"},
                     {"content", render_template(m_framing.user_template, sample, gp)}});
                out["messages"] = std::move(messages);
            }
        } else if (key == "max_tokens") {
            out["max_tokens"] = max_tokens;
        } else if (key == "model") {
            if (model) {
                out["model"] = *model;
            } else if (m_framing.model == ModelField::always) {
                out["model"] = nullptr;
            }
        } else if (m_framing.fields.contains(key)) {
            out[key] = m_framing.fields[key];
        }
        // An optional key with no value is left out, as vLLM's script leaves
        // out what is None.
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
