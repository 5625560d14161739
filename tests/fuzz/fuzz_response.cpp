// libFuzzer target: everything diffeval reads from a server's answer: the
// whole-body parser for both endpoints, the stream accumulator fed the input
// as SSE, the error-message extractor and the probe's first position. A
// success must carry text, and the simdjson paths (the body parser's, the
// probe's) must read every field as nlohmann's DOM parser alone does.
#include <harness/engine/response_parse.hpp>
#include <harness/http/sse.hpp>
#include <harness/probe/reading.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

using namespace diffeval;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string body(reinterpret_cast<const char*>(data), size);
    for (auto endpoint : {engine::Endpoint::completion, engine::Endpoint::chat}) {
        store::ResponseRow row;
        engine::parse_success_body(body, endpoint, row);
        if (row.ok && (!row.text || !row.error.empty())) {
            std::abort();
        }
        store::ResponseRow dom;
        engine::parse_success_body_nlohmann(body, endpoint, dom);
        if (row.ok != dom.ok || row.error != dom.error || row.error_kind != dom.error_kind ||
            row.text != dom.text || row.reasoning != dom.reasoning ||
            row.finish_reason != dom.finish_reason || row.stop_reason != dom.stop_reason ||
            row.stop_field != dom.stop_field || row.prompt_tokens != dom.prompt_tokens ||
            row.completion_tokens != dom.completion_tokens || row.notes != dom.notes) {
            std::abort();
        }
        http::SseParser sse;
        engine::StreamAccumulator acc(endpoint);
        double at = 0;
        for (const auto& event : sse.feed(body)) {
            acc.on_event(event, at += 1);
        }
        store::ResponseRow streamed;
        acc.finish(streamed);
        if (streamed.ok && (!streamed.finish_reason && body.find("[DONE]") == std::string::npos)) {
            std::abort(); // a stream without an end is never a success
        }
    }
    (void)engine::error_message(body);
    const auto fast = probe::first_position(body);
    const auto dom = probe::first_position_nlohmann(body);
    if (bool(fast) != bool(dom) || (!fast && fast.error().message != dom.error().message)) {
        std::abort();
    }
    if (fast) {
        if (fast->chosen != dom->chosen || fast->top.size() != dom->top.size()) {
            std::abort();
        }
        for (size_t i = 0; i < fast->top.size(); ++i) {
            const double a = fast->top[i].logprob;
            const double b = dom->top[i].logprob;
            if (fast->top[i].token != dom->top[i].token ||
                !(a == b || (std::isnan(a) && std::isnan(b)))) {
                std::abort();
            }
        }
    }
    return 0;
}
