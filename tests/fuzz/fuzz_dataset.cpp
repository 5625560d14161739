// libFuzzer target: the GSM8K-format JSONL loader (a downloaded or user file).
#include <datasets/dataset.hpp>

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    (void)diffeval::datasets::parse_jsonl(text, "fuzz.jsonl");
    return 0;
}
