// `diffeval report`: the Markdown of a fixed database matches the golden file
// byte for byte, summary.json embeds the summary and diff documents, and
// model output full of markup cannot turn into markup in the reports. The
// HTML report is opened in headless Chromium (Debian's `chromium`; the test
// skips when it is missing): its explorer shows the flips between two
// servers side by side, and hostile markup in a response renders as text.
#include "e2e.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using nlohmann::json;

namespace {

namespace fs = std::filesystem;

fs::path golden_path() {
    return fs::path(__FILE__).parent_path().parent_path() / "golden" / "report_sample.md";
}

// Two simulated servers, both framings, 2 repeats sent one at a time so
// every repeat sees the same sighting noise on every run.
void build_db(const fs::path& db, const std::vector<std::string>& b_profile,
              const std::string& limit = "24") {
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
                       limit,
                       "--concurrency",
                       "1",
                       "--db",
                       db.string(),
                       "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
}

// Run headless Chromium on `url` with `args`, stdout to `out`, stderr to `err`.
int chromium(const std::string& url, const std::string& args, const fs::path& out,
             const fs::path& err) {
    auto profile = out.parent_path() / ("chromium-profile-" + out.filename().string());
    fs::create_directories(profile);
    auto cmd = "timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic "
               "--no-first-run --disable-background-networking --disable-component-update "
               "--disable-sync --enable-logging=stderr --v=0 --user-data-dir='" +
               profile.string() + "' " + args + " '" + url + "' > '" + out.string() + "' 2> '" +
               err.string() + "'";
    return std::system(cmd.c_str());
}

void set_text(const fs::path& db, const std::string& text, int question) {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(h,
                                 "UPDATE responses SET text = ? WHERE response_id = (SELECT "
                                 "response_id FROM v_responses WHERE server = 'default' AND "
                                 "question_idx = ? ORDER BY framing, repeat LIMIT 1)",
                                 -1, &s, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(h);
    sqlite3_bind_text(s, 1, text.c_str(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int(s, 2, question);
    EXPECT_EQ(sqlite3_step(s), SQLITE_DONE) << sqlite3_errmsg(h);
    EXPECT_EQ(sqlite3_changes(h), 1);
    sqlite3_finalize(s);
    sqlite3_close(h);
}

// Fix what a run cannot repeat (latencies and send times become a function of
// the response, deepgemm 20 ms slower at equal length), and record a
// fingerprint with a conflict for deepgemm.
void make_deterministic_with_conflict(const fs::path& db) {
    e2e::exec(db, "UPDATE responses SET latency_ms = 30 + 1.5 * coalesce(completion_tokens, 0) + "
                  "(SELECT q.question_idx % 7 + 20 * (q.server = 'deepgemm') FROM requests q WHERE "
                  "q.request_id = responses.request_id), started_at = (SELECT "
                  "strftime('%Y-%m-%dT%H:%M:%fZ', '2026-01-01', '+' || (q.repeat * 100 + "
                  "q.question_idx) || ' seconds') FROM requests q WHERE q.request_id = "
                  "responses.request_id)");
    e2e::exec(db, R"(UPDATE servers SET facts_json = '{"engine": "vllm", "facts": )"
                  R"({"engine_version": "0.28.0", "fp8_moe_backend": "DEEPGEMM"}, "conflicts": )"
                  R"([{"name": "backend", "message": "log selects DeepGEMM but )"
                  R"(VLLM_USE_DEEP_GEMM=0", "evidence": ["Using DeepGEMM for FP8 MoE"]}]}' )"
                  R"(WHERE name = 'deepgemm')");
    e2e::exec(db, R"(UPDATE servers SET facts_json = '{"engine": "vllm", "facts": )"
                  R"({"engine_version": "0.28.0", "fp8_moe_backend": "TRITON"}, "conflicts": []}' )"
                  R"(WHERE name = 'default')");
}

// The opening tag of <body> in a serialised DOM.
std::string body_tag(const std::string& dom) {
    auto at = dom.find("<body");
    return at == std::string::npos ? "" : dom.substr(at, dom.find('>', at) - at + 1);
}

} // namespace

TEST(Report, MarkdownOfAFixedDatabaseMatchesTheGoldenFile) {
    auto dir = e2e::scratch("report_golden");
    auto db = dir / "r.sqlite";
    build_db(db, {"--profile", "deepgemm"});
    make_deterministic_with_conflict(db);
    auto o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("report.md"), std::string::npos) << o.out;
    auto md = e2e::slurp(dir / "out" / "report.md");
    // What actually ran: the differing backend is marked and the conflict stands out.
    EXPECT_NE(md.find("| fp8\\_moe\\_backend | TRITON | DEEPGEMM | yes |"), std::string::npos)
        << md;
    EXPECT_NE(md.find("**CONFLICT** on deepgemm: log selects DeepGEMM but VLLM\\_USE"),
              std::string::npos)
        << md;
    auto html = e2e::slurp(dir / "out" / "report.html");
    EXPECT_NE(html.find("<tr class=\"differs\" title=\"differs between servers\"><td>"
                        "fp8_moe_backend</td><td>TRITON</td><td>DEEPGEMM</td>"),
              std::string::npos);
    EXPECT_NE(html.find("<div class=\"conflict\"><strong>CONFLICT</strong> on deepgemm"),
              std::string::npos);
    EXPECT_NE(html.find(".conflict { color: var(--bad)"), std::string::npos);
    EXPECT_NE(md.find("## Latency and tokens"), std::string::npos);
    // Both servers are the simulator, whose /version says so: the report
    // says no model ran, at the top and in the facts (a demo report showed
    // vLLM 0.28.0 and an FP8 model without a word of it).
    const std::string simulated =
        "Every server here (default, deepgemm) is diffeval's simulator, not an inference "
        "engine: no model ran";
    EXPECT_LT(md.find(simulated), md.find("## Harness verdicts")) << md;
    EXPECT_NE(md.find("| simulated | diffeval sim, profile default | diffeval sim, profile "
                      "deepgemm | yes |"),
              std::string::npos)
        << md;
    EXPECT_LT(html.find("<p class=\"note\">Every server here (default, deepgemm) is diffeval&#39;s "
                        "simulator"),
              html.find("<nav>"));
    EXPECT_EQ(md.find(dir.string()), std::string::npos) << "report.md holds a scratch path";
    if (std::getenv("DIFFEVAL_UPDATE_GOLDEN")) {
        std::ofstream(golden_path(), std::ios::binary) << md;
        GTEST_SKIP() << "rewrote " << golden_path();
    }
    auto golden = e2e::slurp(golden_path());
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
    auto j = json::parse(e2e::slurp(dir / "out" / "summary.json"));
    EXPECT_EQ(j["schema"], "diffeval.report/3");
    EXPECT_EQ(j["baseline"], "deepgemm");
    EXPECT_EQ(j["summary"]["schema"], "diffeval.summary/2");
    EXPECT_EQ(j["summary"]["groups"].size(), 4u);
    EXPECT_EQ(j["diff"]["schema"], "diffeval.diff/2");
    // Each server names the simulator's profile it ran.
    ASSERT_EQ(j["servers"].size(), 2u) << j["servers"].dump();
    EXPECT_EQ(j["servers"][0]["simulator"], "default") << j["servers"].dump();
    EXPECT_EQ(j["servers"][1]["simulator"], "deepgemm") << j["servers"].dump();
    // The keys diff --format json always writes, empty without the probe.
    EXPECT_EQ(j["diff"]["probes"], json::array()) << j["diff"].dump();
    EXPECT_EQ(j["diff"]["probes_skipped"], json::array()) << j["diff"].dump();
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

