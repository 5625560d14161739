// libFuzzer target: Python-exact JSON. Whatever parses (depth-bounded) must
// come out of python_json_dumps as JSON that parses back to the same value.
#include <harness/util/pyjson.hpp>
#include <harness/util/untrusted_json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

using diffeval::util::parse_untrusted_json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
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
