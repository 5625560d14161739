// `diffeval gate --baseline-db`: the baseline group comes from another
// database (the last green run's artifact), servers of the same name in the
// two files stay apart, a regression fails and a rerun passes, and two runs
// that did not ask the same questions are refused.
#include "e2e.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <fstream>
#include <thread>

namespace {

std::string run_db(const std::filesystem::path& dir, const std::string& name,
                   const std::vector<std::string>& sim_args) {
    e2e::Sim sim(sim_args);
    auto db = (dir / (name + ".sqlite")).string();
    auto o = e2e::run({"run", "--server", "vllm=" + sim.url(), "--framing", "raw", "--repeats", "3",
                       "--db", db, "--quiet"});
    EXPECT_EQ(o.exit_code, 0) << o.err;
    return db;
}

} // namespace

TEST(GateBaselineDb, RegressionAgainstAnotherDatabaseFailsAndRerunPasses) {
    auto dir = e2e::scratch("gate-baseline-db");
    auto main_db = run_db(dir, "main", {"--profile", "default"});
    auto same_db = run_db(dir, "same", {"--profile", "default"});
    auto profile = dir / "worse.toml";
    std::ofstream(profile) << "version = 1\nname = \"worse\"\n[behaviour]\nreasoning_rate = 0.6\n";
    auto worse_db = run_db(dir, "worse", {"--profile", profile.string()});
    const auto main_before = e2e::slurp(main_db);

    // 48 questions bound a drop to within 6.1 points when none differs
    // (docs/statistics.md), so the rerun is checked against a 7-point margin.
    // The combined database goes in a directory of its own under TMPDIR,
    // and goes with it.
    const auto tmp = dir / "tmp";
    std::filesystem::create_directories(tmp);
    auto gate = [&](const std::string& db, const char* max_drop) {
        return e2e::run({"gate", "--db", db, "--baseline-db", main_db, "--baseline", "vllm/raw",
                         "--candidate", "vllm/raw", "--max-drop", max_drop, "--resamples", "2000"},
                        {"TMPDIR=" + tmp.string()});
    };
    auto bad = gate(worse_db, "1");
    EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
    EXPECT_NE(bad.out.find("FAIL  paired baseline:vllm/raw/256 -> vllm/raw/256"), std::string::npos)
        << bad.out;
    auto good = gate(same_db, "7");
    EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
    EXPECT_NE(good.out.find("PASS  paired baseline:vllm/raw/256 -> vllm/raw/256"),
              std::string::npos)
        << good.out;
    EXPECT_TRUE(std::filesystem::is_empty(tmp));
    // Neither input is touched.
    EXPECT_EQ(e2e::slurp(main_db), main_before);
    EXPECT_EQ(e2e::query(worse_db, "SELECT count(*) FROM servers WHERE name LIKE 'baseline:%'"),
              "0");
}