// A layout file decides what the report leads with: here lm-eval's verdict
// alone, its scorer in the breakdown; an unknown lead scorer names the known.
TEST(Report, ALayoutFileChoosesTheLeadScorerAndTheComparisons) {
    auto dir = e2e::scratch("report_layout");
    auto db = dir / "r.sqlite";
    build_db(db, {"--profile", "deepgemm"}, "8");
    std::ofstream(dir / "layout.toml") << "version = 1\nlead_scorer = \"lm-eval-strict\"\n"
                                          "[[comparisons]]\nscorer = \"lm-eval-strict\"\n"
                                          "framing = \"chat\"\n";
    auto o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string(), "--layout",
                       (dir / "layout.toml").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto j = json::parse(e2e::slurp(dir / "out" / "summary.json"));
    ASSERT_EQ(j["diff"]["comparisons"].size(), 1u);
    EXPECT_EQ(j["diff"]["comparisons"][0]["scorer"], "lm-eval-strict");
    EXPECT_EQ(j["diff"]["comparisons"][0]["b"]["framing"], "chat");
    EXPECT_NE(e2e::slurp(dir / "out" / "report.md").find("accuracy by `lm-eval-strict`"),
              std::string::npos);

    std::ofstream(dir / "bad.toml") << "version = 1\nlead_scorer = \"vlm\"\n"
                                       "[[comparisons]]\nscorer = \"vllm\"\n";
    auto bad = e2e::run({"report", "--db", db.string(), "--out", (dir / "bad-out").string(),
                         "--layout", (dir / "bad.toml").string()});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find("unknown scorer 'vlm'"), std::string::npos) << bad.err;
    EXPECT_FALSE(fs::exists(dir / "bad-out"));

    // A layout whose comparisons match nothing stored says so, not that one
    // server is stored (reports audit #2: three were).
    std::ofstream(dir / "none.toml") << "version = 1\nlead_scorer = \"vllm\"\n"
                                        "[[comparisons]]\nscorer = \"vllm\"\n"
                                        "framing = \"vllm-chat\"\n"
                                        "[[comparisons]]\nscorer = \"ghost\"\nrequired = false\n";
    auto none = e2e::run({"report", "--db", db.string(), "--out", (dir / "none-out").string(),
                          "--format", "md", "--layout", (dir / "none.toml").string()});
    ASSERT_EQ(none.exit_code, 0) << none.err;
    const auto md = e2e::slurp(dir / "none-out" / "report.md");
    EXPECT_EQ(md.find("Only one server"), std::string::npos) << md.substr(0, 400);
    EXPECT_NE(md.find("The layout's comparisons match nothing stored (no group has framing "
                      "'vllm-chat'; no scorer 'ghost' is stored), so nothing is compared against "),
              std::string::npos)
        << md.substr(0, 600);
}

// The explorer's data, parsed from report.html.
json embedded_data(const fs::path& html_path) {
    auto html = e2e::slurp(html_path);
    const std::string open = "<script type=\"application/json\" id=\"data\">";
    auto d0 = html.find(open);
    auto d1 = html.find("</script>", d0);
    if (d0 == std::string::npos || d1 == std::string::npos) {
        return json();
    }
    return json::parse(html.substr(d0 + open.size(), d1 - d0 - open.size()));
}

