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

nlohmann::ordered_json toml_to_json(const toml::node& node) {
    if (const auto* table = node.as_table()) {
        auto out = nlohmann::ordered_json::object();
        for (const auto& [key, value] : *table) {
            out[std::string(key.str())] = toml_to_json(value);
        }
        return out;
    }
    if (const auto* array = node.as_array()) {
        auto out = nlohmann::ordered_json::array();
        for (const auto& value : *array) {
            out.push_back(toml_to_json(value));
        }
        return out;
    }
    if (node.is_string()) {
        return *node.value<std::string>();
    }
    if (node.is_integer()) {
        return *node.value<int64_t>();
    }
    if (node.is_floating_point()) {
        return *node.value<double>();
    }
    if (node.is_boolean()) {
        return *node.value<bool>();
    }
    return nullptr;
}

} // namespace diffeval::util
