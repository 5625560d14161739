// Databases written by older schema versions are migrated in place to the
// current one, and nothing a user sees changes: the bodies in the views,
// what rescore computes, the summary, the comparison and the report, and
// what a resumed run plans and sends.
// - Version 8 (every request and probe request row holds its whole body)
//   goes through 9 (each distinct body once, in request_bodies), 10 (an
//   empty table of users' scorers) and 11.
// - Version 10 goes through 11: spliced bodies (the text a row holds is
//   left out of its stored body), scores WITHOUT ROWID, and body_sha256 read
//   from request_bodies. Its rows keep their whole bodies; what the resumed
//   run adds is spliced.
// - Version 11 goes to 12: request bodies stored after a shared prefix. Its
//   bodies stay whole; what a later run plans is stored after its prefix, and
//   every view shows the exact bytes either way. Then to 13: latency_ms may
//   be NULL (answers imported from lm-eval samples were timed by nothing;
//   tests/unit/test_store_store.cpp migrates such an import).
#include "e2e.hpp"

#include <harness/store/schema.hpp>
#include <harness/util/hash.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <re2/re2.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

using e2e::query;
using e2e::query_rows;

namespace {

const std::string k_current_version = std::to_string(diffeval::store::k_schema_version);

const std::filesystem::path k_fixtures =
    std::filesystem::path(DIFFEVAL_SOURCE_DIR) / "tests/e2e/fixtures";
const std::filesystem::path k_fixture = k_fixtures / "schema_v8";

// A fresh copy of the version 8 fixture database in `dir`.
std::filesystem::path version_eight_database(const std::filesystem::path& dir) {
    auto db = dir / "v8.sqlite";
    e2e::exec(db, e2e::slurp(k_fixture / "v8.sql"));
    return db;
}

// A diffeval.summary/1 document as version 2 writes the same numbers
// (docs/json.md): null, not 0, where nothing was measured. The fixtures'
// simulators report a positive token count in every successful response, so
// a repeat's mean of 0 there means no count.
std::string summary_as_version_2(const std::string& v1) {
    auto j = nlohmann::json::parse(v1);
    j["schema"] = "diffeval.summary/2";
    for (auto& g : j["groups"]) {
        bool finished = false;
        std::vector<double> counted;
        for (auto& r : g["breakdown"]["per_repeat"]) {
            finished = finished || r["finished"].get<int64_t>() > 0;
            if (r["mean_completion_tokens"].get<double>() == 0) {
                r["mean_completion_tokens"] = nullptr;
            } else {
                counted.push_back(r["mean_completion_tokens"].get<double>());
            }
        }
        auto& mean = g["breakdown"]["mean"]["mean_completion_tokens"];
        if (counted.empty()) {
            mean = nullptr;
        } else if (counted.size() < g["breakdown"]["per_repeat"].size()) {
            double sum = 0;
            for (double c : counted) {
                sum += c / static_cast<double>(counted.size());
            }
            mean = sum;
        }
        for (auto& [scorer, acc] : g["accuracy"].items()) {
            if (!finished) {
                acc["finished_accuracy"] = nullptr;
            }
        }
        if (g["latency"]["responses"].get<int64_t>() == 0) {
            for (const char* k : {"p50_ms", "p90_ms", "p99_ms", "max_ms"}) {
                g["latency"][k] = nullptr;
            }
        }
        // A key added on 2026-12-04: whether some question missed a repeat.
        int64_t responses = 0;
        for (auto& r : g["breakdown"]["per_repeat"]) {
            responses += r["responses"].get<int64_t>();
        }
        g["uneven_repeats"] = responses != g["questions"].get<int64_t>() *
                                               static_cast<int64_t>(g["repeats"].get<size_t>());
    }
    return j.dump(2) + "\n";
}

// The summary of `db` is what the diffeval that wrote `fixture` printed,
// byte for byte, in version 2 of the summary's JSON. The comparison and the report are what this
// diffeval printed for the migrated fixture when its statistics last changed (README.md in the
// fixture says when); DIFFEVAL_UPDATE_FIXTURES=1 writes them anew. Either way a migration that
// changed what users see fails.
void expect_fixture_outputs(const std::filesystem::path& fixture, const std::filesystem::path& db,
                            const std::filesystem::path& dir) {
    const bool update = std::getenv("DIFFEVAL_UPDATE_FIXTURES") != nullptr;
    const auto expect = [&](const std::string& text, const char* file) {
        if (update) {
            std::ofstream(fixture / file, std::ios::binary) << text;
        }
        EXPECT_EQ(text, e2e::slurp(fixture / file)) << file;
    };
    auto summary = e2e::run({"summary", "--db", db.string(), "--format", "json"});
    ASSERT_EQ(summary.exit_code, 0) << summary.err;
    // A key added on 2026-12-05, in the order the groups were planned:
    // each fixture's runs finished, so every planned request was sent and
    // those without success are the summary's errors.
    auto now = nlohmann::json::parse(summary.out);
    const auto completeness = now["completeness"];
    now.erase("completeness");
    const auto expected = summary_as_version_2(e2e::slurp(fixture / "summary.json"));
    EXPECT_EQ(now.dump(2) + "\n", expected);
    const auto groups = nlohmann::json::parse(expected)["groups"];
    ASSERT_EQ(completeness.size(), groups.size()) << completeness.dump();
    for (const auto& g : groups) {
        int64_t responses = 0, errors = 0;
        for (const auto& r : g["breakdown"]["per_repeat"]) {
            responses += r["responses"].get<int64_t>();
            errors += r["errors"].get<int64_t>();
        }
        const auto same = std::count_if(completeness.begin(), completeness.end(), [&](auto& c) {
            return c["server"] == g["server"] && c["framing"] == g["framing"] &&
                   c["max_tokens"] == g["max_tokens"] && c["requests"] == responses &&
                   c["without_success"] == errors && c["not_sent"] == 0 &&
                   c["never_planned"] == 0 && c["shards_not_run"] == 0 &&
                   c["missing_shards"].empty();
        });
        EXPECT_EQ(same, 1) << g["server"] << "/" << g["framing"] << "/" << g["max_tokens"] << ": "
                           << completeness.dump();
    }
    auto diff = e2e::run({"diff", "a", "b", "--db", db.string(), "--format", "json"});
    ASSERT_EQ(diff.exit_code, 0) << diff.err;
    expect(diff.out, "diff.json");
    auto report = e2e::run({"report", "--db", db.string(), "--out", (dir / "report").string()});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    expect(e2e::slurp(dir / "report/report.md"), "report.md");
    expect(e2e::slurp(dir / "report/report.html"), "report.html");
    expect(e2e::slurp(dir / "report/summary.json"), "report-summary.json");
}

// Resumes the fixtures' matrix against two fresh simulators; its stderr.
std::string resume(const std::filesystem::path& db) {
    e2e::Sim a;
    e2e::Sim b({"--profile", "deepgemm"});
    auto run = e2e::run({"run", "--server", "a=" + a.url(), "--server", "b=" + b.url(), "--limit",
                         "2", "--framing", "raw,chat", "--max-tokens", "256,1024", "--repeats", "2",
                         "--probe", "think-open", "--db", db.string()});
    EXPECT_EQ(run.exit_code, 0) << run.err << run.out;
    return run.err;
}

// The derived rows rescore writes, by request key so renumbering would show.
constexpr const char* k_derived =
    "SELECT request_key, outcome, reasoning_started, stop_cause FROM v_responses "
    "ORDER BY request_key";
constexpr const char* k_scores =
    "SELECT q.request_key, s.scorer, s.scorer_version, s.score_text, s.extracted, s.valid, "
    "s.correct FROM scores s JOIN requests q ON q.response_id = s.response_id "
    "ORDER BY q.request_key, s.scorer, s.score_text";

} // namespace

