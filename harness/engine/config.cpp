// Experiment files and validation of a run's configuration.
#include <harness/engine/config.hpp>

#include <harness/engine/probe_plan.hpp>
#include <harness/http/client.hpp>
#include <harness/store/store.hpp>
#include <harness/util/file.hpp>
#include <harness/util/text.hpp>
#include <harness/util/toml_json.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <type_traits>

namespace diffeval::engine {

using util::ErrorKind;
using util::make_error;

namespace {

// A server URL's trailing slashes go (the endpoints' paths are appended),
// but not those of its scheme's "://": "http://" stays what the user typed,
// for the message that says it names no host.
void trim_trailing_slashes(std::string& url) {
    const auto scheme_end = url.find("://");
    const size_t keep = scheme_end == std::string::npos ? 0 : scheme_end + 3;
    while (url.size() > keep && url.back() == '/') {
        url.pop_back();
    }
}

std::string where(const std::string& path, const toml::node& node) {
    return util::toml_where(path, node);
}

// What a TOML value is, in words: "a string", "a list".
std::string_view kind_of(const toml::node& node) {
    switch (node.type()) {
    case toml::node_type::string:
        return "a string";
    case toml::node_type::integer:
        return "an integer";
    case toml::node_type::floating_point:
        // 2.5, and 1e20 too: TOML reads an exponent as a float.
        return "a floating-point number";
    case toml::node_type::boolean:
        return "true or false";
    case toml::node_type::array:
        return "a list";
    case toml::node_type::table:
        return "a table";
    default:
        return "a date or time";
    }
}

template <typename T>
util::Result<T> get(const std::string& path, const toml::node& node, const char* what) {
    std::optional<T> v;
    std::string_view wanted;
    if constexpr (std::is_same_v<T, int64_t>) {
        v = util::toml_integer(node);
        wanted = "a whole number";
    } else if constexpr (std::is_same_v<T, bool>) {
        v = node.value<T>();
        wanted = "true or false";
    } else {
        static_assert(std::is_same_v<T, std::string>);
        v = node.value<T>();
        wanted = "a string";
    }
    if (!v) {
        // "'repeats' must be a whole number, not a string": it said "has the
        // wrong type", leaving the reader to guess which.
        return make_error(ErrorKind::usage,
                          fmt::format("{}: '{}' must be {}, not {}", where(path, node), what,
                                      wanted, kind_of(node)));
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
    if (auto r = check_whole_range(fmt::format("{}: '{}'", where(path, node), what), *v, lo, hi);
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

// Whole numbers print whole: a --limit past int64, which CLI11 reads as
// int64's largest value, prints as 9223372036854775808 (that value as a
// double), not 9.223372036854776e+18.
std::string shown(double v) {
    return std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e20 ? fmt::format("{:.0f}", v)
                                                                         : fmt::format("{}", v);
}

} // namespace

util::Result<void> check_whole_range(const std::string& what, int64_t value, int64_t lo,
                                     int64_t hi) {
    if (value >= lo && value <= hi) {
        return {};
    }
    // As typed: through a double, 9223372036854775807 printed as ...808.
    if (lo == hi) {
        return make_error(ErrorKind::usage, fmt::format("{} {}: must be {}", what, value, lo));
    }
    return make_error(ErrorKind::usage,
                      fmt::format("{} {}: must be between {} and {}", what, value, lo, hi));
}

std::string override_flag(std::string_view field) {
    std::string flag = "--" + std::string(field);
    std::replace(flag.begin(), flag.end(), '_', '-');
    return flag;
}

util::Result<void> check_range(const std::string& what, double value, double lo, double hi) {
    if (std::isfinite(value) && value >= lo && value <= hi) {
        return {};
    }
    if (lo == hi) {
        return make_error(ErrorKind::usage,
                          fmt::format("{} {}: must be {}", what, shown(value), shown(lo)));
    }
    return make_error(ErrorKind::usage, fmt::format("{} {}: must be between {} and {}", what,
                                                    shown(value), shown(lo), shown(hi)));
}

namespace {

// A key's value as a list of strings (a single string is a list of one).
util::Result<std::vector<std::string>> string_list(const std::string& path, const toml::node& n,
                                                   const char* what) {
    std::vector<std::string> out;
    if (n.is_string()) {
        out.push_back(*n.value<std::string>());
        return out;
    }
    const auto* a = n.as_array();
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
}

// `table` of `name` = "value" as strings "name: value" (headers) or pairs
// (environment).
util::Result<std::vector<std::pair<std::string, std::string>>>
string_table(const std::string& path, const toml::node& n, const char* what) {
    const auto* t = n.as_table();
    if (!t) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: {} must be a table", where(path, n), what));
    }
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [k, v] : *t) {
        auto s = get<std::string>(path, v, what);
        if (!s) {
            return s.error();
        }
        out.emplace_back(std::string(k.str()), *s);
    }
    return out;
}

// What is wrong with the header `name: value` a config file gives, or
// nothing. Each is sent as written: a line break in a value began another
// header (or a whole second request), a name with a space or a
// Content-Length the server refused with a misleading error.
std::optional<std::string> header_problem(std::string_view name, std::string_view value) {
    // RFC 9110's token: one or more tchar.
    const auto tchar = [](unsigned char c) {
        return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) !=
                                      std::string_view::npos;
    };
    if (name.empty() || !std::all_of(name.begin(), name.end(), tchar)) {
        return "is no header name (letters, digits and !#$%&'*+-.^_`|~ only, no spaces); "
               "rename it";
    }
    for (const auto* framing : {"content-length", "transfer-encoding", "host", "connection"}) {
        const std::string_view f = framing;
        if (name.size() == f.size() &&
            std::equal(name.begin(), name.end(), f.begin(), [](char a, char b) {
                return std::tolower(static_cast<unsigned char>(a)) == b;
            })) {
            return "is set by diffeval for each request (it frames the request or names the "
                   "server); remove it from headers";
        }
    }
    // Field values may hold tabs, never CR, LF, NUL or another control.
    if (std::any_of(value.begin(), value.end(),
                    [](char c) { return util::is_control(c) && c != '\t'; })) {
        return "has a line break or control character in its value, which would begin another "
               "header; remove it";
    }
    return std::nullopt;
}

// How one key of a table is read into `Target`: the tables below list every
// key a file may hold, so the allowed keys and their readers cannot drift.
template <typename Target>
using KeyReader =
    std::function<util::Result<void>(const std::string& path, const toml::node&, Target&)>;

template <typename Target> using KeyTable = std::map<std::string, KeyReader<Target>>;

template <typename Target>
util::Result<void> read_keys(const std::string& path, const toml::table& tbl,
                             const KeyTable<Target>& readers, const std::string& context,
                             Target& target) {
    std::set<std::string> known;
    for (const auto& [name, r] : readers) {
        known.insert(name);
    }
    if (auto r = util::check_known_keys(tbl, known, path, context); !r) {
        return r;
    }
    for (const auto& [k, v] : tbl) {
        if (auto r = readers.at(std::string(k.str()))(path, v, target); !r) {
            return r;
        }
    }
    return {};
}

// A reader that reads a key with `read(path, node, what)` and stores the
// value in `member` of the target.
template <typename Target, typename Member, typename Read>
KeyReader<Target> into(Member Target::*member, const char* what, Read read) {
    return [member, what, read](const std::string& path, const toml::node& n,
                                Target& t) -> util::Result<void> {
        auto v = read(path, n, what);
        if (!v) {
            return v.error();
        }
        t.*member = std::move(*v);
        return {};
    };
}

// A string key's value, which may not be empty (or blank), as no flag's
// may: `db = ""` stored into SQLite's temporary database and lost the run,
// `api_key_env = ""` sent no key.
util::Result<std::string> nonempty_string(const std::string& path, const toml::node& n,
                                          const char* what) {
    auto v = get<std::string>(path, n, what);
    if (v && v->find_first_not_of(" \t") == std::string::npos) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: '{}' is empty; give a value, or leave the key out",
                                      where(path, n), what));
    }
    return v;
}