TEST(GateBaselineDb, DifferentQuestionsUnderOneDatasetNameAreRefused) {
    auto dir = e2e::scratch("gate-baseline-db-questions");
    auto main_db = run_db(dir, "main", {"--profile", "default"});
    auto pr_db = run_db(dir, "pr", {"--profile", "default"});
    // A server neither file holds is said with the servers of the file the
    // flag reads, as the user named them (not the combined copy's
    // "baseline:" names, both files' servers in one list).
    for (const auto& [baseline, candidate, says] :
         {std::tuple{"nope", "vllm",
                     "no server 'nope' in --baseline-db " + main_db + "; its servers: vllm\n"},
          std::tuple{"vllm", "nope",
                     "no server 'nope' in --db " + pr_db + "; its servers: vllm\n"}}) {
        auto r = e2e::run({"gate", "--db", pr_db, "--baseline-db", main_db, "--baseline", baseline,
                           "--candidate", candidate, "--max-drop", "1"});
        EXPECT_EQ(r.exit_code, 2) << r.out;
        EXPECT_EQ(r.err, "diffeval: " + says);
    }
    e2e::exec(main_db,
              "UPDATE questions SET question = question || ' (v2)' WHERE question_idx = 3");
    auto o = e2e::run({"gate", "--db", pr_db, "--baseline-db", main_db, "--baseline", "vllm",
                       "--candidate", "vllm", "--max-drop", "1"});
    EXPECT_EQ(o.exit_code, 2) << o.out;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_NE(o.err.find("--baseline-db " + main_db), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("question 3 has another text there than here"), std::string::npos)
        << o.err;
    // Another gold answer is named as such, not as another text.
    e2e::exec(main_db, "UPDATE questions SET question = replace(question, ' (v2)', ''), "
                       "answer = answer || '0' WHERE question_idx = 3");
    o = e2e::run({"gate", "--db", pr_db, "--baseline-db", main_db, "--baseline", "vllm",
                  "--candidate", "vllm", "--max-drop", "1"});
    EXPECT_EQ(o.exit_code, 2) << o.out;
    EXPECT_NE(o.err.find("question 3 has another gold answer there than here"), std::string::npos)
        << o.err;
    auto missing = e2e::run({"gate", "--db", pr_db, "--baseline-db", (dir / "nope.sqlite").string(),
                             "--baseline", "vllm", "--candidate", "vllm", "--max-drop", "1"});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_NE(missing.err.find("no database"), std::string::npos) << missing.err;
    // A file that is no diffeval database is said as everywhere, under the
    // flag that named it: it was wrapped in advice to free space in TMPDIR,
    // and --db's own was said of --baseline-db (an outside audit).
    const auto text = (dir / "notes.sqlite").string();
    std::ofstream(text) << "hello\n";
    for (const auto& [db, baseline] : {std::pair{pr_db, text}, std::pair{text, main_db}}) {
        auto r = e2e::run({"gate", "--db", db, "--baseline-db", baseline, "--baseline", "vllm",
                           "--candidate", "vllm", "--max-drop", "1"});
        EXPECT_EQ(r.exit_code, 2) << r.out;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(r.err.rfind("diffeval: " + text + " is not a diffeval database", 0), 0u) << r.err;
        EXPECT_EQ(r.err.find("TMPDIR"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("free space"), std::string::npos) << r.err;
    }
    // A TMPDIR that is no directory is the user's to mend (it was an
    // "internal error ... please report it").
    auto no_tmp = e2e::run({"gate", "--db", pr_db, "--baseline-db", main_db, "--baseline", "vllm",
                            "--candidate", "vllm", "--max-drop", "1"},
                           {"TMPDIR=" + (dir / "no-such-dir").string()});
    EXPECT_EQ(no_tmp.exit_code, 2) << no_tmp.err;
    EXPECT_EQ(std::count(no_tmp.err.begin(), no_tmp.err.end(), '\n'), 1) << no_tmp.err;
    EXPECT_NE(no_tmp.err.find("--baseline-db needs a temporary directory, and TMPDIR " +
                              (dir / "no-such-dir").string() + " is none"),
              std::string::npos)
        << no_tmp.err;
}

// The probe's readings of the baseline database stay the baseline's: the probe
// check compares a server against its own baseline, measured on the same
// bodies in both files, and a shift between the two databases fails it.
TEST(GateBaselineDb, TheProbeIsComparedAgainstTheBaselineDatabase) {
    auto dir = e2e::scratch("gate-baseline-db-probe");
    auto probed = [&](const std::string& name, const std::vector<std::string>& sim_args) {
        e2e::Sim sim(sim_args);
        auto db = (dir / (name + ".sqlite")).string();
        auto o = e2e::run({"run", "--server", "vllm=" + sim.url(), "--framing", "raw", "--limit",
                           "12", "--probe", "think-open", "--db", db, "--quiet"});
        EXPECT_EQ(o.exit_code, 0) << o.err;
        return db;
    };
    auto main_db = probed("main", {"--profile", "default"});
    auto same_db = probed("same", {"--profile", "default"});
    auto profile = dir / "eager.toml";
    std::ofstream(profile) << "version = 1\nname = \"eager\"\n[behaviour]\nreasoning_rate = 0.9\n";
    auto eager_db = probed("eager", {"--profile", profile.string()});
    auto gate = [&](const std::string& db) {
        return e2e::run({"gate", "--db", db, "--baseline-db", main_db, "--baseline", "vllm/raw",
                         "--candidate", "vllm/raw", "--max-probe-shift", "0.5"});
    };
    auto good = gate(same_db);
    EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
    EXPECT_NE(good.out.find("PASS  probe_shift baseline:vllm/raw -> vllm/raw"), std::string::npos)
        << good.out;
    EXPECT_NE(good.out.find("P(open) logit shift 0.000 (95% CI [0.000, 0.000]"), std::string::npos)
        << good.out;
    auto bad = gate(eager_db);
    EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
    EXPECT_NE(bad.out.find("FAIL  probe_shift baseline:vllm/raw -> vllm/raw"), std::string::npos)
        << bad.out;
}

// A gate a CI job cancels (SIGTERM) or whose terminal closed (SIGHUP) left
// its copy of both databases under TMPDIR, as big as the two (a user-side
// audit): the signal removes it, and the gate still ends by the signal.
TEST(GateBaselineDb, ASignalLeavesNoCopyUnderTmpdir) {
    auto dir = e2e::scratch("gate-baseline-db-signal");
    auto main_db = run_db(dir, "main", {"--profile", "default"});
    auto other_db = run_db(dir, "other", {"--profile", "default"});
    const auto tmp = dir / "tmp";
    std::filesystem::create_directories(tmp);
    int caught = 0;
    for (int sig : {SIGTERM, SIGHUP}) {
        // The copy lives while the gate combines and analyses: signalled
        // then, unless the gate ended first (tried again).
        for (int attempt = 0; attempt < 20; ++attempt) {
            e2e::Child gate({"gate", "--db", other_db, "--baseline-db", main_db, "--baseline",
                             "vllm/raw", "--candidate", "vllm/raw", "--max-drop", "7"},
                            {"TMPDIR=" + tmp.string()});
            bool seen = false;
            for (int i = 0; i < 5000 && !seen; ++i) {
                seen = !std::filesystem::is_empty(tmp);
                if (!seen) {
                    if (gate.wait_for(std::chrono::milliseconds(0))) {
                        break;
                    }
                    std::this_thread::sleep_for(std::chrono::microseconds(200));
                }
            }
            if (!seen) {
                gate.wait();
                continue;
            }
            const int status = gate.stop(sig);
            if (status == 0 || status == 1) {
                continue; // it ended before the signal came
            }
            EXPECT_EQ(status, 128 + sig);
            EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "signal " << sig;
            ++caught;
            break;
        }
        std::filesystem::remove_all(tmp);
        std::filesystem::create_directories(tmp);
    }
    EXPECT_EQ(caught, 2) << "the gate ended before each signal every time";
}

// A framing the baseline ran and the candidate did not is named as not
// judged (SKIP), in the gate and in diff: the gate checked raw and said
// nothing of chat, so a pull request that stopped running a framing passed
// without a word (gate audit).
TEST(GateBaselineDb, AFramingTheCandidateNeverRanIsNamedNotJudged) {
    auto dir = e2e::scratch("gate-baseline-db-framing");
    e2e::Sim sim;
    const auto main_db = (dir / "main.sqlite").string();
    const auto pr_db = (dir / "pr.sqlite").string();
    for (const auto& [db, framings] : {std::pair{main_db, "raw,chat"}, std::pair{pr_db, "raw"}}) {
        auto o = e2e::run({"run", "--server", "vllm=" + sim.url(), "--framing", framings, "--limit",
                           "20", "--db", db, "--quiet"});
        ASSERT_EQ(o.exit_code, 0) << o.err;
    }
    const auto json_path = (dir / "gate.json").string();
    auto o = e2e::run({"gate", "--db", pr_db, "--baseline-db", main_db, "--baseline", "vllm",
                       "--candidate", "vllm", "--max-drop", "50", "--json", json_path});
    EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
    EXPECT_NE(o.out.find("SKIP  paired baseline:vllm/chat/256 -> vllm/chat/256"), std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("not judged: vllm has no group to pair with baseline:vllm/chat/256 (it "
                         "never ran chat/256)"),
              std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("PASS: the one check passed, 1 not judged (SKIP)"), std::string::npos)
        << o.out;
    const auto j = nlohmann::json::parse(e2e::slurp(json_path));
    ASSERT_EQ(j["checks"].size(), 2u) << j;
    EXPECT_EQ(j["checks"][1]["status"], "skipped") << j;
    EXPECT_TRUE(j["checks"][1]["measured"].is_null()) << j;
    // diff names it too, in text and JSON.
    const auto both = (dir / "both.sqlite").string();
    auto r = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw,chat", "--limit",
                       "20", "--db", both, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = e2e::run({"run", "--server", "b=" + sim.url(), "--framing", "raw", "--limit", "20", "--db",
                  both, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto d = e2e::run({"diff", "a", "b", "--db", both});
    EXPECT_EQ(d.exit_code, 0) << d.err;
    EXPECT_NE(d.out.find("Not compared: b has no group to pair with a/chat/256 (it never ran "
                         "chat/256)."),
              std::string::npos)
        << d.out;
    d = e2e::run({"diff", "a", "b", "--db", both, "--format", "json"});
    EXPECT_EQ(nlohmann::json::parse(d.out)["not_compared"],
              nlohmann::json::parse(R"([{"a": "a/chat/256", "b": "b/chat/256"}])"))
        << d.out;
}

// Two databases rescored on the text after the think block are gated on
// that text: the combined copy was scored on the full text, and the gate
// printed accuracies neither database's summary gives (an interop audit).
// A baseline scored on another text than the candidate is refused, as
// merge refuses such inputs.
TEST(GateBaselineDb, TheCopyIsScoredOnTheTextBothWereScoredOn) {
    auto dir = e2e::scratch("gate-baseline-db-score-text");
    auto main_db = run_db(dir, "main", {"--profile", "deepgemm"});
    auto full_db = (dir / "full.sqlite").string();
    std::filesystem::copy_file(main_db, full_db);
    auto pr_db = (dir / "pr.sqlite").string();
    std::filesystem::copy_file(main_db, pr_db);
    for (const auto& db : {main_db, pr_db}) {
        auto r = e2e::run({"rescore", "--db", db, "--score-text", "after-think"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    const auto accuracy = [](const std::string& db) {
        auto s = e2e::run({"summary", "--db", db, "--format", "json"});
        EXPECT_EQ(s.exit_code, 0) << s.err;
        const double a = nlohmann::json::parse(s.out)["groups"][0]["accuracy"]["vllm"]["mean"];
        return fmt::format("{:.1f}%", 100 * a);
    };
    const auto after = accuracy(main_db);
    ASSERT_NE(after, accuracy(full_db)) << "the test needs texts that score otherwise";
    auto g = e2e::run({"gate", "--db", pr_db, "--baseline-db", main_db, "--baseline", "vllm/raw",
                       "--candidate", "vllm/raw", "--max-drop", "50"});
    EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
    EXPECT_NE(g.out.find("(" + after + " -> " + after), std::string::npos) << g.out;

    auto mixed = e2e::run({"gate", "--db", pr_db, "--baseline-db", full_db, "--baseline",
                           "vllm/raw", "--candidate", "vllm/raw", "--max-drop", "50"});
    EXPECT_EQ(mixed.exit_code, 2) << mixed.out;
    EXPECT_EQ(mixed.err, "diffeval: --baseline-db " + full_db + " is scored on the full text and " +
                             pr_db +
                             " on the after-think text (rescore --score-text): accuracies of two "
                             "texts compare nothing; rescore one like the other, then gate\n");
}
