// `diffeval report`: the Markdown of a fixed database matches the golden file
// byte for byte, summary.json embeds the summary and diff documents, and
// model output full of markup cannot turn into markup in the reports.
#include "e2e.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

using nlohmann::json;

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

fs::path golden_path() {
    return fs::path(__FILE__).parent_path().parent_path() / "golden" / "report_sample.md";
}

// Two simulated servers, both framings, 2 repeats sent one at a time so
// every repeat sees the same sighting noise on every run.
void build_db(const fs::path& db, const std::vector<std::string>& b_profile) {
    e2e::Sim a({"--profile", "default"});
    e2e::Sim b(b_profile);
    auto o = e2e::run({"run",
                       "--server",
                       "default=" + a.url(),
                       "--server",
                       "deepgemm=" + b.url(),
                       "--framing",
                       "raw,chat",
                       "--max-tokens",
                       "128",
                       "--repeats",
                       "2",
                       "--dataset",
                       "sample",
                       "--limit",
                       "24",
                       "--concurrency",
                       "1",
                       "--db",
                       db.string(),
                       "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
}

} // namespace

TEST(Report, MarkdownOfAFixedDatabaseMatchesTheGoldenFile) {
    auto dir = e2e::scratch("report_golden");
    auto db = dir / "r.sqlite";
    build_db(db, {"--profile", "deepgemm"});
    auto o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("report.md"), std::string::npos) << o.out;
    auto md = slurp(dir / "out" / "report.md");
    EXPECT_EQ(md.find(dir.string()), std::string::npos) << "report.md holds a scratch path";
    if (std::getenv("DIFFEVAL_UPDATE_GOLDEN")) {
        std::ofstream(golden_path(), std::ios::binary) << md;
        GTEST_SKIP() << "rewrote " << golden_path();
    }
    auto golden = slurp(golden_path());
    ASSERT_FALSE(golden.empty()) << "missing " << golden_path()
                                 << "; run with DIFFEVAL_UPDATE_GOLDEN=1 to create it";
    EXPECT_EQ(md, golden) << "report.md changed; if intended, rerun with DIFFEVAL_UPDATE_GOLDEN=1";
}

TEST(Report, JsonEmbedsTheSummaryAndEveryComparisonAgainstTheBaseline) {
    auto dir = e2e::scratch("report_json");
    auto db = dir / "r.sqlite";
    build_db(db, {"--profile", "deepgemm"});
    auto o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string(), "--baseline",
                       "deepgemm", "--format", "json"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_FALSE(fs::exists(dir / "out" / "report.md"));
    auto j = json::parse(slurp(dir / "out" / "summary.json"));
    EXPECT_EQ(j["schema"], "diffeval.report/1");
    EXPECT_EQ(j["baseline"], "deepgemm");
    EXPECT_EQ(j["summary"]["schema"], "diffeval.summary/1");
    EXPECT_EQ(j["summary"]["groups"].size(), 4u);
    EXPECT_EQ(j["diff"]["schema"], "diffeval.diff/1");
    // vllm on raw and chat, then lm-eval-strict on chat.
    ASSERT_EQ(j["diff"]["comparisons"].size(), 3u);
    for (const auto& c : j["diff"]["comparisons"]) {
        EXPECT_EQ(c["a"]["server"], "deepgemm") << c.dump();
    }

    auto bad = e2e::run(
        {"report", "--db", db.string(), "--out", (dir / "out").string(), "--baseline", "nope"});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("default, deepgemm"), std::string::npos) << bad.err;
}

TEST(Report, MarkupInModelOutputIsEscapedInTheMarkdown) {
    auto dir = e2e::scratch("report_markup");
    auto profile = dir / "markup.toml";
    std::ofstream(profile) << "version = 1\nname = \"markup\"\n[faults]\nmarkup = 0.3\n";
    auto db = dir / "r.sqlite";
    build_db(db, {"--profile", profile.string()});
    ASSERT_NE(e2e::query(db, "SELECT count(*) FROM responses WHERE text LIKE '%<%'"), "0");
    auto o = e2e::run(
        {"report", "--db", db.string(), "--out", (dir / "out").string(), "--format", "md"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto md = slurp(dir / "out" / "report.md");
    for (size_t i = md.find('<'); i != std::string::npos; i = md.find('<', i + 1)) {
        ASSERT_GT(i, 0u);
        EXPECT_EQ(md[i - 1], '\\') << "unescaped '<' in: " << md.substr(i > 40 ? i - 40 : 0, 80);
    }
}
