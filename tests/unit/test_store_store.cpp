// The store keeps every request and response with their types, points each
// request at the response that counts, refuses files it must not touch, and
// loses nothing when a write fails.
#include <harness/store/lock.hpp>
#include <harness/store/schema.hpp>
#include <harness/store/store.hpp>
#include <harness/store/view_sql.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sys/file.h>
#include <thread>
#include <unistd.h>

using namespace diffeval::store;
namespace fs = std::filesystem;

namespace {

fs::path fresh_db(const std::string& name) {
    auto p = fs::temp_directory_path() / ("diffeval_test_" + name + ".sqlite");
    fs::remove(p);
    fs::remove(p.string() + "-wal");
    fs::remove(p.string() + "-shm");
    return p;
}

RequestRow request(const std::string& key, int q) {
    return RequestRow{key, "a", "raw", 256, 0, q, "sample", "{\"prompt\": \"x\"}", "sha"};
}

ResponseRow response(const std::string& key, bool ok) {
    ResponseRow r;
    r.key = key;
    r.ok = ok;
    r.status = ok ? 200 : 500;
    r.response_json = ok ? "{}" : "boom";
    r.text = ok ? std::optional<std::string>("#### 3") : std::nullopt;
    r.finish_reason = "stop";
    r.attempts = 1;
    r.started_at = now_iso8601();
    r.error = ok ? "" : "HTTP 500";
    r.error_kind = ok ? "" : "http";
    return r;
}

// Run `sql` on the file at `path` through a connection of its own.
bool exec_raw(const std::string& path, const char* sql) {
    Database raw;
    return raw.open(path, Database::Create::no).ok() && raw.exec(sql).ok();
}

int64_t count(Store& s, const char* sql) {
    Statement st(s.handle(), sql);
    return st.step() ? st.column_int(0) : -1;
}

} // namespace

TEST(Store, CreatesSchemaAtCurrentVersion) {
    auto s = Store::open(fresh_db("create").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ((*s)->schema_version(), k_schema_version);
    EXPECT_EQ(count(**s, "PRAGMA user_version"), k_schema_version);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM sqlite_master WHERE name IN ('v_responses', "
                         "'v_scores', 'v_requests', 'requests_counted', 'request_bodies')"),
              5);
}

// diffeval's queries read what v_request_bodies and v_probes compute from
// SQL of their own (a view redefined in a file is the file's), and that SQL
// is the views' as the schema makes them: the same text, spaces aside.
TEST(Store, OwnSqlForTheViewsIsTheViewsBody) {
    auto s = Store::open(fresh_db("view_sql").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    const auto words = [](std::string_view text) {
        std::string out;
        for (char c : text) {
            const bool space = c == ' ' || c == '\n' || c == '\t';
            if (!space) {
                out += c;
            } else if (!out.empty() && out.back() != ' ') {
                out += ' ';
            }
        }
        while (!out.empty() && (out.back() == ' ' || out.back() == ';')) {
            out.pop_back();
        }
        return out;
    };
    for (const auto& [view, select] :
         {std::pair{"v_request_bodies", k_request_bodies_select}, {"v_probes", k_probes_select}}) {
        Statement st((*s)->handle(), "SELECT sql FROM sqlite_master WHERE name = ?");
        ASSERT_TRUE(st.bind(std::string(view)).step()) << view;
        EXPECT_EQ(words(st.column_text(0)),
                  words(fmt::format("CREATE VIEW {} AS {}", view, select)));
    }
}

TEST(Store, MigratesAVersionOneFileForwardKeepingItsRows) {
    const auto path = fresh_db("v1").string();
    // What a version 1 diffeval wrote: no index, no question hashes, no stop
    // columns, no probes, bodies in the request rows.
    ASSERT_TRUE(Store::create_at_version(path, 1).ok());
    ASSERT_TRUE(
        exec_raw(path, R"(INSERT INTO requests (request_key, server, framing, max_tokens, repeat,
                 question_idx, dataset, body_sha256, request_json) VALUES
                 ('k1', 'a', 'raw', 256, 0, 0, 'sample', 'sha', '{"prompt": "x"}'),
                 ('k2', 'a', 'raw', 256, 0, 1, 'sample', 'sha', '{"prompt": "x"}');
             INSERT INTO responses (request_id, ok, status, response_json, attempts, latency_ms,
                 started_at) VALUES
                 (1, 1, 200, '{"choices": [{"text": "x", "stop_reason": null}]}', 1, 1.0, 'now'),
                 (2, 1, 200, '{"choices": [{"text": "x", "finish_reason": "stop"}]}', 1, 1.0,
                  'now');
             UPDATE requests SET response_id = request_id;)"));
    auto read_only = Store::open(path, Store::Mode::read_only);
    ASSERT_FALSE(read_only.ok());
    EXPECT_NE(read_only.error().message.find("schema version 1"), std::string::npos);

    auto s = Store::open(path, Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(count(**s, "PRAGMA user_version"), k_schema_version);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM sqlite_master WHERE name = 'requests_counted'"), 1);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM sqlite_master WHERE name IN ('probe_requests', "
                         "'probe_responses', 'v_probes')"),
              3);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM pragma_table_info('responses') WHERE name IN "
                         "('notes', 'redacted')"),
              2);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM requests"), 2);
    // Version 5: the stop field each stored body shows (vLLM's stop_reason;
    // none for llama.cpp).
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses WHERE stop_field = 'stop_reason' AND "
                         "question_idx = 0"),
              1);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses WHERE stop_field IS NULL AND "
                         "question_idx = 1"),
              1);
}

