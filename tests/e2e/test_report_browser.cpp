// report.html as a reader sees it, in headless Chromium (Debian's `chromium`;
// the tests skip when it is missing): on the official demo's report and on a
// report of 8 servers with long names, no two chart labels overlap and no
// text is smaller than 11 px; every explorer setting survives a reload from
// the URL fragment; and screenshots of the main views are saved in the build
// tree (report-screenshots/) for a person to look at.
#include "e2e.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <regex>

namespace {

namespace fs = std::filesystem;

bool have_chromium() {
    return fs::exists("/usr/bin/chromium");
}

// Run headless Chromium on `url` with `args`; returns stdout.
std::string chromium(const fs::path& dir, const std::string& url, const std::string& args) {
    static int n = 0;
    auto profile = dir / fmt::format("chromium-profile-{}", n++);
    fs::create_directories(profile);
    auto out = profile.string() + ".out";
    auto cmd = "timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic "
               "--no-first-run --disable-background-networking --disable-component-update "
               "--disable-sync --hide-scrollbars --user-data-dir='" +
               profile.string() + "' " + args + " '" + url + "' > '" + out + "' 2>/dev/null";
    (void)std::system(cmd.c_str());
    return e2e::slurp(out);
}

// The page's own script has run when it marks <body data-ready="1">; this
// one runs after it and writes what a reader would stumble on into
// data-layout: text under 11 px (SVG text scaled by its drawn size), chart
// labels past their chart's edge (clipped), and pairs of chart labels whose
// boxes overlap.
const char k_layout_check[] = R"JS(<script>
(function () {
  const problems = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  let n;
  while ((n = walker.nextNode())) {
    const e = n.parentElement;
    if (!n.textContent.trim() || seen.has(e) || e.closest('script, title, select')) continue;
    seen.add(e);
    const r = e.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    let size = parseFloat(getComputedStyle(e).fontSize);
    const svg = e.closest('svg');
    if (svg && svg.viewBox.baseVal && svg.viewBox.baseVal.width) {
      size *= svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    }
    if (size < 10.99) problems.push('small ' + size.toFixed(1) + 'px: ' + n.textContent.trim().slice(0, 40));
  }
  for (const svg of document.querySelectorAll('svg')) {
    const boxes = Array.from(svg.querySelectorAll('text'))
      .map((t) => [t, t.getBoundingClientRect()]).filter(([, r]) => r.width > 0);
    // A label past its chart's edge is clipped: the forest plot cut the
    // borderline verdict's asterisk and long labels' starts.
    const edge = svg.getBoundingClientRect();
    for (const [t, r] of boxes) {
      if (r.left < edge.left - 0.5 || r.right > edge.right + 0.5) {
        problems.push('clipped: "' + t.textContent.slice(0, 30) + '"');
      }
    }
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i][1], b = boxes[j][1];
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 0.5 && h > 0.5) {
          problems.push('overlap: "' + boxes[i][0].textContent.slice(0, 30) + '" / "' +
                        boxes[j][0].textContent.slice(0, 30) + '"');
        }
      }
    }
  }
  // How far the page is wider than its window: a long unbroken question
  // made an audit's page 26,700 px wide.
  const root = document.documentElement;
  document.body.setAttribute('data-overflow', String(Math.max(0, root.scrollWidth - root.clientWidth)));
  document.body.setAttribute('data-texts', String(seen.size));
  document.body.setAttribute('data-layout', problems.length ? problems.slice(0, 10).join(' ;; ') : 'ok');
})();
</script>
)JS";

// A copy of `report` with the layout check run after the page's script. The
// page's policy allows its own script alone (by its sha256): the copy's
// allows inline script, the check's too.
fs::path with_layout_check(const fs::path& report) {
    auto html = e2e::slurp(report);
    const std::regex own("script-src 'sha256-[A-Za-z0-9+/=]+'");
    EXPECT_TRUE(std::regex_search(html, own)) << "the page allows more than its own script";
    html = std::regex_replace(html, own, "script-src 'unsafe-inline'");
    const auto at = html.rfind("</body>");
    html.insert(at, k_layout_check);
    auto out = report.parent_path() / "report-checked.html";
    std::ofstream(out, std::ios::binary) << html;
    return out;
}

std::string attribute(const std::string& dom, const std::string& name) {
    std::smatch m;
    const std::regex re("<body[^>]*\\s" + name + "=\"([^\"]*)\"");
    if (!std::regex_search(dom, m, re)) {
        return "(missing)";
    }
    // The serialised DOM escapes attribute values.
    std::string v = m[1].str();
    for (const auto& [from, to] : {std::pair{"&quot;", "\""}, std::pair{"&gt;", ">"},
                                   std::pair{"&lt;", "<"}, std::pair{"&amp;", "&"}}) {
        v = std::regex_replace(v, std::regex(from), to);
    }
    return v;
}

