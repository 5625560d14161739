// Reading simulator profiles from TOML. Each key the format knows is one row
// of a table (section, key, how to store it), so adding a key is one line and
// every unknown key is reported with its file and line instead of being
// silently ignored.
#include <harness/sim/profile.hpp>

#include <harness/util/embedded.hpp>
#include <harness/util/file.hpp>
#include <harness/util/toml_json.hpp>

#include <fmt/format.h>
#include <toml++/toml.h>

#include <filesystem>
#include <functional>
#include <optional>

namespace diffeval::sim {

namespace {

using util::ErrorKind;
using util::make_error;

constexpr std::string_view k_profile_dir = "harness/sim/profiles/";
constexpr int k_format_version = 1;

// Stores the value of `node` into the profile, or returns why it cannot.
using Setter = std::function<std::optional<std::string>(const toml::node& node, Profile& p)>;

struct KeyRule {
    std::string_view section; // "" = top level
    std::string_view key;
    Setter set;
};

std::optional<double> number_of(const toml::node& node) {
    if (auto i = node.as_integer()) {
        return static_cast<double>(i->get());
    }
    if (auto f = node.as_floating_point()) {
        return f->get();
    }
    return std::nullopt;
}

Setter share(double Behaviour::*field) {
    return [field](const toml::node& node, Profile& p) -> std::optional<std::string> {
        auto v = number_of(node);
        if (!v || *v < 0 || *v > 1) {
            return "must be a number from 0 to 1";
        }
        p.behaviour.*field = *v;
        return std::nullopt;
    };
}

Setter fault_share(double Faults::*field) {
    return [field](const toml::node& node, Profile& p) -> std::optional<std::string> {
        auto v = number_of(node);
        if (!v || *v < 0 || *v > 1) {
            return "must be a number from 0 to 1";
        }
        p.faults.*field = *v;
        return std::nullopt;
    };
}

template <typename Struct> Setter positive_number(Struct Profile::*part, double Struct::*field) {
    return [part, field](const toml::node& node, Profile& p) -> std::optional<std::string> {
        auto v = number_of(node);
        if (!v || *v <= 0) {
            return "must be a positive number";
        }
        p.*part.*field = *v;
        return std::nullopt;
    };
}

template <typename Struct, typename Int>
Setter integer(Struct Profile::*part, Int Struct::*field, int64_t min, int64_t max) {
    return
        [part, field, min, max](const toml::node& node, Profile& p) -> std::optional<std::string> {
            auto i = node.as_integer();
            if (!i || i->get() < min || i->get() > max) {
                return fmt::format("must be an integer from {} to {}", min, max);
            }
            p.*part.*field = static_cast<Int>(i->get());
            return std::nullopt;
        };
}

template <typename Struct> Setter text(Struct Profile::*part, std::string Struct::*field) {
    return [part, field](const toml::node& node, Profile& p) -> std::optional<std::string> {
        auto s = node.as_string();
        if (!s) {
            return "must be a string";
        }
        p.*part.*field = s->get();
        return std::nullopt;
    };
}

// The keys outside any section: version, name, description.
void add_top_rules(std::vector<KeyRule>& r) {
    r.push_back({"", "version", [](const toml::node& node, Profile& p) {
                     auto i = node.as_integer();
                     if (!i || i->get() != k_format_version) {
                         return std::optional<std::string>(
                             fmt::format("must be {} (the profile format this diffeval "
                                         "reads)",
                                         k_format_version));
                     }
                     p.version = static_cast<int>(i->get());
                     return std::optional<std::string>();
                 }});
    r.push_back({"", "name", [](const toml::node& node, Profile& p) {
                     auto s = node.as_string();
                     if (!s || s->get().empty()) {
                         return std::optional<std::string>("must be a non-empty string");
                     }
                     p.name = s->get();
                     return std::optional<std::string>();
                 }});
    r.push_back({"", "description", [](const toml::node& node, Profile& p) {
                     auto s = node.as_string();
                     if (!s) {
                         return std::optional<std::string>("must be a string");
                     }
                     p.description = s->get();
                     return std::optional<std::string>();
                 }});
}

// [server]: what the simulated server says it is.
void add_server_rules(std::vector<KeyRule>& r) {
    r.push_back({"server", "vllm_version", text(&Profile::server, &ServerInfo::vllm_version)});
    r.push_back({"server", "max_model_len",
                 integer(&Profile::server, &ServerInfo::max_model_len, 16, 1 << 24)});
    r.push_back({"server", "created",
                 integer(&Profile::server, &ServerInfo::created, 0, int64_t{1} << 40)});
    r.push_back({"server", "reasoning_parser", [](const toml::node& node, Profile& p) {
                     auto s = node.as_string();
                     if (!s || (s->get() != "qwen3" && !s->get().empty())) {
                         return std::optional<std::string>("must be \"qwen3\" or \"\" (no parser)");
                     }
                     p.server.reasoning_parser = s->get();
                     return std::optional<std::string>();
                 }});
    r.push_back({"server", "reasoning_field", [](const toml::node& node, Profile& p) {
                     auto s = node.as_string();
                     std::string v = s ? s->get() : "";
                     if (v == "reasoning") {
                         p.server.reasoning_field = ReasoningField::reasoning;
                     } else if (v == "reasoning_content") {
                         p.server.reasoning_field = ReasoningField::reasoning_content;
                     } else if (v == "both") {
                         p.server.reasoning_field = ReasoningField::both;
                     } else {
                         return std::optional<std::string>(
                             "must be \"reasoning\", \"reasoning_content\" or \"both\"");
                     }
                     return std::optional<std::string>();
                 }});
}

// [behaviour]: how the simulated model answers; [latency]: how fast.
void add_behaviour_rules(std::vector<KeyRule>& r) {
    auto b = [&](std::string_view key, double Behaviour::*field) {
        r.push_back({"behaviour", key, share(field)});
    };
    b("think_tag_rate", &Behaviour::think_tag_rate);
    b("reasoning_rate", &Behaviour::reasoning_rate);
    b("reasoning_jitter", &Behaviour::reasoning_jitter);
    b("reasoning_question_rate", &Behaviour::reasoning_question_rate);
    b("verbose_rate", &Behaviour::verbose_rate);
    b("loop_rate", &Behaviour::loop_rate);
    b("error_rate", &Behaviour::error_rate);
    b("chat_missing_hash_rate", &Behaviour::chat_missing_hash_rate);
    b("answer_noise", &Behaviour::answer_noise);
    b("repeat_noise", &Behaviour::repeat_noise);
    r.push_back({"behaviour", "reasoning_median_tokens",
                 positive_number(&Profile::behaviour, &Behaviour::reasoning_median_tokens)});
    r.push_back({"behaviour", "reasoning_sigma",
                 positive_number(&Profile::behaviour, &Behaviour::reasoning_sigma)});
    r.push_back({"behaviour", "verbose_min_tokens",
                 integer(&Profile::behaviour, &Behaviour::verbose_min_tokens, 1, 1 << 20)});
    r.push_back({"behaviour", "verbose_max_tokens",
                 integer(&Profile::behaviour, &Behaviour::verbose_max_tokens, 1, 1 << 20)});
    r.push_back({"latency", "ttft_ms", integer(&Profile::latency, &Latency::ttft_ms, 0, 600000)});
    r.push_back(
        {"latency", "per_token_ms", integer(&Profile::latency, &Latency::per_token_ms, 0, 60000)});
}

// [faults]: how often the simulated server misbehaves.
void add_fault_rules(std::vector<KeyRule>& r) {
    auto f = [&](std::string_view key, double Faults::*field) {
        r.push_back({"faults", key, fault_share(field)});
    };
    f("http_500", &Faults::http_500);
    f("http_503", &Faults::http_503);
    f("http_429", &Faults::http_429);
    f("reset_before_body", &Faults::reset_before_body);
    f("reset_during_body", &Faults::reset_during_body);
    f("stall", &Faults::stall);
    f("malformed_json", &Faults::malformed_json);
    f("stream_error", &Faults::stream_error);
    f("markup", &Faults::markup);
    r.push_back(
        {"faults", "retry_after_s", integer(&Profile::faults, &Faults::retry_after_s, 0, 3600)});
    r.push_back({"faults", "stall_ms", integer(&Profile::faults, &Faults::stall_ms, 0, 3600000)});
}

const std::vector<KeyRule>& key_rules() {
    static const std::vector<KeyRule> rules = [] {
        std::vector<KeyRule> r;
        add_top_rules(r);
        add_server_rules(r);
        add_behaviour_rules(r);
        add_fault_rules(r);
        return r;
    }();
    return rules;
}

const KeyRule* find_rule(std::string_view section, std::string_view key) {
    for (const auto& rule : key_rules()) {
        if (rule.section == section && rule.key == key) {
            return &rule;
        }
    }
    return nullptr;
}

bool is_section(std::string_view name) {
    for (const auto& rule : key_rules()) {
        if (!rule.section.empty() && rule.section == name) {
            return true;
        }
    }
    return false;
}

std::string where(const std::string& origin, const toml::source_region& src) {
    return fmt::format("{}:{}", origin, src.begin.line);
}

// Validate the keys of `table` (the section `section`) into `p`.
std::optional<util::Error> read_section(const toml::table& table, std::string_view section,
                                        const std::string& origin, Profile& p) {
    for (const auto& [key, node] : table) {
        std::string_view k = key.str();
        if (section.empty() && node.is_table()) {
            if (!is_section(k)) {
                return make_error(ErrorKind::data,
                                  fmt::format("{}: unknown section [{}]; known sections are "
                                              "[server], [behaviour], [latency], [faults]",
                                              where(origin, key.source()), k));
            }
            if (auto err = read_section(*node.as_table(), k, origin, p)) {
                return err;
            }
            continue;
        }
        const KeyRule* rule = find_rule(section, k);
        if (!rule) {
            return make_error(
                ErrorKind::data,
                fmt::format("{}: unknown key '{}'{} (see docs/simulator.md)",
                            where(origin, key.source()), k,
                            section.empty() ? std::string() : fmt::format(" in [{}]", section)));
        }
        if (auto why = rule->set(node, p)) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: '{}' {}", where(origin, node.source()), k, *why));
        }
    }
    return std::nullopt;
}

} // namespace

