// The run's passes before anything is sent, each called on its own: loading
// the inputs, each server's state and secrets, and planning (read a part at a
// time, every request stored before it is queued, only unanswered ones
// queued, one body per distinct request).
#include <harness/engine/run_parts.hpp>

#include <harness/util/hash.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <limits>
#include <memory>
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

    // Read server 0's whole plan into a fresh state.
    util::Result<void> plan() {
        auto p = planner();
        if (!p) {
            return p.error();
        }
        return fill(**p, std::numeric_limits<size_t>::max());
    }

    // A planner for server 0 over fresh inputs, state and counts.
    util::Result<std::unique_ptr<engine::Planner>> planner() {
        auto in = engine::load_inputs(config);
        if (!in) {
            return in.error();
        }
        inputs = std::move(*in);
        state = engine::ServerState{};
        summary = engine::RunSummary{};
        ctx =
            std::make_unique<engine::RunContext>(engine::RunContext{config, options, log, inputs});
        return engine::Planner::create(*ctx, 0, info);
    }

    // Read `p` on until the queue holds `want` requests or the plan ends,
    // turn after turn as the send loop does: one fill stops after its
    // planning slice, which a slow machine (or a sanitizer) reaches early.
    util::Result<void> fill(engine::Planner& p, size_t want) {
        auto db = store::Store::open(m_path, store::Store::Mode::read_write);
        if (!db) {
            return db.error();
        }
        while (!p.finished() && state.queue.size() < want) {
            if (auto r = p.fill(state, **db, summary, want); !r) {
                return r;
            }
        }
        return {};
    }

    // Store a successful response for each of `keys`.
    void answer(const std::vector<std::string>& keys) {
        auto db = store::Store::open(m_path, store::Store::Mode::read_write);
        ASSERT_TRUE(db);
        std::vector<store::ResponseRow> rows;
        for (const auto& k : keys) {
            store::ResponseRow r;
            r.key = k;
            r.ok = true;
            r.status = 200;
            r.response_json = "{}";
            r.text = "#### 1";
            r.attempts = 1;
            r.started_at = store::now_iso8601();
            rows.push_back(std::move(r));
        }
        ASSERT_TRUE((*db)->write_batch(rows));
    }

    // The keys of the requests queued, in order.
    std::vector<std::string> queued() const { return keys_of(state.queue); }

    // The keys of the requests `work` holds, as their rows store them.
    std::vector<std::string> keys_of(const std::deque<engine::Work>& work) const {
        auto db = store::Store::open(m_path, store::Store::Mode::read_only);
        EXPECT_TRUE(db);
        std::vector<std::string> keys;
        store::Statement s((*db)->handle(),
                           "SELECT request_key FROM requests WHERE request_id = ?");
        for (const auto& w : work) {
            EXPECT_TRUE(s.bind(w.request_id).step()) << s.error();
            keys.push_back(s.column_text(0));
            s.reset();
        }
        return keys;
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
    std::unique_ptr<engine::RunContext> ctx;

private:
    std::string m_path;
};

} // namespace

TEST_F(Plan, EveryRequestIsStoredAndQueuedBeforeAnythingIsSent) {
    auto p = planner();
    ASSERT_TRUE(p);
    ASSERT_TRUE(fill(**p, std::numeric_limits<size_t>::max()));
    // 2 framings x 2 token limits x 2 repeats x 5 questions.
    EXPECT_EQ(summary.planned, 40);
    EXPECT_EQ(summary.skipped, 0);
    EXPECT_EQ(state.queue.size(), 40U);
    EXPECT_EQ(count("SELECT count(*) FROM requests"), 40);
    // Repeats send the same bytes: one stored body per (framing, limit,
    // question).
    EXPECT_EQ(count("SELECT count(*) FROM request_bodies"), 20);
    // Each framing's few-shot block once, every body stored after it
    // (schema v12), and hashed whole from the state after it.
    EXPECT_EQ(count("SELECT count(*) FROM body_prefixes"), 2);
    EXPECT_EQ(count("SELECT count(*) FROM request_bodies WHERE prefix_id IS NOT NULL"), 20);
    {
        auto db = store::Store::open(config.db, store::Store::Mode::read_only);
        ASSERT_TRUE(db);
        store::Statement bodies((*db)->handle(),
                                "SELECT body_sha256, request_json FROM v_request_bodies");
        int hashed = 0;
        while (bodies.step()) {
            EXPECT_EQ(util::sha256_hex(bodies.column_view(1)), bodies.column_text(0));
            ++hashed;
        }
        EXPECT_EQ(hashed, 20);
    }
    // The queue holds no body: each is rendered when sent, the bytes its row
    // stored, and repeats sent one after another share one string.
    auto db = store::Store::open(config.db, store::Store::Mode::read_only);
    ASSERT_TRUE(db);
    store::Statement stored((*db)->handle(),
                            "SELECT request_json FROM v_requests WHERE request_id = ?");
    std::shared_ptr<const std::string> last;
    int shared = 0;
    for (const auto& w : state.queue) {
        EXPECT_EQ(w.body, nullptr);
        const auto body = (*p)->body(w);
        ASSERT_TRUE(stored.bind(w.request_id).step()) << stored.error();
        EXPECT_EQ(*body, stored.column_text(0)) << w.request_id;
        stored.reset();
        shared += body == last ? 1 : 0;
        last = body;
    }
    EXPECT_EQ(shared, 20); // each body's second repeat
}

