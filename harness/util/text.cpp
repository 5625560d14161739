// The one text check that needs a library; the rest of text.hpp is inline.
#include <harness/util/text.hpp>

#include <simdjson.h>

namespace diffeval::util {

bool is_utf8(std::string_view text) {
    return simdjson::validate_utf8(text.data(), text.size());
}

} // namespace diffeval::util
