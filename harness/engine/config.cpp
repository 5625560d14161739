// Experiment files and validation of a run's configuration.
#include <harness/engine/config.hpp>

#include <harness/engine/probe_plan.hpp>
#include <harness/http/client.hpp>
#include <harness/util/file.hpp>
#include <harness/util/toml_json.hpp>

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cmath>
#include <set>
#include <sstream>
#include <type_traits>

namespace diffeval::engine {

using util::ErrorKind;
using util::make_error;

namespace {

std::string where(const std::string& path, const toml::node& node) {
    return fmt::format("{}:{}", path, node.source().begin.line);
}

util::Result<void> check_keys(const std::string& path, const toml::table& t,
                              const std::set<std::string>& allowed, const std::string& context) {
    for (const auto& [k, v] : t) {
        if (!allowed.count(std::string(k.str()))) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: unknown key '{}' in {}; known: {}", where(path, v),
                                          k.str(), context, fmt::join(allowed, ", ")));
        }
    }
    return {};
}

template <typename T>
util::Result<T> get(const std::string& path, const toml::node& node, const char* what) {
    std::optional<T> v;
    if constexpr (std::is_same_v<T, int64_t>) {
        v = util::toml_integer(node);
    } else {
        v = node.value<T>();
    }
    if (!v) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: '{}' has the wrong type", where(path, node), what));
    }
    return *v;
}

// An integer key of the experiment file within [lo, hi].
util::Result<int64_t> get_int_in(const std::string& path, const toml::node& node, const char* what,
                                 int64_t lo, int64_t hi) {
    auto v = get<int64_t>(path, node, what);
    if (!v) {
        return v.error();
    }
    if (auto r =
            check_range(fmt::format("{}: '{}'", where(path, node), what), static_cast<double>(*v),
                        static_cast<double>(lo), static_cast<double>(hi));
        !r) {
        return r.error();
    }
    return *v;
}

// Seconds in the experiment file, within (0, Limits::max_timeout_s].
util::Result<std::chrono::milliseconds> get_seconds(const std::string& path, const toml::node& node,
                                                    const char* what) {
    auto v = node.value<double>();
    if (!v) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: '{}' must be seconds", where(path, node), what));
    }
    if (auto r = check_range(fmt::format("{}: '{}'", where(path, node), what), *v, 0.001,
                             Limits::max_timeout_s);
        !r) {
        return r.error();
    }
    return std::chrono::milliseconds(static_cast<int64_t>(std::llround(*v * 1000)));
}

std::string shown(double v) {
    return std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e18
               ? fmt::format("{}", static_cast<int64_t>(v))
               : fmt::format("{}", v);
}

} // namespace

util::Result<void> check_range(const std::string& what, double value, double lo, double hi) {
    if (std::isfinite(value) && value >= lo && value <= hi) {
        return {};
    }
    return make_error(ErrorKind::usage, fmt::format("{} {}: must be between {} and {}", what,
                                                    shown(value), shown(lo), shown(hi)));
}

