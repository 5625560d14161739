// libFuzzer target: fingerprinting an arbitrary server log with the built-in
// rules (RE2 patterns over untrusted log text).
#include <harness/fingerprint/fingerprint.hpp>

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    (void)diffeval::fingerprint::fingerprint_log(
        std::string_view(reinterpret_cast<const char*>(data), size));
    return 0;
}