template <typename Target, typename Member>
KeyReader<Target> string_into(Member Target::*member, const char* what) {
    return into(member, what, nonempty_string);
}

template <typename Target> KeyReader<Target> bool_into(bool Target::*member, const char* what) {
    return into(member, what, get<bool>);
}

// An integer within [lo, hi], stored as `Int`.
template <typename Int, typename Target, typename Member>
KeyReader<Target> int_into(Member Target::*member, const char* what, int64_t lo, int64_t hi) {
    return into(member, what,
                [lo, hi](const std::string& path, const toml::node& n,
                         const char* key) -> util::Result<Int> {
                    auto v = get_int_in(path, n, key, lo, hi);
                    if (!v) {
                        return v.error();
                    }
                    return static_cast<Int>(*v);
                });
}

const KeyTable<ServerSpec>& server_keys() {
    static const KeyTable<ServerSpec> keys = {
        {"name", string_into(&ServerSpec::name, "name")},
        {"url", string_into(&ServerSpec::url, "url")},
        {"model", string_into(&ServerSpec::model, "model")},
        {"api_key_env", string_into(&ServerSpec::api_key_env, "api_key_env")},
        {"cwd", string_into(&ServerSpec::cwd, "cwd")},
        {"log", string_into(&ServerSpec::log_path, "log")},
        {"launch",
         [](const std::string& path, const toml::node& n, ServerSpec& s) -> util::Result<void> {
             auto v = string_list(path, n, "launch");
             if (!v) {
                 return v.error();
             }
             // An empty one read as "not launched", and the run went on to
             // ask a server nobody started.
             if (v->empty() || v->front().empty()) {
                 return make_error(ErrorKind::usage,
                                   fmt::format("{}: 'launch' is empty; give the command that "
                                               "starts the server, e.g. [\"vllm\", \"serve\", "
                                               "\"MODEL\"], or leave the key out for a server "
                                               "already running",
                                               where(path, n)));
             }
             s.launch = std::move(*v);
             return {};
         }},
        {"health",
         [](const std::string& path, const toml::node& n, ServerSpec& s) -> util::Result<void> {
             auto v = string_list(path, n, "health");
             if (!v) {
                 return v.error();
             }
             // Each is a path on the server's URL; a wrong one was found
             // only when 'ready_timeout' (ten minutes by default) ran out,
             // and none skipped the wait, so preflight met a server still
             // starting and said to start it.
             if (v->empty()) {
                 return make_error(ErrorKind::usage,
                                   fmt::format("{}: 'health' is empty; give the paths that answer "
                                               "once the server is ready, such as [\"/health\"], "
                                               "or leave the key out for [\"/health\", "
                                               "\"/v1/models\"]",
                                               where(path, n)));
             }
             for (const auto& p : *v) {
                 if (!p.starts_with('/')) {
                     return make_error(ErrorKind::usage,
                                       fmt::format("{}: 'health' path '{}' must start with '/' "
                                                   "(a path on the server's URL, such as "
                                                   "\"/health\")",
                                                   where(path, n), util::one_line(p, 80)));
                 }
             }
             s.health = std::move(*v);
             return {};
         }},
        {"ready_timeout", into(&ServerSpec::ready_timeout, "ready_timeout", get_seconds)},
        {"shell", bool_into(&ServerSpec::launch_shell, "shell")},
        {"headers",
         [](const std::string& path, const toml::node& n, ServerSpec& s) -> util::Result<void> {
             auto v = string_table(path, n, "headers");
             if (!v) {
                 return v.error();
             }
             for (const auto& [k, value] : *v) {
                 if (const auto problem = header_problem(k, value)) {
                     return make_error(ErrorKind::usage,
                                       fmt::format("{}: header '{}' {}", where(path, n),
                                                   util::one_line(k, 100), *problem));
                 }
                 s.headers.push_back(fmt::format("{}: {}", k, value));
             }
             return {};
         }},
        {"env",
         [](const std::string& path, const toml::node& n, ServerSpec& s) -> util::Result<void> {
             auto v = string_table(path, n, "env");
             if (!v) {
                 return v.error();
             }
             s.env.insert(s.env.end(), v->begin(), v->end());
             return {};
         }},
        {"body",
         [](const std::string& path, const toml::node& n, ServerSpec& s) -> util::Result<void> {
             if (!n.is_table()) {
                 return make_error(ErrorKind::usage,
                                   fmt::format("{}: body must be a table", where(path, n)));
             }
             auto body = util::toml_to_json(n, path, "body");
             if (!body) {
                 return body.error();
             }
             // Fields the framing and the run write: replaced, the request
             // asked another question, or for another limit, stored and
             // scored as the group's own. max_completion_tokens is the
             // limit's newer name, which vLLM and OpenAI take over
             // max_tokens (answers cut at 5 tokens were stored as group
             // a/chat/1024's, a user-side audit). And fields that change
             // what a response's text is: `echo` puts the prompt before the
             // answer (its worked examples scored as the answer), `n` and
             // `best_of` ask for answers of which one is read (an audit's
             // `echo = true` ran as a/raw/256).
             constexpr std::string_view written =
                 "which the framing and the run write (the question, --max-tokens, the model, "
                 "--stream)";
             constexpr std::string_view changes =
                 "which changes what a response's text is (echo: the prompt before the answer; "
                 "n, best_of: more than one answer)";
             for (const auto& [key, why] : {std::pair{"prompt", written},
                                            {"messages", written},
                                            {"max_tokens", written},
                                            {"max_completion_tokens", written},
                                            {"model", written},
                                            {"stream", written},
                                            {"stream_options", written},
                                            {"echo", changes},
                                            {"n", changes},
                                            {"best_of", changes}}) {
                 if (body->contains(key)) {
                     return make_error(ErrorKind::usage,
                                       fmt::format("{}: body sets '{}', {}; leave it out of body",
                                                   where(path, n), key, why));
                 }
             }
             s.extra_body = std::move(*body);
             return {};
         }},
    };
    return keys;
}