TEST_F(Plan, BodiesRenderedWhenSentAreTheStoredBytesForEveryFraming) {
    // lm-eval's own shots are drawn at random per question, and the probe's
    // bodies have their own options: each is rendered again when sent, after
    // later questions were drawn, and must still be the bytes stored.
    config.framings = {"lm-eval-chat", "vllm-chat", "raw"};
    config.probe = "think-open";
    auto p = planner();
    ASSERT_TRUE(p) << p.error().message;
    ASSERT_TRUE(fill(**p, std::numeric_limits<size_t>::max()));
    ASSERT_GT(state.queue.size(), 40U);
    auto db = store::Store::open(config.db, store::Store::Mode::read_only);
    ASSERT_TRUE(db);
    store::Statement measured((*db)->handle(),
                              "SELECT request_json FROM v_requests WHERE request_id = ?");
    store::Statement probe((*db)->handle(), "SELECT request_json FROM v_probe_requests WHERE "
                                            "probe_request_id = ?");
    int probes = 0;
    // Backwards: the last question's bodies first.
    for (auto it = state.queue.rbegin(); it != state.queue.rend(); ++it) {
        auto& stored = it->probe ? probe : measured;
        probes += it->probe ? 1 : 0;
        ASSERT_TRUE(stored.bind(it->request_id).step()) << stored.error();
        EXPECT_EQ(*(*p)->body(*it), stored.column_text(0)) << it->request_id;
        stored.reset();
    }
    EXPECT_GT(probes, 0);
}

TEST_F(Plan, AQuestionsRequestsFollowEachOther) {
    // Every framing, token limit and repeat of a question before the next
    // question: the scorer's small memory finds the texts a run meets again
    // (ResponseScorer::k_run_memo_bytes), and the peak RSS stays flat.
    ASSERT_TRUE(plan());
    ASSERT_EQ(state.queue.size(), 40U);
    for (size_t i = 0; i < state.queue.size(); ++i) {
        EXPECT_EQ(state.queue[i].question, static_cast<int>(i / 8)) << i;
    }
}

TEST_F(Plan, EachFramingGoesToItsEndpoint) {
    auto p = planner();
    ASSERT_TRUE(p) << p.error().message;
    ASSERT_TRUE(fill(**p, std::numeric_limits<size_t>::max()));
    std::set<std::string> urls;
    for (const auto& w : state.queue) {
        const auto& url = (*p)->url(w);
        urls.insert(url);
        EXPECT_EQ(w.endpoint, url.ends_with("/v1/chat/completions") ? engine::Endpoint::chat
                                                                    : engine::Endpoint::completion);
    }
    EXPECT_EQ(urls, (std::set<std::string>{"http://127.0.0.1:9/v1/completions",
                                           "http://127.0.0.1:9/v1/chat/completions"}));
}

TEST_F(Plan, AResumedPlanQueuesOnlyWhatHasNoAnswerAndStoresNothingTwice) {
    ASSERT_TRUE(plan());
    const auto all = queued();
    std::vector<std::string> done(all.begin(), all.begin() + 15);
    answer(done);
    ASSERT_TRUE(plan());
    EXPECT_EQ(summary.planned, 40);
    EXPECT_EQ(summary.skipped, 15);
    ASSERT_EQ(state.queue.size(), 25U);
    EXPECT_EQ(queued(), std::vector<std::string>(all.begin() + 15, all.end()));
    EXPECT_EQ(count("SELECT count(*) FROM requests"), 40);
    EXPECT_EQ(count("SELECT count(*) FROM request_bodies"), 20);
}

TEST_F(Plan, ThePlanIsReadAPartAtATimeAndEachPartIsStoredBeforeItIsQueued) {
    ASSERT_TRUE(plan());
    const auto whole = queued();
    // A fresh database, read ten requests at a time.
    TearDown();
    auto p = planner();
    ASSERT_TRUE(p);
    EXPECT_EQ((*p)->total(), 40);
    ASSERT_TRUE(fill(**p, 10));
    EXPECT_FALSE((*p)->finished());
    // Whole questions are read (2 repeats each), and nothing further.
    EXPECT_EQ(state.queue.size(), 10U);
    EXPECT_EQ(summary.planned, 10);
    EXPECT_EQ(count("SELECT count(*) FROM requests"), 10);
    std::vector<std::string> keys;
    while (!(*p)->finished()) {
        for (auto& k : queued()) {
            keys.push_back(std::move(k));
        }
        state.queue.clear();
        ASSERT_TRUE(fill(**p, 10));
    }
    for (auto& k : queued()) {
        keys.push_back(std::move(k));
    }
    // The same requests in the same order as reading the plan at once.
    EXPECT_EQ(keys, whole);
    EXPECT_EQ(summary.planned, 40);
    EXPECT_EQ(count("SELECT count(*) FROM requests"), 40);
}