util::Result<void> load_experiment(const std::string& path, RunConfig& config) {
    const auto text = util::read_file(path);
    if (!text) {
        return make_error(ErrorKind::usage,
                          fmt::format("cannot read experiment file {}; check the path", path));
    }
    auto parsed = util::parse_toml(*text, path);
    if (!parsed) {
        return parsed.error();
    }
    const toml::table& tbl = *parsed;
    static const std::set<std::string> k_top = {
        "version",     "servers",    "server",  "model",
        "framings",    "max_tokens", "repeats", "limit",
        "concurrency", "db",         "dataset", "fewshot_from",
        "api_key_env", "timeout",    "retries", "max_response_bytes",
        "probe"};
    if (auto r = check_keys(path, tbl, k_top, "experiment file"); !r) {
        return r;
    }
    auto str_list = [&](const toml::node& n,
                        const char* what) -> util::Result<std::vector<std::string>> {
        std::vector<std::string> out;
        if (n.is_string()) {
            out.push_back(*n.value<std::string>());
            return out;
        }
        auto* a = n.as_array();
        if (!a) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: '{}' must be a list", where(path, n), what));
        }
        for (const auto& e : *a) {
            auto v = get<std::string>(path, e, what);
            if (!v) {
                return v.error();
            }
            out.push_back(*v);
        }
        return out;
    };
    for (const auto& [key, node] : tbl) {
        const std::string k(key.str());
        if (k == "model") {
            auto v = get<std::string>(path, node, "model");
            if (!v)
                return v.error();
            config.model = *v;
        } else if (k == "framings") {
            auto v = str_list(node, "framings");
            if (!v)
                return v.error();
            config.framings = *v;
        } else if (k == "max_tokens") {
            config.max_tokens.clear();
            if (node.is_integer()) {
                auto v = get_int_in(path, node, "max_tokens", 1, Limits::max_max_tokens);
                if (!v)
                    return v.error();
                config.max_tokens.push_back(static_cast<int>(*v));
            } else if (auto* a = node.as_array()) {
                for (const auto& e : *a) {
                    auto v = get_int_in(path, e, "max_tokens", 1, Limits::max_max_tokens);
                    if (!v)
                        return v.error();
                    config.max_tokens.push_back(static_cast<int>(*v));
                }
            } else {
                return make_error(ErrorKind::usage,
                                  fmt::format("{}: 'max_tokens' must be an integer or a list",
                                              where(path, node)));
            }
        } else if (k == "concurrency" && node.value<std::string>() == "auto") {
            config.concurrency_auto = true;
        } else if (k == "max_response_bytes") {
            auto v = get_int_in(path, node, "max_response_bytes", Limits::min_response_bytes,
                                Limits::max_response_bytes);
            if (!v)
                return v.error();
            config.max_response_bytes = *v;
        } else if (k == "repeats" || k == "limit" || k == "concurrency" || k == "retries") {
            const int64_t lo = k == "retries" ? 0 : 1;
            const int64_t hi = k == "repeats"       ? Limits::max_repeats
                               : k == "limit"       ? Limits::max_limit
                               : k == "concurrency" ? Limits::max_concurrency
                                                    : Limits::max_retries;
            auto v = get_int_in(path, node, k.c_str(), lo, hi);
            if (!v)
                return v.error();
            int n = static_cast<int>(*v);
            if (k == "repeats") {
                config.repeats = n;
            } else if (k == "concurrency") {
                config.concurrency = n;
                config.concurrency_auto = false;
            } else if (k == "retries") {
                config.retries = n;
            } else {
                config.limit = n;
            }
        } else if (k == "probe") {
            auto v = get<std::string>(path, node, "probe");
            if (!v)
                return v.error();
            config.probe = *v;
        } else if (k == "stream") {
            auto v = get<bool>(path, node, "stream");
            if (!v)
                return v.error();
            config.stream = *v;
        } else if (k == "timeout") {
            auto v = get_seconds(path, node, "timeout");
            if (!v)
                return v.error();
            config.timeout = *v;
        } else if (k == "db" || k == "dataset" || k == "fewshot_from" || k == "api_key_env") {
            auto v = get<std::string>(path, node, k.c_str());
            if (!v)
                return v.error();
            (k == "db"             ? config.db
             : k == "dataset"      ? config.dataset
             : k == "fewshot_from" ? config.fewshot_from
                                   : config.api_key_env) = *v;
        } else if (k == "servers" || k == "server") {
            auto* arr = node.as_array();
            if (!arr) {
                return make_error(
                    ErrorKind::usage,
                    fmt::format("{}: write servers as [[servers]] tables", where(path, node)));
            }
            for (const auto& sn : *arr) {
                auto* st = sn.as_table();
                if (!st) {
                    return make_error(
                        ErrorKind::usage,
                        fmt::format("{}: each server must be a table", where(path, sn)));
                }
                static const std::set<std::string> k_server = {
                    "name",  "url", "model", "api_key_env",   "headers", "body", "launch",
                    "shell", "env", "cwd",   "ready_timeout", "health",  "log"};
                if (auto r = check_keys(path, *st, k_server, "[[servers]]"); !r) {
                    return r;
                }
                ServerSpec s;
                for (const auto& [sk, sv] : *st) {
                    const std::string skey(sk.str());
                    if (skey == "headers") {
                        auto* ht = sv.as_table();
                        if (!ht)
                            return make_error(
                                ErrorKind::usage,
                                fmt::format("{}: headers must be a table", where(path, sv)));
                        for (const auto& [hk, hv] : *ht) {
                            auto v = get<std::string>(path, hv, "headers");
                            if (!v)
                                return v.error();
                            s.headers.push_back(fmt::format("{}: {}", hk.str(), *v));
                        }
                    } else if (skey == "launch") {
                        if (sv.is_string()) {
                            s.launch = {*sv.value<std::string>()};
                        } else {
                            auto v = str_list(sv, "launch");
                            if (!v)
                                return v.error();
                            s.launch = *v;
                        }
                    } else if (skey == "health") {
                        auto v = str_list(sv, "health");
                        if (!v)
                            return v.error();
                        s.health = *v;
                    } else if (skey == "shell") {
                        auto v = get<bool>(path, sv, "shell");
                        if (!v)
                            return v.error();
                        s.launch_shell = *v;
                    } else if (skey == "ready_timeout") {
                        auto v = get_seconds(path, sv, "ready_timeout");
                        if (!v)
                            return v.error();
                        s.ready_timeout = *v;
                    } else if (skey == "env") {
                        auto* et = sv.as_table();
                        if (!et)
                            return make_error(
                                ErrorKind::usage,
                                fmt::format("{}: env must be a table", where(path, sv)));
                        for (const auto& [ek, ev] : *et) {
                            auto v = get<std::string>(path, ev, "env");
                            if (!v)
                                return v.error();
                            s.env.emplace_back(std::string(ek.str()), *v);
                        }
                    } else if (skey == "body") {
                        if (!sv.is_table())
                            return make_error(
                                ErrorKind::usage,
                                fmt::format("{}: body must be a table", where(path, sv)));
                        s.extra_body = util::toml_to_json(sv);
                    } else {
                        auto v = get<std::string>(path, sv, skey.c_str());
                        if (!v)
                            return v.error();
                        if (skey == "name")
                            s.name = *v;
                        else if (skey == "url")
                            s.url = *v;
                        else if (skey == "model")
                            s.model = *v;
                        else if (skey == "cwd")
                            s.cwd = *v;
                        else if (skey == "log")
                            s.log_path = *v;
                        else
                            s.api_key_env = *v;
                    }
                }
                if (s.name.empty() || s.url.empty()) {
                    return make_error(
                        ErrorKind::usage,
                        fmt::format("{}: a server needs name and url", where(path, sn)));
                }
                while (!s.url.empty() && s.url.back() == '/')
                    s.url.pop_back();
                config.servers.push_back(std::move(s));
            }
        }
    }
    return {};
}