TEST(Migrate, VersionEightDatabaseKeepsEverythingUsersSee) {
    auto dir = e2e::scratch("migrate_v8");
    auto db = version_eight_database(dir);
    ASSERT_EQ(query(db, "PRAGMA user_version"), "8");
    const auto bodies_before =
        query_rows(db, "SELECT request_key, request_json, response_json FROM v_responses ORDER BY "
                       "request_key");
    const auto requests_before = query_rows(
        db, "SELECT request_key, request_json, response_id FROM requests ORDER BY request_key");
    const auto probes_before = query_rows(db, "SELECT * FROM v_probes ORDER BY 1, 2, 3, 4, 5");
    const auto probe_requests_before =
        query_rows(db, "SELECT request_key, request_json, response_id FROM probe_requests ORDER BY "
                       "request_key");
    const auto derived_before = query_rows(db, k_derived);
    const auto scores_before = query_rows(db, k_scores);
    ASSERT_EQ(requests_before.size(), 32u);
    ASSERT_EQ(scores_before.size(), 96u);
    const auto size_before = std::filesystem::file_size(db);

    // Rescoring migrates the file in place and scores it again, to the same
    // classifications and scores the version 8 diffeval stored.
    auto rescore = e2e::run({"rescore", "--db", db.string()});
    ASSERT_EQ(rescore.exit_code, 0) << rescore.err;
    EXPECT_NE(rescore.out.find("rescored 32 responses (96 scores"), std::string::npos)
        << rescore.out;
    EXPECT_EQ(query(db, "PRAGMA user_version"), k_current_version);
    EXPECT_EQ(query(db, "SELECT count(*) FROM scorers"), "0");
    // 8 distinct bodies among 32 requests, 6 among 24 probe requests.
    EXPECT_EQ(query(db, "SELECT count(*) FROM request_bodies"), "14");
    EXPECT_EQ(query(db, "SELECT count(*) FROM pragma_table_info('requests') WHERE name = "
                        "'request_json'"),
              "0");
    EXPECT_EQ(query(db, "SELECT count(*) FROM pragma_table_info('probe_requests') WHERE name = "
                        "'request_json'"),
              "0");
    EXPECT_EQ(query_rows(db, "SELECT request_key, request_json, response_id FROM "
                             "v_probe_requests ORDER BY request_key"),
              probe_requests_before);
    EXPECT_EQ(query_rows(db, "SELECT request_key, request_json, response_json FROM v_responses "
                             "ORDER BY request_key"),
              bodies_before);
    EXPECT_EQ(query_rows(db, "SELECT request_key, request_json, response_id FROM v_requests "
                             "ORDER BY request_key"),
              requests_before);
    EXPECT_EQ(query_rows(db, "SELECT * FROM v_probes ORDER BY 1, 2, 3, 4, 5"), probes_before);
    EXPECT_EQ(query_rows(db, k_derived), derived_before);
    EXPECT_EQ(query_rows(db, k_scores), scores_before);
    EXPECT_LT(std::filesystem::file_size(db), size_before);

    // The summary, the comparison and the report are what the version that
    // wrote the file printed.
    // Its tail lists one baseline whose latency falls with its token count.
    expect_fixture_outputs(k_fixture, db, dir);

    // Resuming the same matrix plans the same requests (their keys hash the
    // bodies) and sends exactly the 6 that failed, 2 of them probes.
    const auto err = resume(db);
    EXPECT_NE(err.find("56 requests planned, 50 already stored (skipped), 6 sent"),
              std::string::npos)
        << err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), "32");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probes"), "16");
    EXPECT_EQ(query(db, "SELECT count(*) FROM requests"), "32");
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests"), "24");
    EXPECT_EQ(query(db, "SELECT count(*) FROM request_bodies"), "14");
    EXPECT_EQ(query_rows(db, "SELECT request_key, request_json FROM v_requests ORDER BY "
                             "request_key"),
              query_rows(db, "SELECT request_key, request_json FROM v_responses ORDER BY "
                             "request_key"));
}

