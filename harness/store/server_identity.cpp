// Comparing two rows of one server name; see server_identity.hpp.
#include <harness/store/server_identity.hpp>

#include <harness/fingerprint/fingerprint.hpp>
#include <harness/util/untrusted_json.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

namespace diffeval::store {

std::optional<std::string> simulator_profile(const nlohmann::json& info) {
    const auto v = info.is_object() ? info.find("version") : info.end();
    if (v == info.end() || !v->is_object()) {
        return std::nullopt;
    }
    const auto sim = v->find("diffeval_simulator");
    if (sim == v->end() || !sim->is_string()) {
        return std::nullopt;
    }
    return sim->get<std::string>();
}

ServerIdentity server_identity(std::string_view url, std::string model, std::string_view info_json,
                               std::string facts_json) {
    ServerIdentity id{"", std::move(model), "", std::move(facts_json)};
    if (!url.empty()) {
        id.origin = url.starts_with(k_imported_url_prefix) ? "lm-eval import" : "live server";
    }
    const auto info = util::parse_untrusted_json(info_json);
    if (info.is_object()) {
        // vLLM answers {"version": "0.11.0"}: its text; another shape as JSON.
        if (auto v = info.find("version"); v != info.end() && !v->is_null()) {
            const auto inner = v->is_object() ? v->find("version") : v->end();
            id.version = v->is_string()                            ? v->get<std::string>()
                         : inner != v->end() && inner->is_string() ? inner->get<std::string>()
                                                                   : v->dump();
        }
        id.simulator = simulator_profile(info);
        id.probed = info.contains("models");
        if (auto l = info.find("launch"); l != info.end() && l->is_array()) {
            for (const auto& token : *l) {
                id.launch.push_back(token.is_string() ? token.get<std::string>() : token.dump());
            }
        }
        if (auto f = info.find("launch_files"); f != info.end() && f->is_object()) {
            for (const auto& [path, sha] : f->items()) {
                if (sha.is_string()) {
                    id.launch_files[path] = sha.get<std::string>();
                }
            }
        }
    }
    return id;
}

std::vector<std::string>
launch_identity(const std::vector<std::pair<std::string, std::string>>& env,
                const std::vector<std::string>& argv, std::string_view port) {
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    const auto lower = [](std::string_view t) {
        std::string out(t);
        std::transform(out.begin(), out.end(), out.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        return out;
    };
    // The port where the text names it as one: after "port=", "port ",
    // "-p " or a host's ":" (a URL), not followed by a digit. Another flag
    // of the same value (`-c 8192` beside `--port 8192`) is left alone, so
    // a change of it is seen.
    const auto portless = [&](const std::string& token) {
        if (port.empty()) {
            return token;
        }
        const auto low = lower(token);
        std::string out;
        size_t from = 0;
        for (size_t at = token.find(port); at != std::string::npos; at = token.find(port, at + 1)) {
            const size_t end = at + port.size();
            const std::string_view before = std::string_view(low).substr(0, at);
            const bool named = before.ends_with("port=") || before.ends_with("port ") ||
                               before.ends_with("-p ") || before.ends_with(":");
            if (!named || (end < token.size() && digit(token[end]))) {
                continue;
            }
            out += token.substr(from, at - from) + "{port}";
            from = end;
        }
        return out + token.substr(from);
    };
    std::vector<std::string> out;
    for (const auto& [name, value] : env) {
        out.push_back(portless(name + "=" + value));
    }
    for (size_t i = 0; i < argv.size(); ++i) {
        // `--port N`, `-p N`, `--server-port N` as two words.
        const auto flag = i > 0 ? lower(argv[i - 1]) : std::string();
        const bool after_flag = flag == "-p" || (flag.starts_with("-") && flag.ends_with("port"));
        out.push_back(after_flag && argv[i] == port ? "{port}" : portless(argv[i]));
    }
    return out;
}

std::optional<std::pair<std::string, std::string>>
launch_difference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    if (a == b) {
        return std::nullopt;
    }
    size_t head = 0;
    while (head < a.size() && head < b.size() && a[head] == b[head]) {
        ++head;
    }
    size_t tail = 0;
    while (tail < a.size() - head && tail < b.size() - head &&
           a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) {
        ++tail;
    }
    // Each side's differing tokens, after the last one both share.
    const size_t start = head > 0 ? head - 1 : 0;
    const auto middle = [&](const std::vector<std::string>& v) {
        std::string out = start > 0 ? "..." : "";
        for (size_t i = start; i < v.size() - tail; ++i) {
            out += (out.empty() ? "" : " ") + v[i];
        }
        return tail > 0 ? out + " ..." : out;
    };
    return std::pair{middle(a), middle(b)};
}

std::optional<ServerDifference> launch_file_difference(const ServerIdentity& a,
                                                       const ServerIdentity& b) {
    for (const auto& [path, sha] : a.launch_files) {
        if (auto other = b.launch_files.find(path);
            other != b.launch_files.end() && other->second != sha) {
            return ServerDifference{"launch file " + path, "sha256 " + sha.substr(0, 12),
                                    "sha256 " + other->second.substr(0, 12)};
        }
    }
    return std::nullopt;
}

std::optional<ServerDifference> simulator_difference(const ServerIdentity& stored,
                                                     const ServerIdentity& now) {
    if (!stored.simulator || !now.probed || now.simulator) {
        return std::nullopt;
    }
    return ServerDifference{
        "origin",
        stored.simulator->empty()
            ? std::string("diffeval's simulator")
            : fmt::format("diffeval's simulator (profile {})", *stored.simulator),
        "a live server whose /version names no simulator"};
}

std::optional<ServerDifference> first_difference(const ServerIdentity& a, const ServerIdentity& b) {
    if (!a.origin.empty() && !b.origin.empty() && a.origin != b.origin) {
        return ServerDifference{"origin", a.origin, b.origin};
    }
    if (!a.model.empty() && !b.model.empty() && a.model != b.model) {
        return ServerDifference{"model", a.model, b.model};
    }
    if (!a.version.empty() && !b.version.empty() && a.version != b.version) {
        return ServerDifference{"version", a.version, b.version};
    }
    if (a.facts_json.empty() || b.facts_json.empty()) {
        return std::nullopt;
    }
    const auto fa = fingerprint::fingerprint_from_json(a.facts_json);
    const auto fb = fingerprint::fingerprint_from_json(b.facts_json);
    if (!fa || !fb) {
        return std::nullopt;
    }
    // Rules of another engine matched best: another server, whatever facts
    // the two rules files happen to share.
    if (!fa->engine.empty() && !fb->engine.empty() && fa->engine != fb->engine) {
        return ServerDifference{"engine", fa->engine, fb->engine};
    }
    if (auto d = fingerprint::first_fact_difference(*fa, *fb)) {
        return ServerDifference{"fingerprint fact " + d->fact, d->a, d->b};
    }
    return std::nullopt;
}

} // namespace diffeval::store
