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
#include <string_view>

namespace diffeval::util {

// Serialise `value` as Python's json.dumps(value) would (ensure_ascii=True,
// default separators, keys in the object's own order).
std::string python_json_dumps(const nlohmann::ordered_json& value);

// How `append_json_string` escapes.
enum class JsonStringStyle {
    python, // json.dumps: everything outside printable ASCII as \uXXXX
    script, // the same, and < > & too, so the text is safe inside an HTML <script>
};

// Append `s` to `out` as a quoted JSON string; invalid UTF-8 becomes U+FFFD.
// Fast on long texts: runs of plain ASCII are copied without decoding.
void append_json_string(std::string& out, std::string_view s, JsonStringStyle style);

// The same without the quotes: `s` as it appears inside a JSON string. The
// escaping is per character, so the valid UTF-8 pieces of a string may be
// escaped apart.
void append_json_escaped(std::string& out, std::string_view s, JsonStringStyle style);

// Python's repr() of the float `x` (shortest round-trip form).
std::string python_float_repr(double x);

} // namespace diffeval::util