util::Result<Profile> parse_profile(std::string_view text, const std::string& origin) {
    auto parsed = util::parse_toml(text, origin, ErrorKind::data);
    if (!parsed) {
        return parsed.error();
    }
    const toml::table& doc = *parsed;
    Profile p;
    p.version = 0;
    if (auto err = read_section(doc, "", origin, p)) {
        return *err;
    }
    if (p.version != k_format_version) {
        return make_error(ErrorKind::data,
                          fmt::format("{}: missing 'version = {}'", origin, k_format_version));
    }
    if (p.name.empty()) {
        return make_error(ErrorKind::data, fmt::format("{}: missing 'name'", origin));
    }
    if (p.behaviour.verbose_max_tokens < p.behaviour.verbose_min_tokens) {
        return make_error(
            ErrorKind::data,
            fmt::format("{}: verbose_max_tokens is below verbose_min_tokens", origin));
    }
    return p;
}

std::vector<std::string> builtin_profile_names() {
    std::vector<std::string> names;
    for (const auto& path : util::embedded_files_under(k_profile_dir)) {
        std::string_view file = std::string_view(path).substr(k_profile_dir.size());
        if (file.size() > 5 && file.substr(file.size() - 5) == ".toml") {
            names.emplace_back(file.substr(0, file.size() - 5));
        }
    }
    return names;
}

util::Result<Profile> load_profile(std::string_view name_or_path) {
    std::string embedded_path = fmt::format("{}{}.toml", k_profile_dir, name_or_path);
    if (auto text = util::embedded_file(embedded_path)) {
        return parse_profile(*text, embedded_path);
    }
    std::filesystem::path path{std::string(name_or_path)};
    // A path that names something (a directory, /dev/zero) is read as a
    // file and refused in its own words; only a name that is neither a
    // built-in profile nor a path is unknown.
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        std::string known;
        for (const auto& n : builtin_profile_names()) {
            known += known.empty() ? n : ", " + n;
        }
        return make_error(ErrorKind::usage,
                          fmt::format("unknown profile '{}': built-in profiles are {}; or give "
                                      "the path of a profile .toml file",
                                      name_or_path, known));
    }
    auto text = util::read_input(path, util::k_max_config_bytes);
    if (!text) {
        return make_error(ErrorKind::usage,
                          fmt::format("cannot read profile file {}", text.error().message));
    }
    return parse_profile(*text, path.string());
}

} // namespace diffeval::sim
