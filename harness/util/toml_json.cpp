// TOML to JSON; see toml_json.hpp.
#include <harness/util/toml_json.hpp>

#include <fmt/format.h>

#include <cmath>

namespace diffeval::util {

Result<toml::table> parse_toml(std::string_view text, const std::string& origin, ErrorKind kind) {
    try {
        return toml::parse(text, origin);
    } catch (const toml::parse_error& e) {
        return make_error(kind,
                          fmt::format("{}:{}: {}", origin, e.source().begin.line, e.description()));
    }
}

std::string toml_where(const std::string& origin, const toml::node& node) {
    return fmt::format("{}:{}", origin, node.source().begin.line);
}

Result<void> check_known_keys(const toml::table& tbl, const std::set<std::string>& known,
                              const std::string& origin, std::string_view context) {
    for (const auto& [k, v] : tbl) {
        if (!known.count(std::string(k.str()))) {
            return make_error(ErrorKind::usage, fmt::format("{}: unknown key '{}' in {}; known: {}",
                                                            toml_where(origin, v), k.str(), context,
                                                            fmt::join(known, ", ")));
        }
    }
    return {};
}

std::optional<int64_t> toml_integer(const toml::node& node) {
    if (const auto* i = node.as_integer()) {
        return i->get();
    }
    if (const auto* f = node.as_floating_point()) {
        // 2^63 is exactly representable; every double below it in magnitude
        // converts without overflow.
        const double v = f->get();
        constexpr double k_limit = 9223372036854775808.0;
        if (std::isfinite(v) && v >= -k_limit && v < k_limit && std::trunc(v) == v) {
            return static_cast<int64_t>(v);
        }
    }
    return std::nullopt;
}

Result<nlohmann::ordered_json> toml_to_json(const toml::node& node, const std::string& origin,
                                            std::string_view key) {
    if (const auto* table = node.as_table()) {
        auto out = nlohmann::ordered_json::object();
        for (const auto& [k, value] : *table) {
            auto v = toml_to_json(value, origin, k.str());
            if (!v) {
                return v.error();
            }
            out[std::string(k.str())] = std::move(*v);
        }
        return out;
    }
    if (const auto* array = node.as_array()) {
        auto out = nlohmann::ordered_json::array();
        for (const auto& value : *array) {
            auto v = toml_to_json(value, origin, key);
            if (!v) {
                return v.error();
            }
            out.push_back(std::move(*v));
        }
        return out;
    }
    if (node.is_string()) {
        return nlohmann::ordered_json(*node.value<std::string>());
    }
    if (node.is_integer()) {
        return nlohmann::ordered_json(*node.value<int64_t>());
    }
    if (const auto* f = node.as_floating_point()) {
        // JSON has no nan or inf: a body holding one is not JSON at all,
        // and every server refuses it.
        if (!std::isfinite(f->get())) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: '{}' is {}; a request body holds finite numbers "
                                          "only: give a number such as 0.6",
                                          toml_where(origin, node), key, f->get()));
        }
        return nlohmann::ordered_json(f->get());
    }
    if (node.is_boolean()) {
        return nlohmann::ordered_json(*node.value<bool>());
    }
    return make_error(ErrorKind::usage,
                      fmt::format("{}: '{}' is a TOML date or time, which JSON has no value for; "
                                  "quote it to send it as a string",
                                  toml_where(origin, node), key));
}

} // namespace diffeval::util
