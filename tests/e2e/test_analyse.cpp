// `diffeval summary`, `diff` and `rescore` on a run against the simulator:
// the tables print, the JSON has the documented shape and adds up, and
// recomputing from stored text gives identical numbers.
#include "e2e.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using nlohmann::json;

namespace {

class Analyse : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir = new std::filesystem::path(e2e::scratch("analyse"));
        db = new std::string((*dir / "r.sqlite").string());
        e2e::Sim a({"--profile", "default"});
        e2e::Sim b({"--profile", "deepgemm"});
        auto o = e2e::run({"run", "--server", "default=" + a.url(), "--server",
                           "deepgemm=" + b.url(), "--framing", "raw,chat", "--max-tokens", "128",
                           "--repeats", "3", "--db", *db, "--quiet"});
        ASSERT_EQ(o.exit_code, 0) << o.err;
    }
    static std::filesystem::path* dir;
    static std::string* db;
};

std::filesystem::path* Analyse::dir = nullptr;
std::string* Analyse::db = nullptr;

} // namespace

TEST_F(Analyse, SummaryJsonHasTheDocumentedShapeAndAddsUp) {
    auto o = e2e::run({"summary", "--db", *db, "--format", "json"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto j = json::parse(o.out);
    EXPECT_EQ(j["schema"], "diffeval.summary/2");
    EXPECT_EQ(j["scorers"], json({"lm-eval-flexible", "lm-eval-strict", "vllm"}));
    ASSERT_EQ(j["groups"].size(), 4u);
    for (const auto& g : j["groups"]) {
        EXPECT_EQ(g["questions"], 48);
        EXPECT_EQ(g["repeats"], 3);
        for (const auto& [name, acc] : g["accuracy"].items()) {
            ASSERT_EQ(acc["per_repeat"].size(), 3u) << name;
            EXPECT_GE(acc["mean"].get<double>(), acc["min"].get<double>());
            EXPECT_LE(acc["mean"].get<double>(), acc["max"].get<double>());
        }
        for (const auto& r : g["breakdown"]["per_repeat"]) {
            EXPECT_EQ(r["finished"].get<int>() + r["stop_truncated"].get<int>() +
                          r["length_truncated"].get<int>() + r["other"].get<int>() +
                          r["errors"].get<int>(),
                      r["responses"].get<int>());
            EXPECT_LE(r["finished_correct"]["vllm"].get<int>(), r["finished"].get<int>());
        }
    }
    // Chat with thinking off never reasons.
    for (const auto& g : j["groups"]) {
        if (g["framing"] == "chat") {
            EXPECT_EQ(g["breakdown"]["mean"]["started_reasoning"], 0.0);
        }
    }
}

TEST_F(Analyse, SummaryJsonHasOrderedLatencyPercentilesAndTokens) {
    auto o = e2e::run({"summary", "--db", *db, "--format", "json"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto j = json::parse(o.out);
    for (const auto& g : j["groups"]) {
        const auto& l = g["latency"];
        EXPECT_EQ(l["responses"], 144) << g.dump();
        EXPECT_GT(l["p50_ms"].get<double>(), 0);
        EXPECT_LE(l["p50_ms"].get<double>(), l["p90_ms"].get<double>());
        EXPECT_LE(l["p90_ms"].get<double>(), l["p99_ms"].get<double>());
        EXPECT_LE(l["p99_ms"].get<double>(), l["max_ms"].get<double>());
        // Not streamed, so no time to first token.
        EXPECT_TRUE(l["ttft_p50_ms"].is_null());
        EXPECT_GT(l["requests_per_s"].get<double>(), 0);
        const auto& t = g["output_tokens"];
        EXPECT_LE(t["p50"].get<double>(), t["p99"].get<double>());
        EXPECT_LE(t["p99"].get<double>(), 128);
        EXPECT_NEAR(t["mean"].get<double>(),
                    g["breakdown"]["mean"]["mean_completion_tokens"].get<double>(), 1e-6);
    }
}

// A reading command leaves no -wal or -shm behind: SQLite's read-only
// connection made them and only a writer removes them (every CI artifact of
// a summary carried two more files). The database's bytes stay as they
// were; side files that were there before stay too.
TEST_F(Analyse, AReadingCommandLeavesNoSideFiles) {
    auto copy = *dir / "tidy.sqlite";
    std::filesystem::copy_file(*db, copy, std::filesystem::copy_options::overwrite_existing);
    for (const char* side : {"-wal", "-shm"}) {
        std::filesystem::remove(copy.string() + side);
    }
    const auto before = e2e::slurp(copy);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"summary"},
          {"diff", "default/raw", "deepgemm/raw"},
          {"report", "--out", (*dir / "tidy-report").string()}}) {
        auto cmd = args;
        cmd.insert(cmd.begin() + 1, {"--db", copy.string()});
        auto o = e2e::run(cmd);
        ASSERT_EQ(o.exit_code, 0) << args[0] << ": " << o.err;
        for (const char* side : {"-wal", "-shm"}) {
            EXPECT_FALSE(std::filesystem::exists(copy.string() + side)) << args[0] << side;
        }
    }
    EXPECT_TRUE(e2e::slurp(copy) == before) << "a reading command changed the database";
    // Left by someone else: kept.
    std::ofstream(copy.string() + "-wal").close();
    std::ofstream(copy.string() + "-shm").close();
    ASSERT_EQ(e2e::run({"summary", "--db", copy.string()}).exit_code, 0);
    EXPECT_TRUE(std::filesystem::exists(copy.string() + "-wal"));
    EXPECT_TRUE(std::filesystem::exists(copy.string() + "-shm"));
}

// A flip whose side was never sent (a run stopped first) says so in its
// excerpt: the cell was blank, where the docs promise "(no answer)" or the
// answer (an outside audit).
// Requests the baseline (A) never sent are left out of the pairing, so no
// flip is one of them; the candidate's (B's) count as wrong answers, and
// their flips say "(no response)".
TEST_F(Analyse, AFlipNeverSentSaysNoResponse) {
    auto copy = *dir / "unsent.sqlite";
    std::filesystem::copy_file(*db, copy, std::filesystem::copy_options::overwrite_existing);
    e2e::unsend(copy, "server = 'default' AND question_idx < 20");
    const std::vector<std::string> diff = {"diff",        "--db",         copy.string(),
                                           "default/raw", "deepgemm/raw", "--format",
                                           "json",        "--flips",      "1000"};
    auto some = e2e::run(diff);
    ASSERT_EQ(some.exit_code, 0) << some.err;
    const auto some_json = json::parse(some.out);
    for (const auto& c : some_json["comparisons"]) {
        EXPECT_GT(c["never_sent"]["a"].get<int>(), 0) << c["never_sent"];
        for (const auto* side : {"a_better", "b_better"}) {
            for (const auto& f : c["flips"][side]) {
                EXPECT_FALSE(f["a_response_id"].is_null()) << f.dump();
                EXPECT_GE(f["question_idx"].get<int>(), 20) << f.dump();
            }
        }
    }
    e2e::unsend(copy, "server = 'deepgemm' AND question_idx BETWEEN 20 AND 39");
    // Every flip's excerpts filled (the first ten are, by default).
    auto o = e2e::run(diff);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto j = json::parse(o.out);
    size_t unsent = 0;
    for (const auto& c : j["comparisons"]) {
        for (const auto* side : {"a_better", "b_better"}) {
            for (const auto& f : c["flips"][side]) {
                if (f["b_response_id"].is_null() && f.contains("b_excerpt")) {
                    EXPECT_EQ(f["b_excerpt"], "(no response)") << f.dump();
                    ++unsent;
                }
                if (f.contains("b_excerpt")) {
                    EXPECT_NE(f["b_excerpt"], "") << f.dump();
                }
            }
        }
    }
    EXPECT_GT(unsent, 0u) << o.out.substr(0, 2000);
}

TEST_F(Analyse, DiffSplitsTheTailDifferenceIntoOutputLengthAndSpeed) {
    // Latency exactly 40 ms + 2 ms per token on a copy: the fit recovers it
    // and all of the p99 difference follows from output lengths.
    auto copy = *dir / "linear.sqlite";
    std::filesystem::copy_file(*db, copy, std::filesystem::copy_options::overwrite_existing);
    e2e::exec(copy, "UPDATE responses SET latency_ms = 40 + 2 * coalesce(completion_tokens, 0)");
    auto o = e2e::run(
        {"diff", "--db", copy.string(), "default/raw", "deepgemm/raw", "--format", "json"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto j = json::parse(o.out);
    const auto& l = j["comparisons"][0]["latency"];
    ASSERT_FALSE(l["from_tokens"].is_null()) << l.dump();
    EXPECT_NEAR(l["from_tokens"]["ms_per_token"].get<double>(), 2.0, 1e-6);
    EXPECT_NEAR(l["from_tokens"]["intercept_ms"].get<double>(), 40.0, 1e-6);
    EXPECT_NEAR(l["from_tokens"]["explained_ms"].get<double>(), l["p99_diff_ms"].get<double>(),
                1e-6);
    EXPECT_NEAR(l["p99_diff_ms"].get<double>(),
                l["b_p99_ms"].get<double>() - l["a_p99_ms"].get<double>(), 1e-9);
    auto text = e2e::run({"diff", "--db", copy.string(), "default/raw", "deepgemm/raw"});
    EXPECT_NE(text.out.find("ms follows from output lengths"), std::string::npos) << text.out;
    // The title names B first; the line under it says which side is A and
    // which B, which every later line ("right more often in A", "A % B %")
    // counts on.
    EXPECT_EQ(text.out.rfind("deepgemm/raw/128 vs default/raw/128 (vllm scorer)\n", 0), 0U)
        << text.out;
    EXPECT_NE(text.out.find("=\nA is default/raw/128, B is deepgemm/raw/128.\n"), std::string::npos)
        << text.out;
}

TEST_F(Analyse, TailPutsNothingDownToOutputLengthsWhenLongerIsNotSlower) {
    // Latency falling by 1 ms a token on a copy, and B 25 ms slower: a fit
    // in which longer outputs come back sooner would call the longer side
    // faster for it, so no part of the difference is put down to lengths.
    auto copy = *dir / "falling.sqlite";
    std::filesystem::copy_file(*db, copy, std::filesystem::copy_options::overwrite_existing);
    e2e::exec(copy, "UPDATE responses SET latency_ms = 400 - coalesce(completion_tokens, 0) + 25 * "
                    "(request_id IN (SELECT request_id FROM requests WHERE server = 'deepgemm'))");
    auto o = e2e::run(
        {"diff", "--db", copy.string(), "default/raw", "deepgemm/raw", "--format", "json"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto l = json::parse(o.out)["comparisons"][0]["latency"];
    EXPECT_TRUE(l["from_tokens"].is_null()) << l.dump();
    ASSERT_NE(l["p99_diff_ms"].get<double>(), 0) << l.dump();
    auto text = e2e::run({"diff", "--db", copy.string(), "default/raw", "deepgemm/raw"});
    EXPECT_NE(text.out.find("A's latency does not grow with its token count"), std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("so none of the +25 ms p99 difference follows from output "
                            "lengths:\nB slower per request, or noise"),
              std::string::npos)
        << text.out;
    EXPECT_EQ(text.out.find("ms/token) and"), std::string::npos) << text.out;
    // The report's tail table: 0 from longer outputs, the whole p99
    // difference as the rest.
    auto report = e2e::run({"report", "--db", copy.string(), "--out", (*dir / "falling").string()});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    const auto md = e2e::slurp(*dir / "falling/report.md");
    EXPECT_NE(md.find("A row whose baseline's latency does not grow with its token count puts "
                      "none of the difference down to longer outputs (0)"),
              std::string::npos)
        << md;
    const auto row =
        md.find("| deepgemm/raw/128 vs default/raw/128 | ", md.find("| p99 diff 95% CI |"));
    ASSERT_NE(row, std::string::npos) << md;
    const auto line = md.substr(row, md.find('\n', row) - row);
    auto diff = fmt::format("{:+.0f}", l["p99_diff_ms"].get<double>());
    if (diff == "+0" || diff == "-0") {
        diff = "0";
    }
    EXPECT_NE(line.find(fmt::format("| 0 | {} |", diff)), std::string::npos) << line;
}

TEST_F(Analyse, SummaryTextShowsBothTables) {
    auto o = e2e::run({"summary", "--db", *db});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("Harness verdicts"), std::string::npos);
    EXPECT_NE(o.out.find("deepgemm/raw/128"), std::string::npos);
    EXPECT_NE(o.out.find("Where the responses went"), std::string::npos);
    EXPECT_NE(o.out.find("Latency and tokens"), std::string::npos);
    for (size_t start = 0, end; (end = o.out.find('\n', start)) != std::string::npos;
         start = end + 1) {
        EXPECT_LE(end - start, 100u) << o.out.substr(start, end - start);
    }
    auto md = e2e::run({"summary", "--db", *db, "--format", "md"});
    EXPECT_NE(md.out.find("| group |"), std::string::npos) << md.out;
}

// At another --alpha the interval is not the 95% one: `ci95` is null and
// `ci` holds it at `confidence`, as the gate's ci95_points and ci_points.
TEST_F(Analyse, DiffJsonNamesItsIntervalByItsConfidence) {
    auto o = e2e::run({"diff", "--db", *db, "default", "deepgemm", "--format", "json",
                       "--resamples", "2000", "--alpha", "0.1"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto j = json::parse(o.out);
    ASSERT_EQ(j["comparisons"].size(), 2u);
    for (const auto& c : j["comparisons"]) {
        EXPECT_TRUE(c["difference"]["ci95"].is_null()) << c["difference"].dump();
        EXPECT_DOUBLE_EQ(c["difference"]["confidence"].get<double>(), 0.9);
        ASSERT_EQ(c["difference"]["ci"].size(), 2u) << c["difference"].dump();
        EXPECT_LT(c["difference"]["ci"][0].get<double>(), c["difference"]["ci"][1].get<double>());
    }
}

TEST_F(Analyse, DiffPairsEveryFramingAndItsTransitionsAccountForEveryPair) {
    auto o = e2e::run(
        {"diff", "--db", *db, "default", "deepgemm", "--format", "json", "--resamples", "2000"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto j = json::parse(o.out);
    EXPECT_EQ(j["schema"], "diffeval.diff/2");
    ASSERT_EQ(j["comparisons"].size(), 2u);
    for (const auto& c : j["comparisons"]) {
        EXPECT_EQ(c["questions"], 48);
        // Every repeat of A against every repeat of B: 48 x 3 x 3.
        EXPECT_EQ(c["paired_responses"], 432);
        int pairs = 0;
        for (const auto& t : c["transitions"]) {
            pairs += t["count"].get<int>();
        }
        EXPECT_EQ(pairs, 432);
        const double diff = c["difference"]["value"];
        EXPECT_NEAR(diff, c["accuracy_b"].get<double>() - c["accuracy_a"].get<double>(), 1e-9);
        EXPECT_LE(c["difference"]["ci95"][0].get<double>(), diff);
        EXPECT_GE(c["difference"]["ci95"][1].get<double>(), diff);
        EXPECT_EQ(c["difference"]["ci"], c["difference"]["ci95"]);
        EXPECT_EQ(c["test"]["a_better_questions"].get<size_t>(), c["flips"]["a_better"].size());
        EXPECT_EQ(c["test"]["b_better_questions"].get<size_t>(), c["flips"]["b_better"].size());
        EXPECT_EQ(c["noise"]["a"]["repeats"], 3);
        EXPECT_EQ(c["test"]["comparisons_adjusted"], 2);
        EXPECT_GE(c["test"]["p_mid_holm"].get<double>(), c["test"]["p_mid"].get<double>());
        EXPECT_FALSE(c["verdict"]["sentence"].get<std::string>().empty());
    }
    auto text = e2e::run({"diff", "--db", *db, "default/raw", "deepgemm/raw"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("Sign-flip test over questions"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("Run-to-run noise:"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("Verdict: "), std::string::npos) << text.out;
    for (size_t start = 0, end; (end = text.out.find('\n', start)) != std::string::npos;
         start = end + 1) {
        EXPECT_LE(end - start, 100u) << text.out.substr(start, end - start);
    }
    // A margin turns the verdict into an equivalence question.
    auto eq = json::parse(e2e::run({"diff", "--db", *db, "default/chat", "deepgemm/chat",
                                    "--format", "json", "--margin", "20", "--resamples", "500"})
                              .out);
    EXPECT_EQ(eq["comparisons"][0]["verdict"]["kind"], "equivalent");
    EXPECT_EQ(eq["comparisons"][0]["verdict"]["margin"], 0.2);
    auto bad = e2e::run({"diff", "--db", *db, "default/chat", "deepgemm/chat", "--margin", "nan"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--margin 'nan': expected a number"), std::string::npos) << bad.err;
}

// A reader subtracts the two printed accuracies and expects the printed
// difference, inside the printed interval, in the verdict and the gate too.
// Before, this run printed "79.2% -> 72.9%: -6.2 points" (the exact -6.25
// rounded).
TEST_F(Analyse, PrintedDifferenceIsThatOfThePrintedAccuracies) {
    const std::regex line(R"(Accuracy (\d+\.\d)% -> (\d+\.\d)%: ([-+]?\d+\.\d) points, 95% CI )"
                          R"(\[([-+]?[\d.]+), ([-+]?[\d.]+)\])");
    int checked = 0;
    for (const char* framing : {"raw", "chat"}) {
        for (const char* scorer : {"vllm", "lm-eval-strict"}) {
            auto o = e2e::run({"diff", "--db", *db, fmt::format("default/{}", framing),
                               fmt::format("deepgemm/{}", framing), "--scorer", scorer});
            ASSERT_EQ(o.exit_code, 0) << o.err;
            std::smatch m;
            ASSERT_TRUE(std::regex_search(o.out, m, line)) << o.out;
            const double a = std::stod(m[1]), b = std::stod(m[2]), d = std::stod(m[3]);
            EXPECT_NEAR(d, b - a, 1e-9) << m[0];
            EXPECT_LE(std::stod(m[4]), d) << m[0];
            EXPECT_GE(std::stod(m[5]), d) << m[0];
            const std::string diff = m[3];
            const auto verdict = o.out.find("Verdict: ");
            ASSERT_NE(verdict, std::string::npos) << o.out;
            EXPECT_NE(o.out.find(diff + " points, 95% CI", verdict), std::string::npos) << o.out;
            const auto out = (*dir / fmt::format("gate-{}-{}.json", framing, scorer)).string();
            auto g =
                e2e::run({"gate", "--db", *db, "--baseline", fmt::format("default/{}", framing),
                          "--candidate", fmt::format("deepgemm/{}", framing), "--scorer", scorer,
                          "--max-drop", "50", "--json", out});
            ASSERT_EQ(g.exit_code, 0) << g.out << g.err;
            std::ifstream in(out);
            const auto checks = json::parse(in)["checks"];
            ASSERT_EQ(checks.size(), 1u) << checks.dump();
            const std::string measured = checks[0]["measured_text"];
            // A rise is called one: "rise 0.7 points", never "drop -0.7
            // points", and no change is no drop: "change 0.0 points".
            const double drop = d == 0 ? 0.0 : -d;
            const char* what = drop < 0 ? "rise" : (drop > 0 ? "drop" : "change");
            EXPECT_EQ(
                measured.rfind(fmt::format("{} {:.1f} points ({}% -> {}%;", what, std::abs(drop),
                                           std::string(m[1]), std::string(m[2])),
                               0),
                0u)
                << measured;
            ++checked;
        }
    }
    EXPECT_EQ(checked, 4);
}

TEST_F(Analyse, PlanSizesARunFromThePilot) {
    auto o = e2e::run({"plan", "--db", *db, "default/raw", "deepgemm/raw", "--drop", "2"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("pilot of 48 questions x 3 repeats each"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("To detect a 2.0-point drop at alpha 0.05 with 80% power"),
              std::string::npos)
        << o.out;
    // One row per repeat count; more repeats never need more questions.
    std::vector<long> needed;
    for (int k : {1, 2, 3, 5, 10}) {
        const auto at = o.out.find("\n" + std::to_string(k) + " ");
        ASSERT_NE(at, std::string::npos) << k << "\n" << o.out;
        const auto line = o.out.substr(at + 1, o.out.find('\n', at + 1) - at - 1);
        needed.push_back(std::stol(line.substr(line.find_last_of(' ') + 1)));
    }
    for (size_t i = 1; i < needed.size(); ++i) {
        EXPECT_LE(needed[i], needed[i - 1]) << o.out;
    }
    EXPECT_GT(needed.front(), 48) << o.out; // a 2-point drop needs more than the pilot
    auto bad = e2e::run({"plan", "--db", *db, "default/raw", "deepgemm/raw", "--drop", "-1"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--drop -1"), std::string::npos) << bad.err;
    // A smaller drop never needs fewer questions: past what an integer holds
    // the count is held, and said to be more (--drop 1e-8 printed "67").
    auto tiny = e2e::run({"plan", "--db", *db, "default/raw", "deepgemm/raw", "--drop", "1e-8"});
    ASSERT_EQ(tiny.exit_code, 0) << tiny.err;
    EXPECT_NE(tiny.out.find("To detect a 1e-08-point drop"), std::string::npos) << tiny.out;
    EXPECT_NE(tiny.out.find("\n1 "), std::string::npos) << tiny.out;
    const auto row = tiny.out.substr(tiny.out.find("\n1 ") + 1);
    EXPECT_NE(row.substr(0, row.find('\n')).find("more than 1,000,000,000,000,000"),
              std::string::npos)
        << tiny.out;
}

// plan draws no interval and takes no --resamples: a strict --alpha was
// refused with "pass --resamples 200000 or more", a flag plan refuses.
TEST_F(Analyse, PlanTakesAStrictAlphaWithoutAskingForResamples) {
    auto o = e2e::run({"plan", "--db", *db, "default/raw", "deepgemm/raw", "--alpha", "1e-05"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("at alpha 1e-05 with 80% power"), std::string::npos) << o.out;
    auto loose = e2e::run({"plan", "--db", *db, "default/raw", "deepgemm/raw", "--alpha", "0.6"});
    EXPECT_EQ(loose.exit_code, 2);
    EXPECT_NE(loose.err.find("--alpha 0.6: must be in (0, 0.5]"), std::string::npos) << loose.err;
    EXPECT_EQ(loose.err.find("--resamples"), std::string::npos) << loose.err;
}

TEST_F(Analyse, RescoreGivesIdenticalNumbers) {
    auto before = e2e::run({"summary", "--db", *db, "--format", "json"});
    auto diff_before = e2e::run(
        {"diff", "--db", *db, "default", "deepgemm", "--format", "json", "--resamples", "500"});
    auto r = e2e::run({"rescore", "--db", *db});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("rescored 576 responses"), std::string::npos) << r.out;
    EXPECT_EQ(e2e::run({"summary", "--db", *db, "--format", "json"}).out, before.out);
    EXPECT_EQ(e2e::run({"diff", "--db", *db, "default", "deepgemm", "--format", "json",
                        "--resamples", "500"})
                  .out,
              diff_before.out);
}

TEST_F(Analyse, BadSelectorsAndScorersAreUsageErrors) {
    auto o = e2e::run({"diff", "--db", *db, "default", "nosuch"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("no server 'nosuch'"), std::string::npos) << o.err;
    auto s = e2e::run({"diff", "--db", *db, "default", "deepgemm", "--scorer", "vlm"});
    EXPECT_EQ(s.exit_code, 2);
    EXPECT_NE(s.err.find("unknown scorer 'vlm'; did you mean 'vllm'? Known scorers: "
                         "lm-eval-flexible, lm-eval-strict, vllm"),
              std::string::npos)
        << s.err;
    // Selections that name groups but pair none: one line listing the groups.
    auto unpaired = e2e::run({"diff", "--db", *db, "default/raw/128", "deepgemm/raw/999"});
    EXPECT_EQ(unpaired.exit_code, 2);
    EXPECT_NE(unpaired.err.find("diffeval: no pair of groups matches default/raw/128 and "
                                "deepgemm/raw/999; groups: "),
              std::string::npos)
        << unpaired.err;
    EXPECT_EQ(std::count(unpaired.err.begin(), unpaired.err.end(), '\n'), 1) << unpaired.err;
    // A group against itself, in diff and in the gate.
    auto self = e2e::run({"diff", "--db", *db, "default/raw", "default/raw"});
    EXPECT_EQ(self.exit_code, 2);
    EXPECT_EQ(self.err, "diffeval: default/raw and default/raw select the same groups, so each "
                        "would be compared with itself: name another server, framing or token "
                        "limit for one of them\n");
    self = e2e::run({"gate", "--db", *db, "--baseline", "default", "--candidate", "default",
                     "--max-drop", "1"});
    EXPECT_EQ(self.exit_code, 2);
    EXPECT_NE(self.err.find("default and default select the same groups"), std::string::npos)
        << self.err;
    // One server's two framings are two groups.
    EXPECT_EQ(e2e::run({"diff", "--db", *db, "default/raw", "default/chat"}).exit_code, 0);
    auto none = e2e::run({"diff", "--db", *db, "default", "deepgemm", "--scorer", "nosuch"});
    EXPECT_NE(none.err.find("unknown scorer 'nosuch'; known scorers: lm-eval-flexible, "),
              std::string::npos)
        << none.err;
    auto bad_scorer = e2e::run({"summary", "--db", *db, "--scorer", "vlm"});
    EXPECT_EQ(bad_scorer.exit_code, 2);
    EXPECT_EQ(bad_scorer.out, "") << "an error must not come after half a table";
    auto missing = e2e::run({"summary", "--db", (*dir / "none.sqlite").string()});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_NE(missing.err.find("run 'diffeval run"), std::string::npos) << missing.err;
}

TEST(Pairing, GroupsThatRanDifferentQuestionsAreNotPaired) {
    // Server "a" ran the sample set; server "b" ran a set of the same size
    // whose questions are other ones. Question 3 of one is not question 3 of
    // the other, so no command may pair them.
    auto dir = e2e::scratch("pairing");
    std::filesystem::create_directories(dir / "other");
    auto other = dir / "other" / "test.jsonl";
    for (const auto& path : {other, dir / "other" / "train.jsonl"}) {
        std::ofstream f(path);
        for (int i = 0; i < 6; ++i) {
            f << "{\"question\": \"What is " << i << " plus " << i
              << "?\", \"answer\": \"Double it.\\n#### " << 2 * i << "\"}\n";
        }
    }
    const auto db = (dir / "p.sqlite").string();
    e2e::Sim sim({"--profile", "default"});
    for (auto [server, dataset] :
         {std::pair<std::string, std::string>{"a", "sample"}, {"b", other.string()}}) {
        auto r = e2e::run({"run", "--server", server + "=" + sim.url(), "--framing", "chat",
                           "--max-tokens", "128", "--dataset", dataset, "--limit", "6", "--db", db,
                           "--quiet"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    auto expect_refusal = [](const e2e::Outcome& o) {
        EXPECT_EQ(o.exit_code, 2) << o.out << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_NE(o.err.find("cannot pair b/chat/128 with a/chat/128: 6 of 6 questions differ "
                             "(first: question 0); a/chat/128 ran dataset 'sample'"),
                  std::string::npos)
            << o.err;
    };
    expect_refusal(e2e::run({"diff", "--db", db, "a", "b"}));
    expect_refusal(
        e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "b", "--max-drop", "5"}));
    // The report is written without b, and says why (it refused the whole
    // database, whatever the --baseline).
    auto report =
        e2e::run({"report", "--db", db, "--out", (dir / "out").string(), "--baseline", "a"});
    EXPECT_EQ(report.exit_code, 0) << report.err;
    EXPECT_NE(e2e::slurp(dir / "out" / "report.md")
                  .find("b is not compared (cannot pair b/chat/128 with a/chat/128: 6 of 6 "
                        "questions differ (first: question 0)"),
              std::string::npos);
    auto self = e2e::run({"summary", "--db", db});
    EXPECT_EQ(self.exit_code, 0) << self.err;
}

// Scoring is a stage of the run: right after `diffeval run` every stored
// response has an outcome and a score per built-in scorer.
TEST_F(Analyse, AfterARunEveryResponseIsClassifiedAndScored) {
    const auto responses = std::stoi(e2e::query(*db, "SELECT count(*) FROM responses"));
    ASSERT_GT(responses, 0);
    EXPECT_EQ(e2e::query(*db, "SELECT count(*) FROM v_responses WHERE outcome IS NULL"), "0");
    EXPECT_EQ(e2e::query(*db, "SELECT count(*) FROM v_scores"), std::to_string(responses * 3));
}

// Read commands only read: they work on a read-only file in a read-only
// directory (no WAL side files can be made) and leave its bytes as they were.
TEST_F(Analyse, ReadCommandsWorkOnAReadOnlyDatabase) {
    auto ro_dir = *dir / "read-only";
    std::filesystem::create_directories(ro_dir);
    auto ro_db = ro_dir / "r.sqlite";
    // A copy after a checkpoint, so the main file holds everything.
    e2e::exec(*db, "PRAGMA wal_checkpoint(TRUNCATE)");
    std::filesystem::copy_file(*db, ro_db);
    auto out_dir = *dir / "read-only-out";
    std::filesystem::create_directories(out_dir);
    using std::filesystem::perms;
    std::filesystem::permissions(out_dir, perms::all);
    std::filesystem::permissions(ro_db, perms::owner_read | perms::group_read | perms::others_read);
    std::filesystem::permissions(ro_dir, perms::owner_read | perms::owner_exec | perms::group_read |
                                             perms::group_exec | perms::others_read |
                                             perms::others_exec);
    const auto before = e2e::slurp(ro_db);
    const std::string d = ro_db.string();
    const std::vector<std::vector<std::string>> commands = {
        {"summary", "--db", d},
        {"diff", "default/raw/128", "deepgemm/raw/128", "--db", d},
        {"report", "--db", d, "--out", (out_dir / "report").string()},
        {"gate", "--db", d, "--baseline", "default/raw/128", "--candidate", "deepgemm/raw/128",
         "--max-drop", "50"},
        {"export", "--db", d, "--format", "lm-eval-samples", "--out",
         (out_dir / "export").string()},
    };
    for (const auto& args : commands) {
        auto o = e2e::run_unprivileged(args);
        EXPECT_EQ(o.exit_code, 0) << args[0] << ": " << o.err;
        EXPECT_EQ(o.err.find("readonly"), std::string::npos) << args[0] << ": " << o.err;
    }
    EXPECT_TRUE(before == e2e::slurp(ro_db)) << "a read command changed the database file";
    EXPECT_FALSE(std::filesystem::exists(ro_dir / "r.sqlite-wal"));
}

namespace {

// A copy of `db` that everyone may write, as r.sqlite in `ro_dir`, made
// then with no write permission for anyone (r-x for all).
std::filesystem::path copy_into_readonly_dir(const std::string& db,
                                             const std::filesystem::path& ro_dir) {
    std::filesystem::create_directories(ro_dir);
    const auto copy = ro_dir / "r.sqlite";
    e2e::exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    std::filesystem::copy_file(db, copy);
    using std::filesystem::perms;
    std::filesystem::permissions(copy, perms::owner_read | perms::owner_write | perms::group_read |
                                           perms::group_write | perms::others_read |
                                           perms::others_write);
    std::filesystem::permissions(ro_dir, perms::owner_read | perms::owner_exec | perms::group_read |
                                             perms::group_exec | perms::others_read |
                                             perms::others_exec);
    return copy;
}

} // namespace

// A database the user may write, in a directory they cannot (audit D4):
// a command that writes it names the directory, where SQLite cannot make
// its side files, and does not call the file "not a diffeval database".
TEST_F(Analyse, AWriteInAReadOnlyDirectoryNamesTheDirectory) {
    const auto ro_dir = *dir / "locked-dir";
    const auto db_copy = copy_into_readonly_dir(*db, ro_dir);
    using std::filesystem::perms;
    const auto before = e2e::slurp(db_copy);
    auto o = e2e::run_unprivileged({"rescore", "--db", db_copy.string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("its directory " + ro_dir.string() + " is not writable"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(o.err.find("not a diffeval database"), std::string::npos) << o.err;
    EXPECT_TRUE(before == e2e::slurp(db_copy));
    std::filesystem::permissions(ro_dir, perms::owner_all);
}

// The same directory made read-only on purpose (chmod a-w) is refused as
// root too, as `report --out` and a chmod a-w database are: an audit's run as
// root made a new database and its lock there, and wrote -wal and -shm files
// beside an existing one.
TEST_F(Analyse, AWriteInADirectoryNobodyMayWriteIsRefusedForRootToo) {
    const auto ro_dir = *dir / "nobody-writes";
    const auto db_copy = copy_into_readonly_dir(*db, ro_dir);
    using std::filesystem::perms;
    const auto before = e2e::slurp(db_copy);
    auto o = e2e::run({"rescore", "--db", db_copy.string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("its directory " + ro_dir.string() +
                         " is not writable (no write permission for anyone)"),
              std::string::npos)
        << o.err;
    EXPECT_NE(o.err.find("the file was left as it is"), std::string::npos) << o.err;
    EXPECT_TRUE(before == e2e::slurp(db_copy));
    e2e::Sim sim;
    const auto fresh = ro_dir / "new.sqlite";
    auto r = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw", "--limit", "1",
                       "--db", fresh.string(), "--quiet"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("nothing was written"), std::string::npos) << r.err;
    std::vector<std::string> left;
    for (const auto& f : std::filesystem::directory_iterator(ro_dir)) {
        left.push_back(f.path().filename().string());
    }
    EXPECT_EQ(left, std::vector<std::string>{"r.sqlite"});
    std::filesystem::permissions(ro_dir, perms::owner_all);
}

// A run that has stored no response yet: a read command says that alone,
// exit 2. It said "what follows is what it has stored so far", then that
// the database holds no response and to run diffeval (which would be
// refused), calling the running run killed.
TEST(ReadWhileWritten, ADatabaseWithNoResponseYetIsSaidToBeWrittenInOneLine) {
    auto dir = e2e::scratch("read-while-empty");
    const auto db = (dir / "r.sqlite").string();
    e2e::Sim sim;
    // A database holding the run's requests and no response, as one that
    // is planned and waiting for its first answers.
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw", "--limit", "2",
                       "--db", db, "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    e2e::exec(db, "DELETE FROM scores; DELETE FROM classifications; UPDATE requests SET "
                  "response_id = NULL; DELETE FROM responses");
    const int held = ::open((db + ".lock").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(held, 0);
    const std::string who = "pid 4242, started 2026-12-05T00:00:00.000Z, diffeval run\n";
    ASSERT_EQ(::write(held, who.data(), who.size()), static_cast<ssize_t>(who.size()));
    ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
    for (const std::string command : {"summary", "report"}) {
        std::vector<std::string> args = {command, "--db", db};
        if (command == "report") {
            args.insert(args.end(), {"--out", (dir / "report").string()});
        }
        auto r = e2e::run(args);
        EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
        EXPECT_EQ(r.err, fmt::format("diffeval: {} is still being written by diffeval run (pid "
                                     "4242, started 2026-12-05T00:00:00.000Z) and holds no "
                                     "response yet; read it once the run has stored some\n",
                                     db))
            << command;
    }
    ::close(held);
}

// While another command still writes the database (a run, a merge into
// it), its unanswered requests count as failed: a read command (and a merge
// of it) says so in one line on stderr, the report's headline says so, and
// the gate refuses (exit 2) rather than judge a partial result. Once it
// ends, nothing is said.
TEST(ReadWhileWritten, ReadCommandsSaySoAndTheGateWaitsForTheEnd) {
    auto dir = e2e::scratch("read-while-written");
    const auto db = (dir / "r.sqlite").string();
    e2e::Sim sim;
    for (const char* name : {"a", "b"}) {
        auto o = e2e::run({"run", "--server", std::string(name) + "=" + sim.url(), "--framing",
                           "raw", "--limit", "4", "--db", db, "--quiet"});
        ASSERT_EQ(o.exit_code, 0) << o.err;
    }
    const std::vector<std::string> gate = {"gate",
                                           "--db",
                                           db,
                                           "--baseline",
                                           "a",
                                           "--candidate",
                                           "b",
                                           "--max-drop",
                                           "50",
                                           "--inconclusive",
                                           "pass",
                                           "--junit",
                                           (dir / "junit.xml").string()};
    const int held = ::open((db + ".lock").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(held, 0);
    const std::string who = "pid 4242, started 2026-12-05T00:00:00.000Z, diffeval run\n";
    ASSERT_EQ(::write(held, who.data(), who.size()), static_cast<ssize_t>(who.size()));
    ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
    const std::string words = "diffeval run (pid 4242, started 2026-12-05T00:00:00.000Z)";

    auto summary = e2e::run({"summary", "--db", db});
    EXPECT_EQ(summary.exit_code, 0) << summary.err;
    EXPECT_EQ(summary.err, fmt::format("diffeval: {} is still being written by {}: what follows "
                                       "is what it has stored so far, and its requests with no "
                                       "response yet count as wrong answers (in a comparison only "
                                       "the candidate's: the baseline's are left out)\n",
                                       db, words));
    auto report = e2e::run({"report", "--db", db, "--out", (dir / "report").string()});
    EXPECT_EQ(report.exit_code, 0) << report.err;
    const auto md = e2e::slurp(dir / "report" / "report.md");
    EXPECT_NE(md.find("This report was made while " + words + " was still writing the database"),
              std::string::npos)
        << md.substr(0, 600);
    const auto headline = json::parse(e2e::slurp(dir / "report" / "summary.json"))["headline"];
    EXPECT_NE(headline.get<std::string>().find("while " + words), std::string::npos) << headline;
    auto refused = e2e::run(gate);
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_EQ(refused.out, "");
    EXPECT_NE(refused.err.find(db + " is still being written by " + words +
                               ", and a gate judges finished results"),
              std::string::npos)
        << refused.err;
    EXPECT_NE(e2e::slurp(dir / "junit.xml").find("still being written"), std::string::npos);
    auto merged = e2e::run({"merge", (dir / "m.sqlite").string(), db});
    EXPECT_EQ(merged.exit_code, 0) << merged.err;
    EXPECT_NE(merged.err.find(db + " is still being written by " + words +
                              ": merging what it has stored so far"),
              std::string::npos)
        << merged.err;

    ::close(held);
    auto after = e2e::run({"summary", "--db", db});
    EXPECT_EQ(after.exit_code, 0);
    EXPECT_EQ(after.err, "");
    auto passed = e2e::run(gate);
    EXPECT_EQ(passed.exit_code, 0) << passed.out << passed.err;
    report = e2e::run({"report", "--db", db, "--out", (dir / "report").string()});
    EXPECT_EQ(e2e::slurp(dir / "report" / "report.md").find("still writing"), std::string::npos);
}

// A rescore scores each distinct answer of a question once; the same answer
// to another question is still scored against that question's own gold.
TEST(Rescore, TheSameAnswerToTwoQuestionsIsScoredAgainstEachGold) {
    auto dir = e2e::scratch("rescore-same-answer");
    auto db = dir / "r.sqlite";
    e2e::Sim sim({"--profile", "default"});
    auto o = e2e::run({"run", "--server", "s=" + sim.url(), "--framing", "raw", "--max-tokens",
                       "64", "--limit", "2", "--repeats", "2", "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    e2e::exec(db, "UPDATE responses SET text = 'Half of 14 is 7.\n#### 7'; "
                  "UPDATE questions SET answer = 'x\n#### ' || (7 + question_idx)");
    auto r = e2e::run({"rescore", "--db", db.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(e2e::query_rows(db,
                              "SELECT question_idx || ' ' || repeat || ' ' || "
                              "group_concat(s.scorer || '=' || s.correct, ' ') FROM v_responses "
                              "v JOIN (SELECT * FROM scores ORDER BY scorer) s USING "
                              "(response_id) GROUP BY v.response_id ORDER BY 1"),
              (std::vector<std::string>{
                  "0 0 lm-eval-flexible=1 lm-eval-strict=1 vllm=1",
                  "0 1 lm-eval-flexible=1 lm-eval-strict=1 vllm=1",
                  "1 0 lm-eval-flexible=0 lm-eval-strict=0 vllm=0",
                  "1 1 lm-eval-flexible=0 lm-eval-strict=0 vllm=0",
              }));

    // While another diffeval writes the file (a run, a merge into it), a
    // rescore is refused and changes no score.
    const int held = ::open((db.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(held, 0);
    ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
    e2e::exec(db, "UPDATE scores SET correct = 1 WHERE scorer = 'vllm'"); // what rescore redoes
    auto busy = e2e::run({"rescore", "--db", db.string()});
    ::close(held);
    EXPECT_EQ(busy.exit_code, 2);
    EXPECT_NE(busy.err.find("in use by another diffeval process (which did not say who it is)"),
              std::string::npos)
        << busy.err;
    EXPECT_NE(busy.err.find("then rescore again"), std::string::npos) << busy.err;
    EXPECT_EQ(e2e::query(db, "SELECT sum(correct) FROM scores WHERE scorer = 'vllm'"), "4");
}

// Groups that ran different subsets of the same questions are compared on
// the questions both answered, and every verdict sentence says so.
TEST(AnalyseSubsets, APartialGroupIsPairedOnSharedQuestionsAndTheSentenceSaysSo) {
    auto dir = e2e::scratch("analyse-subsets");
    auto db = (dir / "r.sqlite").string();
    e2e::Sim sim;
    for (const auto& [name, limit] : {std::pair{"a", "6"}, std::pair{"c", "3"}}) {
        auto o = e2e::run({"run", "--server", std::string(name) + "=" + sim.url(), "--framing",
                           "raw", "--limit", limit, "--db", db, "--quiet"});
        ASSERT_EQ(o.exit_code, 0) << o.err;
    }
    auto d = e2e::run({"diff", "a", "c", "--db", db, "--format", "json"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    const auto c = json::parse(d.out)["comparisons"][0];
    EXPECT_EQ(c["questions"], 3);
    EXPECT_EQ(c["questions_a"], 6);
    EXPECT_EQ(c["questions_b"], 3);
    const std::string sentence = c["verdict"]["sentence"];
    EXPECT_NE(sentence.find("Paired on the 3 questions both groups hold: a/raw/256 asked 6 and "
                            "c/raw/256 asked 3"),
              std::string::npos)
        << sentence;
    auto r = e2e::run({"report", "--db", db, "--baseline", "a", "--out", (dir / "out").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(e2e::slurp(dir / "out/report.md").find("Paired on the 3 questions both groups hold"),
              std::string::npos);
    // One repeat a side measures no run-to-run noise: the plan sizes that
    // design alone, and says why, instead of a row per repeat count.
    e2e::exec(db, "UPDATE scores SET correct = 1 - correct WHERE response_id IN (SELECT "
                  "response_id FROM requests WHERE server = 'c' AND question_idx < 2)");
    auto p = e2e::run({"plan", "--db", db, "a", "c"});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    EXPECT_NE(p.out.find("run-to-run noise not measured with 1 repeat each"), std::string::npos)
        << p.out;
    EXPECT_EQ(p.out.find("within 0.0000"), std::string::npos) << p.out;
    EXPECT_EQ(p.out.find("\n10 "), std::string::npos) << p.out;
    EXPECT_NE(p.out.find("\n1 (the pilot's) "), std::string::npos) << p.out;
    // A pilot of 2 repeats against 1 is sized at its own repeats, and its
    // row says so, not "1".
    auto t = e2e::run({"run", "--server", "t=" + sim.url(), "--framing", "raw", "--limit", "3",
                       "--repeats", "2", "--db", db, "--quiet"});
    ASSERT_EQ(t.exit_code, 0) << t.err;
    auto uneven = e2e::run({"plan", "--db", db, "t", "c"});
    ASSERT_EQ(uneven.exit_code, 0) << uneven.err;
    EXPECT_NE(uneven.out.find("not measured with 2 and 1 repeats"), std::string::npos)
        << uneven.out;
    EXPECT_NE(uneven.out.find("\n2 and 1 (the pilot's) "), std::string::npos) << uneven.out;
    EXPECT_EQ(uneven.out.find("\n1 "), std::string::npos) << uneven.out;
}

// With repeats on different questions the mean (over questions) can lie
// outside every repeat's accuracy: "51.5 (52.0-75.0)" read as a mean below
// its own minimum. The range is then named as the repeats'.
TEST(AnalyseSubsets, AMeanOutsideTheRepeatsRangeSaysWhoseRangeItIs) {
    auto dir = e2e::scratch("analyse-mean-outside");
    auto db = (dir / "r.sqlite").string();
    e2e::Sim sim;
    for (const auto& [repeats, limit] : {std::pair{"1", "4"}, std::pair{"2", "2"}}) {
        auto o = e2e::run({"run", "--server", "s=" + sim.url(), "--framing", "raw", "--limit",
                           limit, "--repeats", repeats, "--db", db, "--quiet"});
        ASSERT_EQ(o.exit_code, 0) << o.err;
    }
    // Repeat 0 right on questions 0 and 1 of 0-3 (50%), repeat 1 right on
    // question 0 of 0-1 (50%): per question 1, 1/2, 0 and 0, a mean of 37.5%.
    e2e::exec(db, "UPDATE scores SET correct = 0; UPDATE scores SET correct = 1 WHERE response_id "
                  "IN (SELECT response_id FROM requests WHERE (repeat = 0 AND question_idx < 2) "
                  "OR (repeat = 1 AND question_idx = 0))");
    auto t = e2e::run({"summary", "--db", db});
    ASSERT_EQ(t.exit_code, 0) << t.err;
    EXPECT_NE(t.out.find("37.5 (repeats 50.0-50.0)"), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("so the mean can lie outside it"), std::string::npos) << t.out;
}

// Repeats added later on fewer questions: the accuracy averaged repeats of
// different question sets (a server right on 80% of every set printed 78.3
// and failed a 79% floor), and n was the largest repeat's count. The unit is
// the question: each question's repeats are averaged, then the questions.
TEST(AnalyseSubsets, RepeatsOnDifferentQuestionsAreAveragedPerQuestion) {
    auto dir = e2e::scratch("analyse-uneven");
    auto db = (dir / "r.sqlite").string();
    e2e::Sim sim;
    for (const auto& [repeats, limit] : {std::pair{"2", "8"}, std::pair{"3", "3"}}) {
        auto o = e2e::run({"run", "--server", "s=" + sim.url(), "--framing", "raw", "--limit",
                           limit, "--repeats", repeats, "--db", db, "--quiet"});
        ASSERT_EQ(o.exit_code, 0) << o.err;
    }
    // Make the repeats disagree, so the two means differ: repeat 2 (on three
    // questions only) is wrong everywhere.
    e2e::exec(db, "UPDATE scores SET correct = 0 WHERE response_id IN (SELECT response_id FROM "
                  "requests WHERE repeat = 2)");
    const double per_question = std::stod(e2e::query(
        db, "SELECT avg(a) FROM (SELECT avg(correct) AS a FROM v_scores WHERE scorer = 'vllm' "
            "GROUP BY question_idx)"));
    const double finished = std::stod(
        e2e::query(db, "SELECT sum(f) FROM (SELECT avg(outcome = 'finished') AS f FROM v_responses "
                       "GROUP BY question_idx)"));
    auto s = e2e::run({"summary", "--db", db, "--format", "json"});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const auto g = json::parse(s.out)["groups"][0];
    EXPECT_EQ(g["questions"], 8) << s.out;
    EXPECT_EQ(g["repeats"], 3) << s.out;
    EXPECT_EQ(g["uneven_repeats"], true) << s.out;
    EXPECT_NEAR(g["accuracy"]["vllm"]["mean"].get<double>(), per_question, 1e-12) << s.out;
    EXPECT_NEAR(g["breakdown"]["mean"]["finished"].get<double>(), finished, 1e-12) << s.out;
    auto t = e2e::run({"summary", "--db", db});
    EXPECT_NE(t.out.find("* its repeats ran different questions"), std::string::npos) << t.out;
    auto o = e2e::run({"gate", "--db", db, "--expect", fmt::format("{}", per_question - 0.001)});
    EXPECT_EQ(o.exit_code, 0) << o.out;
    EXPECT_NE(o.out.find("accuracy over questions (each question's repeats averaged)"),
              std::string::npos)
        << o.out;
    // Its measured figure says what it is beside the repeats' own accuracies,
    // each over its own questions (stats audit: "85.00% (min 75.00, max
    // 75.00, 3 repeats)" passed an 80% floor under a rule of "the mean over
    // repeats").
    EXPECT_NE(o.out.find("% (over questions, each one's repeats averaged; its 3 repeats ran 3 to "
                         "8 questions each and scored "),
              std::string::npos)
        << o.out;
}

// A side whose every request failed agreed with itself on every question
// (each failure counts as wrong) and was called "a deterministic server":
// nothing it answered was compared, and every output says it is not measured.
TEST(AnalyseNoise, ASideThatAnsweredNothingIsNotMeasured) {
    auto dir = e2e::scratch("noise-unanswered");
    auto profile = dir / "fail.toml";
    std::ofstream(profile) << "version = 1\nname = \"fail\"\n[faults]\nhttp_500 = 1.0\n";
    e2e::Sim good;
    e2e::Sim failing({"--profile", profile.string()});
    auto db = (dir / "r.sqlite").string();
    auto r = e2e::run({"run", "--server", "a=" + good.url(), "--server", "fail=" + failing.url(),
                       "--framing", "raw", "--limit", "4", "--repeats", "2", "--retries", "0",
                       "--db", db, "--quiet"});
    ASSERT_EQ(r.exit_code, 1) << r.err;
    auto text = e2e::run({"diff", "--db", db, "a", "fail"});
    EXPECT_EQ(text.exit_code, 0) << text.err;
    std::replace(text.out.begin(), text.out.end(), '\n', ' '); // diff wraps its prose
    EXPECT_NE(text.out.find("fail/raw/256 not measured: fewer than half its questions have two "
                            "successful repeats to compare (see its errors)"),
              std::string::npos)
        << text.out;
    EXPECT_EQ(text.out.find("fail/raw/256 none seen"), std::string::npos) << text.out;
    auto j = json::parse(e2e::run({"diff", "--db", db, "a", "fail", "--format", "json"}).out);
    const auto& noise = j["comparisons"][0]["noise"]["b"];
    EXPECT_EQ(noise["measured"], false) << noise;
    EXPECT_EQ(noise["deterministic"], false) << noise;
    EXPECT_EQ(noise["not_measured"], "too_few_answers") << noise;
    EXPECT_TRUE(noise["rerun_sd"].is_null()) << noise;
    EXPECT_TRUE(j["comparisons"][0]["noise"]["a"]["not_measured"].is_null()) << j;
    auto o = e2e::run({"report", "--db", db, "--out", (dir / "out").string(), "--baseline", "a"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto md = e2e::slurp(dir / "out" / "report.md");
    EXPECT_NE(md.find("n/a (too few answered)"), std::string::npos) << md;
    EXPECT_EQ(md.find("fail/raw/256 none seen"), std::string::npos) << md;
}

// A database an older diffeval wrote may hold a name that is not UTF-8 (a
// server, or a scorer named after its file): every JSON output was then an
// internal error, exit 1, and no document. The bytes are written as U+FFFD,
// as report.html already wrote them.
TEST(AnalyseJson, ANameStoredAsInvalidUtf8StillGivesEveryJsonDocument) {
    auto dir = e2e::scratch("json-not-utf8");
    e2e::Sim a;
    auto db = (dir / "r.sqlite").string();
    auto r = e2e::run({"run", "--server", "a=" + a.url(), "--server", "b=" + a.url(), "--framing",
                       "raw", "--limit", "4", "--db", db, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    e2e::exec(db, "UPDATE servers SET name = CAST(X'62ff' AS TEXT) WHERE name = 'b';"
                  "UPDATE requests SET server = CAST(X'62ff' AS TEXT) WHERE server = 'b';");
    const std::string b = "b\xff";
    const std::string shown = "b\xef\xbf\xbd"; // U+FFFD
    auto summary = e2e::run({"summary", "--db", db, "--format", "json"});
    ASSERT_EQ(summary.exit_code, 0) << summary.err;
    EXPECT_NE(json::parse(summary.out).dump().find(shown), std::string::npos) << summary.out;
    auto diff = e2e::run({"diff", "--db", db, "a", b, "--format", "json"});
    ASSERT_EQ(diff.exit_code, 0) << diff.err;
    EXPECT_EQ(json::parse(diff.out)["comparisons"][0]["b"]["server"], shown);
    const auto verdict = dir / "gate.json";
    auto gate = e2e::run({"gate", "--db", db, "--expect", "0", "--json", verdict.string()});
    ASSERT_EQ(gate.exit_code, 0) << gate.err;
    EXPECT_TRUE(json::accept(e2e::slurp(verdict)));
    auto report = e2e::run({"report", "--db", db, "--out", (dir / "out").string()});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    EXPECT_TRUE(json::accept(e2e::slurp(dir / "out" / "summary.json")));
}

// A report's headline says what the database lacks of what its runs asked
// (a request never sent, a place never planned), but not while a run still
// writes it: that run has yet to plan and send its part, and the sentence
// before says the result is partial.
TEST(ReadWhileWritten, TheReportSaysWhatIsMissingOnlyOnceNoRunWrites) {
    auto dir = e2e::scratch("read-while-written-gaps");
    const auto db = (dir / "r.sqlite").string();
    e2e::Sim sim;
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw", "--limit", "4",
                       "--db", db, "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    // What a run still sending question 0 and yet to plan question 3
    // leaves: a request with no response, and no request.
    e2e::unsend(db, "question_idx IN (0, 3)");
    e2e::exec(db, "DELETE FROM requests WHERE question_idx = 3");
    const std::string lacks =
        "The database lacks part of what its runs asked: a/raw/256 has 1 planned request without "
        "a response (never sent, or in flight when a run stopped), 1 request never planned (the "
        "run stopped first); requests without a response count as wrong answers (in a "
        "comparison only the candidate's: the baseline's are left out), the others count "
        "nowhere: run the command that asked for them again.";
    {
        const int held = ::open((db + ".lock").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
        ASSERT_GE(held, 0);
        ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
        auto report = e2e::run({"report", "--db", db, "--out", (dir / "during").string()});
        ::close(held);
        ASSERT_EQ(report.exit_code, 0) << report.err;
        const auto md = e2e::slurp(dir / "during" / "report.md");
        EXPECT_NE(md.find("was still writing the database"), std::string::npos) << md;
        EXPECT_EQ(md.find("lacks part"), std::string::npos) << md;
    }
    auto report = e2e::run({"report", "--db", db, "--out", (dir / "after").string()});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    const auto md = e2e::slurp(dir / "after" / "report.md");
    EXPECT_NE(md.find(lacks), std::string::npos) << md;
    // Beside the err column that counts it, as summary says under its table
    // (an audit read "err 160" for a server that never failed).
    const std::string errors = "Errors include planned requests without a response (never sent, "
                               "or in flight when a run stopped), over all repeats: a/raw/256 1.";
    const auto at = md.find("## Where the responses went");
    ASSERT_NE(at, std::string::npos) << md;
    EXPECT_NE(md.find(errors, at), std::string::npos) << md.substr(at, 1500);
    // The page's explorer and transition chart call it unsent, not error.
    const auto html = e2e::slurp(dir / "after" / "report.html");
    EXPECT_NE(html.find(errors), std::string::npos);
    EXPECT_NE(html.find(R"(,"unsent",)"), std::string::npos);
}

// A pilot whose B failed some requests: those count as wrong answers in
// the variances plan sizes from, and it says how many (words audit,
// 2026-12-06: a pilot with 34% of B's requests failed was sized silently).
TEST(Plan, APilotWithFailedRequestsSaysHowMany) {
    auto dir = e2e::scratch("plan_failed");
    e2e::Sim a;
    e2e::Sim b({"--fault-http-500", "0.3"});
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + a.url(), "--server", "b=" + b.url(), "--framing",
                       "raw", "--limit", "24", "--repeats", "2", "--retries", "0", "--db",
                       db.string(), "--quiet"});
    const auto failed = e2e::query(db, "SELECT count(*) FROM v_responses WHERE server = 'b' AND "
                                       "ok = 0");
    ASSERT_NE(failed, "0") << o.err;
    auto p = e2e::run({"plan", "--db", db.string(), "a/raw", "b/raw"});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    EXPECT_NE(p.out.find("Failed (no successful response), each counted as a wrong answer in the "
                         "variances below: " +
                         failed + " of b/raw/256's 48 requests here;"),
              std::string::npos)
        << p.out;
    auto clean = e2e::run({"plan", "--db", db.string(), "a/raw", "a/raw"});
    EXPECT_EQ(clean.out.find("Failed (no successful response)"), std::string::npos) << clean.out;
}

// Reports audit #4: every question differing by the same amount (b wrong
// wherever a is right) has no variance to size a run from, as the docs say;
// plan printed a table of "10 questions" built on a variance of 0.
TEST(Plan, EveryQuestionDifferingAlikeHasNoVarianceToSizeFrom) {
    auto dir = e2e::scratch("plan_same_everywhere");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(),
                       "--framing", "raw", "--limit", "8", "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    e2e::exec(db, "UPDATE scores SET correct = CASE WHEN response_id IN (SELECT response_id FROM "
                  "requests WHERE server = 'a') THEN 1 ELSE 0 END WHERE scorer = 'vllm'");
    auto p = e2e::run({"plan", "--db", db.string(), "a/raw", "b/raw"});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    EXPECT_NE(p.out.find("There is no variance to size a run from: every one of the 8 questions "
                         "differs by the same amount, so their spread sizes no test."),
              std::string::npos)
        << p.out;
    EXPECT_EQ(p.out.find("questions needed"), std::string::npos) << p.out;
}

// A database rescored on the text after the think block gives other
// accuracies than the full text's: every output that prints accuracies
// says which text it scored, so two outputs that differ say why (an
// interop audit: only summary's JSON did). The full text, the default,
// is not said.
TEST(ScoreText, EveryAccuracyOutputSaysWhenTheTextAfterTheThinkBlockIsScored) {
    auto dir = e2e::scratch("score-text-said");
    e2e::Sim sim;
    const auto db = (dir / "r.sqlite").string();
    for (const char* name : {"a", "b"}) {
        auto o = e2e::run({"run", "--server", std::string(name) + "=" + sim.url(), "--framing",
                           "raw", "--limit", "4", "--db", db, "--quiet"});
        ASSERT_EQ(o.exit_code, 0) << o.err;
    }
    const std::string words = "on the text after the think block";
    const auto outputs = [&](const std::string& tag) {
        std::vector<std::string> out;
        for (const auto& args : std::vector<std::vector<std::string>>{
                 {"summary", "--db", db},
                 {"summary", "--db", db, "--format", "md"},
                 {"diff", "a", "b", "--db", db},
                 {"gate", "--db", db, "--expect", "0.1", "--group", "a/raw"}}) {
            auto o = e2e::run(args, {"GITHUB_STEP_SUMMARY=" + (dir / (tag + "-step.md")).string()});
            EXPECT_EQ(o.exit_code, 0) << o.err;
            out.push_back(o.out);
        }
        out.push_back(e2e::slurp(dir / (tag + "-step.md")));
        auto r = e2e::run({"report", "--db", db, "--out", (dir / tag).string(), "--format", "md"});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        out.push_back(e2e::slurp(dir / tag / "report.md"));
        return out;
    };
    for (const auto& out : outputs("full")) {
        EXPECT_EQ(out.find(words), std::string::npos) << out;
    }
    auto json_full = e2e::run({"diff", "a", "b", "--db", db, "--format", "json"});
    EXPECT_EQ(json::parse(json_full.out)["score_text"], "full");

    ASSERT_EQ(e2e::run({"rescore", "--db", db, "--score-text", "after-think"}).exit_code, 0);
    for (const auto& out : outputs("after")) {
        EXPECT_NE(out.find(words), std::string::npos) << out;
    }
    auto json_after = e2e::run({"diff", "a", "b", "--db", db, "--format", "json"});
    EXPECT_EQ(json::parse(json_after.out)["score_text"], "after-think");
    // The report's `diff` is the document diff writes (docs audit).
    ASSERT_EQ(e2e::run({"report", "--db", db, "--out", (dir / "json").string(), "--format", "json"})
                  .exit_code,
              0);
    EXPECT_EQ(json::parse(e2e::slurp(dir / "json" / "summary.json"))["diff"]["score_text"],
              "after-think");
    const auto gate_json = (dir / "gate.json").string();
    auto g =
        e2e::run({"gate", "--db", db, "--expect", "0.1", "--group", "a/raw", "--json", gate_json});
    EXPECT_EQ(g.exit_code, 0) << g.err;
    EXPECT_EQ(json::parse(e2e::slurp(gate_json))["score_text"], "after-think");
}

// A plan that needs more questions than the dataset holds says so: an
// audit's plan asked for 8,373 of GSM8K's 1,319, and a run with that
// --limit ran the 1,319 there are without a word.
TEST(AnalysePlan, ARowPastTheDatasetsQuestionsIsSaid) {
    auto dir = e2e::scratch("plan-past-dataset");
    e2e::Sim sim;
    const auto db = (dir / "r.sqlite").string();
    ASSERT_EQ(e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(),
                        "--framing", "chat", "--limit", "5", "--db", db, "--quiet"})
                  .exit_code,
              0);
    e2e::exec(db, "UPDATE scores SET correct = 1 - correct WHERE scorer = 'vllm' AND response_id "
                  "IN (SELECT response_id FROM requests WHERE server = 'b' AND question_idx < 3)");
    auto o = e2e::run({"plan", "--db", db, "a", "b", "--drop", "5"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("Dataset sample holds 48 questions, fewer than a row above needs: accept "
                         "a larger --drop, or run a pilot of 2 or more repeats a side"),
              std::string::npos)
        << o.out;
    // Within them, nothing is said.
    auto wide = e2e::run({"plan", "--db", db, "a", "b", "--drop", "90"});
    ASSERT_EQ(wide.exit_code, 0) << wide.err;
    EXPECT_EQ(wide.out.find("fewer than a row above needs"), std::string::npos) << wide.out;
}
