// Asking servers what they are before anything is sent: request headers
// with the API key, the secrets to redact, and the preflight (GET /v1/models,
// /version and the published limits) that fails a run fast on a wrong URL,
// key or model.
#include <harness/engine/run_parts.hpp>

#include <harness/util/json_text.hpp>
#include <harness/util/text.hpp>
#include <harness/util/untrusted_json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace diffeval::engine {

using util::ErrorKind;
using util::make_error;

namespace {

// The variable holding server `s`'s API key: its own, else the run's ("" for none).
const std::string& key_env_of(const ServerSpec& s, const RunConfig& c) {
    return s.api_key_env.empty() ? c.api_key_env : s.api_key_env;
}

// Server `s`'s request headers; an error when its key variable is unset.
util::Result<std::vector<std::string>> request_headers(const ServerSpec& s, const RunConfig& c) {
    std::vector<std::string> h = {"Content-Type: application/json", "Accept: application/json"};
    if (const auto& env = key_env_of(s, c); !env.empty()) {
        const char* key = std::getenv(env.c_str());
        if (!key || !*key) {
            return make_error(
                ErrorKind::usage,
                fmt::format("server '{}': the API key variable {} is {}", s.name, env,
                            key ? "empty; give it the key" : "not set; export it with the key"));
        }
        // A line end would split the header (every request then fails as
        // sent); other control characters no server takes either.
        if (util::has_control_character(key)) {
            return make_error(ErrorKind::usage,
                              fmt::format("server '{}': the API key in {} holds a line end or "
                                          "another control character; set it to the key alone",
                                          s.name, env));
        }
        h.push_back(fmt::format("Authorization: Bearer {}", key));
    }
    h.insert(h.end(), s.headers.begin(), s.headers.end());
    return h;
}

} // namespace

util::Result<std::vector<ServerState>> server_states(const RunConfig& config) {
    std::vector<ServerState> servers(config.servers.size());
    for (size_t i = 0; i < servers.size(); ++i) {
        servers[i].spec = &config.servers[i];
        servers[i].limit = static_cast<size_t>(config.concurrency_auto ? k_default_concurrency
                                                                       : config.concurrency);
        auto headers = request_headers(config.servers[i], config);
        if (!headers) {
            return headers.error();
        }
        servers[i].headers = std::move(*headers);
    }
    return servers;
}

util::Redactor secrets_of(const RunConfig& c) {
    util::Redactor redactor;
    for (const auto& s : c.servers) {
        const auto& env = key_env_of(s, c);
        if (const char* key = env.empty() ? nullptr : std::getenv(env.c_str())) {
            redactor.add(key);
        }
        for (const auto& spelling : http::url_secret_spellings(s.url)) {
            redactor.add(spelling);
        }
    }
    return redactor;
}

std::vector<std::string> unredactable_keys(const RunConfig& c) {
    std::vector<std::string> vars;
    for (const auto& s : c.servers) {
        const auto& env = key_env_of(s, c);
        const char* key = env.empty() ? nullptr : std::getenv(env.c_str());
        if (key && *key && std::string_view(key).size() < util::Redactor::k_min_secret &&
            std::find(vars.begin(), vars.end(), env) == vars.end()) {
            vars.push_back(env);
        }
        const auto in_url = http::url_secret(s.url);
        const auto named = fmt::format("the URL of server '{}'", s.name);
        if (!in_url.empty() && in_url.size() < util::Redactor::k_min_secret &&
            std::find(vars.begin(), vars.end(), named) == vars.end()) {
            vars.push_back(named);
        }
    }
    return vars;
}

