// A server's stop reason, the one type for it from the response parser to
// the store, the classifier and the reports: nothing named (null or absent:
// end of sequence, or a server that names no stop), the stop string that
// fired, or the stop token id that fired.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

namespace diffeval::util {

using StopReason = std::variant<std::monostate, int64_t, std::string>;

} // namespace diffeval::util
