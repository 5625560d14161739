// libFuzzer target: the SSE splitter fed the input in chunks whose sizes the
// input's first bytes choose, checked against feeding it whole: the events
// must not depend on how the network cut the bytes.
#include <harness/http/sse.hpp>

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) {
        return 0;
    }
    const size_t step = 1 + data[0] % 17;
    std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    diffeval::http::SseParser whole;
    auto expected = whole.feed(text);
    diffeval::http::SseParser pieces;
    std::vector<std::string> got;
    for (size_t i = 0; i < text.size(); i += step) {
        for (auto& e : pieces.feed(text.substr(i, step))) {
            got.push_back(std::move(e));
        }
    }
    if (got != expected) {
        std::abort();
    }
    return 0;
}
