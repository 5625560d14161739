// Response rendering (harness/sim/response.cpp) writes JSON text directly;
// its bytes must stay those of nlohmann::ordered_json's dump(), which the
// simulator's bodies were defined by. A body that is its own dump after
// parsing (keys in order) is written nlohmann's way: its escapes, number
// format and separators.
#include "test_sim_support.hpp"

#include <harness/sim/generate.hpp>
#include <harness/sim/question_bank.hpp>
#include <harness/sim/response.hpp>

namespace diffeval::sim {
namespace {

using namespace testing;
using ojson = nlohmann::ordered_json;

std::string redumped(const std::string& text) {
    return ojson::parse(text).dump(-1, ' ', false, ojson::error_handler_t::replace);
}

// Every body and event of the responses `profile` gives `body` at `endpoint`.
void expect_nlohmann_bytes(const Profile& profile, const QuestionBank& bank, const json& body,
                           Endpoint endpoint) {
    auto parsed = parse_request(body.dump(), endpoint, profile, std::string(k_default_model_id));
    ASSERT_TRUE(std::holds_alternative<ParsedRequest>(parsed)) << body.dump();
    ParsedRequest r = std::get<ParsedRequest>(parsed);
    std::vector<Generation> choices;
    GenerateOptions options;
    options.inject_markup = "\"><img src=x onerror=alert(1)>";
    for (size_t p = 0; p < r.prompts.size(); ++p) {
        options.prompt_index = p;
        Generation g = generate(profile, bank, r, options);
        for (int i = 0; i < r.n; ++i) {
            choices.push_back(g);
        }
    }
    ResponseMeta meta{response_id(r, 0), profile.server.created, r.model};
    std::string whole = response_body(profile, r, choices, meta);
    EXPECT_EQ(whole, redumped(whole));
    for (const auto& e : response_events(profile, r, choices, meta)) {
        ASSERT_EQ(e.data.substr(0, 6), "data: ");
        ASSERT_EQ(e.data.substr(e.data.size() - 2), "\n\n");
        std::string data = e.data.substr(6, e.data.size() - 8);
        if (data != "[DONE]") {
            EXPECT_EQ(data, redumped(data));
        }
    }
}

TEST(SimResponse, BodiesAndEventsAreNlohmannsDump) {
    auto ds = sample_dataset();
    QuestionBank bank(ds);
    Profile both = default_profile();
    both.server.reasoning_field = ReasoningField::both;
    for (const Profile& profile : {default_profile(), both}) {
        for (size_t i = 0; i < ds.test.size(); ++i) {
            json raw = raw_body(ds, i, 300);
            raw["logprobs"] = 5;
            raw["echo"] = i % 2 == 0;
            raw["n"] = 2;
            raw["model"] = k_default_model_id;
            raw["stream_options"] = {{"include_usage", true}};
            raw["stream"] = true;
            expect_nlohmann_bytes(profile, bank, raw, Endpoint::completions);
            for (Thinking thinking : {Thinking::off, Thinking::on}) {
                json chat = chat_body(ds, i, 300, thinking);
                chat["logprobs"] = true;
                chat["top_logprobs"] = 3;
                chat["stop"] = {"Question:", "</s>"};
                chat["model"] = k_default_model_id;
                expect_nlohmann_bytes(profile, bank, chat, Endpoint::chat);
            }
        }
    }
}

} // namespace
} // namespace diffeval::sim