TEST(Store, EveryRequestCarriesItsQuestionsContentHash) {
    auto s = Store::open(fresh_db("qhash").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_TRUE((*s)->put_questions("sample", {{"How many?", "3"}, {"How far?", "7"}}).ok());
    ASSERT_TRUE((*s)->put_requests({request("k1", 0), request("k2", 1)}).ok());
    Statement st((*s)->handle(), "SELECT question_sha256 FROM requests ORDER BY question_idx");
    ASSERT_TRUE(st.step());
    EXPECT_EQ(st.column_text(0), question_hash("How many?", "3"));
    ASSERT_TRUE(st.step());
    EXPECT_EQ(st.column_text(0), question_hash("How far?", "7"));
    // The hash is of the content: text and gold answer both count.
    EXPECT_NE(question_hash("How many?", "3"), question_hash("How many?", "4"));
    EXPECT_NE(question_hash("ab", "c"), question_hash("a", "bc"));
}

TEST(Store, MigratesAVersionTwoFileByHashingItsStoredQuestions) {
    const auto path = fresh_db("v2").string();
    ASSERT_TRUE(Store::create_at_version(path, 2).ok());
    ASSERT_TRUE(
        exec_raw(path, R"(INSERT INTO questions (dataset, question_idx, question, answer) VALUES
                 ('sample', 0, 'How many?', '3'), ('sample', 1, 'How far?', '7');
             INSERT INTO requests (request_key, server, framing, max_tokens, repeat,
                 question_idx, dataset, body_sha256, request_json) VALUES
                 ('k1', 'a', 'raw', 256, 0, 0, 'sample', 'sha', '{}'),
                 ('k2', 'a', 'raw', 256, 0, 1, 'sample', 'sha', '{}'),
                 ('k3', 'a', 'raw', 256, 0, 5, 'sample', 'sha', '{}');)"));
    auto s = Store::open(path, Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(count(**s, "PRAGMA user_version"), k_schema_version);
    Statement st((*s)->handle(),
                 "SELECT question_idx, question_sha256 FROM requests ORDER BY question_idx");
    ASSERT_TRUE(st.step());
    EXPECT_EQ(st.column_text(1), question_hash("How many?", "3"));
    ASSERT_TRUE(st.step());
    EXPECT_EQ(st.column_text(1), question_hash("How far?", "7"));
    // No question row: nothing to hash, paired by dataset and index.
    ASSERT_TRUE(st.step());
    EXPECT_EQ(st.column_int(0), 5);
    EXPECT_TRUE(st.column_null(1));
}

// Version 8 kept every request's whole body in its row; version 9 keeps each
// distinct body once, and users still read it where they did.
TEST(Store, MigratesAVersionEightFileToOneBodyPerDistinctBody) {
    const auto path = fresh_db("v8").string();
    ASSERT_TRUE(Store::create_at_version(path, 8).ok());
    ASSERT_TRUE(
        exec_raw(path, R"(INSERT INTO requests (request_key, server, framing, max_tokens, repeat,
                 question_idx, dataset, body_sha256, request_json) VALUES
                 ('k1', 'a', 'raw', 256, 0, 0, 'sample', 's0', 'body zero'),
                 ('k2', 'a', 'raw', 256, 1, 0, 'sample', 's0', 'body zero'),
                 ('k3', 'b', 'raw', 256, 0, 0, 'sample', 's0', 'body zero'),
                 ('k4', 'a', 'raw', 256, 0, 1, 'sample', 's1', 'body one');
             INSERT INTO probe_requests (request_key, probe, step, server, framing, repeat,
                 question_idx, dataset, body_sha256, request_json) VALUES
                 ('p1', 'think-open', 0, 'a', 'raw', 0, 0, 'sample', 's2', 'probe body'),
                 ('p2', 'think-open', 0, 'b', 'raw', 0, 0, 'sample', 's2', 'probe body');
             INSERT INTO responses (request_id, ok, status, response_json, attempts, latency_ms,
                 started_at) SELECT request_id, 1, 200, '{}', 1, 1.0, 'now' FROM requests;
             UPDATE requests SET response_id = request_id;)"));
    auto s = Store::open(path, Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(count(**s, "PRAGMA user_version"), k_schema_version);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM request_bodies"), 3);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_probe_requests WHERE request_json = "
                         "'probe body'"),
              2);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM pragma_table_info('requests') "
                         "WHERE name = 'request_json'"),
              0);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses WHERE request_json = 'body zero'"), 3);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_requests WHERE request_key = 'k4' AND "
                         "request_json = 'body one'"),
              1);

    // New requests with a known body point at it instead of storing it again.
    RequestRow again = request("k5", 2);
    again.body = "body one";
    again.body_sha256 = "s1";
    ASSERT_TRUE((*s)->put_requests({again}).ok());
    EXPECT_EQ(count(**s, "SELECT count(*) FROM request_bodies"), 3);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_requests WHERE request_json = 'body one'"), 2);
}

