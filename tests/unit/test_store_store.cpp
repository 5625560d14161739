// The store keeps every request and response with their types, points each
// request at the response that counts, refuses files it must not touch, and
// loses nothing when a write fails.
#include <harness/store/schema.hpp>
#include <harness/store/store.hpp>

#include <gtest/gtest.h>

#include <filesystem>

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

int64_t count(Store& s, const char* sql) {
    Statement st(s.handle(), sql);
    return st.step() ? st.column_int(0) : -1;
}

} // namespace

TEST(Store, CreatesSchemaAtCurrentVersion) {
    auto s = Store::open(fresh_db("create").string(), Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ((*s)->schema_version(), diffeval::store::k_schema_version);
    EXPECT_EQ(count(**s, "PRAGMA user_version"), diffeval::store::k_schema_version);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM sqlite_master WHERE name IN ('v_responses', "
                         "'v_scores', 'requests_counted')"),
              3);
}

TEST(Store, MigratesAVersionOneFileForwardKeepingItsRows) {
    const auto path = fresh_db("v1").string();
    {
        auto s = Store::open(path, Store::Mode::read_write);
        ASSERT_TRUE(s.ok()) << s.error().message;
        ASSERT_TRUE((*s)->put_requests({request("k1", 0), request("k2", 1)}).ok());
        // What a version 1 file looks like: the same tables, no index, no
        // version 4 columns.
        ASSERT_TRUE(Statement((*s)->handle(), "DROP INDEX requests_counted").run());
        ASSERT_TRUE(Statement((*s)->handle(), "ALTER TABLE responses DROP COLUMN notes").run());
        ASSERT_TRUE(Statement((*s)->handle(), "ALTER TABLE responses DROP COLUMN redacted").run());
        ASSERT_TRUE(Statement((*s)->handle(), "PRAGMA user_version = 1").run());
    }
    auto read_only = Store::open(path, Store::Mode::read_only);
    ASSERT_FALSE(read_only.ok());
    EXPECT_NE(read_only.error().message.find("schema version 1"), std::string::npos);

    auto s = Store::open(path, Store::Mode::read_write);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(count(**s, "PRAGMA user_version"), diffeval::store::k_schema_version);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM sqlite_master WHERE name = 'requests_counted'"), 1);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM pragma_table_info('responses') WHERE name IN "
                         "('notes', 'redacted')"),
              2);
    EXPECT_EQ(count(**s, "SELECT count(*) FROM requests"), 2);
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
