// TOML helpers: parsing with a "file:line: problem" error, and TOML values
// as JSON (framings' fixed fields and experiment files' extra body fields are
// written in TOML but sent as JSON, keeping their order).
#pragma once

#include <harness/util/result.hpp>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace diffeval::util {

// `text` parsed as TOML; a syntax error becomes an error of `kind` reading
// "ORIGIN:LINE: what is wrong" (`origin` names the file or embedded data).
Result<toml::table> parse_toml(std::string_view text, const std::string& origin,
                               ErrorKind kind = ErrorKind::usage);

// "ORIGIN:LINE" of `node`, the prefix of every message about a TOML file.
std::string toml_where(const std::string& origin, const toml::node& node);

// A usage error for the first key of `tbl` not in `known`: "ORIGIN:LINE:
// unknown key 'K' in CONTEXT; known: A, B, ..." (known keys sorted).
Result<void> check_known_keys(const toml::table& tbl, const std::set<std::string>& known,
                              const std::string& origin, std::string_view context);

// `node` as a 64-bit integer: an integer, or a float with an exact integral
// value inside int64's range; nullopt for anything else. toml++'s own
// node::value<int64_t>() converts an out-of-range float with undefined
// behaviour (found by fuzz_experiment_toml), so loaders read integers here.
std::optional<int64_t> toml_integer(const toml::node& node);

// `node` as JSON: tables become objects, arrays arrays, and scalars keep
// their type (integers stay integers, floats floats). A value JSON cannot
// hold (nan, inf, a date or time) is a usage error "ORIGIN:LINE: 'KEY' is
// ...", KEY being the innermost key around it (`key` for `node` itself).
Result<nlohmann::ordered_json> toml_to_json(const toml::node& node, const std::string& origin,
                                            std::string_view key = {});

} // namespace diffeval::util