// Version 10 adds the table of users' scorers, empty; nothing stored moves.
TEST(Store, MigratesAVersionNineFileWithAnEmptyScorersTable) {
    const auto path = fresh_db("v9").string();
    ASSERT_TRUE(Store::create_at_version(path, 9).ok());
    ASSERT_FALSE(exec_raw(path, "SELECT count(*) FROM scorers"));
    ASSERT_TRUE(exec_raw(path, R"(INSERT INTO request_bodies (body_sha256, request_json)
                 VALUES ('s0', 'body zero');
             INSERT INTO requests (request_key, server, framing, max_tokens, repeat,
                 question_idx, dataset, body_sha256, body_id) VALUES
                 ('k1', 'a', 'raw', 256, 0, 0, 'sample', 's0', 1);)"));
    // A reader cannot migrate: it says which command will.
    auto ro = Store::open(path, Store::Mode::read_only);
    ASSERT_FALSE(ro.ok());
    EXPECT_NE(ro.error().message.find("has schema version 9"), std::string::npos);
    EXPECT_NE(ro.error().message.find("migrate it with 'diffeval rescore --db " + path + "'"),
              std::string::npos)
        << ro.error().message;
    auto s = Store::open(path, Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(count(**s, "PRAGMA user_version"), k_schema_version);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM scorers"), 0);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_requests WHERE request_json = 'body zero'"), 1);
}