TEST(Report, HtmlEmbedsEachResponseThatCountsOnceWithItsOwnScores) {
    auto dir = e2e::scratch("report_counted");
    auto db = dir / "r.sqlite";
    build_db(db, {"--profile", "deepgemm"}, "48"); // 384 responses: read in two parts
    ASSERT_EQ(e2e::run({"rescore", "--db", db.string()}).exit_code, 0);
    // The first responses lost one scorer's rows (as a database scored by an
    // older diffeval might): the two halves a report reads meet the scorers
    // in different orders, and every row must still carry its own.
    e2e::exec(db, "DELETE FROM scores WHERE scorer = 'lm-eval-flexible' AND response_id IN "
                  "(SELECT response_id FROM requests WHERE response_id IS NOT NULL ORDER BY "
                  "response_id LIMIT 10)");
    // And the scorers disagree on the first half, so a row read with another
    // row's scorer order would change the accuracies below.
    e2e::exec(db, "UPDATE scores SET correct = (scorer = 'vllm') WHERE response_id IN (SELECT "
                  "response_id FROM requests WHERE response_id IS NOT NULL ORDER BY response_id "
                  "LIMIT 150)");
    // A retry: a middle request now counts a newer response, so its old row
    // and that row's scores sit among the counted ones and must be skipped.
    e2e::exec(db, "CREATE TEMP TABLE pick AS SELECT request_id, response_id AS old FROM requests "
                  "WHERE response_id = (SELECT response_id FROM requests ORDER BY response_id "
                  "LIMIT 1 OFFSET 20);"
                  "INSERT INTO responses (request_id, ok, status, response_json, text, "
                  "finish_reason, completion_tokens, attempts, latency_ms, started_at) SELECT "
                  "request_id, 1, 200, '{}', 'RETRIED #### 7', 'stop', 4, 2, 5, "
                  "'2026-01-01T00:00:00.000Z' FROM pick;"
                  "UPDATE requests SET response_id = (SELECT max(response_id) FROM responses) "
                  "WHERE request_id = (SELECT request_id FROM pick);");
    auto o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;

    auto data = embedded_data(dir / "out" / "report.html");
    ASSERT_TRUE(data.is_object());
    const auto& responses = data["responses"];
    EXPECT_EQ(std::to_string(responses.size()), e2e::query(db, "SELECT count(*) FROM v_responses"));
    // Every embedded row against the views: same text, same extraction per
    // scorer, reading each part's rows in that part's scorer order.
    ASSERT_EQ(data["parts"].size(), 2u) << "a report of this size reads in two parts";
    std::vector<std::vector<std::string>> part_scorers;
    size_t rows_in_parts = 0;
    for (const auto& part : data["parts"]) {
        part_scorers.push_back(part["scorers"].get<std::vector<std::string>>());
        rows_in_parts += part["rows"].get<size_t>();
    }
    EXPECT_EQ(rows_in_parts, responses.size());
    EXPECT_GT(data["parts"][0]["rows"].get<size_t>(), 0u);
    EXPECT_GT(data["parts"][1]["rows"].get<size_t>(), 0u);
    EXPECT_NE(part_scorers[0], part_scorers[1]) << "the halves should meet scorers differently";
    std::map<std::string, std::string> expected;
    for (const auto& row : e2e::query_rows(
             db, "SELECT v.server || '/' || v.framing || '/' || v.max_tokens || '/' || v.repeat "
                 "|| '/' || v.question_idx || '=' || coalesce(v.text, '') || '|' || "
                 "(SELECT group_concat(s.scorer || ':' || s.extracted || ':' || s.correct, ',') "
                 "FROM (SELECT * FROM scores WHERE response_id = v.response_id ORDER BY scorer) "
                 "s) FROM v_responses v")) {
        expected[row.substr(0, row.find('='))] = row.substr(row.find('=') + 1);
    }
    int retried = 0;
    size_t index = 0;
    for (const auto& r : responses) {
        const auto& scorers =
            part_scorers[index++ < data["parts"][0]["rows"].get<size_t>() ? 0 : 1];
        const auto key =
            fmt::format("{}/{}/{}/{}/{}", data["servers"][r[0].get<size_t>()].get<std::string>(),
                        data["framings"][r[1].get<size_t>()].get<std::string>(), r[2].get<int>(),
                        r[3].get<int>(), r[4].get<int>());
        std::string got = r[5].is_null() ? "" : r[5].get<std::string>();
        got += '|';
        std::map<std::string, std::string> by_name; // sorted like the expected text
        for (size_t k = 0; k < r[12].size(); ++k) {
            if (!r[12][k].is_null()) {
                by_name[scorers.at(k)] =
                    fmt::format("{}:{}", r[12][k][0].get<std::string>(), r[12][k][1].get<int>());
            }
        }
        bool first = true;
        for (const auto& [name, value] : by_name) {
            got += fmt::format("{}{}:{}", first ? "" : ",", name, value);
            first = false;
        }
        EXPECT_EQ(got, expected[key]) << key;
        retried += got.starts_with("RETRIED") ? 1 : 0;
    }
    EXPECT_EQ(retried, 1);

    // The tables agree with the store too: each group's per-repeat accuracy
    // per scorer, as SQL counts it over the responses that count.
    auto summary = json::parse(e2e::slurp(dir / "out" / "summary.json"))["summary"];
    int checked = 0;
    for (const auto& g : summary["groups"]) {
        for (const auto& [scorer, acc] : g["accuracy"].items()) {
            const auto per_repeat = acc["per_repeat"];
            for (size_t rep = 0; rep < per_repeat.size(); ++rep) {
                const auto sql = fmt::format(
                    "SELECT printf('%.6f', avg(coalesce((SELECT correct FROM scores s WHERE "
                    "s.response_id = v.response_id AND s.scorer = '{}'), 0))) FROM v_responses v "
                    "WHERE v.server = '{}' AND v.framing = '{}' AND v.max_tokens = {} AND "
                    "v.repeat = {}",
                    scorer, g["server"].get<std::string>(), g["framing"].get<std::string>(),
                    g["max_tokens"].get<int>(), rep);
                EXPECT_EQ(fmt::format("{:.6f}", per_repeat[rep].get<double>()), e2e::query(db, sql))
                    << scorer << " " << g.dump().substr(0, 80);
                ++checked;
            }
        }
    }
    EXPECT_EQ(checked, 4 * 3 * 2); // groups x scorers x repeats
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
    auto md = e2e::slurp(dir / "out" / "report.md");
    for (size_t i = md.find('<'); i != std::string::npos; i = md.find('<', i + 1)) {
        ASSERT_GT(i, 0u);
        EXPECT_EQ(md[i - 1], '\\') << "unescaped '<' in: " << md.substr(i > 40 ? i - 40 : 0, 80);
    }
}

