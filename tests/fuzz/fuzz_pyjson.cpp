// libFuzzer target: Python-exact JSON. Whatever parses (depth-bounded) must
// come out of python_json_dumps as JSON that parses back to the same value.
// And any bytes, written as one JSON string by util/json_text (the
// simulator's bodies, export's lines, the probe's stored alternatives), must
// be nlohmann's dump of them byte for byte.
#include <harness/util/json_text.hpp>
#include <harness/util/pyjson.hpp>
#include <harness/util/untrusted_json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

using diffeval::util::parse_untrusted_json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    std::string direct;
    diffeval::util::append_dump_string(direct, text);
    if (direct != nlohmann::json(std::string(text))
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) {
        std::abort();
    }
    if (!diffeval::util::json_depth_within(text)) {
        return 0;
    }
    auto j = nlohmann::ordered_json::parse(text, nullptr, false);
    if (j.is_discarded()) {
        return 0;
    }
    const auto dumped = diffeval::util::python_json_dumps(j);
    auto back = nlohmann::ordered_json::parse(dumped, nullptr, false);
    if (back.is_discarded()) {
        std::abort();
    }
    // Numbers may change type (1.0 -> 1.0 stays float; big ints stay ints);
    // compare through nlohmann's own serialisation of both.
    if (back.dump() != j.dump()) {
        std::abort();
    }
    return 0;
}