// Version 13: an answer imported from lm-eval samples was timed by nothing
// and records no finish state. The file keeps every row, latency_ms may be
// NULL, the imports stored before get NULL for their 0 and `unrecorded` for
// `other`, and SQLite finds the file sound.
TEST(Store, MigratesAVersionTwelveFileSoImportsHaveNoLatency) {
    const auto path = fresh_db("v12").string();
    ASSERT_TRUE(Store::create_at_version(path, 12).ok());
    ASSERT_TRUE(exec_raw(path, R"(INSERT INTO request_bodies (body_sha256, request_json) VALUES
                 ('s0', '{"prompt": "x"}'), ('s1', '{"lm_eval_arguments": {}}');
             INSERT INTO requests (request_key, server, framing, max_tokens, repeat,
                 question_idx, dataset, body_id) VALUES
                 ('k1', 'a', 'raw', 256, 0, 0, 'sample', 1),
                 ('k2', 'lm', 'raw', 256, 0, 0, 'sample', 2),
                 ('k3', 'a', 'raw', 256, 0, 1, 'sample', 1);
             INSERT INTO responses (request_id, ok, status, response_json, text, finish_reason,
                 attempts, latency_ms, started_at) VALUES
                 (1, 1, 200, '{"choices": []}', '#### 3', 'stop', 1, 12.5, 'now'),
                 (2, 1, 200, '{"lm_eval": {"resps": "#### 3", "filters": {}}}', '#### 3', NULL,
                  1, 0.0, 'now'),
                 (3, 1, 200, '{"choices": []}', '#### 3', NULL, 1, 0.0, 'now');
             UPDATE requests SET response_id = request_id;
             INSERT INTO classifications (response_id, opened, closed, reasoning_started,
                 outcome, stop_cause) VALUES (1, 0, 0, 0, 'finished', 'eos'),
                 (2, 0, 0, 0, 'other', ''), (3, 0, 0, 0, 'other', '');)"));
    auto s = Store::open(path, Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(count(**s, "PRAGMA user_version"), k_schema_version);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM pragma_table_info('responses') WHERE "
                         "name = 'latency_ms' AND \"notnull\" = 0"),
              1);
    // The import's latency is NULL and its outcome unrecorded; the run's
    // rows, one of them a server's answer without a finish_reason, keep theirs.
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses WHERE latency_ms IS NULL"), 1);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses WHERE server = 'lm' AND "
                         "latency_ms IS NULL AND outcome = 'unrecorded'"),
              1);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses WHERE request_key = 'k1' AND "
                         "latency_ms = 12.5 AND outcome = 'finished'"),
              1);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses WHERE request_key = 'k3' AND "
                         "latency_ms = 0 AND outcome = 'other'"),
              1);
    Statement integrity((*s)->handle(), "PRAGMA integrity_check");
    ASSERT_TRUE(integrity.step());
    EXPECT_EQ(integrity.column_text(0), "ok");
    EXPECT_EQ(count(**s, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    // A new response with nothing timed stores NULL.
    ASSERT_TRUE((*s)->put_requests({request("k4", 2)}).ok());
    auto untimed = response("k4", true);
    ASSERT_TRUE((*s)->write_batch({untimed}).ok());
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses WHERE latency_ms IS NULL"), 2);
    // Another connection reads the new definition too.
    s->reset();
    auto again = Store::open(path, Store::Mode::read_only);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(count(**again, "SELECT count(*) FROM pragma_table_info('responses') WHERE "
                             "name = 'latency_ms' AND \"notnull\" = 0"),
              1);
}

// Two commands opening one old file at once (two CI jobs' reports on a shared
// database): one migrates it, the other waits for that and finds it current,
// instead of climbing again from the version it read before the first one's
// commit ("table request_bodies already exists"), or calling a file it found
// locked "not a diffeval database".
TEST(Store, TwoOpeningAnOldFileAtOnceMigrateItOnce) {
    for (int round = 0; round < 8; ++round) {
        const auto path = fresh_db("race").string();
        ASSERT_TRUE(Store::create_at_version(path, 8).ok());
        ASSERT_TRUE(
            exec_raw(path, R"(INSERT INTO requests (request_key, server, framing, max_tokens,
                     repeat, question_idx, dataset, body_sha256, request_json) VALUES
                     ('k1', 'a', 'raw', 256, 0, 0, 'sample', 's0', 'body zero'),
                     ('k2', 'a', 'raw', 256, 0, 1, 'sample', 's1', 'body one');)"));
        // Every diffeval has left its files in WAL mode; another tool's copy
        // may not be, and switching it needs the file alone.
        if (round % 2 == 1) {
            ASSERT_TRUE(exec_raw(path, "PRAGMA journal_mode=WAL"));
        }
        std::optional<diffeval::util::Result<std::unique_ptr<Store>>> first;
        std::optional<diffeval::util::Result<std::unique_ptr<Store>>> second;
        std::thread other([&] { second = Store::open(path, Store::Mode::read_write); });
        first = Store::open(path, Store::Mode::read_write);
        other.join();
        for (auto* opened : {&first, &second}) {
            ASSERT_TRUE(opened->has_value() && (*opened)->ok())
                << "round " << round << ": " << (**opened).error().message;
        }
        EXPECT_EQ(count(***first, "PRAGMA user_version"), k_schema_version);
        EXPECT_EQ(count(***second, "SELECT count(*) FROM request_bodies"), 2);
        EXPECT_EQ(count(***second, "SELECT count(*) FROM v_requests"), 2);
    }
}

TEST(Store, StoresEachDistinctBodyOnce) {
    auto s = Store::open(fresh_db("bodies").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    RequestRow other = request("k3", 2);
    other.body = "{\"prompt\": \"y\"}";
    other.body_sha256 = "sha2";
    ASSERT_TRUE((*s)->put_requests({request("k1", 0), other, request("k2", 1)}).ok());
    ASSERT_TRUE((*s)->put_requests({request("k4", 3)}).ok());
    EXPECT_EQ(count(**s, "SELECT count(*) FROM requests"), 4);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM request_bodies"), 2);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_requests WHERE request_json = "
                         "'{\"prompt\": \"x\"}'"),
              3);
}

TEST(Store, StopReasonKeepsItsType) {
    auto s = Store::open(fresh_db("types").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->put_requests({request("k1", 0), request("k2", 1), request("k3", 2)}).ok());
    auto a = response("k1", true);
    a.stop_reason = std::string("Question");
    auto b = response("k2", true);
    b.stop_reason = int64_t{151645};
    auto c = response("k3", true);
    auto wr = (*s)->write_batch({a, b, c});
    ASSERT_TRUE(wr.ok()) << wr.error().message;
    Statement st((*s)->handle(),
                 "SELECT typeof(stop_reason) FROM v_responses ORDER BY question_idx");
    std::vector<std::string> types;
    while (st.step()) {
        types.push_back(st.column_text(0));
    }
    EXPECT_EQ(types, (std::vector<std::string>{"text", "integer", "null"}));
}

TEST(Store, FailureNeverReplacesSuccessAndResumeSeesOnlySuccesses) {
    auto s = Store::open(fresh_db("resume").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->put_requests({request("k1", 0), request("k2", 1)}).ok());
    ASSERT_TRUE((*s)->write_batch({response("k1", false), response("k2", true)}).ok());
    ASSERT_TRUE((*s)->write_batch({response("k1", true), response("k2", false)}).ok());
    auto done = (*s)->completed_keys();
    ASSERT_TRUE(done.ok());
    EXPECT_EQ(done->size(), 2u);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses WHERE ok = 1"), 2);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM responses"), 4);
}