TEST(Report, HtmlExplorerShowsFlipsSideBySideAndRunsNoModelMarkup) {
    if (!fs::exists("/usr/bin/chromium")) {
        GTEST_SKIP() << "/usr/bin/chromium is missing; install it with "
                        "'scripts/install-deps.sh --browser' (or 'make test') to run this test";
    }
    auto dir = e2e::scratch("report_browser");
    auto db = dir / "r.sqlite";
    // Large enough to be read in two parts, whose scorer orders differ (the
    // first responses lack one scorer), so the page must reorder the scores.
    build_db(db, {"--profile", "deepgemm"}, "48");
    ASSERT_EQ(e2e::run({"rescore", "--db", db.string()}).exit_code, 0);
    e2e::exec(db, "DELETE FROM scores WHERE scorer = 'lm-eval-flexible' AND response_id IN "
                  "(SELECT response_id FROM requests WHERE response_id IS NOT NULL ORDER BY "
                  "response_id LIMIT 10)");
    auto out = dir / "out";
    ASSERT_EQ(e2e::run({"report", "--db", db.string(), "--out", out.string()}).exit_code, 0);

    // 1. A question that flips, whose baseline response we make hostile.
    auto j = json::parse(e2e::slurp(out / "summary.json"));
    int flip = -1;
    for (const auto& c : j["diff"]["comparisons"]) {
        for (const auto& side : {"a_better", "b_better"}) {
            if (flip < 0 && !c["flips"][side].empty()) {
                flip = c["flips"][side][0]["question_idx"];
            }
        }
    }
    ASSERT_GE(flip, 0) << "the fixed database has no flipped question";
    const std::string hostile =
        "<script>document.body.setAttribute('data-pwned','1')</script> \"><img src=x "
        "onerror=\"document.body.setAttribute('data-pwned','2')\"> </textarea><a "
        "href=\"javascript:document.body.setAttribute('data-pwned','3')\">link</a>";
    set_text(db, hostile, flip);
    auto o = e2e::run({"report", "--db", db.string(), "--out", out.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;

    // 2. No address of another host outside the embedded data.
    auto html = e2e::slurp(out / "report.html");
    const std::string data_open = "<script type=\"application/json\" id=\"data\">";
    auto d0 = html.find(data_open);
    ASSERT_NE(d0, std::string::npos);
    auto d1 = html.find("</script>", d0);
    ASSERT_NE(d1, std::string::npos);
    EXPECT_EQ(html.substr(d0, d1 - d0).find("<"), 0u) << "model text closed the data block";
    auto page = html.substr(0, d0) + html.substr(d1);
    // The SVG namespace the script creates chart elements in is a name, not an address.
    const std::string svg_ns = "'http://www.w3.org/2000/svg'";
    for (auto at = page.find(svg_ns); at != std::string::npos; at = page.find(svg_ns)) {
        page.erase(at, svg_ns.size());
    }
    EXPECT_EQ(page.find("http://"), std::string::npos);
    EXPECT_EQ(page.find("https://"), std::string::npos);
    EXPECT_NE(page.find("Content-Security-Policy"), std::string::npos);

    // 3. Open the flips between the two servers with that question expanded.
    const auto url = "file://" + (out / "report.html").string() +
                     "#flips=default,deepgemm&open=" + std::to_string(flip);
    ASSERT_EQ(chromium(url, "--dump-dom", dir / "dom.html", dir / "dom.err"), 0)
        << e2e::slurp(dir / "dom.err");
    auto dom = e2e::slurp(dir / "dom.html");
    auto body = body_tag(dom);
    EXPECT_NE(body.find("data-ready=\"1\""), std::string::npos) << body;
    EXPECT_NE(body.find("data-filter=\"flips\""), std::string::npos) << body;
    EXPECT_NE(body.find("data-servers=\"default,deepgemm\""), std::string::npos) << body;
    EXPECT_NE(body.find("data-open=\"" + std::to_string(flip) + "\""), std::string::npos) << body;
    EXPECT_NE(dom.find("<h3>Question " + std::to_string(flip) + "</h3>"), std::string::npos);
    EXPECT_NE(dom.find("Gold answer: "), std::string::npos);
    EXPECT_NE(dom.find("<h3>default ("), std::string::npos) << "no baseline side";
    EXPECT_NE(dom.find("<h3>deepgemm ("), std::string::npos) << "no candidate side";
    EXPECT_NE(dom.find("vllm: <span class="), std::string::npos) << "no vllm extraction shown";
    EXPECT_NE(dom.find(" flip between default and deepgemm"), std::string::npos);

    // 4. The hostile response is on the page as text and ran nothing.
    EXPECT_EQ(body.find("data-pwned"), std::string::npos) << body;
    EXPECT_NE(dom.find("&lt;script&gt;document.body.setAttribute('data-pwned','1')&lt;/script&gt;"),
              std::string::npos);
    EXPECT_NE(dom.find("&lt;img src=x onerror="), std::string::npos);
    EXPECT_EQ(dom.find("<img"), std::string::npos);
    EXPECT_EQ(dom.find("<a href=\"javascript:"), std::string::npos);
    auto err = e2e::slurp(dir / "dom.err");
    EXPECT_EQ(err.find("Uncaught"), std::string::npos) << err;
    EXPECT_EQ(err.find("Refused to"), std::string::npos) << err;

    // 5. A screenshot for a person to look at.
    auto shot = dir / "report.png";
    chromium(url, "--screenshot='" + shot.string() + "' --window-size=1280,3600", dir / "shot.out",
             dir / "shot.err");
    ASSERT_TRUE(fs::exists(shot)) << e2e::slurp(dir / "shot.err");
    EXPECT_GT(fs::file_size(shot), 10000u);
}

// A server whose groups share no framing and token limit with the
// baseline's is not compared, and the report says so; the rest is written
// (an audit's report refused the whole database: "no pair of groups
// matches a and b", exit 2, nothing written).
TEST(Report, AServerWithNoGroupLikeTheBaselinesIsNamedNotFatal) {
    auto dir = e2e::scratch("report_unpaired");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    for (const auto& [server, framing] :
         std::vector<std::pair<std::string, std::string>>{{"a", "raw"}, {"b", "chat"}}) {
        auto r = e2e::run({"run", "--server", server + "=" + sim.url(), "--framing", framing,
                           "--limit", "5", "--db", db.string(), "--quiet"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    auto o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto md = e2e::slurp(dir / "out" / "report.md");
    EXPECT_NE(md.find("b has no group with the framing and token limit of one of the baseline "
                      "a's, so it is not compared"),
              std::string::npos)
        << md.substr(0, 2000);
    EXPECT_EQ(md.find("Only one server"), std::string::npos);
    EXPECT_TRUE(std::filesystem::exists(dir / "out" / "report.html"));
}

// So is a server whose group ran other questions than the baseline's (a
// copy of the dataset with one question edited): it refused the whole
// report, exit 2, for every --baseline.
TEST(Report, AServerThatRanOtherQuestionsIsNamedNotFatal) {
    auto dir = e2e::scratch("report_other_questions");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    // The sample set with question 3's text edited, its few-shot file beside.
    fs::copy_file(std::string(DIFFEVAL_SOURCE_DIR) + "/datasets/sample/train.jsonl",
                  dir / "train.jsonl");
    auto edited = dir / "edited.jsonl";
    {
        std::ifstream in(std::string(DIFFEVAL_SOURCE_DIR) + "/datasets/sample/test.jsonl");
        std::ofstream out(edited);
        std::string line;
        for (int i = 0; std::getline(in, line); ++i) {
            out << (i == 3 ? json{{"question", "How many apples are there?"},
                                  {"answer", "Two apples.\n#### 2"}}
                                 .dump()
                           : line)
                << "\n";
        }
    }
    for (const auto& [server, dataset] : std::vector<std::pair<std::string, std::string>>{
             {"a", "sample"}, {"b", "sample"}, {"c", edited.string()}}) {
        auto r = e2e::run({"run", "--server", server + "=" + sim.url(), "--framing", "raw",
                           "--dataset", dataset, "--limit", "5", "--db", db.string(), "--quiet"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    auto o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto md = e2e::slurp(dir / "out" / "report.md");
    EXPECT_NE(md.find("c is not compared (cannot pair c/raw/256 with a/raw/256: 1 of 5 questions "
                      "differs (first: question 3)"),
              std::string::npos)
        << md.substr(0, 2000);
    // b is still compared with a.
    const auto j = json::parse(e2e::slurp(dir / "out" / "summary.json"));
    ASSERT_EQ(j["diff"]["comparisons"].size(), 1u) << j["diff"].dump();
    EXPECT_EQ(j["diff"]["comparisons"][0]["b"]["server"], "b");
}

TEST(Report, ALlamaCppServersVersionIsItsBuildNotItsServerHeader) {
    // llama.cpp has no /version: its Server header names the engine
    // ("llama.cpp"), and /props its build. The version row shows the build.
    auto dir = e2e::scratch("report_llama_version");
    auto db = dir / "r.sqlite";
    build_db(db, {"--profile", "deepgemm"}, "4");
    e2e::exec(db, R"(UPDATE servers SET info_json = '{"server_header": "llama.cpp", "props": )"
                  R"({"build_info": "b11669-Debian", "total_slots": 1}}' WHERE name = 'default')");
    e2e::exec(db, R"(UPDATE servers SET info_json = '{"server_header": "llama.cpp", "props": )"
                  R"({"build_info": "b11700-Debian", "total_slots": 1}}' WHERE name = 'deepgemm')");
    auto o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto md = e2e::slurp(dir / "out" / "report.md");
    EXPECT_NE(md.find("| version | b11669-Debian | b11700-Debian | yes |"), std::string::npos)
        << md;
}

// A database written before the build fact was rewritten holds it as
// llama.cpp's log writes it; beside a server fingerprinted since, the same
// build reads as one value, not two, and the other build still differs.
TEST(Report, ALlamaCppBuildStoredInTheLogsWordsIsTheSameBuild) {
    auto dir = e2e::scratch("report_old_build");
    auto db = dir / "r.sqlite";
    build_db(db, {"--profile", "deepgemm"}, "4");
    e2e::exec(db, R"x(UPDATE servers SET facts_json = '{"engine": "llamacpp", "facts": )x"
                  R"x({"engine_version": "11669 (Debian)"}, "conflicts": []}' )x"
                  R"x(WHERE name = 'default')x");
    e2e::exec(db, R"x(UPDATE servers SET facts_json = '{"engine": "llamacpp", "facts": )x"
                  R"x({"engine_version": "b11669-Debian"}, "stated": {"engine_version": )x"
                  R"x("11669 (Debian)"}, "conflicts": []}' WHERE name = 'deepgemm')x");
    auto o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string(), "--format",
                       "md,html,json"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto md = e2e::slurp(dir / "out" / "report.md");
    // The same words as stated, as a newer diffeval would have kept them.
    EXPECT_NE(md.find("| engine\\_version | b11669-Debian (stated: 11669 (Debian)) | "
                      "b11669-Debian (stated: 11669 (Debian)) |  |"),
              std::string::npos)
        << md;
    auto html = e2e::slurp(dir / "out" / "report.html");
    EXPECT_NE(html.find("<tr><td>engine_version</td><td>b11669-Debian"), std::string::npos);
    auto j = json::parse(e2e::slurp(dir / "out" / "summary.json"));
    EXPECT_EQ(j["servers"][0]["facts"]["engine_version"], "b11669-Debian");

    e2e::exec(db, R"(UPDATE servers SET facts_json = json_set(facts_json, )"
                  R"('$.facts.engine_version', 'b11700-Debian') WHERE name = 'deepgemm')");
    o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    md = e2e::slurp(dir / "out" / "report.md");
    EXPECT_NE(md.find("| engine\\_version | b11669-Debian (stated: 11669 (Debian)) | "
                      "b11700-Debian (stated: 11669 (Debian)) | yes |"),
              std::string::npos)
        << md;
}

// A server's stated words show beside its fact in both reports, as
// `diffeval fingerprint` prints them, escaped like every server-supplied
// text and cut to one line: 1 MB of them does not reach the report.
TEST(Report, WhatAServerStatedIsShownBesideItsFactEscapedAndBounded) {
    auto dir = e2e::scratch("report_stated");
    auto db = dir / "r.sqlite";
    build_db(db, {"--profile", "deepgemm"}, "4");
    e2e::exec(db, R"(UPDATE servers SET facts_json = '{"engine": "llamacpp", "facts": )"
                  R"({"flash_attention": "enabled"}, "stated": {"flash_attention": "auto"}, )"
                  R"("conflicts": []}' WHERE name = 'default')");
    e2e::exec(db,
              R"(UPDATE servers SET facts_json = json_set('{"engine": "llamacpp", "facts": )"
              R"({"flash_attention": "enabled"}, "conflicts": []}', '$.stated.flash_attention', )"
              R"('<b>on</b> | x' || char(10) || '| y & z ' || replace(hex(zeroblob(500000)), )"
              R"('0', 'a')) WHERE name = 'deepgemm')");
    auto o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const std::string cut = std::string(900, 'a');
    auto md = e2e::slurp(dir / "out" / "report.md");
    const auto at = md.find("| flash\\_attention | enabled (stated: auto) | enabled (stated: "
                            "\\<b\\>on\\</b\\> \\| x \\| y &amp; z aaaa");
    ASSERT_NE(at, std::string::npos) << md.substr(md.find("## What actually ran"), 2000);
    const auto line = md.substr(at, md.find('\n', at) - at);
    EXPECT_NE(line.find(cut + "...) |  |"), std::string::npos) << line.substr(line.size() - 40);
    EXPECT_LT(line.size(), 1200U);
    EXPECT_LT(md.size(), 100'000U);
    auto html = e2e::slurp(dir / "out" / "report.html");
    const auto cell = html.find("<tr><td>flash_attention</td><td>enabled (stated: auto)</td><td>"
                                "enabled (stated: &lt;b&gt;on&lt;/b&gt; | x | y &amp; z aaaa");
    ASSERT_NE(cell, std::string::npos);
    EXPECT_NE(html.find(cut + "...)</td></tr>", cell), std::string::npos);
    EXPECT_EQ(html.find(std::string(1100, 'a')), std::string::npos);
}

// A fact's value is the server's words too (a log line a rule matched, a
// /props build, a model id): 1 MB of it reaches no report as more than one
// bounded line, in report.md, report.html or summary.json.
TEST(Report, AServersLongFactValuesAreCutToOneBoundedLine) {
    auto dir = e2e::scratch("report_long_fact");
    auto db = dir / "r.sqlite";
    build_db(db, {"--profile", "deepgemm"}, "4");
    e2e::exec(db,
              R"(UPDATE servers SET facts_json = json_set('{"engine": "llamacpp", "facts": {}, )"
              R"("conflicts": []}', '$.facts.model_file_type', 'q4' || char(10) || )"
              R"(replace(hex(zeroblob(500000)), '0', 'b')), )"
              R"(model = 'm' || replace(hex(zeroblob(500000)), '0', 'c') WHERE name = 'deepgemm')");
    auto o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    for (const char* name : {"report.md", "report.html", "summary.json"}) {
        const auto text = e2e::slurp(dir / "out" / name);
        EXPECT_EQ(text.find(std::string(1100, 'b')), std::string::npos) << name;
        EXPECT_EQ(text.find(std::string(1100, 'c')), std::string::npos) << name;
        EXPECT_NE(text.find(std::string(900, 'b')), std::string::npos) << name;
    }
    const auto md = e2e::slurp(dir / "out" / "report.md");
    EXPECT_NE(md.find("| model\\_file\\_type | - | q4 bbbb"), std::string::npos)
        << md.substr(md.find("## What actually ran"), 600);
}

namespace {

// The sample set's first `n` test questions as `path`, with the gold answer
// of each question in `wrong` raised by 1: a simulator serving it answers
// those questions wrongly against the sample set.
void write_golds(const fs::path& path, size_t n, const std::set<size_t>& wrong) {
    std::istringstream in(e2e::slurp(fs::path(DIFFEVAL_SOURCE_DIR) / "datasets/sample/test.jsonl"));
    std::ofstream out(path, std::ios::binary);
    size_t i = 0;
    for (std::string line; i < n && std::getline(in, line); ++i) {
        auto q = nlohmann::json::parse(line);
        if (wrong.count(i)) {
            auto answer = q["answer"].get<std::string>();
            const auto mark = answer.rfind("#### ");
            std::string gold = answer.substr(mark + 5);
            gold.erase(std::remove(gold.begin(), gold.end(), ','), gold.end());
            q["answer"] = answer.substr(0, mark + 5) + std::to_string(std::stoll(gold) + 1);
        }
        out << q.dump() << '\n';
    }
}

} // namespace

// The report's own sentence for each comparison, lead or not, ends as the
// verdict's does, and the table's difference says what it was taken on: a
// difference made by failed requests, or on fewer questions than each group
// ran, or a raw mid-p below alpha that only Holm's adjustment keeps from
// rejecting, each read as a contradiction of the numbers beside it.
TEST(Report, EachComparisonSaysWhatItsNumbersRestOn) {
    auto dir = e2e::scratch("report_caveats");
    const auto sample = fs::path(DIFFEVAL_SOURCE_DIR) / "datasets/sample";
    {
        std::ofstream(dir / "clean.toml")
            << "version = 1\nname = \"clean\"\n[behaviour]\nthink_tag_rate = 0.0\n"
               "reasoning_rate = 0.0\nverbose_rate = 0.0\nloop_rate = 0.0\nerror_rate = 0.0\n"
               "chat_missing_hash_rate = 0.0\nanswer_noise = 0.0\nrepeat_noise = 0.0\n";
    }
    // x is wrong on 8 of 40 questions the baseline gets right, and right on
    // the one it gets wrong: mid-p 0.0215, above 0.05 once adjusted over
    // four comparisons (y is the baseline again, p another run of it on
    // half the questions, e the baseline failing some requests).
    write_golds(dir / "base.jsonl", 40, {0});
    write_golds(dir / "x.jsonl", 40, {1, 2, 3, 4, 5, 6, 7, 8});
    const std::vector<std::string> clean = {"--profile", (dir / "clean.toml").string(),
                                            "--fewshot-from", (sample / "train.jsonl").string()};
    auto with = [&](std::vector<std::string> a, const std::vector<std::string>& b) {
        a.insert(a.end(), b.begin(), b.end());
        return a;
    };
    e2e::Sim base(with({"--dataset", (dir / "base.jsonl").string()}, clean));
    e2e::Sim x(with({"--dataset", (dir / "x.jsonl").string()}, clean));
    e2e::Sim failing(
        with({"--dataset", (dir / "base.jsonl").string(), "--fault-http-500", "0.3"}, clean));
    const auto db = (dir / "r.sqlite").string();
    const std::vector<std::string> run = {"run", "--framing", "raw",    "--max-tokens",
                                          "256", "--dataset", "sample", "--retries",
                                          "0",   "--db",      db,       "--quiet"};
    auto o = e2e::run(
        with(run, {"--server", "base=" + base.url(), "--server", "x=" + x.url(), "--server",
                   "y=" + base.url(), "--server", "e=" + failing.url(), "--limit", "40"}));
    ASSERT_EQ(o.exit_code, 1) << o.err; // e's failed requests are stored as such
    o = e2e::run(with(run, {"--server", "p=" + base.url(), "--limit", "20"}));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    ASSERT_NE(e2e::query(db, "SELECT count(*) FROM v_responses WHERE server = 'e' AND ok = 0"),
              "0");

    o = e2e::run({"report", "--db", db, "--out", (dir / "out").string(), "--baseline", "base"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto md = e2e::slurp(dir / "out" / "report.md");
    auto headline = [&](const std::string& candidate) {
        const auto at = md.find("- " + candidate + "/raw/256 ");
        return at == std::string::npos ? std::string() : md.substr(at, md.find('\n', at) - at);
    };
    const auto e = headline("e");
    EXPECT_NE(e.find("Failed (no successful response), each counted as a wrong answer: "),
              std::string::npos)
        << md.substr(0, 3000);
    EXPECT_NE(e.find("of e/raw/256's 40 requests here."), std::string::npos) << e;
    const auto p = headline("p");
    EXPECT_NE(p.find("Paired on the 20 questions both groups hold: base/raw/256 asked 40 and "
                     "p/raw/256 asked 20"),
              std::string::npos)
        << md.substr(0, 3000);
    EXPECT_NE(md.find("| p/raw/256 vs base/raw/256 | vllm | 0.0 (95.0 -\\> 95.0 on the 20 shared "
                      "questions) |"),
              std::string::npos)
        << md.substr(0, 6000);
    const auto xs = headline("x");
    EXPECT_NE(xs.find("excludes 0, but the sign-flip test does not reject once adjusted for the "
                      "report's comparisons (mid-p 0.0215, Holm-adjusted 0.0"),
              std::string::npos)
        << xs;
    // And why `diff` of this pair alone can say worse (a reader audit: "0
    // worse" here, "worse" from diff and gate, one database).
    EXPECT_NE(xs.find(" over 4 comparisons; diff or gate of fewer comparisons adjusts over "
                      "those alone and can call it worse)"),
              std::string::npos)
        << xs;
    // summary.json's headline is the same sentences.
    const auto j = nlohmann::json::parse(e2e::slurp(dir / "out" / "summary.json"));
    const auto sentences = j["headline_sentences"].dump();
    EXPECT_NE(sentences.find("of e/raw/256's 40 requests here."), std::string::npos) << sentences;
}

// Reports audit #8: "Top flipped questions" showed a comparison whose side
// answered nothing (rows of failed requests) before a worse one; the docs
// say worse first.
TEST(Report, TopFlippedShowsAWorseComparisonBeforeOneThatAnsweredNothing) {
    auto dir = e2e::scratch("report_top_flipped");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "base=" + sim.url(), "--server", "bad=" + sim.url(),
                       "--server", "dead=" + sim.url(), "--framing", "raw", "--limit", "8", "--db",
                       db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    e2e::exec(db, "UPDATE scores SET correct = CASE WHEN response_id IN (SELECT response_id FROM "
                  "requests WHERE server = 'bad') THEN 0 ELSE 1 END");
    e2e::exec(db, "UPDATE responses SET ok = 0, status = 400, error_kind = 'http', error = "
                  "'HTTP 400: refused' WHERE response_id IN (SELECT response_id FROM requests "
                  "WHERE server = 'dead')");
    o = e2e::run({"report", "--db", db.string(), "--out", (dir / "out").string(), "--format", "md",
                  "--baseline", "base"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto md = e2e::slurp(dir / "out" / "report.md");
    EXPECT_NE(md.find("## Top flipped questions: bad/raw/256 vs base/raw/256 (vllm)"),
              std::string::npos)
        << md;
}

// A candidate compared on the framing both ran is not said to be "not
// compared" because the layout's chat comparison found no chat group of
// its own (an audit: the baseline ran raw and chat, the candidate raw);
// the baseline's chat group it never ran is named, in the headline and in
// summary.json, as diff names it (before, the report said nothing of chat).
TEST(Report, ACandidateComparedOnOneFramingIsNotSaidToBeUncompared) {
    auto dir = e2e::scratch("report-one-framing");
    e2e::Sim sim;
    auto db = (dir / "r.sqlite").string();
    ASSERT_EQ(e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw,chat", "--limit",
                        "4", "--db", db, "--quiet"})
                  .exit_code,
              0);
    ASSERT_EQ(e2e::run({"run", "--server", "b=" + sim.url(), "--framing", "raw", "--limit", "4",
                        "--db", db, "--quiet"})
                  .exit_code,
              0);
    auto o = e2e::run({"report", "--db", db, "--baseline", "a", "--out", (dir / "out").string(),
                       "--format", "md,json"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto md = e2e::slurp(dir / "out/report.md");
    EXPECT_EQ(md.find("so it is not compared"), std::string::npos) << md.substr(0, 2000);
    EXPECT_NE(md.find("b/raw/256"), std::string::npos) << md.substr(0, 2000);
    EXPECT_NE(md.find("- b never ran chat/256, so the baseline's a/chat/256 is not compared with "
                      "it."),
              std::string::npos)
        << md.substr(0, 2000);
    const auto summary = nlohmann::json::parse(e2e::slurp(dir / "out/summary.json"));
    EXPECT_EQ(summary["diff"]["not_compared"],
              nlohmann::json::parse(R"([{"a": "a/chat/256", "b": "b/chat/256"}])"));
}

// Two groups of one framing and token limit that ran other questions (the
// two shards of a run, each in its own database merged by hand, or --limit
// on other files) share none: diff says so, not "no pair of groups
// matches" while listing a matching pair, and the report does not say the
// framing differs.
TEST(Report, GroupsThatShareNoQuestionAreSaidToShareNone) {
    auto dir = e2e::scratch("report-disjoint");
    e2e::Sim sim;
    auto db = (dir / "r.sqlite").string();
    for (const auto& [server, shard] : {std::pair{"a", "0/2"}, std::pair{"b", "1/2"}}) {
        ASSERT_EQ(e2e::run({"run", "--server", std::string(server) + "=" + sim.url(), "--framing",
                            "raw", "--limit", "6", "--shard", shard, "--db", db, "--quiet"})
                      .exit_code,
                  0);
    }
    auto d = e2e::run({"diff", "a", "b", "--db", db});
    EXPECT_EQ(d.exit_code, 2) << d.out;
    EXPECT_EQ(d.err, "diffeval: a/raw/256 (3 questions) and b/raw/256 (3 questions) share no "
                     "question: each ran others (another shard, --limit or dataset file); merge "
                     "the other shards into one database, or run both on the same questions\n");
    auto o = e2e::run({"report", "--db", db, "--baseline", "a", "--out", (dir / "out").string(),
                       "--format", "md"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto md = e2e::slurp(dir / "out/report.md");
    EXPECT_EQ(md.find("framing and token limit"), std::string::npos) << md.substr(0, 2000);
    EXPECT_NE(md.find("share no question"), std::string::npos) << md.substr(0, 2000);
    // When another pair does share questions, the pair that does not is
    // still refused: a gate of a and b passed on their chat groups and never
    // said the raw ones were not compared.
    for (const char* server : {"a", "b"}) {
        ASSERT_EQ(e2e::run({"run", "--server", std::string(server) + "=" + sim.url(), "--framing",
                            "chat", "--limit", "4", "--db", db, "--quiet"})
                      .exit_code,
                  0);
    }
    d = e2e::run({"diff", "a", "b", "--db", db});
    EXPECT_EQ(d.exit_code, 2) << d.out;
    EXPECT_NE(d.err.find("a/raw/256 (3 questions) and b/raw/256 (3 questions) share no question"),
              std::string::npos)
        << d.err;
    EXPECT_NE(d.err.find("or name groups that share questions (such as a/chat/256 and "
                         "b/chat/256)"),
              std::string::npos)
        << d.err;
    auto g = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "b", "--max-drop",
                       "50", "--inconclusive", "pass"});
    EXPECT_EQ(g.exit_code, 2) << g.out << g.err;
    EXPECT_EQ(e2e::run({"diff", "a/chat", "b/chat", "--db", db}).exit_code, 0);
    o = e2e::run({"report", "--db", db, "--baseline", "a", "--out", (dir / "out2").string(),
                  "--format", "md"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto md2 = e2e::slurp(dir / "out2/report.md");
    // The report's chat comparison stands, and the note says the rest is
    // missing, once.
    const auto first = md2.find("b is compared only where the layout names its groups (a/raw/256 "
                                "(3 questions) and b/raw/256 (3 questions) share no question");
    ASSERT_NE(first, std::string::npos) << md2.substr(0, 2000);
    EXPECT_EQ(md2.find("share no question", first + 200), std::string::npos)
        << "one note a server: " << md2.substr(0, 2000);
    EXPECT_EQ(md2.find("b is not compared"), std::string::npos) << md2.substr(0, 2000);
    EXPECT_NE(md2.find("b/chat/256 shows no detectable difference"), std::string::npos)
        << md2.substr(0, 2000);
}

// A streamed body is its events as received: the model a stream answered
// under is read from its first event. Every response of one server renamed
// on the wire shows in "answered as" without a mixed line; half of them,
// with both names and a MIXED MODELS line.
TEST(Report, TheModelAStreamAnsweredUnderIsReadFromItsFirstEvent) {
    auto dir = e2e::scratch("report_stream_models");
    auto db = dir / "r.sqlite";
    e2e::Sim a({"--profile", "default"});
    auto o = e2e::run({"run", "--server", "s=" + a.url(), "--framing", "raw", "--max-tokens", "64",
                       "--dataset", "sample", "--limit", "6", "--stream", "--db", db.string(),
                       "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto facts = [&](const std::string& out) {
        auto r = e2e::run({"report", "--db", db.string(), "--out", (dir / out).string()});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        auto md = e2e::slurp(dir / out / "report.md");
        return md.substr(md.find("## What actually ran"));
    };
    EXPECT_EQ(facts("same").find("answered as"), std::string::npos) << facts("same");
    e2e::exec(db, "UPDATE responses SET response_json = replace(response_json, "
                  "'\"model\":\"Qwen/Qwen3.5-35B-A3B-FP8\"', '\"model\":\"proxy/name\"')");
    auto renamed = facts("renamed");
    EXPECT_NE(renamed.find("| answered as | proxy/name |"), std::string::npos) << renamed;
    EXPECT_EQ(renamed.find("MIXED MODELS"), std::string::npos) << renamed;
    e2e::exec(db, "UPDATE responses SET response_json = replace(response_json, "
                  "'\"model\":\"proxy/name\"', '\"model\":\"Qwen/Qwen3.5-35B-A3B-FP8\"') "
                  "WHERE response_id % 2 = 0");
    auto mixed = facts("mixed");
    EXPECT_NE(mixed.find("| answered as | Qwen/Qwen3.5-35B-A3B-FP8 (3), proxy/name (3) |"),
              std::string::npos)
        << mixed;
    EXPECT_NE(mixed.find("**MIXED MODELS** on s: its 6 successful responses name 2 models"),
              std::string::npos)
        << mixed;
    // A comment line before the first event (OpenRouter's ": OPENROUTER
    // PROCESSING") hid both names, and the gate passed.
    e2e::exec(db, "UPDATE responses SET response_json = ': ping' || char(10) || char(10) || "
                  "response_json");
    EXPECT_NE(facts("ping").find("| answered as | Qwen/Qwen3.5-35B-A3B-FP8 (3), proxy/name (3) |"),
              std::string::npos)
        << facts("ping");
    // A name that is empty, or no text, is no model's name.
    e2e::exec(db, "UPDATE responses SET response_json = replace(response_json, "
                  "'\"model\":\"proxy/name\"', '\"model\":\"\"') WHERE response_id = 1");
    e2e::exec(db, "UPDATE responses SET response_json = replace(response_json, "
                  "'\"model\":\"proxy/name\"', '\"model\":{\"a\":1}') WHERE response_id = 3");
    EXPECT_NE(facts("odd").find("| answered as | Qwen/Qwen3.5-35B-A3B-FP8 (3), proxy/name (1) |"),
              std::string::npos)
        << facts("odd");
}

// Each response's system_fingerprint (OpenAI's name for the backend
// configuration; llama-server's build) is a fact of the server: one shows
// in its row; two, a backend that changed mid-run or a proxy that mixed
// two, also get a MIXED SYSTEM FINGERPRINTS line, and fail the gate's
// conflict check, in both a body and a stream's first event.
TEST(Report, ResponsesNamingTwoSystemFingerprintsAreNotOneBackends) {
    auto dir = e2e::scratch("report_system_fingerprints");
    e2e::Sim a({"--profile", "default"});
    for (const bool stream : {false, true}) {
        const auto db = dir / (stream ? "stream.sqlite" : "body.sqlite");
        std::vector<std::string> args = {
            "run",       "--server",  "s=" + a.url(), "--framing", "raw", "--max-tokens",
            "64",        "--dataset", "sample",       "--limit",   "6",   "--db",
            db.string(), "--quiet"};
        if (stream) {
            args.push_back("--stream");
        }
        auto o = e2e::run(args);
        ASSERT_EQ(o.exit_code, 0) << o.err;
        const auto out = dir / (stream ? "stream" : "body");
        const auto facts = [&] {
            auto r = e2e::run({"report", "--db", db.string(), "--out", out.string()});
            EXPECT_EQ(r.exit_code, 0) << r.err;
            auto md = e2e::slurp(out / "report.md");
            return md.substr(md.find("## What actually ran"));
        };
        const auto gate = [&] {
            return e2e::run({"gate", "--db", db.string(), "--fail-on-conflict"});
        };
        // The simulator, as vLLM, names none.
        EXPECT_EQ(facts().find("system fingerprint"), std::string::npos) << facts();
        // A body's null becomes a name; a stream's first event gains one.
        e2e::exec(db, stream ? "UPDATE responses SET response_json = replace(response_json, "
                               "'\"model\":\"Qwen/Qwen3.5-35B-A3B-FP8\"', '\"model\":\"Qwen/"
                               "Qwen3.5-35B-A3B-FP8\",\"system_fingerprint\":\"b1-a\"')"
                             : "UPDATE responses SET response_json = replace(response_json, "
                               "'\"system_fingerprint\":null', '\"system_fingerprint\":\"b1-a\"')");
        auto one = facts();
        EXPECT_NE(one.find("| system fingerprint | b1-a |"), std::string::npos) << one;
        EXPECT_EQ(one.find("MIXED"), std::string::npos) << one;
        EXPECT_EQ(gate().exit_code, 0) << gate().out;
        e2e::exec(db, "UPDATE responses SET response_json = replace(response_json, "
                      "'\"system_fingerprint\":\"b1-a\"', '\"system_fingerprint\":\"b2-b\"') "
                      "WHERE response_id % 3 = 0");
        auto two = facts();
        EXPECT_NE(two.find("| system fingerprint | b1-a (4), b2-b (2) |"), std::string::npos)
            << two;
        EXPECT_NE(two.find("**MIXED SYSTEM FINGERPRINTS** on s: its 6 successful responses name 2 "
                           "system fingerprints: b1-a (4), b2-b (2); its answers are not one "
                           "backend's"),
                  std::string::npos)
            << two;
        EXPECT_EQ(two.find("MIXED MODELS"), std::string::npos) << two;
        const auto summary = json::parse(e2e::slurp(out / "summary.json"));
        EXPECT_EQ(summary["servers"][0]["system_fingerprints"],
                  json::parse(R"([{"system_fingerprint": "b1-a", "responses": 4},
                                  {"system_fingerprint": "b2-b", "responses": 2}])"))
            << summary["servers"].dump();
        auto failed = gate();
        EXPECT_EQ(failed.exit_code, 1) << failed.out << failed.err;
        EXPECT_NE(failed.out.find("a server's responses name more than one system fingerprint: s: "
                                  "its 6 successful responses name 2 system fingerprints"),
                  std::string::npos)
            << failed.out;
    }
}

// A run too small to detect any difference says so, as the verdict does:
// the headline said "the run detects 113.2 points or more", past the 100
// there are (a reports audit), and the MDD column printed the number.
TEST(Report, ARunThatDetectsNoDifferenceSaysSo) {
    auto dir = e2e::scratch("report-mdd-past-100");
    e2e::Sim sim;
    auto db = (dir / "r.sqlite").string();
    ASSERT_EQ(e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(),
                        "--framing", "chat", "--limit", "5", "--db", db, "--quiet"})
                  .exit_code,
              0);
    e2e::exec(db, "UPDATE scores SET correct = 1 - correct WHERE scorer = 'vllm' AND response_id "
                  "IN (SELECT response_id FROM requests WHERE server = 'b' AND question_idx < 3)");
    auto o = e2e::run({"report", "--db", db, "--out", (dir / "out").string(), "--format", "md"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto md = e2e::slurp(dir / "out/report.md");
    EXPECT_NE(md.find("; the run detects no difference at 80% power: it would take "),
              std::string::npos)
        << md.substr(0, 1500);
    EXPECT_EQ(md.find("points or more"), std::string::npos) << md.substr(0, 1500);
    EXPECT_NE(md.find("| \\> 100 | no detectable difference |"), std::string::npos)
        << md.substr(0, 3000);
}

// The headline leads with what would block a merge: a worse comparison
// before those with no detectable difference, whatever the layout's order
// (a reports audit: a 29-point regression was the sixth line).
TEST(Report, TheHeadlineListsWorseComparisonsFirst) {
    auto dir = e2e::scratch("report-worse-first");
    e2e::Sim sim;
    auto db = (dir / "r.sqlite").string();
    ASSERT_EQ(e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(),
                        "--server", "c=" + sim.url(), "--framing", "chat", "--db", db, "--quiet"})
                  .exit_code,
              0);
    e2e::exec(db, "UPDATE scores SET correct = 0 WHERE response_id IN (SELECT response_id FROM "
                  "requests WHERE server = 'c' AND question_idx < 20)");
    auto o = e2e::run({"report", "--db", db, "--baseline", "a", "--out", (dir / "out").string(),
                       "--format", "md"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto md = e2e::slurp(dir / "out/report.md");
    const auto worse = md.find("- c/chat/256 regressed against a/chat/256");
    const auto same = md.find("- b/chat/256 shows no detectable difference");
    ASSERT_NE(worse, std::string::npos) << md.substr(0, 2000);
    ASSERT_NE(same, std::string::npos) << md.substr(0, 2000);
    EXPECT_LT(worse, same) << md.substr(0, 2000);
}
