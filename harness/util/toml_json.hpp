// TOML values as JSON: framings' fixed fields and experiment files' extra
// body fields are written in TOML but sent as JSON, keeping their order.
#pragma once

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

namespace diffeval::util {

// `node` as JSON: tables become objects, arrays arrays, and scalars keep
// their type (integers stay integers, floats floats).
nlohmann::ordered_json toml_to_json(const toml::node& node);

} // namespace diffeval::util
