// Server records; see facts.hpp.
#include <harness/analysis/facts.hpp>

#include <harness/store/readers.hpp>
#include <harness/store/server_identity.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace diffeval::analysis {

namespace {

using nlohmann::json;

// The version string a server reported: vLLM's /version body, else
// llama.cpp's build in /props, else its Server header (which names the
// engine, not its version: the last resort).
std::string version_of(const json& info) {
    if (auto v = info.find("version"); v != info.end()) {
        if (v->is_string()) {
            return v->get<std::string>();
        }
        if (v->is_object() && v->contains("version") && (*v)["version"].is_string()) {
            return (*v)["version"].get<std::string>();
        }
    }
    if (auto p = info.find("props"); p != info.end() && p->is_object()) {
        if (auto b = p->find("build_info"); b != p->end() && b->is_string() && !b->empty()) {
            return b->get<std::string>();
        }
    }
    if (auto h = info.find("server_header"); h != info.end() && h->is_string()) {
        return h->get<std::string>();
    }
    return "";
}

void read_info(const std::string& text, ServerFacts& f) {
    auto info = json::parse(text, nullptr, false);
    if (info.is_discarded() || !info.is_object()) {
        return;
    }
    f.version = version_of(info);
    f.simulator = store::simulator_profile(info);
    auto models = info.find("models");
    if (models == info.end() || !models->is_array() || models->empty() ||
        !(*models)[0].is_object()) {
        return;
    }
    const auto& m = (*models)[0];
    if (f.model.empty() && m.contains("id") && m["id"].is_string()) {
        f.model = m["id"].get<std::string>();
    }
    if (m.contains("max_model_len") && m["max_model_len"].is_number_integer()) {
        f.max_model_len = m["max_model_len"].get<int64_t>();
    }
    // Without a log that names the engine, the one the server names itself
    // as its model's owner, where that is an engine the fingerprint rules
    // know (a llama-server attached without --server-log showed its build
    // beside an engine "-"); a proxy's owner ("openai", an organisation) is
    // no engine.
    if (f.fingerprint.engine.empty()) {
        if (auto owner = m.find("owned_by");
            owner != m.end() && owner->is_string() &&
            fingerprint::is_builtin_engine(owner->get<std::string>())) {
            f.fingerprint.engine = owner->get<std::string>();
        }
    }
}

// Every text of a server record is the server's words (a log line a rule
// matched, a /props build, a model id), shown in reports and JSON: one line
// of at most util::k_server_words_bytes each, as its error messages are.
void bound(ServerFacts& f) {
    fingerprint::bound_words(f.model);
    fingerprint::bound_words(f.version);
    fingerprint::bound_words(f.fingerprint.engine);
    fingerprint::bound_words(f.fingerprint);
    if (f.simulator) {
        fingerprint::bound_words(*f.simulator);
    }
    for (auto* names : {&f.answered_as.models, &f.answered_as.system_fingerprints}) {
        for (auto& [name, n] : names->listed) {
            fingerprint::bound_words(name);
        }
    }
}

} // namespace

util::Result<std::vector<ServerFacts>> load_server_facts(store::Store& st,
                                                         const std::vector<std::string>& names) {
    auto records = store::server_records(st, names);
    if (!records) {
        return records.error();
    }
    auto answered = store::answered_as(st, names);
    if (!answered) {
        return answered.error();
    }
    std::vector<ServerFacts> out;
    for (size_t i = 0; i < names.size(); ++i) {
        const auto& r = (*records)[i];
        ServerFacts f;
        f.name = names[i];
        if (r.found) {
            f.model = r.model;
            if (auto fp = r.facts_json ? fingerprint::fingerprint_from_json(*r.facts_json)
                                       : std::nullopt) {
                f.fingerprinted = true;
                f.fingerprint = std::move(*fp);
            }
            read_info(r.info_json, f);
        }
        f.answered_as = std::move((*answered)[i]);
        bound(f);
        out.push_back(std::move(f));
    }
    return out;
}