fs::path screenshot_dir() {
    auto dir = fs::current_path() / "report-screenshots";
    fs::create_directories(dir);
    return dir;
}

// Check the layout, round-trip every fragment parameter, save screenshots.
void check_report(const fs::path& dir, const fs::path& report, const std::string& name,
                  const std::string& a, const std::string& b, const std::string& group_a,
                  const std::string& group_b) {
    auto dom = chromium(dir, "file://" + with_layout_check(report).string(),
                        "--window-size=1400,1000 --dump-dom");
    EXPECT_EQ(attribute(dom, "data-ready"), "1");
    EXPECT_EQ(attribute(dom, "data-layout"), "ok") << name;
    EXPECT_GT(std::atoi(attribute(dom, "data-texts").c_str()), 50) << name;

    // Every parameter set away from its default comes back from the link.
    const std::string state = fmt::format("a={}&b={}&f=raw&mt=256&show=flips&sort=lost&ta={}&tb={}"
                                          "&sc=lm-eval-strict&ts=lm-eval-flexible&q=3",
                                          a, b, group_a, group_b);
    auto url = "file://" + report.string() + "#" + state;
    // encodeURIComponent writes '/' as %2F.
    auto encoded = std::regex_replace(state, std::regex("/"), "%2F");
    auto linked = chromium(dir, url, "--window-size=1400,1000 --dump-dom");
    EXPECT_EQ(attribute(linked, "data-state"), encoded) << name;

    // Under the page's own policy its script runs and no other inline
    // script does: escaping is not the only wall (an outside audit).
    auto html = e2e::slurp(report);
    html.insert(html.rfind("</body>"),
                "<script>document.body.setAttribute('data-injected', '1')</script>");
    const auto injected = report.parent_path() / "report-injected.html";
    std::ofstream(injected, std::ios::binary) << html;
    auto walled =
        chromium(dir, "file://" + injected.string(), "--window-size=1400,1000 --dump-dom");
    EXPECT_EQ(attribute(walled, "data-ready"), "1") << name;
    EXPECT_EQ(attribute(walled, "data-injected"), "(missing)") << name;
    EXPECT_EQ(attribute(linked, "data-open"), "3") << name;
    EXPECT_EQ(attribute(linked, "data-filter"), "flips") << name;
    EXPECT_EQ(attribute(linked, "data-servers"), a + "," + b) << name;
    EXPECT_EQ(attribute(linked, "data-transitions"), group_a + " -> " + group_b) << name;

    const auto shots = screenshot_dir();
    (void)chromium(dir, "file://" + report.string(),
                   fmt::format("--window-size=1400,5200 --screenshot={}",
                               (shots / (name + "-page.png")).string()));
    // Headless Chromium draws nothing once a page scrolls, so the linked view
    // (which scrolls to the open question) is taken in a window taller than
    // the page.
    (void)chromium(dir, url,
                   fmt::format("--window-size=1400,12000 --screenshot={}",
                               (shots / (name + "-explorer.png")).string()));
    EXPECT_TRUE(fs::exists(shots / (name + "-page.png")));
}

