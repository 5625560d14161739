// libFuzzer target: spliced bodies (schema version 11). Whatever a server
// sends and whatever text the row holds, a body diffeval splices must come
// back byte for byte through the real views, computed by SQLite; plain
// quoting must be SQLite's json_quote; and the scan of a probe's top_json
// must read the object the JSON parser reads.
//
// Input: a mode byte (even: a response, odd: a probe), then the body, then
// 0xff, then the text (a probe's top_json), then 0xff, then the reasoning.
// A part that is absent is NULL. 0xff is never in UTF-8, so a part holding
// one is never spliced anyway.
#include <harness/store/splice.hpp>
#include <harness/store/store.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

using namespace diffeval::store;

namespace {

std::vector<std::optional<std::string>> parts_of(std::string_view in) {
    std::vector<std::optional<std::string>> parts;
    size_t at = 0;
    for (int k = 0; k < 3; ++k) {
        if (at > in.size()) {
            parts.emplace_back();
            continue;
        }
        const auto end = std::min(in.find('\xff', at), in.size());
        parts.emplace_back(std::string(in.substr(at, end - at)));
        at = end + 1;
    }
    return parts;
}

// A store with one request and one probe request to hang rows on; each
// input's rows are rolled back.
Store& store() {
    static std::unique_ptr<Store> s = [] {
        const auto path = std::filesystem::temp_directory_path() /
                          ("diffeval_fuzz_splice_" + std::to_string(getpid()) + ".sqlite");
        auto opened = Store::open(path.string(), Store::Mode::read_write);
        if (!opened) {
            std::abort();
        }
        RequestRow q{"k", "a", "raw", 256, 0, 0, "sample", "{}", "sha"};
        RequestRow p = q;
        p.key = "p";
        p.probe = "think-open";
        p.probe_step = 0;
        if (!(*opened)->put_requests({q, p}).ok()) {
            std::abort();
        }
        return std::move(*opened);
    }();
    return *s;
}

std::optional<std::string> through_view(const char* insert, const char* point, const char* select,
                                        const std::string& stored,
                                        const std::optional<std::string>& a,
                                        const std::optional<std::string>& b) {
    auto* db = store().handle();
    Statement(db, "BEGIN").run();
    Statement ins(db, insert);
    ins.bind(stored, a, b);
    std::optional<std::string> out;
    if (ins.run() && Statement(db, point).run()) {
        Statement sel(db, select);
        if (sel.step()) {
            out = sel.column_text(0);
        }
    }
    Statement(db, "ROLLBACK").run();
    return out;
}

void check_response(const std::string& body, const std::optional<std::string>& text,
                    const std::optional<std::string>& reasoning) {
    const auto stored = splice_response(body, text, reasoning);
    if (!stored) {
        return;
    }
    const auto back = through_view(
        "INSERT INTO responses (request_id, ok, status, response_json, text, reasoning, attempts, "
        "latency_ms, started_at, spliced) VALUES (1, 1, 200, ?, ?, ?, 1, 0, 'now', 1)",
        "UPDATE requests SET response_id = last_insert_rowid()",
        "SELECT response_json FROM v_responses", *stored, text, reasoning);
    if (back != body) {
        std::abort();
    }
}

void check_probe(const std::string& body, const std::optional<std::string>& top_json) {
    const auto stored = top_json ? splice_probe(body, *top_json) : std::nullopt;
    if (!stored) {
        return;
    }
    const auto back = through_view(
        "INSERT INTO probe_responses (probe_request_id, ok, status, response_json, top_json, "
        "chosen, attempts, latency_ms, started_at, spliced) VALUES (1, 1, 200, ?, ?, ?, 1, 0, "
        "'now', 1)",
        "UPDATE probe_requests SET response_id = last_insert_rowid()",
        "SELECT r.response_json FROM probe_requests q JOIN v_probe_responses r ON "
        "r.response_id = q.response_id",
        *stored, top_json, std::nullopt);
    if (back != body) {
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) {
        return 0;
    }
    std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
    const auto parts = parts_of(in);
    const std::string body = parts[0].value_or("");
    if (data[0] % 2 == 0) {
        check_response(body, parts[1], parts[2]);
    } else {
        check_probe(body, parts[1]);
        // The scan of top_json reads what the JSON parser reads.
        if (parts[1] && top_object(*parts[1]) != top_object_parsed(*parts[1])) {
            std::abort();
        }
    }
    // Plain quoting is SQLite's.
    if (const auto q = plain_json_quote(body)) {
        Statement quote(store().handle(), "SELECT json_quote(?)");
        if (!quote.bind(body).step() || quote.column_text(0) != *q) {
            std::abort();
        }
    }
    return 0;
}