TEST(Store, PlannedRequestsAreNotDuplicated) {
    auto s = Store::open(fresh_db("dup").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->put_requests({request("k1", 0)}).ok());
    ASSERT_TRUE((*s)->put_requests({request("k1", 0), request("k2", 1)}).ok());
    EXPECT_EQ(count(**s, "SELECT count(*) FROM requests"), 2);
}

// The event loop plans while the writer stores answers. With requests still
// queued it asks not to wait (Wait::no): while a batch is being stored it is
// told so at once, having read and stored nothing, and plans once the batch
// is done. Waiting kept every answer unread for the batch's commit.
TEST(Store, PlanningThatMustNotWaitStepsAsideForTheWritersBatch) {
    auto s = Store::open(fresh_db("turn").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok());
    int reads = 0;
    std::vector<Store::Planned> found;
    const auto read = [&](std::vector<RequestRow>& rows) {
        if (reads > 0) {
            return false;
        }
        ++reads;
        rows.push_back(request("k1", 0));
        return true;
    };
    const auto take = [&](std::vector<RequestRow>&, const std::vector<Store::Planned>& p) {
        found = p;
    };
    std::optional<diffeval::util::Result<bool>> busy;
    {
        auto turn = (*s)->hold_turn();
        std::thread planner([&] { busy = (*s)->put_unanswered(read, take, Store::Wait::no); });
        planner.join();
    }
    ASSERT_TRUE(busy && busy->ok());
    EXPECT_FALSE(**busy);
    EXPECT_EQ(reads, 0);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM requests"), 0);

    auto planned = (*s)->put_unanswered(read, take, Store::Wait::no);
    ASSERT_TRUE(planned.ok());
    EXPECT_TRUE(*planned);
    EXPECT_EQ(reads, 1);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_GT(found[0].id, 0);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM requests"), 1);
}

TEST(Store, RefusesNewerSchemaAndForeignDatabases) {
    auto newer = fresh_db("newer");
    {
        Database db;
        ASSERT_TRUE(db.open(newer.string(), Database::Create::yes).ok());
        ASSERT_TRUE(db.exec("CREATE TABLE t(x); PRAGMA user_version = 99").ok());
    }
    auto s = Store::open(newer.string(), Store::Mode::read_write);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("newer than this diffeval"), std::string::npos);

    auto foreign = fresh_db("foreign");
    {
        Database db;
        ASSERT_TRUE(db.open(foreign.string(), Database::Create::yes).ok());
        ASSERT_TRUE(db.exec("CREATE TABLE mine(x); INSERT INTO mine VALUES (1)").ok());
    }
    auto f = Store::open(foreign.string(), Store::Mode::read_write);
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message.find("not diffeval's"), std::string::npos);
    Database check;
    ASSERT_TRUE(check.open(foreign.string(), Database::Create::no).ok());
    Statement st(check.handle(), "SELECT count(*) FROM mine");
    ASSERT_TRUE(st.step());
    EXPECT_EQ(st.column_int(0), 1);
}

// Another program's file that holds no table yet: one marked with its
// application id (GeoPackage and MBTiles set one), or holding only a view.
// diffeval sets no application id; it wrote its schema into both.
TEST(Store, RefusesAnotherProgramsFileWithoutTables) {
    for (const char* sql : {"PRAGMA application_id = 1196444487", "CREATE VIEW v AS SELECT 1"}) {
        auto path = fresh_db("marked");
        {
            Database db;
            ASSERT_TRUE(db.open(path.string(), Database::Create::yes).ok());
            ASSERT_TRUE(db.exec(sql).ok());
        }
        const auto before = fs::file_size(path);
        auto s = Store::open(path.string(), Store::Mode::read_write);
        ASSERT_FALSE(s.ok()) << sql;
        EXPECT_NE(s.error().message.find("not diffeval's"), std::string::npos) << s.error().message;
        EXPECT_EQ(fs::file_size(path), before) << sql;
        Database check;
        ASSERT_TRUE(check.open(path.string(), Database::Create::no).ok());
        Statement st(check.handle(), "SELECT count(*) FROM sqlite_master WHERE name = 'runs'");
        ASSERT_TRUE(st.step());
        EXPECT_EQ(st.column_int(0), 0) << sql;
    }
}

TEST(Writer, RetriesAFailedBatchAndLosesNothing) {
    auto s = Store::open(fresh_db("writer").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->put_requests({request("k1", 0), request("k2", 1)}).ok());
    (*s)->fail_next_writes(1);
    {
        Writer w(**s);
        w.push(response("k1", true));
        w.push(response("k2", true));
        w.close();
        EXPECT_FALSE(w.error().has_value());
        EXPECT_EQ(w.committed(), 2);
    }
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses"), 2);
}

