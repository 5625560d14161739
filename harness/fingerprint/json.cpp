// A fingerprint to and from its JSON; see fingerprint.hpp.
#include <harness/fingerprint/fingerprint.hpp>

#include <nlohmann/json.hpp>

namespace diffeval::fingerprint {

using nlohmann::json;

namespace {

std::string text_of(const json& v) {
    return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string member_text(const json& object, const char* key) {
    auto it = object.find(key);
    return it == object.end() ? std::string() : text_of(*it);
}

Conflict conflict_from(const json& c) {
    Conflict out{member_text(c, "name"), member_text(c, "message"), {}};
    if (auto e = c.find("evidence"); e != c.end() && e->is_array()) {
        for (const auto& line : *e) {
            out.evidence.push_back(text_of(line));
        }
    }
    return out;
}

} // namespace

json to_json(const Fingerprint& fp) {
    json conflicts = json::array();
    for (const auto& c : fp.conflicts) {
        conflicts.push_back({{"name", c.name}, {"message", c.message}, {"evidence", c.evidence}});
    }
    json out = {{"engine", fp.engine}, {"facts", fp.facts}};
    if (!fp.stated.empty()) {
        out["stated"] = fp.stated;
    }
    out["conflicts"] = std::move(conflicts);
    return out;
}

std::optional<Fingerprint> fingerprint_from_json(std::string_view text) {
    auto j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return std::nullopt;
    }
    Fingerprint out;
    if (auto e = j.find("engine"); e != j.end() && e->is_string()) {
        out.engine = e->get<std::string>();
    }
    if (auto f = j.find("facts"); f != j.end() && f->is_object()) {
        for (const auto& [k, v] : f->items()) {
            out.facts[k] = text_of(v);
        }
    }
    if (auto f = j.find("stated"); f != j.end() && f->is_object()) {
        for (const auto& [k, v] : f->items()) {
            out.stated[k] = text_of(v);
        }
    }
    if (auto c = j.find("conflicts"); c != j.end() && c->is_array()) {
        for (const auto& one : *c) {
            if (one.is_object()) {
                out.conflicts.push_back(conflict_from(one));
            }
        }
    }
    normalize(out);
    return out;
}

} // namespace diffeval::fingerprint
