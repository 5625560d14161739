// JSON text exactly as Python's `json.dumps(obj)` writes it.
//
// The reference harnesses (vLLM's GSM8K script, lm-eval) send request bodies
// through Python's json module: ", " and ": " separators, non-ASCII escaped as
// lower-case \uXXXX (surrogate pairs above U+FFFF), floats in repr form
// (`0.0`, `1e-05`). Reproducing those bytes lets diffeval's raw framing be
// byte-identical to the CI script. nlohmann::json has no such mode, so this
// small writer exists.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace diffeval::util {

// Serialise `value` as Python's json.dumps(value) would (ensure_ascii=True,
// default separators, keys in the object's own order).
std::string python_json_dumps(const nlohmann::ordered_json& value);

// Python's repr() of the float `x` (shortest round-trip form).
std::string python_float_repr(double x);

} // namespace diffeval::util