util::Result<void> attach_server_log(const std::string& value, RunConfig& config) {
    auto eq = value.find('=');
    if (eq == std::string::npos || eq == 0) {
        return make_error(ErrorKind::usage,
                          fmt::format("--server-log '{}': expected NAME=PATH", value));
    }
    auto name = value.substr(0, eq);
    for (auto& s : config.servers) {
        if (s.name == name) {
            s.attached_log = value.substr(eq + 1);
            return {};
        }
    }
    return make_error(ErrorKind::usage, fmt::format("--server-log: no server named '{}'", name));
}

util::Result<ServerSpec> parse_server_flag(const std::string& value) {
    auto eq = value.find('=');
    if (eq == std::string::npos || eq == 0) {
        return make_error(
            ErrorKind::usage,
            fmt::format("--server '{}': expected NAME=URL, e.g. default=http://localhost:8000",
                        value));
    }
    ServerSpec s;
    s.name = value.substr(0, eq);
    s.url = value.substr(eq + 1);
    while (!s.url.empty() && s.url.back() == '/') {
        s.url.pop_back();
    }
    return s;
}

util::Result<void> validate(const RunConfig& c) {
    if (c.servers.empty()) {
        return make_error(ErrorKind::usage,
                          "no servers: pass --server NAME=URL or a --config file with [[servers]]");
    }
    std::set<std::string> names;
    for (const auto& s : c.servers) {
        if (s.name.find_first_of("/ \t") != std::string::npos) {
            return make_error(
                ErrorKind::usage,
                fmt::format("server name '{}' must not contain '/' or spaces", s.name));
        }
        if (!names.insert(s.name).second) {
            return make_error(ErrorKind::usage,
                              fmt::format("server name '{}' is given twice", s.name));
        }
        if (!http::looks_like_http_url(s.url)) {
            return make_error(
                ErrorKind::usage,
                fmt::format("server '{}': '{}' is not an http:// or https:// URL", s.name, s.url));
        }
    }
    if (c.framings.empty()) {
        return make_error(ErrorKind::usage, "no framings: pass --framing raw,chat");
    }
    if (c.max_tokens.empty()) {
        return make_error(ErrorKind::usage, "no token limits: pass --max-tokens 256,1024");
    }
    auto range = [](const char* what, double v, double lo, double hi) {
        return check_range(what, v, lo, hi);
    };
    for (int m : c.max_tokens) {
        if (auto r = range("--max-tokens", m, 1, Limits::max_max_tokens); !r) {
            return r;
        }
    }
    const double timeout_s = static_cast<double>(c.timeout.count()) / 1000.0;
    for (auto r :
         {range("--repeats", c.repeats, 1, Limits::max_repeats),
          c.limit ? range("--limit", *c.limit, 1, Limits::max_limit) : util::Result<void>{},
          range("--concurrency", c.concurrency, 1, Limits::max_concurrency),
          range("--retries", c.retries, 0, Limits::max_retries),
          range("--retry-backoff-ms", static_cast<double>(c.retry_backoff.count()), 0,
                Limits::max_retry_backoff_ms),
          range("--timeout", timeout_s, 0.001, Limits::max_timeout_s),
          range("--max-response-bytes", static_cast<double>(c.max_response_bytes),
                Limits::min_response_bytes, Limits::max_response_bytes)}) {
        if (!r) {
            return r;
        }
    }
    if (c.probe) {
        return validate_probe(*c.probe);
    }
    return {};
}