TEST(Writer, ReportsAPersistentWriteFailure) {
    auto s = Store::open(fresh_db("writer_fail").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->put_requests({request("k1", 0)}).ok());
    (*s)->fail_next_writes(2);
    Writer w(**s);
    w.push(response("k1", true));
    w.close();
    ASSERT_TRUE(w.error().has_value());
    EXPECT_NE(w.error()->find("injected"), std::string::npos);
}

// The event loop, with nothing in flight and the writer's backlog at its
// bound, waits for the writer to take its queue: not at all below the bound,
// until the timeout while the writer cannot start a batch, and once it can,
// until it has taken the queue rather than for the whole timeout.
TEST(Writer, ASenderHeldBackGoesOnOnceTheWriterTakesItsQueue) {
    auto s = Store::open(fresh_db("writer_below").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok());
    std::vector<RequestRow> requests;
    for (int i = 0; i < 64; ++i) {
        requests.push_back(request(fmt::format("k{}", i), i));
    }
    ASSERT_TRUE((*s)->put_requests(requests).ok());
    Writer w(**s);
    std::optional<std::chrono::steady_clock::duration> waited;
    {
        // The writer is held at the store's turn: its batch cannot start
        // until the turn is released, so the backlog stays where it is.
        auto turn = (*s)->hold_turn();
        w.push(response("k0", true)); // the writer takes this one and waits for the turn
        while (w.backlog() > 0) {
            std::this_thread::yield();
        }
        for (int i = 1; i < 64; ++i) {
            w.push(response(fmt::format("k{}", i), true));
        }
        EXPECT_EQ(w.backlog(), 63u);
        auto start = std::chrono::steady_clock::now();
        w.wait_below(64, std::chrono::seconds(60));
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30))
            << "below the bound already: no wait";
        start = std::chrono::steady_clock::now();
        w.wait_below(32, std::chrono::milliseconds(50));
        EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50))
            << "went on with the backlog at its bound";
        EXPECT_EQ(w.backlog(), 63u);
        std::thread sender([&] {
            const auto at = std::chrono::steady_clock::now();
            w.wait_below(32, std::chrono::seconds(60));
            waited = std::chrono::steady_clock::now() - at;
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        EXPECT_FALSE(waited.has_value()) << "went on while the writer could not take its queue";
        turn = {}; // the first batch commits; the writer takes the 63
        sender.join();
    }
    ASSERT_TRUE(waited.has_value());
    EXPECT_LT(*waited, std::chrono::seconds(30)) << "waited for the timeout";
    w.close();
    EXPECT_EQ(w.committed(), 64);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses"), 64);
}

TEST(Writer, KeepsTheWalBoundedWhileItWrites) {
    // A thread of the writer's checkpoints the WAL while commits go on, and
    // past four times SQLite's threshold (64 MB of 16 KiB pages) the writer
    // waits for it before its next batch; a commit checkpoints only past 16
    // times. So 40 MB of answers reach the database file before close
    // without a commit having checkpointed, and 100 MB never take the WAL
    // much past 64 MB.
    const auto path = fresh_db("writer_wal");
    auto s = Store::open(path.string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok());
    constexpr int k_rows = 6400;
    std::vector<RequestRow> requests;
    for (int i = 0; i < k_rows; ++i) {
        requests.push_back(request(fmt::format("k{}", i), i));
    }
    ASSERT_TRUE((*s)->put_requests(requests).ok());
    const std::string text(16 << 10, 'x');
    const auto wal_size = [&] {
        std::error_code ec;
        const auto n = fs::file_size(path.string() + "-wal", ec);
        return ec ? uintmax_t{0} : n;
    };
    uintmax_t wal_peak = 0;
    {
        Writer w(**s);
        for (int i = 0; i < k_rows; ++i) {
            auto r = response(fmt::format("k{}", i), true);
            r.text = text + std::to_string(i);
            w.push(std::move(r));
            if (i % 256 == 255) {
                w.flush();
                wal_peak = std::max(wal_peak, wal_size());
            }
            if (i == 2559) {
                // 40 MB committed, under the cap: only the checkpoint thread
                // can have copied them into the file. Wait for it (a few
                // milliseconds; the bound is for a loaded machine).
                const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                while (fs::file_size(path) < (uintmax_t{20} << 20) &&
                       std::chrono::steady_clock::now() < deadline) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(5));
                }
                EXPECT_GT(fs::file_size(path), uintmax_t{20} << 20);
            }
        }
        w.close();
        EXPECT_FALSE(w.error().has_value());
    }
    // 64 MB, plus the batch whose commit passed it.
    EXPECT_LT(wal_peak, uintmax_t{72} << 20) << wal_peak;
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses"), k_rows);
}

namespace {

RequestRow probe_request(const std::string& key, int q, int step) {
    RequestRow r = request(key, q);
    r.max_tokens = 1;
    r.probe = "think-open";
    r.probe_step = step;
    return r;
}

ResponseRow probe_response(const std::string& key, bool ok, ProbeReadingRow reading) {
    ResponseRow r = response(key, ok);
    r.probe = true;
    if (ok) {
        r.reading = std::move(reading);
    }
    return r;
}

} // namespace

