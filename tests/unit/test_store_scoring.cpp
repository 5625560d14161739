// The scoring stage's store access: the responses to score (all, or only the
// unclassified), a request's stop strings, the derived rows written inside a
// transaction that is undone unless committed, the stored text mode, and
// users' scorers kept by name.
#include <harness/store/scoring.hpp>

#include <gtest/gtest.h>

#include <filesystem>

using namespace diffeval::store;
namespace fs = std::filesystem;

namespace {

fs::path fresh_db(const std::string& name) {
    auto p = fs::temp_directory_path() / ("diffeval_test_scoring_" + name + ".sqlite");
    fs::remove(p);
    fs::remove(p.string() + "-wal");
    fs::remove(p.string() + "-shm");
    return p;
}

RequestRow request(const std::string& key, int q, const std::string& body) {
    return RequestRow{key, "a", "raw", 256, 0, q, "sample", body, "sha-" + body};
}

ResponseRow response(const std::string& key, const std::string& text) {
    ResponseRow r;
    r.key = key;
    r.ok = true;
    r.status = 200;
    r.response_json = "{}";
    r.text = text;
    r.finish_reason = "stop";
    r.attempts = 1;
    r.started_at = now_iso8601();
    return r;
}

int64_t count(Store& s, const char* sql) {
    Statement st(s.handle(), sql);
    return st.step() ? st.column_int(0) : -1;
}

// A store with two answered questions (gold answers "#### 3" and "#### 4"),
// their requests' bodies `body0` and `body1`.
std::unique_ptr<Store> two_responses(const std::string& name, const std::string& body0,
                                     const std::string& body1) {
    auto s = Store::open(fresh_db(name).string(), Store::Mode::read_write);
    EXPECT_TRUE(s.ok()) << s.error().message;
    EXPECT_TRUE((*s)->put_questions("sample", {{"one", "#### 3"}, {"two", "#### 4"}}).ok());
    EXPECT_TRUE((*s)->put_requests({request("k0", 0, body0), request("k1", 1, body1)}).ok());
    EXPECT_TRUE((*s)->write_batch({response("k0", "#### 3"), response("k1", "#### 5")}).ok());
    return std::move(*s);
}

std::vector<ResponseToScore> read_all(Store& s, Pending which) {
    auto cursor = ResponsesToScore::open(s, which);
    EXPECT_TRUE(cursor.ok()) << cursor.error().message;
    std::vector<ResponseToScore> out;
    while (true) {
        auto next = cursor->next();
        EXPECT_TRUE(next.ok()) << next.error().message;
        if (!next.ok() || !*next) {
            return out;
        }
        out.push_back(std::move(**next));
    }
}

} // namespace

TEST(ResponsesToScore, YieldsEachResponseWithItsGoldAnswer) {
    auto s = two_responses("cursor", "{}", "{}");
    const auto rows = read_all(*s, Pending::all);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].dataset, "sample");
    EXPECT_EQ(rows[0].question_idx, 0);
    EXPECT_EQ(rows[0].text, "#### 3");
    EXPECT_EQ(rows[0].answer, "#### 3");
    EXPECT_EQ(rows[1].answer, "#### 4");
    EXPECT_TRUE(rows[1].ok);
    EXPECT_EQ(rows[1].finish_reason, "stop");
}

TEST(ResponsesToScore, UnclassifiedSkipsWhatIsClassified) {
    auto s = two_responses("unclassified", "{}", "{}");
    const auto first = read_all(*s, Pending::all).front();
    auto writer = ScoreWriter::prepare(*s);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->classification({first.response_id, false, false, false, "finished", ""}));
    const auto rows = read_all(*s, Pending::unclassified);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_NE(rows[0].response_id, first.response_id);
    EXPECT_EQ(read_all(*s, Pending::all).size(), 2u);
}

TEST(RequestStops, ReadsTheBodysStopList) {
    auto s = two_responses("stops", R"({"prompt": "x", "stop": ["Question", 7, "A:"]})",
                           R"({"prompt": "x"})");
    const auto rows = read_all(*s, Pending::all);
    auto stops = RequestStops::prepare(*s);
    ASSERT_TRUE(stops.ok());
    auto listed = stops->of(rows[0].request_id);
    ASSERT_TRUE(listed.ok());
    EXPECT_EQ(*listed, (std::vector<std::string>{"Question", "A:"}));
    auto none = stops->of(rows[1].request_id);
    ASSERT_TRUE(none.ok());
    EXPECT_TRUE(none->empty());
}

// A body stored after its shared prefix (schema v12) is read whole: the
// stored rest alone is not JSON.
TEST(RequestStops, ReadsTheStopListOfABodyStoredAfterItsPrefix) {
    auto s = Store::open(fresh_db("stops_prefix").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_TRUE((*s)->put_questions("sample", {{"one", "#### 3"}}).ok());
    const std::string shots = R"({"prompt": ")" + std::string(300, 's');
    RequestRow row = request("k0", 0, shots + R"(Question: one\nAnswer:", "stop": ["Question"]})");
    row.prefix_bytes = shots.size();
    ASSERT_TRUE((*s)->put_requests({row}).ok());
    ASSERT_TRUE((*s)->write_batch({response("k0", "#### 3")}).ok());
    EXPECT_EQ(count(**s, "SELECT count(*) FROM request_bodies WHERE prefix_id IS NOT NULL AND "
                         "NOT json_valid(request_json)"),
              1);
    const auto rows = read_all(**s, Pending::all);
    ASSERT_EQ(rows.size(), 1u);
    auto stops = RequestStops::prepare(**s);
    ASSERT_TRUE(stops.ok());
    auto listed = stops->of(rows[0].request_id);
    ASSERT_TRUE(listed.ok());
    EXPECT_EQ(*listed, std::vector<std::string>{"Question"});
}

