// The outcomes model served by llama-server, launched by diffeval from an
// experiment file: every response says what the model was built to say, in
// both framings, streamed and not, and diffeval stores it.
#include "engine.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <tuple>

using e2e::query;
using engine_test::expected_outcomes;

namespace {

// Runs the outcome questions against one launched llama-server into `db`.
void run_outcomes(const std::filesystem::path& root, const std::filesystem::path& dir,
                  const std::filesystem::path& db, bool stream,
                  std::vector<std::string> server_args = {}) {
    auto test = engine_test::write_outcome_dataset(dir);
    auto config = dir / "experiment.toml";
    engine_test::Server server;
    server.extra_args = std::move(server_args);
    std::ofstream(config) << engine_test::experiment(
        root, {server},
        "framings = [\"raw\", \"chat\"]\nmax_tokens = [16]\ndataset = " +
            nlohmann::json(test.string()).dump() +
            "\nfewshot_from = " + nlohmann::json((dir / "train.jsonl").string()).dump());
    std::vector<std::string> args = {"run",  "--config",  config.string(),
                                     "--db", db.string(), "--quiet"};
    if (stream) {
        args.push_back("--stream");
    }
    auto o = e2e::run(args);
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
}

// Every response says what the model was built to say and is classified as
// such. llama-server names no stop on its OpenAI endpoints, so every stopped
// response's cause is "unknown" and an empty answer is never "finished".
void expect_responses(const std::filesystem::path& db) {
    const auto& want = expected_outcomes();
    ASSERT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1"),
              std::to_string(2 * want.size()));
    auto rescored = e2e::run({"rescore", "--db", db.string()});
    ASSERT_EQ(rescored.exit_code, 0) << rescored.err;
    for (size_t i = 0; i < want.size(); ++i) {
        for (const auto& [framing, text, outcome] :
             {std::tuple{"raw", want[i].raw_text, want[i].raw_outcome},
              std::tuple{"chat", want[i].chat_text, want[i].chat_outcome}}) {
            auto row =
                query(db, "SELECT text, outcome, coalesce(stop_cause, '-'), "
                          "coalesce(stop_field, '-') FROM v_responses WHERE framing = '" +
                              std::string(framing) + "' AND question_idx = " + std::to_string(i));
            const std::string cause = outcome == "length_truncated" ? "-" : "unknown";
            EXPECT_EQ(row, text + "|" + outcome + "|" + cause + "|-")
                << want[i].name << " (" << framing << ")";
        }
    }
}

} // namespace

TEST(EngineOutcomes, LaunchedLlamaServerAnswersWhatTheModelWasBuiltToSay) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-outcomes");
    auto db = dir / "r.sqlite";
    run_outcomes(root, dir, db, false);
    expect_responses(db);
    EXPECT_EQ(query(db, "SELECT count(*) FROM servers WHERE log_text LIKE '%llama%'"), "1");
    // The summary says how many stops rest on no stated cause.
    auto summary = e2e::run({"summary", "--db", db.string()});
    ASSERT_EQ(summary.exit_code, 0) << summary.err;
    EXPECT_NE(summary.out.find("llama/raw/16: stop cause unknown for 5 of 5 stopped responses"),
              std::string::npos)
        << summary.out;
    EXPECT_NE(summary.out.find("llama/chat/16: stop cause unknown for 4 of 4 stopped responses"),
              std::string::npos)
        << summary.out;
}

TEST(EngineOutcomes, StreamedResponsesCarryTheSameTexts) {
    ENGINE_OR_SKIP(root);
    auto dir = e2e::scratch("engine-outcomes-stream");
    auto db = dir / "r.sqlite";
    run_outcomes(root, dir, db, true);
    expect_responses(db);
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE streamed = 1"), "12");
}

// Started with --verbose, llama-server adds its own `__verbose` object to
// every answer, naming the stop: diffeval reads it, so the causes are known.
TEST(EngineOutcomes, VerboseServerNamesEveryStopInItsOwnFields) {
    ENGINE_OR_SKIP(root);
    for (bool stream : {false, true}) {
        auto dir = e2e::scratch(stream ? "engine-verbose-stream" : "engine-verbose");
        auto db = dir / "r.sqlite";
        run_outcomes(root, dir, db, stream, {"-v"});
        auto rescored = e2e::run({"rescore", "--db", db.string()});
        ASSERT_EQ(rescored.exit_code, 0) << rescored.err;
        auto rows = e2e::query_rows(
            db, "SELECT framing || question_idx || ' ' || outcome || ' ' || coalesce(stop_cause, "
                "'-') || ' ' || coalesce(stop_field, '-') FROM v_responses ORDER BY framing, "
                "question_idx");
        const std::string f = "__verbose.stop_type";
        EXPECT_EQ(rows, (std::vector<std::string>{
                            "chat0 finished eos " + f,
                            "chat1 finished stop_string " + f,
                            "chat2 stop_truncated stop_string " + f,
                            "chat3 length_truncated - -",
                            "chat4 length_truncated - -",
                            "chat5 stop_truncated eos " + f,
                            "raw0 finished eos " + f,
                            "raw1 finished stop_string " + f,
                            "raw2 stop_truncated stop_string " + f,
                            "raw3 stop_truncated stop_string " + f,
                            "raw4 length_truncated - -",
                            "raw5 stop_truncated eos " + f,
                        }))
            << (stream ? "streamed" : "not streamed");
    }
}