TEST(Store, ProbesAreStoredApartFromAnswersAndResume) {
    auto s = Store::open(fresh_db("probes").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->put_requests({request("k1", 0), probe_request("p0", 0, 0),
                                    probe_request("p1", 0, 1), probe_request("p2", 1, 0)})
                    .ok());
    EXPECT_EQ(count(**s, "SELECT count(*) FROM requests"), 1);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM probe_requests"), 3);
    // Question 0 chains: " " at 0.6, then <think> at 0.9. Question 1 lists
    // neither: bounded by its smallest listed probability.
    ProbeReadingRow first{" ", R"([[" ",-0.51],[" Jan",-1.2]])", 0, false, 0.6, true, 0.3};
    ProbeReadingRow second{"<think>", R"([["<think>",-0.1]])", 0.9, true, 0, false, 0.9};
    ProbeReadingRow none{" Jan", R"([[" Jan",-0.1]])", 0, false, 0, false, 0.05};
    ASSERT_TRUE(
        (*s)->write_batch({response("k1", true), probe_response("p0", true, first),
                           probe_response("p1", true, second), probe_response("p2", false, none)})
            .ok());
    auto done = (*s)->completed_keys();
    ASSERT_TRUE(done.ok());
    EXPECT_EQ(done->size(), 3u); // k1, p0, p1: the failed probe is sent again
    EXPECT_FALSE(done->count("p2"));
    EXPECT_EQ(count(**s, "SELECT count(*) FROM responses"), 1);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_responses"), 1);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM v_probes"), 1);

    ASSERT_TRUE((*s)->write_batch({probe_response("p2", true, none)}).ok());
    Statement st(
        (*s)->handle(),
        "SELECT question_idx, p_open, bounded, chosen FROM v_probes ORDER BY question_idx");
    ASSERT_TRUE(st.step());
    EXPECT_NEAR(st.column_double(1), 0.54, 1e-12);
    EXPECT_EQ(st.column_int(2), 0);
    EXPECT_EQ(st.column_text(3), " ");
    ASSERT_TRUE(st.step());
    EXPECT_EQ(st.column_int(0), 1);
    EXPECT_NEAR(st.column_double(1), 0.05, 1e-12);
    EXPECT_EQ(st.column_int(2), 1);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM probe_responses"), 4);
}

// Whoever holds a database's lock is named by its command, so a run refused
// while a merge writes the file is not told "another diffeval run".
TEST(RunLock, ARefusalNamesTheCommandThatHoldsTheLock) {
    const auto path = fresh_db("lock").string();
    auto merge = RunLock::acquire(path, "merge", RunLock::Wait::no, nullptr);
    ASSERT_TRUE(merge.ok()) << merge.error().message;
    auto run = RunLock::acquire(path, "run", RunLock::Wait::no, nullptr);
    ASSERT_FALSE(run.ok());
    EXPECT_NE(run.error().message.find(fmt::format(
                  "{} is in use by diffeval merge (pid {}, started ", path, ::getpid())),
              std::string::npos)
        << run.error().message;
    EXPECT_NE(run.error().message.find("; wait for it to finish or pass --wait-lock"),
              std::string::npos);
}

// A holder may remove the lock file (an import that created its database and
// failed leaves nothing behind). A waiter that then takes the lock on the
// removed file locked nothing another process can see: a third command
// created a new lock file and wrote alongside it. The waiter now locks the
// file named at that moment, so the third is refused.
TEST(RunLock, AWaiterWhoseLockFileWasRemovedLocksTheFileNamedNow) {
    const auto path = fresh_db("lock-removed").string();
    auto acquired = RunLock::acquire(path, "import", RunLock::Wait::no, nullptr);
    ASSERT_TRUE(acquired.ok()) << acquired.error().message;
    std::optional<RunLock> first(std::move(acquired.value()));
    std::optional<diffeval::util::Result<RunLock>> waiter;
    std::thread waiting(
        [&] { waiter.emplace(RunLock::acquire(path, "run", RunLock::Wait::yes, nullptr)); });
    // The waiter has opened the lock file once it is told who holds it; give
    // it time to open the file (it polls every 50 ms).
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    std::filesystem::remove(RunLock::path_for(path));
    first.reset(); // the import ends
    waiting.join();
    ASSERT_TRUE(waiter && waiter->ok()) << (waiter ? waiter->error().message : "no result");
    EXPECT_TRUE(std::filesystem::exists(RunLock::path_for(path)));
    auto third = RunLock::acquire(path, "merge", RunLock::Wait::no, nullptr);
    EXPECT_FALSE(third.ok()) << "two commands hold the lock of " << path;
    if (!third.ok()) {
        EXPECT_NE(third.error().message.find("in use by diffeval run"), std::string::npos)
            << third.error().message;
    }
}