TEST(ReportBrowser, EightServersWithLongNamesKeepLabelsApartAndReadable) {
    if (!have_chromium()) {
        GTEST_SKIP() << "/usr/bin/chromium is missing; install it with "
                        "'scripts/install-deps.sh --browser'";
    }
    auto dir = e2e::scratch("report_browser_eight");
    auto db = dir / "r.sqlite";
    e2e::Sim plain({"--profile", "default"});
    e2e::Sim shifted({"--profile", "deepgemm"});
    std::vector<std::string> args = {"run",       "--framing", "raw,chat", "--max-tokens",
                                     "128,256",   "--dataset", "sample",   "--limit",
                                     "12",        "--repeats", "2",        "--db",
                                     db.string(), "--quiet"};
    std::vector<std::string> names;
    for (int i = 0; i < 8; ++i) {
        names.push_back(fmt::format("h100-fp8-{}-deepgemm-cutlass-tp{}-build", i, i + 1));
        ASSERT_GE(names.back().size(), 30U);
        args.push_back("--server");
        args.push_back(names.back() + "=" + (i % 2 ? shifted.url() : plain.url()));
    }
    auto o = e2e::run(args);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    o = e2e::run(
        {"report", "--db", db.string(), "--out", (dir / "out").string(), "--format", "html"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    check_report(dir, dir / "out" / "report.html", "eight-long-names", names[0], names[1],
                 names[0] + "/raw/256", names[3] + "/chat/128");
}

TEST(ReportBrowser, OfficialDemoReportKeepsLabelsApartAndReadable) {
    if (!have_chromium()) {
        GTEST_SKIP() << "/usr/bin/chromium is missing; install it with "
                        "'scripts/install-deps.sh --browser'";
    }
    const char* gsm8k = std::getenv("GSM8K_DIR");
    if (!gsm8k || !*gsm8k) {
        GTEST_SKIP() << "GSM8K_DIR is not set; the official demo's report needs it";
    }
    auto dir = e2e::scratch("report_browser_official");
    auto o = e2e::run({"demo", "--dataset", std::string(gsm8k) + "/test.jsonl", "--out",
                       (dir / "demo").string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    check_report(dir, dir / "demo" / "report.html", "official-demo", "default", "deepgemm",
                 "default/raw/256", "deepgemm/raw/256");
}

// A database of a and b, 4 questions on the raw framing, in scratch
// directory `name`, where b's answer to question 0 flips for every scorer.
std::filesystem::path one_flip_db(const std::string& name) {
    auto dir = e2e::scratch(name);
    auto db = dir / "r.sqlite";
    e2e::Sim sim;
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(),
                       "--framing", "raw", "--limit", "4", "--db", db.string(), "--quiet"});
    EXPECT_EQ(o.exit_code, 0) << o.err;
    e2e::exec(db, "UPDATE scores SET correct = 1 - correct WHERE response_id = (SELECT "
                  "response_id FROM requests WHERE server = 'b' AND question_idx = 0)");
    return db;
}

} // namespace

// A baseline's requests without a successful response are left out of the
// explorer's flips and the transition chart, as the comparisons leave them
// out: a killed baseline's unsent questions read as "35 questions flip",
// each a gain of the candidate, beside a verdict of 17, all lost (an audit).
TEST(ReportBrowser, ABaselinesUnansweredQuestionsAreNoFlips) {
    if (!have_chromium()) {
        GTEST_SKIP() << "/usr/bin/chromium is missing; install it with "
                        "'scripts/install-deps.sh --browser'";
    }
    const auto db = one_flip_db("report_browser_unsent");
    ASSERT_FALSE(HasFailure());
    const auto dir = db.parent_path();
    // a never sent questions 2 and 3.
    e2e::unsend(db, "server = 'a' AND question_idx >= 2");
    auto o = e2e::run(
        {"report", "--db", db.string(), "--out", (dir / "out").string(), "--format", "html"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto url = "file://" + (dir / "out" / "report.html").string() +
               "#a=a&b=b&show=flips&ta=a%2Fraw%2F256&tb=b%2Fraw%2F256";
    auto dom = chromium(dir, url, "--window-size=1400,1000 --dump-dom");
    EXPECT_EQ(attribute(dom, "data-ready"), "1");
    EXPECT_NE(dom.find("<span id=\"count\">1 question flips between a and b</span>"),
              std::string::npos)
        << dom.substr(dom.find("id=\"count\""), 200);
    EXPECT_TRUE(dom.find("2 questions in both; 50.0 points lost, 0.0 gained<") !=
                    std::string::npos ||
                dom.find("2 questions in both; 0.0 points lost, 50.0 gained<") != std::string::npos)
        << dom.substr(dom.find("questions in both"), 120);
}

// The explorer's count takes the singular for one: "1 questions flip between
// a and b" read as several.
TEST(ReportBrowser, OneFlipIsSingular) {
    if (!have_chromium()) {
        GTEST_SKIP() << "/usr/bin/chromium is missing; install it with "
                        "'scripts/install-deps.sh --browser'";
    }
    const auto db = one_flip_db("report_browser_one");
    ASSERT_FALSE(HasFailure());
    const auto dir = db.parent_path();
    auto o = e2e::run(
        {"report", "--db", db.string(), "--out", (dir / "out").string(), "--format", "html"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto url = "file://" + (dir / "out" / "report.html").string() +
               "#a=a&b=b&show=flips&ta=a%2Fraw%2F256&tb=b%2Fraw%2F256";
    auto dom = chromium(dir, url, "--window-size=1400,1000 --dump-dom");
    EXPECT_EQ(attribute(dom, "data-ready"), "1");
    EXPECT_NE(dom.find("<span id=\"count\">1 question flips between a and b</span>"),
              std::string::npos)
        << dom.substr(dom.find("id=\"count\""), 200);
    EXPECT_NE(dom.find("4 questions in both;"), std::string::npos);
    // The transition chart's net is the table's difference, in points of
    // accuracy (reports audit #1: it summed questions and called them
    // points, "0.2 points" beside a table's 25.0).
    EXPECT_TRUE(dom.find("4 questions in both; 25.0 points lost, 0.0 gained<") !=
                    std::string::npos ||
                dom.find("4 questions in both; 0.0 points lost, 25.0 gained<") != std::string::npos)
        << dom.substr(dom.find("questions in both"), 120);
    // The chart and the explorer name the scorer they count right answers by
    // (stats audit: a chart by vllm beside a table by lm-eval-strict).
    EXPECT_NE(dom.find("colour: points lost, gained or unchanged by vllm)"), std::string::npos);
    EXPECT_NE(dom.find("a right (vllm)"), std::string::npos);

    // A stop the server did not name is shown as unknown, not EOS, and a
    // stray `</think>` that opened no block is text, not reasoning set apart
    // (engine audit: llama-server's stops by "Question" read "EOS").
    e2e::exec(db, "UPDATE responses SET stop_reason = NULL, text = '</think>' || text WHERE "
                  "response_id = (SELECT response_id FROM requests WHERE server = 'a' AND "
                  "question_idx = 1)");
    e2e::exec(db, "UPDATE classifications SET stop_cause = 'unknown', opened = 0 WHERE "
                  "response_id = (SELECT response_id FROM requests WHERE server = 'a' AND "
                  "question_idx = 1)");
    // A server whose reasoning parser split the reasoning out (opened by
    // the classification) left the answer as text: only the reasoning is
    // set apart, and the answer keeps its highlighted extraction.
    e2e::exec(db, "UPDATE responses SET reasoning = 'thinking it over', text = 'The answer is "
                  "36.' WHERE response_id = (SELECT response_id FROM requests WHERE server = 'a' "
                  "AND question_idx = 2)");
    e2e::exec(db, "UPDATE scores SET extracted = '36' WHERE scorer = 'vllm' AND response_id = "
                  "(SELECT response_id FROM requests WHERE server = 'a' AND question_idx = 2)");
    e2e::exec(db, "UPDATE classifications SET opened = 1 WHERE response_id = (SELECT response_id "
                  "FROM requests WHERE server = 'a' AND question_idx = 2)");
    o = e2e::run(
        {"report", "--db", db.string(), "--out", (dir / "out2").string(), "--format", "html"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    dom = chromium(
        dir, "file://" + (dir / "out2" / "report.html").string() + "#a=a&b=b&f=raw&mt=256&q=1",
        "--window-size=1400,1000 --dump-dom");
    EXPECT_EQ(attribute(dom, "data-ready"), "1");
    EXPECT_NE(dom.find("stop_reason unknown (the server names no stop)"), std::string::npos)
        << dom.substr(dom.find("class=\"stop"), 200);
    EXPECT_EQ(dom.find("<span class=\"think\">&lt;/think&gt;"), std::string::npos);
    dom = chromium(
        dir, "file://" + (dir / "out2" / "report.html").string() + "#a=a&b=b&f=raw&mt=256&q=2",
        "--window-size=1400,1000 --dump-dom");
    const auto card = dom.find("<span class=\"think\">thinking it over</span>");
    ASSERT_NE(card, std::string::npos) << dom.substr(dom.find("id=\"detail\""), 400);
    const auto next_think = dom.find("<span class=\"think\">", card + 1);
    const auto mark = dom.find("<mark>", card);
    ASSERT_NE(mark, std::string::npos);
    EXPECT_TRUE(next_think == std::string::npos || next_think > mark)
        << "the answer was set apart as reasoning: " << dom.substr(card, 400);

    // A question of one 3,000-character word wraps in its box: the page is
    // no wider than the window.
    e2e::exec(db, "UPDATE questions SET question = replace(hex(zeroblob(1500)), '00', 'ab') "
                  "WHERE question_idx = 3");
    // And a right-to-left override in an answer shows as what it is: raw,
    // "\u202E21" reads "12" (interop audit).
    e2e::exec(db, "UPDATE responses SET text = 'The answer is ' || char(8238) || '21 ok' WHERE "
                  "response_id = (SELECT response_id FROM requests WHERE server = 'a' AND "
                  "question_idx = 3)");
    o = e2e::run(
        {"report", "--db", db.string(), "--out", (dir / "out3").string(), "--format", "html"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    dom = chromium(dir,
                   "file://" + with_layout_check(dir / "out3" / "report.html").string() +
                       "#a=a&b=b&f=raw&mt=256&q=3",
                   "--window-size=1400,1000 --dump-dom");
    EXPECT_EQ(attribute(dom, "data-ready"), "1");
    EXPECT_NE(dom.find("ababababab"), std::string::npos);
    EXPECT_EQ(attribute(dom, "data-overflow"), "0");
    EXPECT_NE(dom.find("The answer is &lt;U+202E&gt;21 ok"), std::string::npos)
        << dom.substr(dom.find("The answer is"), 80);
    EXPECT_EQ(dom.find("\u202E"), std::string::npos);
}