namespace {

const std::filesystem::path k_fixture_v10 = k_fixtures / "schema_v10";

// What users read of the bodies, by request key.
constexpr const char* k_bodies =
    "SELECT q.request_key, q.body_sha256, q.request_json, r.response_json FROM v_requests q "
    "LEFT JOIN v_responses r USING (request_key) ORDER BY q.request_key";
constexpr const char* k_probe_bodies =
    "SELECT q.request_key, q.body_sha256, q.request_json, r.response_json, r.top_json FROM "
    "v_probe_requests q LEFT JOIN v_probe_responses r ON r.response_id = q.response_id ORDER BY "
    "q.request_key";

// What users read of a fixture: bodies (by `probe_bodies_sql` for probes:
// version 10 has no v_probe_responses), probe readings, classifications and
// scores; and how many measured and probe requests have no success.
struct UsersSee {
    std::vector<std::string> bodies, probe_bodies, probes, derived, scores;
    int unanswered = 0;

    static UsersSee in(const std::filesystem::path& db, const std::string& probe_bodies_sql) {
        UsersSee s;
        s.bodies = query_rows(db, k_bodies);
        s.probe_bodies = query_rows(db, probe_bodies_sql);
        s.probes = query_rows(db, "SELECT * FROM v_probes ORDER BY 1, 2, 3, 4, 5");
        s.derived = query_rows(db, k_derived);
        s.scores = query_rows(db, k_scores);
        s.unanswered = std::stoi(query(db, "SELECT count(*) FROM v_responses WHERE ok = 0")) +
                       std::stoi(query(db, "SELECT count(*) FROM probe_requests q LEFT JOIN "
                                           "probe_responses r ON r.response_id = q.response_id "
                                           "WHERE r.ok IS NOT 1"));
        return s;
    }
};

// Every part of `now` equals `before`'s.
void expect_same(const UsersSee& now, const UsersSee& before) {
    EXPECT_EQ(now.bodies, before.bodies);
    EXPECT_EQ(now.probe_bodies, before.probe_bodies);
    EXPECT_EQ(now.probes, before.probes);
    EXPECT_EQ(now.derived, before.derived);
    EXPECT_EQ(now.scores, before.scores);
}

} // namespace

