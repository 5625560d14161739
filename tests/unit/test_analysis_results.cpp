// analysis::load_results reads one state of the database, though a run
// commits to it while a summary, diff, gate or report reads it.
#include <harness/analysis/results.hpp>
#include <harness/store/store.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

using namespace diffeval;
namespace fs = std::filesystem;

namespace {

fs::path fresh_db(const std::string& name) {
    auto p = fs::temp_directory_path() / ("diffeval_test_results_" + name + ".sqlite");
    for (const char* side : {"", "-wal", "-shm"}) {
        fs::remove(p.string() + side);
    }
    return p;
}

// `n` requests of `server` (questions 0..n-1), the first `answered` of them
// answered.
void store_rows(store::Store& s, const std::string& server, int n, int answered) {
    std::vector<store::RequestRow> requests;
    std::vector<store::ResponseRow> responses;
    for (int q = 0; q < n; ++q) {
        const auto key = fmt::format("{}-{}", server, q);
        requests.push_back(store::RequestRow{key, server, "raw", 256, 0, q, "sample",
                                             "{\"prompt\": \"x\"}", "sha"});
        if (q < answered) {
            store::ResponseRow r;
            r.key = key;
            r.ok = true;
            r.status = 200;
            r.response_json = "{}";
            r.text = "#### 3";
            r.finish_reason = "stop";
            r.attempts = 1;
            r.started_at = store::now_iso8601();
            responses.push_back(std::move(r));
        }
    }
    ASSERT_TRUE(s.put_requests(requests).ok());
    ASSERT_TRUE(s.write_batch(responses).ok());
}

} // namespace

// A run that planned and answered requests of a server new to the database
// while the load read the rows: the load took the names first and the
// planned requests last, so they and the rows of the second connection's
// half named a server it did not know (summary: "internal error:
// std::bad_alloc", or a count with a request in it twice or not at all).
TEST(LoadResults, ReadsOneStateOfAFileARunCommitsToMeanwhile) {
    const auto path = fresh_db("snapshot").string();
    auto st = store::Store::open(path, store::Store::Mode::read_write);
    ASSERT_TRUE(st.ok()) << st.error().message;
    // Enough responses for two halves on two connections.
    store_rows(**st, "a", 400, 400);

    auto reader = store::Store::open(path, store::Store::Mode::read_only);
    ASSERT_TRUE(reader.ok()) << reader.error().message;
    bool committed = false;
    const analysis::ResponseVisitor commit_once = [&](const analysis::ResultRow&,
                                                      const analysis::ResponseDetail&) {
        if (!committed) {
            committed = true;
            store_rows(**st, "z", 4, 2);
        }
        return util::Result<void>{};
    };
    const analysis::ResponseVisitor none = [](const analysis::ResultRow&,
                                              const analysis::ResponseDetail&) {
        return util::Result<void>{};
    };
    auto results = analysis::load_results(**reader, {commit_once, none});
    ASSERT_TRUE(results.ok()) << results.error().message;
    ASSERT_TRUE(committed);
    EXPECT_EQ(results->servers, std::vector<std::string>{"a"});
    EXPECT_EQ(results->rows.size(), 400u);
    for (const auto& row : results->rows) {
        ASSERT_LT(row.server, static_cast<int>(results->servers.size()));
    }

    // Read again, the file holds both.
    auto again = analysis::load_results(**reader);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(again->servers, (std::vector<std::string>{"a", "z"}));
    EXPECT_EQ(again->rows.size(), 404u);
}