// The API allows one stop string instead of a list; a framing that sends one
// must not lose it (the text ending in it is then a stop-string stop).
TEST(RequestStops, ReadsASingleStopString) {
    auto s = two_responses("stop_string", R"({"prompt": "x", "stop": "Question"})",
                           R"({"prompt": "x", "stop": 7})");
    const auto rows = read_all(*s, Pending::all);
    auto stops = RequestStops::prepare(*s);
    ASSERT_TRUE(stops.ok());
    auto one = stops->of(rows[0].request_id);
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(*one, std::vector<std::string>{"Question"});
    auto number = stops->of(rows[1].request_id);
    ASSERT_TRUE(number.ok());
    EXPECT_TRUE(number->empty());
}

TEST(ScoringTransaction, UndoesItsWritesUnlessCommitted) {
    auto s = two_responses("transaction", "{}", "{}");
    const auto id = read_all(*s, Pending::all).front().response_id;
    {
        auto tx = ScoringTransaction::begin(*s);
        ASSERT_TRUE(tx.ok()) << tx.error().message;
        auto writer = ScoreWriter::prepare(*s);
        ASSERT_TRUE(writer.ok());
        ASSERT_TRUE(writer->score({id, "vllm", 1, "full", "3", true, true}));
    }
    EXPECT_EQ(count(*s, "SELECT count(*) FROM scores"), 0);
    {
        auto tx = ScoringTransaction::begin(*s);
        ASSERT_TRUE(tx.ok());
        auto writer = ScoreWriter::prepare(*s);
        ASSERT_TRUE(writer.ok());
        ASSERT_TRUE(writer->score({id, "vllm", 1, "full", "3", true, true}));
        ASSERT_TRUE(writer->classification({id, false, false, false, "finished", "stop-string"}));
        ASSERT_TRUE(tx->commit());
    }
    EXPECT_EQ(count(*s, "SELECT count(*) FROM scores"), 1);
    EXPECT_EQ(count(*s, "SELECT count(*) FROM v_responses WHERE stop_cause = 'stop-string'"), 1);
}

TEST(ScoreWriter, ClearDerivedRemovesEveryScoreAndClassification) {
    auto s = two_responses("clear", "{}", "{}");
    const auto id = read_all(*s, Pending::all).front().response_id;
    auto writer = ScoreWriter::prepare(*s);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->score({id, "vllm", 1, "after-think", "3", true, true}));
    ASSERT_TRUE(writer->classification({id, true, true, true, "finished", ""}));
    EXPECT_EQ(count(*s, "SELECT count(*) FROM classifications WHERE stop_cause IS NULL"), 1);
    auto mode = stored_score_text(*s);
    ASSERT_TRUE(mode.ok());
    EXPECT_EQ(*mode, std::optional<std::string>{"after-think"});
    ASSERT_TRUE(clear_derived(*s));
    EXPECT_EQ(count(*s, "SELECT count(*) FROM scores"), 0);
    EXPECT_EQ(count(*s, "SELECT count(*) FROM classifications"), 0);
    mode = stored_score_text(*s);
    ASSERT_TRUE(mode.ok());
    EXPECT_FALSE(mode->has_value());
}

TEST(StoredScorers, PutSaysWhetherTheDefinitionIsNewChangedOrTheSame) {
    auto s = Store::open(fresh_db("scorers").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    auto none = stored_scorers(**s);
    ASSERT_TRUE(none.ok());
    EXPECT_TRUE(none->empty());

    StoredScorer mine{"mine", 1, "version = 1\n", "mine.toml", ""};
    EXPECT_EQ(*put_scorer(**s, mine), ScorerChange::added);
    EXPECT_EQ(*put_scorer(**s, mine), ScorerChange::unchanged);
    StoredScorer other{"other", 3, "version = 3\n", "x/other.toml", ""};
    EXPECT_EQ(*put_scorer(**s, other), ScorerChange::added);
    mine.version = 2;
    mine.definition = "version = 2\n";
    EXPECT_EQ(*put_scorer(**s, mine), ScorerChange::replaced);

    auto stored = stored_scorers(**s);
    ASSERT_TRUE(stored.ok());
    ASSERT_EQ(stored->size(), 2u);
    EXPECT_EQ((*stored)[0].name, "mine");
    EXPECT_EQ((*stored)[0].version, 2);
    EXPECT_EQ((*stored)[0].definition, "version = 2\n");
    EXPECT_EQ((*stored)[0].origin, "mine.toml");
    EXPECT_FALSE((*stored)[0].added_at.empty());
    EXPECT_EQ((*stored)[1].name, "other");
}
