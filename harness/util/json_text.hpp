// Compact JSON text exactly as nlohmann::json's dump() writes it (no indent,
// ensure_ascii off, invalid UTF-8 replaced): the bytes the simulator's
// response bodies and request content hashes were defined by. Appending
// them to a string directly costs a fraction of building a DOM and dumping
// it, which was a sixth of the simulator's CPU per request. For valid UTF-8
// these strings are also Python's json.dumps(s, ensure_ascii=False), the
// form of lm-eval's samples files that `diffeval export` writes.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace diffeval::util {

// Append `s` to `out` as a quoted JSON string, escaped as nlohmann escapes
// it: `"` and `\`, \b \f \n \r \t, other control characters as \u00xx
// (lower-case hex), everything else as it is; invalid UTF-8 is replaced by
// U+FFFD as error_handler_t::replace does.
void append_dump_string(std::string& out, std::string_view s);

// The same for `s` known to be valid UTF-8 (simdjson checked it): no check.
void append_valid_dump_string(std::string& out, std::string_view s);

// `s` with its invalid UTF-8 replaced by U+FFFD as append_dump_string
// replaces it: untrusted bytes (a server's header) made fit for a
// nlohmann::json string, whose dump() throws on invalid UTF-8.
std::string valid_utf8(std::string_view s);

// `j` as every JSON document diffeval writes it (summary, diff, gate and
// fingerprint output, report summary.json): two-space indent, a final line
// end, and text that is not UTF-8 (a name an older diffeval stored) as
// U+FFFD, where dump() would throw and leave no document at all.
std::string document_text(const nlohmann::json& j);

// Append `x` as nlohmann writes a double: the shortest text that reads back
// as `x` ("0.0", "0.95", "1e-05", "-9999.0"), "null" when not finite.
void append_dump_double(std::string& out, double x);

// Append `n` in decimal.
void append_dump_int(std::string& out, int64_t n);
void append_dump_uint(std::string& out, uint64_t n);

} // namespace diffeval::util