TEST_F(Plan, TheTotalIsWhatReadingThePlanFinds) {
    for (bool probe : {false, true}) {
        for (std::optional<engine::Shard> shard :
             {std::optional<engine::Shard>{}, std::optional<engine::Shard>{{0, 2}},
              std::optional<engine::Shard>{{2, 3}}}) {
            config.probe = probe ? std::optional<std::string>("think-open") : std::nullopt;
            config.shard = shard;
            config.repeats = probe ? 1 : 3;
            TearDown();
            auto p = planner();
            ASSERT_TRUE(p);
            ASSERT_TRUE(fill(**p, std::numeric_limits<size_t>::max()));
            EXPECT_EQ((*p)->total(), summary.planned)
                << "probe " << probe << " shard " << (shard ? shard->index : -1);
            EXPECT_EQ(static_cast<int64_t>(state.queue.size()), summary.planned);
        }
    }
}

// A changed body for a stored question would count the question twice in
// its group: refused, and nothing of the changed plan is stored.
TEST_F(Plan, AChangedBodyForAStoredQuestionIsRefused) {
    ASSERT_TRUE(plan());
    config.framing_overrides.fields["temperature"] = 0.5;
    auto r = plan();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, util::ErrorKind::usage);
    EXPECT_NE(r.error().message.find("already holds question 0 (repeat 0) sent with another "
                                     "request body"),
              std::string::npos)
        << r.error().message;
    EXPECT_EQ(count("SELECT count(*) FROM requests"), 40);
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

// A password in a server's URL (`http://user:PASSWORD@host`, sent by libcurl
// as Basic authentication) is a secret like an API key: cut from what is
// stored and printed, the URL included; one too short to cut is named.
TEST(ServerStates, APasswordInAServersUrlIsRedactedLikeAKey) {
    engine::RunConfig config;
    config.servers = {engine::ServerSpec{}, engine::ServerSpec{}, engine::ServerSpec{}};
    config.servers[0].name = "a";
    config.servers[0].url = "https://ci:hunter2-long-password@gpu.example:8000/";
    config.servers[1].name = "b";
    config.servers[1].url = "http://tok-0123456789@127.0.0.1:9";
    config.servers[2].name = "c";
    config.servers[2].url = "http://ci:short@127.0.0.1:9";
    const auto redactor = engine::secrets_of(config);
    EXPECT_EQ(redactor.redacted(config.servers[0].url), "https://ci:[REDACTED]@gpu.example:8000/");
    EXPECT_EQ(redactor.redacted(config.servers[1].url), "http://[REDACTED]@127.0.0.1:9");
    EXPECT_EQ(engine::unredactable_keys(config),
              (std::vector<std::string>{"the URL of server 'c'"}));
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
    // Set but empty is said so: the user's export line is there.
    ::setenv("DIFFEVAL_UNIT_PLAN_KEY", "", 1);
    auto empty = engine::server_states(config);
    ASSERT_FALSE(empty);
    EXPECT_NE(empty.error().message.find("DIFFEVAL_UNIT_PLAN_KEY is empty"), std::string::npos)
        << empty.error().message;

    ::setenv("DIFFEVAL_UNIT_PLAN_KEY", "sk-unit-0123456789", 1);
    auto set = engine::server_states(config);
    ASSERT_TRUE(set);
    const auto& headers = (*set)[0].headers;
    EXPECT_NE(std::find(headers.begin(), headers.end(), "Authorization: Bearer sk-unit-0123456789"),
              headers.end());
    EXPECT_EQ(engine::secrets_of(config).redacted("echo sk-unit-0123456789"), "echo [REDACTED]");
    // A key with a line end (a file read with its newline) would split the
    // header: refused before anything is sent, the key not quoted.
    ::setenv("DIFFEVAL_UNIT_PLAN_KEY", "sk-line-one\nline-two", 1);
    auto split = engine::server_states(config);
    ASSERT_FALSE(split);
    EXPECT_EQ(split.error().kind, util::ErrorKind::usage);
    EXPECT_NE(split.error().message.find("holds a line end"), std::string::npos);
    EXPECT_EQ(split.error().message.find("sk-line-one"), std::string::npos);
    ::unsetenv("DIFFEVAL_UNIT_PLAN_KEY");
}