util::Result<Shard> parse_shard(const std::string& value) {
    Shard s;
    char slash = 0;
    std::istringstream in(value);
    if (!(in >> s.index >> slash >> s.count) || slash != '/' || !in.eof() || s.count < 1 ||
        s.index < 0 || s.index >= s.count) {
        return make_error(
            ErrorKind::usage,
            fmt::format("--shard '{}': expected I/N with 0 <= I < N, such as 0/4", value));
    }
    return s;
}

nlohmann::json to_json(const RunConfig& c) {
    nlohmann::json servers = nlohmann::json::array();
    for (const auto& s : c.servers) {
        nlohmann::json j = {{"name", s.name}, {"url", s.url}};
        if (s.model)
            j["model"] = *s.model;
        if (!s.api_key_env.empty())
            j["api_key_env"] = s.api_key_env;
        if (!s.extra_body.empty())
            j["body"] = s.extra_body;
        // Header values may hold credentials: keep only their names.
        nlohmann::json names = nlohmann::json::array();
        for (const auto& h : s.headers)
            names.push_back(h.substr(0, h.find(':')));
        if (!names.empty())
            j["headers"] = names;
        if (!s.launch.empty())
            j["launch"] = s.launch;
        // Environment values may hold credentials too: names only.
        nlohmann::json env_names = nlohmann::json::array();
        for (const auto& [k, v] : s.env)
            env_names.push_back(k);
        if (!env_names.empty())
            j["env"] = env_names;
        servers.push_back(j);
    }
    nlohmann::json j = {{"servers", servers},
                        {"sequential_servers", c.sequential_servers},
                        {"framings", c.framings},
                        {"max_tokens", c.max_tokens},
                        {"repeats", c.repeats},
                        {"concurrency", c.concurrency_auto ? nlohmann::json("auto")
                                                           : nlohmann::json(c.concurrency)},
                        {"dataset", c.dataset},
                        {"timeout_s", c.timeout.count() / 1000.0},
                        {"retries", c.retries},
                        {"max_response_bytes", c.max_response_bytes}};
    if (c.limit)
        j["limit"] = *c.limit;
    if (c.probe)
        j["probe"] = *c.probe;
    if (c.model)
        j["model"] = *c.model;
    if (!c.fewshot_from.empty())
        j["fewshot_from"] = c.fewshot_from;
    if (c.shard)
        j["shard"] = fmt::format("{}/{}", c.shard->index, c.shard->count);
    const auto& o = c.framing_overrides;
    if (o.fewshot)
        j["num_shots"] = *o.fewshot;
    if (o.gen_prefix)
        j["gen_prefix"] = *o.gen_prefix;
    if (!o.fields.empty())
        j["framing_fields"] = o.fields;
    return j;
}

} // namespace diffeval::engine