TEST(Migrate, VersionTenDatabaseKeepsEverythingUsersSee) {
    auto dir = e2e::scratch("migrate_v10");
    auto db = dir / "v10.sqlite";
    e2e::exec(db, e2e::slurp(k_fixture_v10 / "v10.sql"));
    ASSERT_EQ(query(db, "PRAGMA user_version"), "10");
    // Version 10 had no v_probe_responses: its table held the bodies whole.
    const auto before = UsersSee::in(
        db, "SELECT q.request_key, q.body_sha256, q.request_json, r.response_json, r.top_json FROM "
            "v_probe_requests q LEFT JOIN probe_responses r ON r.response_id = q.response_id "
            "ORDER BY q.request_key");
    ASSERT_EQ(before.bodies.size(), 32u);
    ASSERT_EQ(before.probe_bodies.size(), 24u);
    ASSERT_EQ(before.scores.size(), 96u);
    const auto failed = query(db, "SELECT count(*) FROM v_responses WHERE ok = 0");

    auto rescore = e2e::run({"rescore", "--db", db.string()});
    ASSERT_EQ(rescore.exit_code, 0) << rescore.err;
    EXPECT_EQ(query(db, "PRAGMA user_version"), k_current_version);
    EXPECT_EQ(query(db, "SELECT count(*) FROM pragma_table_list WHERE name = 'scores' AND wr = 1"),
              "1");
    EXPECT_EQ(query(db, "SELECT count(*) FROM pragma_table_info('requests') WHERE name = "
                        "'body_sha256'"),
              "0");
    // Stored rows keep their whole bodies.
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses WHERE spliced = 1"), "0");
    expect_same(UsersSee::in(db, k_probe_bodies), before);
    expect_fixture_outputs(k_fixture_v10, db, dir);

    // The resumed run sends exactly what failed, and stores it spliced.
    const auto err = resume(db);
    const auto sent = before.unanswered;
    EXPECT_NE(err.find(fmt::format("56 requests planned, {} already stored (skipped), {} sent",
                                   56 - sent, sent)),
              std::string::npos)
        << err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), "32");
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses WHERE spliced = 1"), failed);
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1 AND "
                        "coalesce(json_extract(response_json, '$.choices[0].text'), "
                        "json_extract(response_json, '$.choices[0].message.content')) = text"),
              "32");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probe_responses WHERE ok = 1 AND "
                        "json_valid(response_json) AND instr(response_json, '$diffeval') = 0"),
              "24");
}

namespace {

const std::filesystem::path k_fixture_v11 = k_fixtures / "schema_v11";

// Bodies (measured and probe) whose bytes do not hash to their body_sha256,
// the hash of the whole body taken when it was planned: a prefix and rest
// put together wrongly would show here.
std::vector<std::string> misassembled_bodies(const std::filesystem::path& db) {
    std::vector<std::string> bad;
    for (const char* view : {"v_requests", "v_probe_requests"}) {
        // Key and hash are hex: the body is what follows their two bars.
        for (const auto& row : query_rows(
                 db, fmt::format("SELECT request_key, body_sha256, request_json FROM {}", view))) {
            const size_t key_end = row.find('|');
            const size_t sha_end = row.find('|', key_end + 1);
            const std::string sha = row.substr(key_end + 1, sha_end - key_end - 1);
            if (diffeval::util::sha256_hex(row.substr(sha_end + 1)) != sha) {
                bad.push_back(row.substr(0, key_end));
            }
        }
    }
    return bad;
}

} // namespace

