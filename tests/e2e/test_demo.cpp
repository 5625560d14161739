// `diffeval demo` on the built-in sample set: the comparison it prints is the
// question-level one, its p-value is what an independent computation over the
// stored correctness gives, and no sentence anywhere claims "within noise".
#include "e2e.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

using nlohmann::json;

namespace {

// Per-question mean correctness of one group, by question_idx, straight from
// the database's public view.
std::map<int, double> question_means(const std::filesystem::path& db, const std::string& server,
                                     const std::string& framing, int max_tokens) {
    std::map<int, double> out;
    for (const auto& row : e2e::query_rows(
             db, "SELECT question_idx, avg(correct) FROM v_scores WHERE scorer = 'vllm' AND "
                 "server = '" +
                     server + "' AND framing = '" + framing + "' AND max_tokens = " +
                     std::to_string(max_tokens) + " GROUP BY question_idx")) {
        const auto bar = row.find('|');
        out[std::stoi(row.substr(0, bar))] = std::stod(row.substr(bar + 1));
    }
    return out;
}

size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
        ++n;
    }
    return n;
}

} // namespace

TEST(Demo, SampleComparisonIsTheQuestionLevelTestAndNeverSaysWithinNoise) {
    auto dir = e2e::scratch("demo-sample");
    auto o = e2e::run({"demo", "--dataset", "sample", "--out", dir.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto db = dir / "diffeval-demo.sqlite";

    // Independent computation: the sign-flip distribution of the 48
    // per-question differences, enumerated over every sign of the ones that
    // are not zero, with the doubled mid-p.
    const auto a = question_means(db, "default", "raw", 256);
    const auto b = question_means(db, "deepgemm", "raw", 256);
    ASSERT_EQ(a.size(), 48u);
    ASSERT_EQ(b.size(), 48u);
    std::vector<double> moving;
    double t = 0;
    for (const auto& [q, pa] : a) {
        const double d = b.at(q) - pa;
        if (std::abs(d) > 1e-12) {
            moving.push_back(d);
            t += d;
        }
    }
    ASSERT_LT(moving.size(), 25u);
    double beyond = 0, at = 0;
    for (uint64_t mask = 0; mask < (uint64_t{1} << moving.size()); ++mask) {
        double sum = 0;
        for (size_t i = 0; i < moving.size(); ++i) {
            sum += ((mask >> i) & 1U) ? moving[i] : -moving[i];
        }
        if (std::abs(sum) > std::abs(t) + 1e-9) {
            beyond += 1;
        } else if (std::abs(sum) >= std::abs(t) - 1e-9) {
            at += 1;
        }
    }
    const double total = std::ldexp(1.0, static_cast<int>(moving.size()));
    const double p = (beyond + at) / total;
    const double p_mid = std::abs(t) < 1e-9 ? 1.0 : (beyond + 0.5 * at) / total;

    const auto report = json::parse(e2e::slurp(dir / "summary.json"));
    bool found = false;
    for (const auto& c : report["diff"]["comparisons"]) {
        if (c["scorer"] == "vllm" && c["a"]["framing"] == "raw" && c["a"]["max_tokens"] == 256 &&
            c["b"]["server"] == "deepgemm") {
            found = true;
            EXPECT_EQ(c["questions"], 48);
            EXPECT_NEAR(c["test"]["p"].get<double>(), p, 1e-12);
            EXPECT_NEAR(c["test"]["p_mid"].get<double>(), p_mid, 1e-12);
            EXPECT_EQ(c["test"]["questions_differing"].get<size_t>(), moving.size());
            EXPECT_EQ(c["test"]["computed"], "exact");
        }
    }
    EXPECT_TRUE(found) << report["diff"].dump();

    // No output claims "within noise", and none presents a zero noise
    // measurement as if it were one.
    for (const auto& text : {o.out, e2e::slurp(dir / "report.md"), e2e::slurp(dir / "summary.json"),
                             e2e::slurp(dir / "report.html")}) {
        EXPECT_EQ(text.find("within noise"), std::string::npos);
        EXPECT_EQ(text.find("within run-to-run noise"), std::string::npos);
        EXPECT_EQ(text.find("noise floor"), std::string::npos);
        EXPECT_EQ(text.find("±0.0 points"), std::string::npos);
    }
    EXPECT_NE(o.out.find("Verdict: "), std::string::npos) << o.out;
    // A flip list cut to 3 rows says so beside its count.
    EXPECT_NE(o.out.find("Right more often in default/raw/256 (4 questions, the first 3 shown)"),
              std::string::npos)
        << o.out;
    // A headline sentence never says "no detectable difference" beside an
    // interval that excludes 0 without saying why.
    for (const auto& sentence : report["headline_sentences"]) {
        const auto text = sentence.get<std::string>();
        const auto ci = text.find("95% CI [");
        if (text.find("no detectable difference") == std::string::npos || ci == std::string::npos) {
            continue;
        }
        const double lo = std::stod(text.substr(ci + 8));
        const double hi = std::stod(text.substr(text.find(", ", ci) + 2));
        if (lo > 0 || hi < 0) {
            EXPECT_NE(text.find("excludes 0, but the sign-flip test does not reject"),
                      std::string::npos)
                << text;
        }
    }
    // The probe's shift at the first token is in the headline with its
    // numbers, though every accuracy verdict says no detectable difference.
    bool probe_said = false;
    for (const auto& sentence : report["headline_sentences"]) {
        const auto text = sentence.get<std::string>();
        if (text.find("decision-point probe separates deepgemm from default on raw") !=
            std::string::npos) {
            probe_said = text.find("sign-flip p ") != std::string::npos;
        }
    }
    EXPECT_TRUE(probe_said) << report["headline_sentences"].dump(1);
    EXPECT_NE(e2e::slurp(dir / "report.md").find("decision-point probe separates deepgemm"),
              std::string::npos);

    // The forest plot shows every comparison, coloured by its verdict.
    const auto html = e2e::slurp(dir / "report.html");
    const auto forest_at = html.find("<figure class=\"forest\">");
    ASSERT_NE(forest_at, std::string::npos);
    const auto forest = html.substr(forest_at, html.find("</figure>", forest_at) - forest_at);
    EXPECT_EQ(count_of(forest, "<circle cx="), report["diff"]["comparisons"].size());
    EXPECT_NE(o.out.find("Run-to-run noise: "), std::string::npos) << o.out;
}

// An --out that cannot take the results is refused before the experiment
// runs (it ran the whole demo, then failed on the path): one line, exit 2.
// So is one where a file the demo writes is a directory (report.html: the
// whole demo ran, then 'cannot write out/report.html: Is a directory', exit 1).
TEST(Demo, AnOutThatCannotTakeTheResultsIsRefusedFirst) {
    auto dir = e2e::scratch("demo-bad-out");
    std::ofstream(dir / "a-file") << "mine\n";
    std::filesystem::create_directories(dir / "locked");
    std::filesystem::permissions(dir / "locked", std::filesystem::perms::owner_read |
                                                     std::filesystem::perms::owner_exec);
    const std::vector<std::pair<std::filesystem::path, std::string>> cases = {
        {dir / "a-file", "it is a file, not a directory; choose another --out"},
        {dir / "a-file" / "sub", (dir / "a-file").string() + " is a file, not a directory"},
        {dir / "locked" / "new", "cannot write in " + (dir / "locked").string()},
        // A file the demo writes at the end, in the way as a directory.
        {dir / "html-is-a-dir",
         (dir / "html-is-a-dir" / "report.html").string() +
             " is a directory, where a file goes; remove it or choose another --out"},
        {dir / "db-is-a-dir", (dir / "db-is-a-dir" / "diffeval-demo.sqlite").string() +
                                  " is a directory, where a file goes"},
    };
    std::filesystem::create_directories(dir / "html-is-a-dir" / "report.html");
    std::filesystem::create_directories(dir / "db-is-a-dir" / "diffeval-demo.sqlite" / "x");
    for (const auto& [out, says] : cases) {
        auto o = e2e::run({"demo", "--dataset", "sample", "--limit", "2", "--out", out.string()});
        EXPECT_EQ(o.exit_code, 2) << out << ": " << o.err;
        EXPECT_EQ(count_of(o.err, "\n"), 1u) << o.err;
        EXPECT_NE(o.err.find("diffeval: --out " + out.string() + ": "), std::string::npos) << o.err;
        EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
        EXPECT_EQ(o.out.find("simulated server"), std::string::npos) << "nothing started";
    }
    EXPECT_EQ(e2e::slurp(dir / "a-file"), "mine\n");
    EXPECT_TRUE(std::filesystem::is_empty(dir / "locked"));
    EXPECT_TRUE(std::filesystem::is_empty(dir / "html-is-a-dir" / "report.html"));
    EXPECT_FALSE(std::filesystem::exists(dir / "html-is-a-dir" / "diffeval-demo.sqlite"));
    std::filesystem::permissions(dir / "locked", std::filesystem::perms::owner_all);
}

// --limit 0 ran every question (83,097 requests on the official set) while
// -1 was refused: 0 is refused alike, all questions is the flag's absence,
// and --help shows no default of 0.
TEST(Demo, ALimitOfZeroIsRefusedAsMinusOneIs) {
    auto dir = e2e::scratch("demo-limit-0");
    for (const std::string limit : {"0", "-1"}) {
        auto o = e2e::run(
            {"demo", "--dataset", "sample", "--limit", limit, "--out", (dir / "out").string()});
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_EQ(o.err, "diffeval: --limit " + limit + ": must be between 1 and 2147483647\n");
        EXPECT_EQ(o.out.find("simulated server"), std::string::npos) << "nothing started";
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "out"));
    auto help = e2e::run({"demo", "--help"});
    const auto line_at = help.out.find("--limit");
    ASSERT_NE(line_at, std::string::npos) << help.out;
    const auto line = help.out.substr(line_at, help.out.find('\n', line_at) - line_at);
    EXPECT_EQ(line.find("=0"), std::string::npos) << line;
    EXPECT_NE(line.find("default: all"), std::string::npos) << line;
}

// Two demos into one --out (two CI jobs): the second removed the database
// the first was writing. While another diffeval holds that database's lock
// the demo is refused, exit 2, and the file is left as it is.
TEST(Demo, AnOutWhoseDatabaseAnotherProcessWritesIsRefusedAndKept) {
    auto dir = e2e::scratch("demo-busy-out");
    const auto db = dir / "diffeval-demo.sqlite";
    std::ofstream(db) << "another job's results\n";
    const int held = ::open((db.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(held, 0);
    ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
    auto o = e2e::run({"demo", "--dataset", "sample", "--limit", "2", "--out", dir.string()});
    ::close(held);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_EQ(count_of(o.err, "\n"), 1u) << o.err;
    EXPECT_NE(o.err.find(db.string() + " is in use by another diffeval process"), std::string::npos)
        << o.err;
    EXPECT_NE(o.err.find("give another --out"), std::string::npos) << o.err;
    EXPECT_EQ(e2e::slurp(db), "another job's results\n");
    EXPECT_FALSE(std::filesystem::exists(dir / "report.md"));
}

// The demo replaces its own database in --out, and nothing else of that name:
// a file a run wrote other servers into, or another program's, was deleted.
TEST(Demo, AnOutWhoseDatabaseHoldsOtherResultsIsRefusedAndKept) {
    auto dir = e2e::scratch("demo-other-db");
    const auto db = dir / "diffeval-demo.sqlite";
    const std::vector<std::string> demo = {"demo", "--dataset", "sample",    "--limit",
                                           "2",    "--out",     dir.string()};
    // Its own database, from an earlier demo, is replaced.
    ASSERT_EQ(e2e::run(demo).exit_code, 0);
    ASSERT_EQ(e2e::run(demo).exit_code, 0);
    // Results of another server in the same file are kept.
    e2e::Sim mine;
    ASSERT_EQ(e2e::run({"run", "--server", "mine=" + mine.url(), "--dataset", "sample", "--limit",
                        "2", "--framing", "raw", "--db", db.string(), "--quiet"})
                  .exit_code,
              0);
    auto o = e2e::run(demo);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_EQ(o.err, "diffeval: " + db.string() +
                         " holds results of servers the demo does not run (mine); the demo "
                         "replaces only its own database, so it was left as it is: give "
                         "another --out\n");
    EXPECT_EQ(e2e::query(db, "SELECT count(*) FROM v_responses WHERE server = 'mine'"), "2");
    // Another program's file of that name is kept too.
    std::filesystem::remove(db);
    std::ofstream(db) << "not ours\n";
    o = e2e::run(demo);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("is not a database the demo wrote"), std::string::npos) << o.err;
    EXPECT_EQ(e2e::slurp(db), "not ours\n");
}

namespace {

// The database of a demo of `limit` sample questions, one repeat, made in
// `dir`/d; empty (the failure said) when the demo failed.
std::filesystem::path small_demo(const std::filesystem::path& dir, const char* limit) {
    auto made = e2e::run({"demo", "--dataset", "sample", "--limit", limit, "--repeats", "1",
                          "--out", (dir / "d").string()});
    EXPECT_EQ(made.exit_code, 0) << made.err;
    return made.exit_code == 0 ? dir / "d" / "diffeval-demo.sqlite" : std::filesystem::path();
}

} // namespace

// A file's views are the file's: diffeval reads what v_probes and
// v_request_bodies compute from SQL of its own. A colleague's file whose
// v_probes was an endless recursive query held `diff`, `report` and the
// gate's probe check at full CPU until killed (a hostile-file audit), and a
// view redefined in the file changed what they printed.
TEST(Demo, ViewsRedefinedInTheFileChangeNothingDiffevalPrints) {
    auto dir = e2e::scratch("demo-views");
    const auto intact = small_demo(dir, "3");
    ASSERT_FALSE(intact.empty());
    const auto edited = dir / "edited.sqlite";
    std::filesystem::copy_file(intact, edited);
    e2e::exec(edited,
              // (Were it read, this v_probes would give every question the
              // same P(open) on both sides; an endless one hung the reader.)
              "DROP VIEW v_probes; CREATE VIEW v_probes AS SELECT q.probe, q.server, q.framing, "
              "q.repeat, q.question_idx, q.dataset, 0.1 AS p_direct, 0.0 AS p_whitespace, NULL AS "
              "p_after_whitespace, 0.5 AS p_open, 0 AS bounded, NULL AS chosen, NULL AS top_json, "
              "NULL AS top_after_whitespace, NULL AS response_id, NULL AS "
              "response_id_after_whitespace FROM probe_requests q WHERE q.step = 0; "
              "DROP VIEW v_requests; DROP VIEW v_probe_requests; DROP VIEW v_responses; "
              "DROP VIEW v_request_bodies; CREATE VIEW v_request_bodies AS SELECT body_id, "
              "body_sha256, '{\"stop\": [\"6\"]}' AS request_json FROM request_bodies;");
    const std::vector<std::vector<std::string>> commands = {
        {"diff", "default/raw", "deepgemm/raw"},
        {"gate", "--baseline", "default", "--candidate", "deepgemm", "--max-probe-shift", "1"},
        {"summary"},
    };
    for (auto args : commands) {
        auto on = [&](const std::filesystem::path& db) {
            auto a = args;
            a.insert(a.begin() + 1, {"--db", db.string()});
            return e2e::run(a);
        };
        auto want = on(intact);
        auto got = on(edited);
        EXPECT_EQ(got.exit_code, want.exit_code) << args[0] << ": " << got.err;
        for (auto* o : {&want.out, &got.out}) {
            for (const auto& db : {intact.string(), edited.string()}) {
                for (size_t at = o->find(db); at != std::string::npos; at = o->find(db)) {
                    o->replace(at, db.size(), "DB");
                }
            }
        }
        EXPECT_EQ(got.out, want.out) << args[0];
    }
    // Export reads each request's body with its shared prefix.
    for (const auto& [db, out] :
         {std::pair{intact, dir / "x-intact"}, {edited, dir / "x-edited"}}) {
        auto o = e2e::run(
            {"export", "--db", db.string(), "--format", "lm-eval-samples", "--out", out.string()});
        ASSERT_EQ(o.exit_code, 0) << o.err;
    }
    // (Each file's name holds the time of its export.)
    const auto contents = [](const std::filesystem::path& out) {
        std::vector<std::pair<std::string, std::string>> files;
        for (const auto& f : std::filesystem::directory_iterator(out)) {
            const auto name = f.path().filename().string();
            files.emplace_back(name.substr(0, name.rfind('_')), e2e::slurp(f.path()));
        }
        std::sort(files.begin(), files.end());
        return files;
    };
    const auto want = contents(dir / "x-intact");
    EXPECT_EQ(want.size(), 12u);
    EXPECT_EQ(contents(dir / "x-edited"), want);
}

// A name read from a file reaches terminals, tables and JSON as it is: one
// no diffeval writes (a terminal escape, bytes that are not UTF-8) is
// refused, one line, exit 2, as a run refuses it. A colleague's file whose
// server and scorer names held escapes cleared the screen of whoever ran
// `summary`, and `merge` carried them into its output (a hostile-file audit).
TEST(Demo, NamesNoDiffevalWritesAreRefusedWhereTheyAreRead) {
    auto dir = e2e::scratch("demo-names");
    const auto intact = small_demo(dir, "2");
    ASSERT_FALSE(intact.empty());
    const auto server = dir / "server.sqlite";
    const auto scorer = dir / "scorer.sqlite";
    std::filesystem::copy_file(intact, server);
    std::filesystem::copy_file(intact, scorer);
    e2e::exec(server, "UPDATE requests SET server = 'x' || char(27) || '[2Jy' WHERE server = "
                      "'deepgemm'; UPDATE probe_requests SET server = 'x' || char(27) || '[2Jy' "
                      "WHERE server = 'deepgemm'");
    // A scorer stored under such a name, and its scores (as an older
    // diffeval's rescore of the file would have left them).
    e2e::exec(scorer,
              "INSERT INTO scorers VALUES ('s' || char(27) || ']0;t' || char(7), 1, 'version = "
              "1\n[extract]\npattern = ''\\p{Nd}+''\nmatch = \"last\"\n[gold]\nfrom = "
              "\"extract\"\n[compare]\nkind = \"python_int\"\n', '/tmp/s.toml', "
              "'2026-01-01T00:00:00Z'); INSERT INTO scores SELECT response_id, 's' || char(27) || "
              "']0;t' || char(7), scorer_version, score_text, extracted, valid, correct FROM "
              "scores WHERE scorer = 'vllm'");
    const std::vector<std::pair<std::filesystem::path, std::string>> files = {
        {server, "a stored server name, 'x [2Jy', holds a control character"},
        {scorer, "scorer name 's ]0;t ', which holds a control character"},
    };
    for (const auto& [db, says] : files) {
        for (const std::vector<std::string>& args :
             {std::vector<std::string>{"summary", "--db", db.string()},
              {"gate", "--db", db.string(), "--require-complete"},
              {"merge", (dir / ("m-" + db.filename().string())).string(), db.string()}}) {
            auto o = e2e::run(args);
            EXPECT_EQ(o.exit_code, 2) << args[0] << ": " << o.err;
            EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
            EXPECT_NE(o.err.find(says), std::string::npos) << args[0] << ": " << o.err;
            EXPECT_EQ(o.out.find('\x1b'), std::string::npos) << args[0];
            EXPECT_EQ(o.err.find('\x1b'), std::string::npos) << args[0];
        }
        EXPECT_FALSE(std::filesystem::exists(dir / ("m-" + db.filename().string())));
    }
    // The intact file reads as before.
    EXPECT_EQ(e2e::run({"summary", "--db", intact.string()}).exit_code, 0);
}