// [[servers]]: each a table of server_keys(), with a name and a url.
util::Result<void> read_servers(const std::string& path, const toml::node& node,
                                RunConfig& config) {
    const auto* arr = node.as_array();
    if (!arr) {
        return make_error(ErrorKind::usage, fmt::format("{}: write servers as [[servers]] tables",
                                                        where(path, node)));
    }
    for (const auto& sn : *arr) {
        const auto* st = sn.as_table();
        if (!st) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: each server must be a table", where(path, sn)));
        }
        ServerSpec s;
        if (auto r = read_keys(path, *st, server_keys(), "[[servers]]", s); !r) {
            return r;
        }
        if (s.name.empty() || s.url.empty()) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: a server needs name and url", where(path, sn)));
        }
        trim_trailing_slashes(s.url);
        config.servers.push_back(std::move(s));
    }
    return {};
}

// max_tokens: one integer or a list of them.
util::Result<void> read_max_tokens(const std::string& path, const toml::node& node,
                                   RunConfig& config) {
    config.max_tokens.clear();
    auto add = [&](const toml::node& n) -> util::Result<void> {
        auto v = get_int_in(path, n, "max_tokens", 1, Limits::max_max_tokens);
        if (!v) {
            return v.error();
        }
        config.max_tokens.push_back(static_cast<int>(*v));
        return {};
    };
    if (const auto* a = node.as_array()) {
        for (const auto& e : *a) {
            if (auto r = add(e); !r) {
                return r;
            }
        }
        return {};
    }
    if (node.is_integer()) {
        return add(node);
    }
    return make_error(ErrorKind::usage, fmt::format("{}: 'max_tokens' must be an integer or a list",
                                                    where(path, node)));
}