// A user's trigger on a view whose body reads a column a step removed
// (version 11 drops requests.body_sha256): made again, it would fail when it
// fires and make every later ALTER TABLE on the file fail. The migration
// refuses it by name and leaves the file as it was; without it, it goes on.
TEST(Migrate, ATriggerOnAViewThatReadsARemovedColumnStopsTheMigration) {
    auto dir = e2e::scratch("migrate_stale_trigger");
    auto db = dir / "v10.sqlite";
    e2e::exec(db, e2e::slurp(k_fixture_v10 / "v10.sql"));
    e2e::exec(db, "CREATE TABLE my_log (what, n); CREATE TRIGGER stale INSTEAD OF DELETE ON "
                  "v_requests BEGIN INSERT INTO my_log SELECT body_sha256, 0 FROM requests WHERE "
                  "request_id = old.request_id; END;");
    auto refused = e2e::run({"rescore", "--db", db.string()});
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
    EXPECT_NE(refused.err.find("cannot migrate " + db.string() + " to schema version " +
                               std::string(k_current_version) + ": error in trigger stale: "),
              std::string::npos)
        << refused.err;
    EXPECT_NE(refused.err.find("a view or trigger of your own reads what the migration changes; "
                               "drop it, run again"),
              std::string::npos)
        << refused.err;
    EXPECT_NE(refused.err.find("body_sha256"), std::string::npos) << refused.err;
    EXPECT_EQ(query(db, "PRAGMA user_version"), "10");
    EXPECT_EQ(query(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'stale'"), "1");
    EXPECT_EQ(query(db, "PRAGMA integrity_check"), "ok");
    e2e::exec(db, "DROP TRIGGER stale");
    auto migrated = e2e::run({"rescore", "--db", db.string()});
    EXPECT_EQ(migrated.exit_code, 0) << migrated.err;
    EXPECT_EQ(query(db, "PRAGMA user_version"), k_current_version);
    // Every later ALTER TABLE still works on the file.
    e2e::exec(db, "ALTER TABLE my_log RENAME TO my_log_2");
}

// A user's view that reads v_scores, which version 11 drops while it drops a
// column (SQLite then reads every view): the step cannot go on. The file is
// left as it was, and the line says what to do, as a data error.
TEST(Migrate, AUserViewThatStopsAStepIsNamedWithWhatToDo) {
    auto dir = e2e::scratch("migrate_user_view");
    auto db = dir / "v10.sqlite";
    e2e::exec(db, e2e::slurp(k_fixture_v10 / "v10.sql"));
    e2e::exec(db, "CREATE VIEW my_scores AS SELECT count(*) AS n FROM v_scores");
    auto refused = e2e::run({"rescore", "--db", db.string()});
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
    EXPECT_NE(refused.err.find("error in view my_scores"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("a view or trigger of your own reads what the migration changes; "
                               "drop it, run again, then make it again"),
              std::string::npos)
        << refused.err;
    EXPECT_EQ(query(db, "PRAGMA user_version"), "10");
    EXPECT_EQ(query(db, "SELECT n FROM my_scores"), "96");
}

TEST(Migrate, VersionElevenDatabaseKeepsEverythingUsersSee) {
    auto dir = e2e::scratch("migrate_v11");
    auto db = dir / "v11.sqlite";
    e2e::exec(db, e2e::slurp(k_fixture_v11 / "v11.sql"));
    ASSERT_EQ(query(db, "PRAGMA user_version"), "11");
    // A user's own view, index and triggers, which name the request tables
    // version 16 copies and the views that read them.
    e2e::exec(db, "CREATE VIEW \"my \"\"view\"\"\" AS SELECT count(*) AS n FROM requests; "
                  "CREATE INDEX my_index ON requests (dataset); "
                  "CREATE TABLE my_log (what TEXT, n INTEGER); "
                  "CREATE TRIGGER my_trigger AFTER UPDATE ON probe_requests BEGIN INSERT INTO "
                  "my_log SELECT 'probe', count(*) FROM requests; END; "
                  "CREATE TRIGGER my_answers AFTER INSERT ON responses BEGIN INSERT INTO my_log "
                  "SELECT 'answer', count(*) FROM v_requests; END; "
                  "CREATE TRIGGER my_requests AFTER UPDATE ON requests BEGIN INSERT INTO my_log "
                  "SELECT 'request', count(*) FROM probe_requests; END; "
                  "CREATE TRIGGER my_instead INSTEAD OF DELETE ON v_scores BEGIN INSERT INTO "
                  "my_log VALUES ('instead', 0); END; "
                  // On views that versions 12 and 14-15 make again.
                  "CREATE TRIGGER my_instead_answers INSTEAD OF DELETE ON v_responses BEGIN "
                  "INSERT INTO my_log VALUES ('deleted', old.request_id); END; "
                  "CREATE TRIGGER my_instead_probes INSTEAD OF UPDATE ON v_probes BEGIN "
                  "INSERT INTO my_log VALUES ('probe', 0); END;");
    const auto before = UsersSee::in(db, k_probe_bodies);
    ASSERT_EQ(before.bodies.size(), 32u);
    ASSERT_EQ(before.probe_bodies.size(), 24u);
    ASSERT_EQ(before.scores.size(), 96u);

    auto rescore = e2e::run({"rescore", "--db", db.string()});
    ASSERT_EQ(rescore.exit_code, 0) << rescore.err;
    EXPECT_EQ(query(db, "PRAGMA user_version"), k_current_version);
    // Stored bodies stay whole, and read as before.
    EXPECT_EQ(query(db, "SELECT count(*) FROM body_prefixes"), "0");
    EXPECT_EQ(query(db, "SELECT count(*) FROM request_bodies WHERE prefix_id IS NULL"), "14");
    expect_same(UsersSee::in(db, k_probe_bodies), before);
    // Version 16 copied both request tables: the key has no index of its
    // own, the group index (in plan order) ends with it and keeps it unique,
    // and every row, id and reference is as it was.
    for (const char* table : {"requests", "probe_requests"}) {
        EXPECT_EQ(query(db, fmt::format("SELECT group_concat(i.name || ':' || c.name, ' ') FROM "
                                        "pragma_index_list('{}') i, pragma_index_info(i.name) c "
                                        "WHERE i.\"unique\" = 1 AND c.name = 'request_key'",
                                        table)),
                  std::string(table) + "_group:request_key");
    }
    EXPECT_EQ(query(db, "PRAGMA integrity_check"), "ok");
    EXPECT_EQ(query_rows(db, "PRAGMA foreign_key_check"), std::vector<std::string>{});
    EXPECT_EQ(query(db, "SELECT count(*) FROM requests"), "32");
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests"), "24");
    EXPECT_EQ(query(db, "SELECT n FROM \"my \"\"view\"\"\""), "32");
    EXPECT_EQ(
        query_rows(db, "SELECT name FROM sqlite_schema WHERE name LIKE 'my_%' AND type "
                       "IN ('index', 'trigger') ORDER BY name"),
        (std::vector<std::string>{"my_answers", "my_index", "my_instead", "my_instead_answers",
                                  "my_instead_probes", "my_requests", "my_trigger"}));
    expect_fixture_outputs(k_fixture_v11, db, dir);

    // The resumed run plans the same requests (their keys hash the whole
    // bodies) and sends exactly what failed.
    const auto err = resume(db);
    const auto sent = before.unanswered;
    EXPECT_NE(err.find(fmt::format("56 requests planned, {} already stored (skipped), {} sent",
                                   56 - sent, sent)),
              std::string::npos)
        << err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), "32");
    EXPECT_EQ(query(db, "SELECT count(*) FROM requests"), "32");
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests"), "24");
    EXPECT_EQ(query(db, "SELECT count(*) FROM request_bodies"), "14");
    // The user's triggers still fire, reading the copied tables.
    EXPECT_EQ(query(db, "SELECT count(*) FROM my_log WHERE what = 'answer' AND n = 32"),
              "4"); // the 4 measured requests the injected 500s failed (README.md)
    // Those on views the migration made again were made again with them.
    e2e::exec(db, "DELETE FROM v_responses WHERE ok = 1");
    EXPECT_EQ(query(db, "SELECT count(*) FROM my_log WHERE what = 'deleted'"), "32");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), "32");
    // Its bodies were stored whole before: no prefix is stored for them.
    EXPECT_EQ(query(db, "SELECT count(*) FROM body_prefixes"), "0");

    // A new token limit is new bodies: stored after their framing's prefix,
    // one per framing, each body's bytes those it was hashed from.
    e2e::Sim a;
    auto more = e2e::run({"run", "--server", "a=" + a.url(), "--limit", "2", "--framing",
                          "raw,chat", "--max-tokens", "512", "--db", db.string()});
    ASSERT_EQ(more.exit_code, 0) << more.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM body_prefixes"), "2");
    EXPECT_EQ(query(db, "SELECT count(*) FROM request_bodies WHERE prefix_id IS NOT NULL"), "4");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_requests WHERE max_tokens = 512 AND "
                        "json_extract(request_json, '$.max_tokens') = 512"),
              "4");
    EXPECT_EQ(misassembled_bodies(db), std::vector<std::string>{});
    // The prefix is most of a body: the rest stored is a fraction of it.
    EXPECT_EQ(query(db, "SELECT count(*) FROM request_bodies b JOIN body_prefixes p USING "
                        "(prefix_id) WHERE length(b.request_json) * 2 < length(p.text)"),
              "4");
}

