// The run's passes before anything is sent, each called on its own: loading
// the inputs, each server's state and secrets, and planning (every request
// stored before the first leaves, only unanswered ones queued, one body per
// distinct request).
#include <harness/engine/run_parts.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace diffeval;

namespace {

class Plan : public ::testing::Test {
protected:
    void SetUp() override {
        m_path = (std::filesystem::temp_directory_path() /
                  ("diffeval-unit-plan-" + std::to_string(::getpid()) + ".sqlite"))
                     .string();
        std::filesystem::remove(m_path);
        config.servers = {engine::ServerSpec{}};
        config.servers[0].name = "base";
        config.servers[0].url = "http://127.0.0.1:9";
        config.model = "tiny";
        config.framings = {"raw", "chat"};
        config.max_tokens = {64, 128};
        config.repeats = 2;
        config.limit = 5;
        config.db = m_path;
    }
    void TearDown() override {
        for (const char* suffix : {"", "-wal", "-shm"}) {
            std::filesystem::remove(m_path + suffix);
        }
    }

    // Plan server 0 into a fresh state; `done` are keys already answered.
    util::Result<void> plan(const std::unordered_set<std::string>& done = {}) {
        auto in = engine::load_inputs(config);
        if (!in) {
            return in.error();
        }
        inputs = std::move(*in);
        auto db = store::Store::open(m_path, store::Store::Mode::read_write);
        if (!db) {
            return db.error();
        }
        state = engine::ServerState{};
        summary = engine::RunSummary{};
        engine::RunContext ctx{config, options, log, inputs};
        return engine::plan_server(ctx, 0, info, done, state, **db, summary);
    }

    // One number the store holds.
    int64_t count(const std::string& sql) {
        auto db = store::Store::open(m_path, store::Store::Mode::read_only);
        EXPECT_TRUE(db);
        store::Statement s((*db)->handle(), sql);
        EXPECT_TRUE(s.step()) << s.error();
        return s.column_int(0);
    }

    engine::RunConfig config;
    engine::RunOptions options;
    std::ostringstream log;
    engine::Inputs inputs;
    engine::ServerInfo info;
    engine::ServerState state;
    engine::RunSummary summary;

private:
    std::string m_path;
};

} // namespace

TEST_F(Plan, EveryRequestIsStoredAndQueuedBeforeAnythingIsSent) {
    ASSERT_TRUE(plan());
    // 2 framings x 2 token limits x 2 repeats x 5 questions.
    EXPECT_EQ(summary.planned, 40);
    EXPECT_EQ(summary.skipped, 0);
    EXPECT_EQ(state.queue.size(), 40U);
    EXPECT_EQ(count("SELECT count(*) FROM requests"), 40);
    // Repeats send the same bytes: one stored body per (framing, limit,
    // question), and the queued repeats share it in memory too.
    EXPECT_EQ(count("SELECT count(*) FROM request_bodies"), 20);
    std::set<const std::string*> bodies;
    for (const auto& w : state.queue) {
        bodies.insert(w.body.get());
    }
    EXPECT_EQ(bodies.size(), 20U);
}

TEST_F(Plan, EachFramingGoesToItsEndpoint) {
    ASSERT_TRUE(plan());
    std::set<std::string> urls;
    for (const auto& w : state.queue) {
        urls.insert(w.url);
        EXPECT_EQ(w.endpoint, w.url.ends_with("/v1/chat/completions")
                                  ? engine::Endpoint::chat
                                  : engine::Endpoint::completion);
    }
    EXPECT_EQ(urls, (std::set<std::string>{"http://127.0.0.1:9/v1/completions",
                                           "http://127.0.0.1:9/v1/chat/completions"}));
}

TEST_F(Plan, AResumedPlanQueuesOnlyWhatHasNoAnswerAndStoresNothingTwice) {
    ASSERT_TRUE(plan());
    std::unordered_set<std::string> done;
    for (size_t i = 0; i < 15; ++i) {
        done.insert(state.queue[i].key);
    }
    ASSERT_TRUE(plan(done));
    EXPECT_EQ(summary.planned, 40);
    EXPECT_EQ(summary.skipped, 15);
    ASSERT_EQ(state.queue.size(), 25U);
    for (const auto& w : state.queue) {
        EXPECT_EQ(done.count(w.key), 0U) << w.key;
    }
    EXPECT_EQ(count("SELECT count(*) FROM requests"), 40);
    EXPECT_EQ(count("SELECT count(*) FROM request_bodies"), 20);
}

TEST_F(Plan, AChangedBodyIsANewRequest) {
    ASSERT_TRUE(plan());
    config.framing_overrides.fields["temperature"] = 0.5;
    ASSERT_TRUE(plan());
    EXPECT_EQ(summary.skipped, 0);
    EXPECT_EQ(count("SELECT count(*) FROM requests"), 80);
}

TEST_F(Plan, AShardTakesEveryNthQuestionForEveryFramingAndRepeat) {
    config.shard = engine::Shard{1, 2};
    ASSERT_TRUE(plan());
    EXPECT_EQ(summary.planned, 2 * 2 * 2 * 2); // questions 1 and 3
    EXPECT_EQ(count("SELECT count(DISTINCT question_idx) FROM requests"), 2);
    EXPECT_EQ(count("SELECT count(*) FROM requests WHERE question_idx % 2 = 0"), 0);
}

TEST_F(Plan, AFramingThatAlwaysNamesTheModelNeedsOneWhenPreflightFoundNone) {
    config.model.reset();
    auto r = plan();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, util::ErrorKind::usage);
    EXPECT_NE(r.error().message.find("framing 'chat' needs a model name for server 'base'"),
              std::string::npos)
        << r.error().message;
    // What preflight found is used instead.
    info.served_model = "served";
    ASSERT_TRUE(plan());
    EXPECT_EQ(summary.planned, 40);
}

TEST_F(Plan, LoadingInputsRefusesAnUnknownFramingAndCapsTheLimitAtTheDataset) {
    config.framings = {"raw", "nonesuch"};
    EXPECT_FALSE(engine::load_inputs(config));
    config.framings = {"raw"};
    config.limit = 1'000'000;
    auto in = engine::load_inputs(config);
    ASSERT_TRUE(in) << in.error().message;
    EXPECT_EQ(in->n_questions, in->dataset.test.size());
}

TEST(ServerStates, AnUnsetKeyVariableIsNamedAndASetKeyIsSentAndRedacted) {
    engine::RunConfig config;
    config.servers = {engine::ServerSpec{}};
    config.servers[0].name = "base";
    config.servers[0].url = "http://127.0.0.1:9";
    config.servers[0].api_key_env = "DIFFEVAL_UNIT_PLAN_KEY";
    ::unsetenv("DIFFEVAL_UNIT_PLAN_KEY");
    auto unset = engine::server_states(config);
    ASSERT_FALSE(unset);
    EXPECT_NE(unset.error().message.find("DIFFEVAL_UNIT_PLAN_KEY is not set"), std::string::npos);

    ::setenv("DIFFEVAL_UNIT_PLAN_KEY", "sk-unit-0123456789", 1);
    auto set = engine::server_states(config);
    ASSERT_TRUE(set);
    const auto& headers = (*set)[0].headers;
    EXPECT_NE(std::find(headers.begin(), headers.end(), "Authorization: Bearer sk-unit-0123456789"),
              headers.end());
    EXPECT_EQ(engine::secrets_of(config).redacted("echo sk-unit-0123456789"), "echo [REDACTED]");
    ::unsetenv("DIFFEVAL_UNIT_PLAN_KEY");
}
