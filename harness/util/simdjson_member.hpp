// Looking a member up in a simdjson object the way nlohmann reads one: the
// last of duplicate keys wins (simdjson keeps every duplicate and its own
// lookup returns the first). The readers that parse untrusted JSON with
// simdjson and must agree with nlohmann's DOM use it.
#pragma once

#include <simdjson.h>

#include <optional>
#include <string_view>

namespace diffeval::util {

// The value of the last member called `key` in `obj`, or nothing.
inline std::optional<simdjson::dom::element> last_member(simdjson::dom::object obj,
                                                         std::string_view key) {
    std::optional<simdjson::dom::element> found;
    for (auto field : obj) {
        if (field.key == key) {
            found = field.value;
        }
    }
    return found;
}

} // namespace diffeval::util
