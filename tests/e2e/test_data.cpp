// `diffeval data fetch gsm8k` downloads into the cache and verifies sha256;
// `--data-url-base` points it at a loopback server here. A file that does not
// match is refused and never replaces anything; a missing dataset gives one
// line saying how to fetch it.
#include "e2e.hpp"

#include <gtest/gtest.h>
#include <httplib.h>

#include <condition_variable>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

namespace {

// Serves `files` (name -> content) on a free loopback port. With `together`
// above 1, each file's first `together` requests are answered at once, when
// the last of them has come (or after 10 s).
class FileServer {
public:
    explicit FileServer(std::map<std::string, std::string> files, int together = 1)
        : m_files(std::move(files)), m_together(together) {
        m_server.Get(R"(/data/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
            auto it = m_files.find(req.matches[1]);
            if (it == m_files.end()) {
                res.status = 404;
                return;
            }
            {
                std::unique_lock lock(m_mutex);
                const int mine = ++m_asked[it->first];
                m_came.notify_all();
                if (mine <= m_together) {
                    m_came.wait_for(lock, std::chrono::seconds(10),
                                    [&] { return m_asked[it->first] >= m_together; });
                }
            }
            res.set_content(it->second, "application/octet-stream");
        });
        // A mirror that moved: every file answers 301 to where it went.
        m_server.Get(R"(/moved/(.+))", [](const httplib::Request& req, httplib::Response& res) {
            res.status = 301;
            res.set_header("Location", "/data/" + req.matches[1].str());
        });
        m_port = m_server.bind_to_any_port("127.0.0.1");
        // Bound already: connections wait in the backlog until it accepts.
        m_thread = std::thread([this] { m_server.listen_after_bind(); });
    }
    ~FileServer() {
        m_server.stop();
        m_thread.join();
    }
    std::string base() const { return "http://127.0.0.1:" + std::to_string(m_port) + "/data"; }
    int port() const { return m_port; }

private:
    std::map<std::string, std::string> m_files;
    int m_together;
    std::mutex m_mutex;
    std::condition_variable m_came;
    std::map<std::string, int> m_asked;
    httplib::Server m_server;
    std::thread m_thread;
    int m_port = 0;
};

} // namespace

TEST(DataFetch, TamperedFileIsRefusedAndTheCacheStaysEmpty) {
    auto dir = e2e::scratch("fetch_bad");
    FileServer server({{"test.jsonl", "{\"question\": \"q\", \"answer\": \"#### 1\"}\n"},
                       {"train.jsonl", "{\"question\": \"q\", \"answer\": \"#### 1\"}\n"}});
    auto o = e2e::run({"data", "fetch", "gsm8k", "--data-url-base", server.base()},
                      {"DIFFEVAL_DATA=" + dir.string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("expected 3730d312"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("not the official GSM8K file"), std::string::npos) << o.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "gsm8k" / "test.jsonl"));
    // Nor an empty directory of the fetch's making (docs audit).
    EXPECT_FALSE(std::filesystem::exists(dir / "gsm8k"));
    // A DIFFEVAL_DATA that cannot hold the cache is the user's to change.
    auto not_a_dir = e2e::run({"data", "fetch", "gsm8k", "--data-url-base", server.base()},
                              {"DIFFEVAL_DATA=/dev/null"});
    EXPECT_EQ(not_a_dir.exit_code, 2) << not_a_dir.err;
    EXPECT_NE(not_a_dir.err.find("cannot create /dev/null/gsm8k: Not a directory; set "
                                 "DIFFEVAL_DATA to a writable directory"),
              std::string::npos)
        << not_a_dir.err;
    // So is a directory where a file goes: said before any download (it was
    // the download's exit 1, after it, with no next step).
    std::filesystem::create_directories(dir / "gsm8k" / "train.jsonl");
    auto in_the_way = e2e::run({"data", "fetch", "gsm8k", "--data-url-base", server.base()},
                               {"DIFFEVAL_DATA=" + dir.string()});
    EXPECT_EQ(in_the_way.exit_code, 2) << in_the_way.err;
    EXPECT_NE(in_the_way.err.find((dir / "gsm8k" / "train.jsonl").string() +
                                  " is a directory, where data fetch writes the file train.jsonl; "
                                  "remove it"),
              std::string::npos)
        << in_the_way.err;
    EXPECT_EQ(std::count(in_the_way.err.begin(), in_the_way.err.end(), '\n'), 1);
    std::filesystem::remove(dir / "gsm8k" / "train.jsonl");
    auto missing = e2e::run({"run", "--server", "a=http://127.0.0.1:9", "--dataset", "gsm8k"},
                            {"DIFFEVAL_DATA=" + dir.string()});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_NE(missing.err.find("run 'diffeval data fetch gsm8k'"), std::string::npos)
        << missing.err;
}

// A base URL no download can use is the flag's mistake (exit 2, before the
// network); a password in it is never printed.
TEST(DataFetch, ABaseUrlNoDownloadCanUseIsAUsageError) {
    auto dir = e2e::scratch("fetch_url");
    for (const std::string url : {"ftp://x/y", "http://[::1", "gsm8k.example"}) {
        auto o = e2e::run({"data", "fetch", "gsm8k", "--data-url-base", url},
                          {"DIFFEVAL_DATA=" + dir.string()});
        EXPECT_EQ(o.exit_code, 2) << url << o.err;
        EXPECT_NE(o.err.find("--data-url-base " + url), std::string::npos) << o.err;
    }
    FileServer server({});
    auto base = server.base();
    base.insert(base.find("//") + 2, "user:hunter2@");
    auto o = e2e::run({"data", "fetch", "gsm8k", "--data-url-base", base},
                      {"DIFFEVAL_DATA=" + dir.string()});
    EXPECT_NE(o.exit_code, 0);
    EXPECT_EQ(o.err.find("hunter2"), std::string::npos) << o.err;
    EXPECT_EQ(o.out.find("hunter2"), std::string::npos) << o.out;
}