util::Result<ServerInfo> preflight(const ServerSpec& s, const std::vector<std::string>& headers,
                                   const std::optional<std::string>& model,
                                   std::chrono::milliseconds timeout,
                                   const std::atomic<bool>* stop) {
    ServerInfo out;
    http::Request req;
    req.url = s.url + "/v1/models";
    req.headers = headers;
    req.timeout = std::min(timeout, std::chrono::milliseconds{15'000});
    req.cancel = stop;
    auto r = http::fetch(req);
    if (r.transport == http::Transport::cancelled) {
        return make_error(ErrorKind::usage, "interrupted during preflight");
    }
    if (r.transport != http::Transport::ok) {
        return make_error(ErrorKind::usage,
                          fmt::format("server '{}' at {} is unreachable ({}); check the URL, start "
                                      "the server, or pass --no-preflight",
                                      s.name, s.url, r.transport_error));
    }
    if (r.status == 401 || r.status == 403) {
        return make_error(
            ErrorKind::usage,
            fmt::format("server '{}' refused the credentials (HTTP {}); set the API key "
                        "variable named by --api-key-env",
                        s.name, r.status));
    }
    // 503 is a server not ready yet (llama-server answers it while it loads
    // its model; vLLM while it starts): asking whether it is an
    // OpenAI-compatible server sent users looking the wrong way.
    if (r.status == 503) {
        return make_error(ErrorKind::usage,
                          fmt::format("server '{}' is not ready yet: GET /v1/models answered HTTP "
                                      "503: {}; run again once it has started (llama-server "
                                      "answers 503 while it loads its model)",
                                      s.name, error_message(r.body)));
    }
    if (r.status != 200) {
        // A URL given with the API's /v1 (as OpenAI clients take it) asked
        // for /v1/v1/models: the server's 404 read as if /v1/models were
        // missing (a user-side audit).
        std::string_view path = s.url;
        const auto scheme = path.find("://");
        path = scheme == std::string_view::npos ? std::string_view{} : path.substr(scheme + 3);
        path = path.substr(std::min(path.size(), path.find('/')));
        while (path.ends_with('/')) {
            path.remove_suffix(1);
        }
        if (path.ends_with("/v1")) {
            return make_error(
                ErrorKind::usage,
                fmt::format("server '{}': GET {}/v1/models answered HTTP {}: {}; diffeval adds "
                            "/v1/... to the server's URL itself: give the URL without its /v1",
                            s.name, path, r.status, error_message(r.body)));
        }
        return make_error(ErrorKind::usage,
                          fmt::format("server '{}': GET /v1/models answered HTTP {}: {}; is it an "
                                      "OpenAI-compatible server?",
                                      s.name, r.status, error_message(r.body)));
    }
    auto j = util::parse_untrusted_json(r.body);
    std::vector<std::string> ids;
    if (j.is_object() && j.contains("data") && j["data"].is_array()) {
        for (const auto& m : j["data"]) {
            if (m.is_object() && m.contains("id") && m["id"].is_string()) {
                ids.push_back(m["id"].get<std::string>());
            }
        }
    }
    if (ids.empty()) {
        // A body cut short, or no JSON at all, is not "no models" (audit).
        return make_error(ErrorKind::usage,
                          fmt::format("server '{}': GET /v1/models {}; is it an "
                                      "OpenAI-compatible server?",
                                      s.name,
                                      j.is_discarded()
                                          ? "answered with no readable JSON (malformed, cut short "
                                            "or nested too deep)"
                                          : "listed no models"));
    }
    if (model && std::find(ids.begin(), ids.end(), *model) == ids.end()) {
        return make_error(
            ErrorKind::usage,
            fmt::format("server '{}' does not serve model '{}'; it serves: {}", s.name, *model,
                        util::one_line(fmt::format("{}", fmt::join(ids, ", ")), 400)));
    }
    out.served_model = ids.front();
    out.info["models"] = j["data"];
    if (!r.server_header.empty()) {
        // Any bytes a server sends: invalid UTF-8 would throw when the
        // record is dumped.
        out.info["server_header"] = util::valid_utf8(r.server_header);
    }
    // /version is vLLM's; other engines may not have it.
    req.url = s.url + "/version";
    auto v = http::fetch(req);
    if (v.transport == http::Transport::ok && v.status == 200) {
        auto vj = util::parse_untrusted_json(v.body);
        if (!vj.is_discarded()) {
            out.info["version"] = vj;
        }
    }
    // Slots, context and build, where the server publishes them.
    out.limits = read_limits(s.url, headers, j["data"], timeout);
    if (!out.limits.props.is_null()) {
        out.info["props"] = out.limits.props;
    }
    return out;
}

} // namespace diffeval::engine