// Version 16 changed indexes alone, so a command that only reads takes a
// version 15 file as it is: a baseline kept read-only (a CI artifact) and
// merge's inputs, which merge never writes, are read after an upgrade
// without a `rescore` first. What it reads is what the migrated file gives.
TEST(Migrate, VersionFifteenFileIsReadAsItIsAndMergedAsAnInput) {
    auto dir = e2e::scratch("migrate_v15");
    const auto v15 = dir / "v15.sqlite";
    e2e::exec(v15, e2e::slurp(k_fixtures / "schema_v15" / "v15.sql"));
    ASSERT_EQ(query(v15, "PRAGMA user_version"), "15");
    const auto migrated = dir / "migrated.sqlite";
    std::filesystem::copy_file(v15, migrated);

    auto summary = e2e::run({"summary", "--db", v15.string(), "--format", "json"});
    ASSERT_EQ(summary.exit_code, 0) << summary.err;
    auto diff = e2e::run({"diff", "a", "b", "--db", v15.string(), "--format", "json"});
    ASSERT_EQ(diff.exit_code, 0) << diff.err;
    EXPECT_EQ(query(v15, "PRAGMA user_version"), "15") << "a reading command wrote the file";

    auto rescore = e2e::run({"rescore", "--db", migrated.string()});
    ASSERT_EQ(rescore.exit_code, 0) << rescore.err;
    EXPECT_EQ(query(migrated, "PRAGMA user_version"), k_current_version);
    auto summary16 = e2e::run({"summary", "--db", migrated.string(), "--format", "json"});
    auto diff16 = e2e::run({"diff", "a", "b", "--db", migrated.string(), "--format", "json"});
    EXPECT_EQ(summary16.out, summary.out);
    EXPECT_EQ(diff16.out, diff.out);

    // merge reads it as an input and writes the current schema.
    const auto merged = dir / "merged.sqlite";
    auto merge = e2e::run({"merge", merged.string(), v15.string()});
    ASSERT_EQ(merge.exit_code, 0) << merge.err << merge.out;
    EXPECT_EQ(query(merged, "PRAGMA user_version"), k_current_version);
    EXPECT_EQ(query(merged, "SELECT count(*) FROM requests"), "32");
    EXPECT_EQ(query(merged, "SELECT count(*) FROM probe_responses"), "24");
    auto diff_merged = e2e::run({"diff", "a", "b", "--db", merged.string(), "--format", "json"});
    EXPECT_EQ(diff_merged.out, diff.out);
    EXPECT_EQ(query(v15, "PRAGMA user_version"), "15");
}

// A migration from before schema 9 ends with a VACUUM, which shrinks the
// database through its log: until a checkpoint copies it, the log leaves
// the database smaller than the file. `report` migrated, then opened the
// file again while its first connection held that log, and refused its own
// log as another database's, every time (a regression check of the -wal
// test, store/wal_fit.cpp). The log is the file's own: it is read.
TEST(Migrate, AVacuumedMigrationsOwnLogIsRead) {
    auto dir = e2e::scratch("migrate_v8_vacuum_log");
    auto db = dir / "v8.sqlite";
    e2e::exec(db, e2e::slurp(k_fixture / "v8.sql"));
    auto report = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string()});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    EXPECT_TRUE(std::filesystem::exists(dir / "out" / "report.html"));
    EXPECT_EQ(query(db, "PRAGMA user_version"), k_current_version);
}
