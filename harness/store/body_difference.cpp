// See body_difference.hpp.
#include <harness/store/body_difference.hpp>
#include <harness/util/text.hpp>
#include <harness/util/untrusted_json.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <set>

namespace diffeval::store {

namespace {

// `value` of key `key` of a request body, as the sentence names it.
std::string body_value(const nlohmann::json& body, const std::string& key) {
    if (!body.contains(key)) {
        return fmt::format("no \"{}\"", util::one_line(key, 80));
    }
    return util::one_line(fmt::format("\"{}\": {}", key, body[key].dump()), 120);
}

} // namespace

std::optional<std::pair<std::string, std::string>> first_body_difference(std::string_view a_text,
                                                                         std::string_view b_text) {
    auto a = util::parse_untrusted_json(a_text);
    auto b = util::parse_untrusted_json(b_text);
    if (!a.is_object() || !b.is_object()) {
        return std::nullopt;
    }
    std::set<std::string> keys;
    for (const auto* body : {&a, &b}) {
        for (const auto& [k, v] : body->items()) {
            if (k != "prompt" && k != "messages") {
                keys.insert(k);
            }
        }
    }
    for (const auto& k : keys) {
        if (a.contains(k) != b.contains(k) || (a.contains(k) && a[k] != b[k])) {
            return std::pair{body_value(a, k), body_value(b, k)};
        }
    }
    return std::nullopt;
}

std::string what_changed(std::string_view stored, std::string_view now) {
    if (auto d = first_body_difference(stored, now)) {
        return fmt::format("{} stored, {} now", d->first, d->second);
    }
    return "the framing, a sampling setting, the model or the question changed since";
}

} // namespace diffeval::store
