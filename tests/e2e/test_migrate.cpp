// A database written by schema version 8 (every request and probe request
// row holds its whole body) is migrated in place to the current version (9:
// each distinct body once, in request_bodies; 10: an empty table of users'
// scorers; 11: spliced bodies) and nothing a user sees changes: the bodies in the
// views, what rescore computes, the summary, the comparison and the report,
// and what a resumed run plans and sends.
#include "e2e.hpp"

#include <gtest/gtest.h>

#include <filesystem>

using e2e::query;
using e2e::query_rows;

namespace {

const std::filesystem::path k_fixture =
    std::filesystem::path(DIFFEVAL_SOURCE_DIR) / "tests/e2e/fixtures/schema_v8";

// A fresh copy of the version 8 fixture database in `dir`.
std::filesystem::path version_eight_database(const std::filesystem::path& dir) {
    auto db = dir / "v8.sqlite";
    e2e::exec(db, e2e::slurp(k_fixture / "v8.sql"));
    return db;
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
    EXPECT_EQ(query(db, "PRAGMA user_version"), "11");
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
    auto summary = e2e::run({"summary", "--db", db.string(), "--format", "json"});
    ASSERT_EQ(summary.exit_code, 0) << summary.err;
    EXPECT_EQ(summary.out, e2e::slurp(k_fixture / "summary.json"));
    auto diff = e2e::run({"diff", "a", "b", "--db", db.string(), "--format", "json"});
    ASSERT_EQ(diff.exit_code, 0) << diff.err;
    EXPECT_EQ(diff.out, e2e::slurp(k_fixture / "diff.json"));
    auto report = e2e::run({"report", "--db", db.string(), "--out", (dir / "report").string()});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    EXPECT_EQ(e2e::slurp(dir / "report/report.md"), e2e::slurp(k_fixture / "report.md"));
    EXPECT_EQ(e2e::slurp(dir / "report/report.html"), e2e::slurp(k_fixture / "report.html"));
    EXPECT_EQ(e2e::slurp(dir / "report/summary.json"),
              e2e::slurp(k_fixture / "report-summary.json"));

    // Resuming the same matrix plans the same requests (their keys hash the
    // bodies) and sends exactly the 6 that failed, 2 of them probes.
    e2e::Sim a;
    e2e::Sim b({"--profile", "deepgemm"});
    auto run = e2e::run({"run", "--server", "a=" + a.url(), "--server", "b=" + b.url(), "--limit",
                         "2", "--framing", "raw,chat", "--max-tokens", "256,1024", "--repeats", "2",
                         "--probe", "think-open", "--db", db.string()});
    ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
    EXPECT_NE(run.err.find("56 requests planned, 50 already stored (skipped), 6 sent"),
              std::string::npos)
        << run.err;
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
