// TOML to JSON; see toml_json.hpp.
#include <harness/util/toml_json.hpp>

#include <fmt/format.h>

namespace diffeval::util {

Result<toml::table> parse_toml(std::string_view text, const std::string& origin, ErrorKind kind) {
    try {
        return toml::parse(text, origin);
    } catch (const toml::parse_error& e) {
        return make_error(kind,
                          fmt::format("{}:{}: {}", origin, e.source().begin.line, e.description()));
    }
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