TEST(DataFetch, OfficialFilesAreDownloadedVerifiedAndUsable) {
    const char* gsm = std::getenv("GSM8K_DIR");
    if (!gsm || !*gsm) {
        GTEST_SKIP() << "GSM8K_DIR not set: the official files' download is not checked";
    }
    auto dir = e2e::scratch("fetch_ok");
    FileServer server({{"test.jsonl", e2e::slurp(std::filesystem::path(gsm) / "test.jsonl")},
                       {"train.jsonl", e2e::slurp(std::filesystem::path(gsm) / "train.jsonl")}});
    std::vector<std::string> env = {"DIFFEVAL_DATA=" + dir.string()};
    auto o = e2e::run({"data", "fetch", "gsm8k", "--data-url-base", server.base()}, env);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("test.jsonl: downloaded and verified"), std::string::npos) << o.out;
    auto again = e2e::run({"data", "fetch", "gsm8k", "--data-url-base", server.base()}, env);
    EXPECT_NE(again.out.find("test.jsonl: already present and verified"), std::string::npos)
        << again.out;
    // The cached set is what `--dataset gsm8k` reads: 1,319 questions.
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    auto run = e2e::run({"run", "--server", "a=" + sim.url(), "--dataset", "gsm8k", "--framing",
                         "raw", "--limit", "2", "--db", db.string(), "--quiet"},
                        env);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(e2e::query(db, "SELECT count(*) FROM questions WHERE dataset = 'gsm8k'"), "1319");
}

// Two fetches into one cache at once (two CI jobs sharing a runner's cache),
// their downloads answered together: each puts a whole, verified file in
// place. With one ".part" name for both, one renamed the file the other was
// still writing and the other failed ("cannot write ...").
TEST(DataFetch, TwoFetchesIntoOneCacheAtOnceBothSucceed) {
    const char* gsm = std::getenv("GSM8K_DIR");
    if (!gsm || !*gsm) {
        GTEST_SKIP() << "GSM8K_DIR not set: the official files' download is not checked";
    }
    const auto test = e2e::slurp(std::filesystem::path(gsm) / "test.jsonl");
    const auto train = e2e::slurp(std::filesystem::path(gsm) / "train.jsonl");
    for (int round = 0; round < 3; ++round) {
        auto dir = e2e::scratch("fetch_twice_" + std::to_string(round));
        FileServer server({{"test.jsonl", test}, {"train.jsonl", train}}, 2);
        const std::vector<std::string> args = {"data", "fetch", "gsm8k", "--data-url-base",
                                               server.base()};
        const std::vector<std::string> env = {"DIFFEVAL_DATA=" + dir.string()};
        std::vector<std::unique_ptr<e2e::Child>> fetches;
        fetches.push_back(std::make_unique<e2e::Child>(args, env));
        fetches.push_back(std::make_unique<e2e::Child>(args, env));
        for (auto& f : fetches) {
            EXPECT_EQ(f->wait(), 0) << "round " << round << ": " << f->err();
        }
        EXPECT_EQ(e2e::slurp(dir / "gsm8k" / "test.jsonl"), test) << "round " << round;
        EXPECT_EQ(e2e::slurp(dir / "gsm8k" / "train.jsonl"), train) << "round " << round;
        // Nothing of either download is left beside the files.
        size_t entries = 0;
        for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir / "gsm8k")) {
            ++entries;
        }
        EXPECT_EQ(entries, 2U) << "round " << round;
    }
}

// Interop audit #10: a redirect was "HTTP 301" with no word of why, and a
// body past the download's bound named run's --max-response-bytes, a flag
// data fetch does not take.
TEST(DataFetch, ARedirectAndAnEndlessFileSayWhatToDo) {
    auto dir = e2e::scratch("fetch_moved");
    FileServer server({{"test.jsonl", std::string((size_t{33} << 20), 'x')}});
    auto moved = e2e::run({"data", "fetch", "gsm8k", "--data-url-base",
                           "http://127.0.0.1:" + std::to_string(server.port()) + "/moved"},
                          {"DIFFEVAL_DATA=" + dir.string()});
    EXPECT_EQ(moved.exit_code, 1) << moved.err;
    EXPECT_NE(moved.err.find("HTTP 301 (a redirect, which data fetch does not follow: give the "
                             "address it leads to as --data-url-base)"),
              std::string::npos)
        << moved.err;
    auto big = e2e::run({"data", "fetch", "gsm8k", "--data-url-base", server.base()},
                        {"DIFFEVAL_DATA=" + dir.string()});
    EXPECT_EQ(big.exit_code, 1) << big.err;
    EXPECT_NE(big.err.find("far more than GSM8K's files; check --data-url-base"), std::string::npos)
        << big.err;
    EXPECT_EQ(big.err.find("--max-response-bytes"), std::string::npos) << big.err;
}