// concurrency: an integer, or "auto" (the server's published slots).
util::Result<void> read_concurrency(const std::string& path, const toml::node& node,
                                    RunConfig& config) {
    if (node.value<std::string>() == "auto") {
        config.concurrency_auto = true;
        return {};
    }
    if (node.is_string()) {
        const auto text = *node.value<std::string>();
        const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
            return c >= '0' && c <= '9';
        });
        return make_error(ErrorKind::usage,
                          fmt::format("{}: 'concurrency' \"{}\" {}", where(path, node),
                                      util::one_line(text, 80),
                                      digits ? "is a string: write the number without quotes, "
                                               "or \"auto\""
                                             : fmt::format("is not a number from 1 to {} or "
                                                           "\"auto\"",
                                                           Limits::max_concurrency)));
    }
    auto v = get_int_in(path, node, "concurrency", 1, Limits::max_concurrency);
    if (!v) {
        return v.error();
    }
    config.concurrency = static_cast<int>(*v);
    config.concurrency_auto = false;
    return {};
}

const KeyTable<RunConfig>& experiment_keys() {
    static const KeyTable<RunConfig> keys = {
        // The file format's version; the only one so far is 1, and any other
        // is refused so a later format is never read as this one.
        {"version",
         [](const std::string& path, const toml::node& n, RunConfig&) -> util::Result<void> {
             auto v = get_int_in(path, n, "version", 1, 1);
             if (!v) {
                 return v.error();
             }
             return {};
         }},
        {"servers", read_servers},
        {"server", read_servers},
        {"model", string_into(&RunConfig::model, "model")},
        {"framings", into(&RunConfig::framings, "framings", string_list)},
        {"max_tokens", read_max_tokens},
        {"repeats", int_into<int>(&RunConfig::repeats, "repeats", 1, Limits::max_repeats)},
        {"limit", int_into<int>(&RunConfig::limit, "limit", 1, Limits::max_limit)},
        {"concurrency", read_concurrency},
        {"retries", int_into<int>(&RunConfig::retries, "retries", 0, Limits::max_retries)},
        {"max_response_bytes",
         int_into<int64_t>(&RunConfig::max_response_bytes, "max_response_bytes",
                           Limits::min_response_bytes, Limits::max_response_bytes)},
        {"timeout", into(&RunConfig::timeout, "timeout", get_seconds)},
        {"db", string_into(&RunConfig::db, "db")},
        {"dataset", string_into(&RunConfig::dataset, "dataset")},
        {"fewshot_from", string_into(&RunConfig::fewshot_from, "fewshot_from")},
        {"api_key_env", string_into(&RunConfig::api_key_env, "api_key_env")},
        {"probe", string_into(&RunConfig::probe, "probe")},
        {"scorer_files", into(&RunConfig::scorer_files, "scorer_files", string_list)},
        {"stream", bool_into(&RunConfig::stream, "stream")},
    };
    return keys;
}

} // namespace