std::vector<FactRow> fact_rows(const std::vector<ServerFacts>& servers) {
    std::vector<FactRow> rows;
    auto add = [&](const std::string& name, auto value_of) -> FactRow& {
        FactRow row{name, {}, std::vector<std::string>(servers.size()), false};
        std::set<std::string> seen;
        for (const auto& s : servers) {
            row.values.push_back(value_of(s));
            if (!row.values.back().empty()) {
                seen.insert(row.values.back());
            }
        }
        row.differs = seen.size() > 1;
        rows.push_back(std::move(row));
        return rows.back();
    };
    add("engine", [](const ServerFacts& s) { return s.fingerprint.engine; });
    add("version", [](const ServerFacts& s) { return s.version; });
    // The name /v1/models (or --model) gave; a fingerprint's `model` fact,
    // in its own row, is what the log or /props says was loaded.
    add("served model", [](const ServerFacts& s) { return s.model; });
    add("max_model_len", [](const ServerFacts& s) {
        return s.max_model_len ? std::to_string(*s.max_model_len) : std::string();
    });
    // What the responses named, where it is news: a server that answered
    // under more than one name, or under another than /v1/models served
    // (a proxy's provider name, a mixed backend).
    const auto one_or_all = [](const store::NameCounts& n) {
        return n.names() == 1 ? n.listed.front().first : names_text(n);
    };
    if (std::any_of(servers.begin(), servers.end(), [](const ServerFacts& s) {
            const auto& m = s.answered_as.models;
            return m.names() > 1 || (m.names() == 1 && m.listed.front().first != s.model);
        })) {
        add("answered as", [&](const ServerFacts& s) { return one_or_all(s.answered_as.models); });
    }
    // The backend configuration each response named (OpenAI's field; a
    // llama-server's build): two servers built alike give the same.
    if (std::any_of(servers.begin(), servers.end(), [](const ServerFacts& s) {
            return s.answered_as.system_fingerprints.names() > 0;
        })) {
        add("system fingerprint",
            [&](const ServerFacts& s) { return one_or_all(s.answered_as.system_fingerprints); });
    }
    if (std::any_of(servers.begin(), servers.end(),
                    [](const ServerFacts& s) { return s.simulator.has_value(); })) {
        add("simulated", [](const ServerFacts& s) {
            if (!s.simulator) {
                return std::string();
            }
            return s.simulator->empty() ? std::string("diffeval sim")
                                        : fmt::format("diffeval sim, profile {}", *s.simulator);
        });
    }
    std::set<std::string> names;
    for (const auto& s : servers) {
        for (const auto& [k, v] : s.fingerprint.facts) {
            names.insert(k);
        }
        for (const auto& [k, v] : s.fingerprint.stated) {
            names.insert(k);
        }
    }
    for (const auto& name : names) {
        auto in = [&](const std::map<std::string, std::string>& m) {
            auto it = m.find(name);
            return it == m.end() ? std::string() : it->second;
        };
        auto& row = add(name, [&](const ServerFacts& s) { return in(s.fingerprint.facts); });
        for (size_t i = 0; i < servers.size(); ++i) {
            row.stated[i] = in(servers[i].fingerprint.stated);
        }
    }
    return rows;
}

std::string names_text(const store::NameCounts& names) {
    std::vector<std::string> parts;
    for (const auto& [name, n] : names.listed) {
        parts.push_back(fmt::format("{} ({})", name, n));
    }
    if (names.more_names > 0) {
        parts.push_back(fmt::format("and {} more ({})", names.more_names, names.more_responses));
    }
    return fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<MixedAnswers> mixed_answers(const ServerFacts& s) {
    std::vector<MixedAnswers> out;
    const auto mixed = [&](const store::NameCounts& n, std::string_view kind,
                           std::string_view heading, const char* name, const char* kinds,
                           const char* field, const char* meaning) {
        if (n.names() < 2) {
            return;
        }
        fingerprint::Conflict c{name,
                                fmt::format("its {} name {} {}: {}; {}",
                                            util::counted(n.responses(), "successful response"),
                                            n.names(), kinds, names_text(n), meaning),
                                {}};
        for (const auto& [value, count] : n.listed) {
            c.evidence.push_back(fmt::format("{}={} ({})", field, value, count));
        }
        if (n.more_names > 0) {
            c.evidence.push_back(
                fmt::format("{} more {} ({})", n.more_names, kinds, n.more_responses));
        }
        out.push_back({std::move(c), kind, heading});
    };
    mixed(s.answered_as.models, "model", "MIXED MODELS", "mixed-models", "models", "model",
          "its answers are not one model's");
    mixed(s.answered_as.system_fingerprints, "system fingerprint", "MIXED SYSTEM FINGERPRINTS",
          "mixed-system-fingerprints", "system fingerprints", "system_fingerprint",
          "its answers are not one backend's (it changed during the run, or a proxy mixed "
          "backends)");
    return out;
}

std::string simulated_sentence(const std::vector<ServerFacts>& servers) {
    std::vector<std::string> names;
    for (const auto& s : servers) {
        if (s.simulator) {
            names.push_back(s.name);
        }
    }
    if (names.empty()) {
        return "";
    }
    const bool one = names.size() == 1;
    const auto list = fmt::format("{}", fmt::join(names, ", "));
    if (names.size() == servers.size()) {
        return one ? fmt::format("Server {} is diffeval's simulator, not an inference engine: no "
                                 "model ran, and its answers, engine, version and model are what "
                                 "its profile imitates.",
                                 list)
                   : fmt::format("Every server here ({}) is diffeval's simulator, not an "
                                 "inference engine: no model ran, and their answers, engines, "
                                 "versions and models are what their profiles imitate.",
                                 list);
    }
    const bool one_other = servers.size() - names.size() == 1;
    return fmt::format("{} {}, not {}: no model ran there, and {}; the other {}.", list,
                       one ? "is diffeval's simulator" : "are diffeval's simulator",
                       one ? "an inference engine" : "inference engines",
                       one ? "its answers, engine, version and model are what its profile imitates"
                           : "their answers, engines, versions and models are what their "
                             "profiles imitate",
                       one_other ? "server's are its own" : "servers' are their own");
}

} // namespace diffeval::analysis
