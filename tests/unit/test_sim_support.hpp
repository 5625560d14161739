// Helpers shared by the simulator's tests: a server on a free loopback port
// with the built-in sample set, raw and chat request bodies like the
// reference harnesses send, and an SSE splitter.
#pragma once

#include <harness/sim/profile.hpp>
#include <harness/sim/request.hpp>
#include <harness/sim/server.hpp>

#include <datasets/dataset.hpp>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace diffeval::sim::testing {

using nlohmann::json;

inline datasets::Dataset sample_dataset() {
    auto ds = datasets::open_dataset("sample");
    EXPECT_TRUE(ds.ok()) << (ds.ok() ? "" : ds.error().message);
    return ds.ok() ? std::move(*ds) : datasets::Dataset{};
}

inline Profile default_profile() {
    return load_profile("default").value();
}

// A running server; `profile` defaults to the built-in "default".
inline std::unique_ptr<Server> start_server(Profile profile = default_profile()) {
    SimConfig c;
    c.profile = std::move(profile);
    c.dataset = sample_dataset();
    auto s = Server::start(std::move(c));
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return s.ok() ? std::move(*s) : nullptr;
}

inline httplib::Client client_for(const Server& server) {
    httplib::Client c("127.0.0.1", server.port());
    c.set_read_timeout(30, 0);
    return c;
}

// The 5-shot raw prompt of vLLM's GSM8K script for test question `i`.
inline std::string raw_prompt(const datasets::Dataset& ds, size_t i) {
    std::string p;
    for (size_t k = 0; k < 5 && k < ds.fewshot.size(); ++k) {
        p += "Question: " + ds.fewshot[k].question + "\nAnswer: " + ds.fewshot[k].answer + "\n\n";
    }
    return p + "Question: " + ds.test.at(i).question + "\nAnswer:";
}

inline json raw_body(const datasets::Dataset& ds, size_t i, int max_tokens = 256) {
    return {{"prompt", raw_prompt(ds, i)},
            {"max_tokens", max_tokens},
            {"stop", {"Question", "Assistant:", "<|separator|>"}},
            {"temperature", 0.0},
            {"seed", 42}};
}

// A chat request for test question `i`.
inline json chat_body(const datasets::Dataset& ds, size_t i, int max_tokens = 256,
                      Thinking thinking = Thinking::off) {
    return {
        {"messages",
         {{{"role", "user"}, {"content", "Question: " + ds.test.at(i).question + "\nAnswer:"}}}},
        {"max_tokens", max_tokens},
        {"temperature", 0.0},
        {"chat_template_kwargs", {{"enable_thinking", thinking == Thinking::on}}}};
}

// POST `body` as JSON; the response must exist.
inline httplib::Result post(httplib::Client& c, const std::string& path, const json& body) {
    return c.Post(path.c_str(), body.dump(), "application/json");
}

// The JSON payloads of an SSE body, "[DONE]" kept as the string "[DONE]".
inline std::vector<json> sse_events(const std::string& body) {
    std::vector<json> out;
    size_t pos = 0;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
        size_t end = body.find("\n\n", pos);
        std::string data = body.substr(pos + 6, end - pos - 6);
        out.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data, nullptr, false));
        pos = end;
    }
    return out;
}

} // namespace diffeval::sim::testing