// A lock file removed while its run goes on (`rm -f *.lock` in a CI step),
// or a second name of the database (a bind mount has a lock file of its
// own): the next command made another lock file and wrote beside the run,
// sending every request again. The database file itself is locked.
TEST(RunLock, ALockFileRemovedWhileHeldDoesNotLetASecondWriterIn) {
    const auto path = fresh_db("lock-db-file").string();
    std::ofstream(path) << ""; // the database exists
    auto first = RunLock::acquire(path, "run", RunLock::Wait::no, nullptr);
    ASSERT_TRUE(first.ok()) << first.error().message;
    std::filesystem::remove(RunLock::path_for(path));
    auto second = RunLock::acquire(path, "run", RunLock::Wait::no, nullptr);
    ASSERT_FALSE(second.ok()) << "two runs hold " << path;
    EXPECT_NE(second.error().message.find(
                  path + " is in use by another diffeval process, which reached the file "
                         "through another name"),
              std::string::npos)
        << second.error().message;
    // Let go, the file is free again.
    first = RunLock::acquire(fresh_db("lock-db-file-other").string(), "run", RunLock::Wait::no,
                             nullptr);
    EXPECT_TRUE(RunLock::acquire(path, "run", RunLock::Wait::no, nullptr).ok());
}

// A database the command created after taking the lock is locked once it
// exists (hold_database_file), so the removed lock file of a fresh run's
// database lets nobody in either.
TEST(RunLock, ADatabaseCreatedUnderTheLockIsHeldOnceItExists) {
    const auto path = fresh_db("lock-created").string();
    auto first = RunLock::acquire(path, "run", RunLock::Wait::no, nullptr);
    ASSERT_TRUE(first.ok()) << first.error().message;
    std::ofstream(path) << "";
    ASSERT_TRUE(first->hold_database_file(path).ok());
    std::filesystem::remove(RunLock::path_for(path));
    EXPECT_FALSE(RunLock::acquire(path, "import", RunLock::Wait::no, nullptr).ok());
}

// A read command asks who writes the database: nobody without a lock file
// or once it is let go, the holder by its command while another process
// (here a lock taken outside RunLock) holds it, and nobody when the asking
// process holds it itself (a demo reports on the database it wrote).
TEST(RunLock, HolderNamesAnotherProcessWritingTheDatabase) {
    const auto path = fresh_db("holder").string();
    EXPECT_EQ(RunLock::holder(path), std::nullopt);
    const int held = ::open(RunLock::path_for(path).c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(held, 0);
    const std::string text = "pid 4242, started 2026-12-05T00:00:00.000Z, diffeval run\n";
    ASSERT_EQ(::write(held, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    EXPECT_EQ(RunLock::holder(path), std::nullopt) << "a lock file alone is nobody's lock";
    ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
    EXPECT_EQ(
        RunLock::holder(path),
        std::optional<std::string>("diffeval run (pid 4242, started 2026-12-05T00:00:00.000Z)"));
    ::close(held);
    EXPECT_EQ(RunLock::holder(path), std::nullopt);
    auto own = RunLock::acquire(path, "demo", RunLock::Wait::no, nullptr);
    ASSERT_TRUE(own.ok()) << own.error().message;
    EXPECT_EQ(RunLock::holder(path), std::nullopt);
}

// holder() tests with a shared lock held for a moment: a run starting in
// that moment waits it out instead of being refused as if a writer held
// the file.
TEST(RunLock, AReadersMomentaryTestDoesNotRefuseARun) {
    const auto path = fresh_db("holder-moment").string();
    const int reader = ::open(RunLock::path_for(path).c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(reader, 0);
    ASSERT_EQ(::flock(reader, LOCK_SH | LOCK_NB), 0);
    std::thread let_go([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ::close(reader);
    });
    auto run = RunLock::acquire(path, "run", RunLock::Wait::no, nullptr);
    let_go.join();
    EXPECT_TRUE(run.ok()) << run.error().message;
}

// Every stored time is UTC in ISO 8601 with milliseconds, and is now.
TEST(StoreTime, NowIsUtcIso8601WithMilliseconds) {
    using namespace std::chrono;
    const auto before = floor<milliseconds>(system_clock::now());
    const auto text = now_iso8601();
    const auto after = system_clock::now();
    ASSERT_EQ(text.size(), 24u) << text;
    for (size_t i = 0; i < text.size(); ++i) {
        const char want = std::string_view("0000-00-00T00:00:00.000Z")[i];
        if (want == '0') {
            EXPECT_TRUE(text[i] >= '0' && text[i] <= '9') << text;
        } else {
            EXPECT_EQ(text[i], want) << text;
        }
    }
    std::tm tm{};
    ASSERT_NE(strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm), nullptr) << text;
    const auto at =
        system_clock::from_time_t(timegm(&tm)) + milliseconds(std::stoi(text.substr(20, 3)));
    EXPECT_LE(before, at) << text;
    EXPECT_LE(at, after) << text;
}