util::Result<void> load_experiment(const std::string& path, RunConfig& config) {
    const auto text = util::read_input(path, util::k_max_config_bytes);
    if (!text) {
        return make_error(
            ErrorKind::usage,
            fmt::format("cannot read experiment file {}; check the path", text.error().message));
    }
    auto parsed = util::parse_toml(*text, path);
    if (!parsed) {
        return parsed.error();
    }
    return read_keys(path, *parsed, experiment_keys(), "experiment file", config);
}

util::Result<void> attach_server_log(const std::string& value, RunConfig& config) {
    auto eq = value.find('=');
    if (eq == std::string::npos || eq == 0) {
        return make_error(ErrorKind::usage,
                          fmt::format("--server-log '{}': expected NAME=PATH", value));
    }
    auto name = value.substr(0, eq);
    for (auto& s : config.servers) {
        if (s.name != name) {
            continue;
        }
        // A launched server's own log is captured as it runs; another file
        // would say nothing and be ignored.
        if (!s.launch.empty()) {
            return make_error(ErrorKind::usage,
                              fmt::format("--server-log: server '{}' is launched by diffeval, "
                                          "which keeps its log itself; leave --server-log out "
                                          "for it (its log is written where 'log' says)",
                                          name));
        }
        const auto path = value.substr(eq + 1);
        // One file read for two servers gave both the facts of one: a
        // report showed f16 beside f16 for an f16 and a q4_0 server (an
        // engine audit).
        for (const auto& other : config.servers) {
            std::error_code ec;
            if (&other != &s && !other.attached_log.empty() &&
                (other.attached_log == path ||
                 std::filesystem::equivalent(other.attached_log, path, ec))) {
                return make_error(ErrorKind::usage,
                                  fmt::format("--server-log: servers '{}' and '{}' both name {}, "
                                              "but each server writes a log of its own; give "
                                              "each the file its own server writes",
                                              other.name, name, path));
            }
        }
        s.attached_log = path;
        return {};
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
    trim_trailing_slashes(s.url);
    return s;
}

namespace {

// The first value of `values` that an earlier one equals.
template <class T> std::optional<T> given_twice(const std::vector<T>& values) {
    for (auto it = values.begin(); it != values.end(); ++it) {
        if (std::find(values.begin(), it, *it) != it) {
            return *it;
        }
    }
    return std::nullopt;
}

// The first text of `c` that is not UTF-8, with the flag that gave it:
// request bodies, the stored configuration (`runs.config_json`) and the
// dataset's stored name are JSON, which holds only UTF-8 text (nlohmann's
// dump() throws on anything else, which ended the run as an internal error
// after it had created the database).
std::optional<std::pair<std::string, std::string>> not_utf8(const RunConfig& c) {
    std::vector<std::pair<std::string, std::string>> texts = {{"--dataset", c.dataset},
                                                              {"--fewshot-from", c.fewshot_from},
                                                              {"--api-key-env", c.api_key_env}};
    if (c.model) {
        texts.emplace_back("--model", *c.model);
    }
    if (c.probe) {
        texts.emplace_back("--probe", *c.probe);
    }
    for (const auto& f : c.framings) {
        texts.emplace_back("--framing", f);
    }
    for (const auto& f : c.scorer_files) {
        texts.emplace_back("--scorer-file", f);
    }
    if (c.framing_overrides.gen_prefix) {
        texts.emplace_back("--gen-prefix", *c.framing_overrides.gen_prefix);
    }
    for (const auto& [key, value] : c.framing_overrides.fields.items()) {
        if (value.is_string()) {
            texts.emplace_back(override_flag(key), value.get<std::string>());
        }
    }
    for (const auto& s : c.servers) {
        texts.emplace_back("--server", s.url);
        if (s.model) {
            texts.emplace_back("--model", *s.model);
        }
        texts.emplace_back("--api-key-env", s.api_key_env);
    }
    for (auto& t : texts) {
        if (!util::is_utf8(t.second)) {
            return std::move(t);
        }
    }
    return std::nullopt;
}

} // namespace

util::Result<void> validate_settings(const RunConfig& c) {
    if (auto bad = not_utf8(c)) {
        return make_error(ErrorKind::usage,
                          fmt::format("{} '{}' is not UTF-8 text, and diffeval sends and stores "
                                      "it as JSON, which holds only UTF-8; give it in UTF-8 (a "
                                      "file: rename it)",
                                      bad->first,
                                      util::one_line(bad->first == "--server"
                                                         ? http::url_without_secret(bad->second)
                                                         : bad->second,
                                                     200)));
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
    // A value given twice would send every request of its group twice.
    if (auto twice = given_twice(c.max_tokens)) {
        return make_error(
            ErrorKind::usage,
            fmt::format("--max-tokens {} is given twice; give each token limit once", *twice));
    }
    if (auto twice = given_twice(c.framings)) {
        return make_error(
            ErrorKind::usage,
            fmt::format("--framing {} is given twice; give each framing once", *twice));
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

util::Result<void> validate(const RunConfig& c) {
    if (c.servers.empty()) {
        return make_error(ErrorKind::usage,
                          "no servers: pass --server NAME=URL or a --config file with [[servers]]");
    }
    std::set<std::string> names;
    for (const auto& s : c.servers) {
        if (auto problem = util::name_problem(s.name)) {
            return make_error(ErrorKind::usage, fmt::format("server name '{}' {}",
                                                            util::one_line(s.name, 80), *problem));
        }
        if (!names.insert(s.name).second) {
            return make_error(ErrorKind::usage,
                              fmt::format("server name '{}' is given twice", s.name));
        }
        // A launched server appends its log there: over the database, it
        // would write into the stored results.
        if (!s.launch.empty() && !s.log_path.empty() && store::names_database(s.log_path, c.db)) {
            return make_error(ErrorKind::usage,
                              fmt::format("server '{}': its log {} is the database {} or one of "
                                          "its files; give 'log' another path",
                                          s.name, s.log_path, c.db));
        }
        // Checked with the other launch settings, before the database is
        // opened: found when the server started, it failed the run (exit 1).
        if (std::error_code ec; !s.launch.empty() && !s.log_path.empty() &&
                                std::filesystem::is_directory(s.log_path, ec)) {
            return make_error(ErrorKind::usage,
                              fmt::format("server '{}': its log {} is a directory; give 'log' "
                                          "the path of a file",
                                          s.name, s.log_path));
        }
        if (const auto problem = http::http_url_problem(s.url)) {
            return make_error(ErrorKind::usage,
                              fmt::format("server '{}': '{}' {}", s.name,
                                          util::one_line(http::url_without_secret(s.url), 200),
                                          *problem));
        }
    }
    return validate_settings(c);
}

util::Result<Shard> parse_shard(const std::string& value) {
    // Each number plain decimal digits, as every number flag's: a stream
    // read " 0/3", "0 /3" and "+0/+3" alike.
    // A number past int's range leaves `out` as it was (from_chars reads all
    // its digits and reports the range): 0/3000000000 ran as 0/1, the whole
    // plan, and 3000000000/4 as shard 0.
    bool too_large = false;
    auto whole = [&too_large](std::string_view text, int& out) {
        const auto* end = text.data() + text.size();
        if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) {
            return false;
        }
        const auto [ptr, ec] = std::from_chars(text.data(), end, out);
        too_large = too_large || ec == std::errc::result_out_of_range;
        return ptr == end && ec == std::errc();
    };
    Shard s;
    const auto slash = value.find('/');
    const std::string_view text = value;
    if (slash == std::string::npos || !whole(text.substr(0, slash), s.index) ||
        !whole(text.substr(slash + 1), s.count) || s.count < 1) {
        return make_error(
            ErrorKind::usage,
            too_large
                ? fmt::format("--shard '{}': I and N are at most {}; expected I/N with 0 "
                              "<= I < N, such as 0/4",
                              value, std::numeric_limits<int>::max())
                : fmt::format("--shard '{}': expected I/N with 0 <= I < N, such as 0/4", value));
    }
    // A CI matrix or job array numbered from 1 gives N/N for its last job.
    if (s.index >= s.count) {
        // One shard is "the one shard is 0/1", not "the 1 shards are 0/1 to
        // 0/1" (reliability audit).
        const auto shards = s.count == 1 ? std::string("the one shard is 0/1")
                                         : fmt::format("the {} shards are 0/{} to {}/{}", s.count,
                                                       s.count, s.count - 1, s.count);
        return make_error(ErrorKind::usage,
                          fmt::format("--shard '{}': shards count from 0, so {}; expected I/N "
                                      "with 0 <= I < N",
                                      value, shards));
    }
    return s;
}

size_t questions_in_shard(const std::optional<Shard>& shard, size_t n) {
    if (!shard) {
        return n;
    }
    const auto count = static_cast<size_t>(shard->count);
    const auto index = static_cast<size_t>(shard->index);
    return n / count + (index < n % count ? 1 : 0);
}

bool in_shard(const std::optional<Shard>& shard, size_t q) {
    return !shard || static_cast<int>(q % static_cast<size_t>(shard->count)) == shard->index;
}

nlohmann::json to_json(const RunConfig& c) {
    nlohmann::json servers = nlohmann::json::array();
    for (const auto& s : c.servers) {
        nlohmann::json j = {{"name", s.name}, {"url", s.url}};
        if (s.model)
            j["model"] = *s.model;
        // The variable the key was read from, the server's own or the run's
        // (--api-key-env), as preflight reads it: never the key.
        if (const auto& var = s.api_key_env.empty() ? c.api_key_env : s.api_key_env; !var.empty())
            j["api_key_env"] = var;
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
    if (!c.scorer_files.empty())
        j["scorer_files"] = c.scorer_files;
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
