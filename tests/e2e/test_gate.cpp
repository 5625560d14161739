// `diffeval gate` on databases written from the simulated profiles: each
// check's pass and fail paths with the exit codes CI acts on, the JUnit,
// JSON and step-summary outputs, completeness on a run with HTTP errors, and
// usage errors as one line with exit 2.
#include "e2e.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

using nlohmann::json;

namespace {

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
        ++n;
    }
    return n;
}

// Attribute `name` of the first element starting at `from` in `xml`.
std::string attribute(const std::string& xml, size_t from, const std::string& name) {
    auto at = xml.find(" " + name + "=\"", from);
    if (at == std::string::npos) {
        return "";
    }
    at += name.size() + 3;
    return xml.substr(at, xml.find('"', at) - at);
}

// The few elements the gate emits open and close in order, and no raw '<'
// or '&' is left outside markup and entities.
void expect_well_formed(const std::string& xml) {
    std::vector<std::string> open;
    for (size_t i = 0; i < xml.size();) {
        if (xml[i] == '&') {
            auto semi = xml.find(';', i);
            ASSERT_NE(semi, std::string::npos);
            const auto entity = xml.substr(i, semi - i + 1);
            EXPECT_TRUE(entity == "&amp;" || entity == "&lt;" || entity == "&gt;" ||
                        entity == "&quot;" || entity == "&apos;")
                << entity;
            i = semi + 1;
            continue;
        }
        if (xml[i] != '<') {
            ++i;
            continue;
        }
        auto end = xml.find('>', i);
        ASSERT_NE(end, std::string::npos);
        std::string tag = xml.substr(i + 1, end - i - 1);
        EXPECT_EQ(tag.find('<'), std::string::npos) << tag;
        if (tag.starts_with("?")) {
        } else if (tag.starts_with("/")) {
            ASSERT_FALSE(open.empty()) << tag;
            EXPECT_EQ(open.back(), tag.substr(1));
            open.pop_back();
        } else if (!tag.ends_with("/")) {
            open.push_back(tag.substr(0, tag.find(' ')));
        }
        i = end + 1;
    }
    EXPECT_TRUE(open.empty());
}

class Gate : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir = new std::filesystem::path(e2e::scratch("gate"));
        db = new std::string((*dir / "r.sqlite").string());
        e2e::Sim a({"--profile", "default"});
        e2e::Sim b({"--profile", "deepgemm"});
        auto o = e2e::run({"run", "--server", "default=" + a.url(), "--server",
                           "deepgemm=" + b.url(), "--framing", "raw,chat", "--max-tokens",
                           "128,256", "--repeats", "3", "--db", *db, "--quiet"});
        ASSERT_EQ(o.exit_code, 0) << o.err;
        // A candidate far worse than deepgemm, for a drop 48 questions can show.
        auto profile = *dir / "worse.toml";
        std::ofstream(profile) << "version = 1\nname = \"worse\"\n[behaviour]\n"
                                  "reasoning_rate = 0.6\n";
        e2e::Sim c({"--profile", profile.string()});
        auto w = e2e::run({"run", "--server", "worse=" + c.url(), "--framing", "raw",
                           "--max-tokens", "256", "--repeats", "3", "--db", *db, "--quiet"});
        ASSERT_EQ(w.exit_code, 0) << w.err;
    }
    static e2e::Outcome gate(std::vector<std::string> args,
                             const std::vector<std::string>& env = {}) {
        args.insert(args.begin(), {"gate", "--db", *db, "--resamples", "2000"});
        return e2e::run(args, env);
    }
    static json gate_json(std::vector<std::string> args) {
        auto path = *dir / "v.json";
        args.insert(args.end(), {"--json", path.string()});
        gate(args);
        return json::parse(e2e::slurp(path));
    }
    static std::filesystem::path* dir;
    static std::string* db;
};

std::filesystem::path* Gate::dir = nullptr;
std::string* Gate::db = nullptr;

} // namespace

TEST_F(Gate, AbsoluteFloorPassesBelowAndFailsAboveTheMeasuredAccuracy) {
    auto summary = json::parse(e2e::run({"summary", "--db", *db, "--format", "json"}).out);
    double raw = -1;
    for (const auto& g : summary["groups"]) {
        if (g["server"] == "default" && g["framing"] == "raw" && g["max_tokens"] == 256) {
            raw = g["accuracy"]["vllm"]["mean"];
        }
    }
    ASSERT_GE(raw, 0);
    const auto low = std::to_string(raw - 0.01);
    const auto high = std::to_string(raw + 0.05);
    auto pass = gate({"--expect", low, "--tolerance", "0", "--group", "default/raw/256"});
    EXPECT_EQ(pass.exit_code, 0) << pass.out << pass.err;
    EXPECT_NE(pass.out.find("PASS  accuracy default/raw/256"), std::string::npos) << pass.out;
    EXPECT_NE(pass.out.find("PASS: the one check passed"), std::string::npos) << pass.out;
    EXPECT_NE(pass.out.find("diffeval gate: 1 check on"), std::string::npos) << pass.out;

    auto fail = gate({"--expect", high, "--tolerance", "0.02", "--group", "default/raw/256"});
    EXPECT_EQ(fail.exit_code, 1) << fail.out << fail.err;
    EXPECT_NE(fail.out.find("FAIL  accuracy default/raw/256"), std::string::npos) << fail.out;
    EXPECT_NE(fail.out.find("points below the floor"), std::string::npos) << fail.out;
    // A floor a hair above the accuracy prints apart from it, with the gap.
    auto hair = gate({"--expect", fmt::format("{:.17g}", raw + 2e-7), "--tolerance", "0", "--group",
                      "default/raw/256"});
    EXPECT_EQ(hair.exit_code, 1) << hair.out;
    EXPECT_NE(hair.out.find(fmt::format("measured:  {:.5f}%", raw * 100)), std::string::npos)
        << hair.out;
    EXPECT_NE(hair.out.find("0.00002 points below the floor"), std::string::npos) << hair.out;

    // Without --group every group is checked: one check each.
    auto j = gate_json({"--expect", "0.0"});
    // A floor at a group's exact accuracy (every repeat plans the same
    // questions, so it is the share of all its answers) passes, and is
    // said to be met exactly: a mean over repeats loses its last bit
    // (19/20 three times averages to 94.99999999999999%), which printed
    // "-0.000000 points above the floor" and a JSON measured below it.
    const auto groups = e2e::query_rows(
        *db, "SELECT server || '/' || framing || '/' || max_tokens, sum(correct), count(*) "
             "FROM v_scores WHERE scorer = 'vllm' GROUP BY server, framing, max_tokens");
    ASSERT_EQ(groups.size(), 9u);
    for (const auto& row : groups) {
        const auto a = row.find('|');
        const auto b = row.rfind('|');
        const std::string group = row.substr(0, a);
        const double exact = std::stod(row.substr(a + 1, b - a - 1)) / std::stod(row.substr(b + 1));
        const std::vector<std::string> args = {
            "--expect", fmt::format("{:.17g}", exact), "--tolerance", "0", "--group", group};
        auto at = gate(args);
        EXPECT_EQ(at.exit_code, 0) << at.out;
        EXPECT_NE(at.out.find("is at the floor"), std::string::npos) << at.out;
        EXPECT_EQ(at.out.find("-0.0"), std::string::npos) << at.out;
        auto c = gate_json(args)["checks"][0];
        EXPECT_EQ(c["measured"], c["threshold"]) << c.dump();
    }
    EXPECT_EQ(j["schema"], "diffeval.gate/2");
    EXPECT_EQ(j["passed"], true);
    EXPECT_EQ(j["checks"].size(), 9u);
    for (const auto& c : j["checks"]) {
        EXPECT_EQ(c["kind"], "accuracy");
        EXPECT_EQ(c["status"], "pass");
        EXPECT_GT(c["measured"].get<double>(), 40.0) << c["name"];
    }
}

TEST_F(Gate, CompletenessPassesOnAFullRunAndFailsOnHttpErrors) {
    auto full = gate({"--require-complete"});
    EXPECT_EQ(full.exit_code, 0) << full.out << full.err;
    EXPECT_NE(full.out.find("0 of 1296 requests without a successful response"), std::string::npos)
        << full.out;

    auto d = e2e::scratch("gate-errors");
    auto profile = d / "flaky.toml";
    std::ofstream(profile) << "version = 1\nname = \"flaky\"\n[faults]\nhttp_500 = 0.5\n";
    e2e::Sim flaky({"--profile", profile.string()});
    auto edb = (d / "e.sqlite").string();
    auto run = e2e::run({"run", "--server", "flaky=" + flaky.url(), "--framing", "raw", "--limit",
                         "16", "--retries", "0", "--db", edb, "--quiet"});
    ASSERT_EQ(run.exit_code, 1) << run.err;
    const int failed = std::stoi(e2e::query(edb, "SELECT count(*) FROM v_responses WHERE ok = 0"));
    ASSERT_GT(failed, 0);
    auto o = e2e::run({"gate", "--db", edb, "--require-complete"});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("FAIL  complete"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find(std::to_string(failed) + " of 16 requests without a successful response"),
              std::string::npos)
        << o.out;
    // Each group's count labelled as its ("in flaky/raw/256 12" read as part of its name).
    EXPECT_NE(o.out.find(fmt::format("failed or unsent requests (http {0}) in flaky/raw/256: {0}",
                                     failed)),
              std::string::npos)
        << o.out;
    // Without --require-complete the errors only cost accuracy: a zero floor passes.
    EXPECT_EQ(e2e::run({"gate", "--db", edb, "--expect", "0"}).exit_code, 0);
    // And the accuracy check says what the failures cost it: "0.00%, 50.00
    // points below the floor" read as the model's for a server that answered
    // HTTP 500 to everything.
    auto floor = e2e::run({"gate", "--db", edb, "--expect", "1"});
    EXPECT_EQ(floor.exit_code, 1) << floor.out;
    EXPECT_NE(floor.out.find(
                  fmt::format("; {} of its 16 requests {} no successful response "
                              "(failed, or no response stored), each counted as a wrong answer",
                              failed, failed == 1 ? "has" : "have")),
              std::string::npos)
        << floor.out;
}

TEST_F(Gate, ConflictPassesWithoutFingerprintsAndFailsOnAConflictingLog) {
    auto none = gate_json({"--fail-on-conflict"});
    ASSERT_EQ(none["checks"].size(), 1u) << none.dump();
    EXPECT_TRUE(none["passed"]) << none.dump();
    EXPECT_EQ(none["checks"][0]["kind"], "conflict");
    EXPECT_NE(none["checks"][0]["note"].get<std::string>().find("no fingerprint recorded"),
              std::string::npos)
        << none.dump();

    // A copy where deepgemm's log said DeepGEMM while claiming the default backend.
    auto copy = *dir / "conflict.sqlite";
    std::filesystem::copy_file(*db, copy, std::filesystem::copy_options::overwrite_existing);
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(copy.c_str(), &h), SQLITE_OK);
    const char* sql =
        R"(UPDATE servers SET facts_json = '{"engine": "vllm", "facts": {"engine_version": )"
        R"("0.26.0", "fp8_moe_backend": "DEEPGEMM"}, "conflicts": [{"name": "backend", )"
        R"("message": "log selects DeepGEMM but VLLM_USE_DEEP_GEMM=0", "evidence": )"
        R"(["Using DeepGEMM for FP8 MoE"]}]}' WHERE name = 'deepgemm')";
    EXPECT_EQ(sqlite3_exec(h, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
    EXPECT_EQ(sqlite3_changes(h), 1);
    sqlite3_close(h);
    auto bad = e2e::run({"gate", "--db", copy.string(), "--fail-on-conflict"});
    EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
    EXPECT_NE(bad.out.find("FAIL  conflict"), std::string::npos) << bad.out;
    EXPECT_NE(bad.out.find("VLLM_USE_DEEP_GEMM=0"), std::string::npos) << bad.out;
    // Comparing two servers without the conflicting one passes.
    auto other = e2e::run({"gate", "--db", copy.string(), "--fail-on-conflict", "--baseline",
                           "default/raw", "--candidate", "worse/raw"});
    EXPECT_EQ(other.exit_code, 0) << other.out << other.err;
    auto pair = e2e::run({"gate", "--db", copy.string(), "--fail-on-conflict", "--baseline",
                          "default/raw", "--candidate", "deepgemm/raw"});
    EXPECT_EQ(pair.exit_code, 1) << pair.out << pair.err;
}

// A proxy that sent a third of one server's requests to another backend:
// its responses name two models. The conflict check fails on that server
// (and passes on two others), the report's facts show the two names with
// their counts and a line under the table says the answers are mixed.
TEST_F(Gate, AServerWhoseResponsesNameTwoModelsFailsTheConflictCheck) {
    EXPECT_EQ(gate({"--fail-on-conflict"}).exit_code, 0);
    auto copy = *dir / "mixed.sqlite";
    std::filesystem::copy_file(*db, copy, std::filesystem::copy_options::overwrite_existing);
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(copy.c_str(), &h), SQLITE_OK);
    const char* sql =
        R"(UPDATE responses SET response_json = replace(response_json, '"model":"Qwen/Qwen3.5-)"
        R"(35B-A3B-FP8"', '"model":"other/Small-7B"') WHERE response_id % 3 = 0 AND )"
        R"(request_id IN (SELECT request_id FROM requests WHERE server = 'worse'))";
    ASSERT_EQ(sqlite3_exec(h, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
    const int changed = sqlite3_changes(h);
    sqlite3_close(h);
    ASSERT_GT(changed, 0);
    const int kept = 144 - changed; // worse: 48 questions x 3 repeats, all answered

    const auto json_path = *dir / "mixed.json";
    auto bad = e2e::run(
        {"gate", "--db", copy.string(), "--fail-on-conflict", "--json", json_path.string()});
    EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
    const auto line = fmt::format("worse: its 144 successful responses name 2 models: "
                                  "Qwen/Qwen3.5-35B-A3B-FP8 ({}), other/Small-7B ({})",
                                  kept, changed);
    EXPECT_NE(bad.out.find("a server's responses name more than one model: " + line),
              std::string::npos)
        << bad.out;
    const auto j = json::parse(e2e::slurp(json_path));
    const auto& conflicts = j["checks"][0]["detail"]["conflicts"];
    ASSERT_EQ(conflicts.size(), 1u) << j.dump();
    EXPECT_EQ(conflicts[0]["server"], "worse");
    EXPECT_EQ(conflicts[0]["name"], "mixed-models");
    EXPECT_EQ(conflicts[0]["evidence"],
              json({fmt::format("model=Qwen/Qwen3.5-35B-A3B-FP8 ({})", kept),
                    fmt::format("model=other/Small-7B ({})", changed)}));
    EXPECT_EQ(e2e::run({"gate", "--db", copy.string(), "--fail-on-conflict", "--baseline",
                        "default/raw", "--candidate", "deepgemm/raw"})
                  .exit_code,
              0);

    auto report = e2e::run({"report", "--db", copy.string(), "--out", (*dir / "mixed").string()});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    const auto md = e2e::slurp(*dir / "mixed" / "report.md");
    EXPECT_NE(md.find(fmt::format("| answered as | Qwen/Qwen3.5-35B-A3B-FP8 | "
                                  "Qwen/Qwen3.5-35B-A3B-FP8 | Qwen/Qwen3.5-35B-A3B-FP8 ({}), "
                                  "other/Small-7B ({}) | yes |",
                                  kept, changed)),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("**MIXED MODELS** on worse: its 144 successful responses name 2 models"),
              std::string::npos)
        << md;
}

TEST_F(Gate, JunitHasOneTestcasePerCheckAndAFailurePerFailedCheck) {
    auto xml_path = *dir / "gate.xml";
    auto o = gate({"--expect", "0.99", "--group", "default", "--require-complete", "--junit",
                   xml_path.string()});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    const auto xml = e2e::slurp(xml_path);
    expect_well_formed(xml);
    EXPECT_EQ(count(xml, "<testsuites>"), 1u);
    const auto suite = xml.find("<testsuite ");
    ASSERT_NE(suite, std::string::npos);
    EXPECT_EQ(attribute(xml, suite, "name"), "diffeval gate");
    // complete + four default groups, each below 99%.
    EXPECT_EQ(attribute(xml, suite, "tests"), "5");
    EXPECT_EQ(attribute(xml, suite, "failures"), "4");
    EXPECT_EQ(count(xml, "<testcase "), 5u);
    EXPECT_EQ(count(xml, "<failure "), 4u);
    EXPECT_NE(xml.find("name=\"accuracy default/raw/256\""), std::string::npos) << xml;
}

TEST_F(Gate, StepSummaryIsAppendedKeepingWhatWasThere) {
    auto path = *dir / "step-summary.md";
    std::ofstream(path) << "# earlier step\n";
    auto o = gate({"--expect", "0.0", "--group", "deepgemm/chat"},
                  {"GITHUB_STEP_SUMMARY=" + path.string()});
    EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
    const auto md = e2e::slurp(path);
    EXPECT_EQ(md.rfind("# earlier step\n", 0), 0u) << md;
    EXPECT_NE(md.find("## diffeval gate: PASS: all 2 checks passed"), std::string::npos) << md;
    EXPECT_NE(md.find("| check | result | measured | threshold | why |"), std::string::npos) << md;
    // Words all along, left-aligned whatever a cell looks like (docs audit).
    EXPECT_NE(md.find("| check | result | measured | threshold | why |\n| --- | --- | --- | --- | "
                      "--- |"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("| accuracy deepgemm/chat/128 | PASS |"), std::string::npos) << md;
    EXPECT_NE(md.find("Where the responses went"), std::string::npos) << md;
    EXPECT_NE(md.find("| group |"), std::string::npos) << md;
    // A second gate appends again rather than replacing.
    gate({"--expect", "0.0", "--group", "deepgemm/chat"}, {"GITHUB_STEP_SUMMARY=" + path.string()});
    EXPECT_EQ(count(e2e::slurp(path), "## diffeval gate:"), 2u);
    // After a last line without its end, the heading starts a line of its
    // own (CI audit: "| 1 | 2 |## diffeval gate").
    std::ofstream(path) << "| 1 | 2 |";
    gate({"--expect", "0.0", "--group", "deepgemm/chat"}, {"GITHUB_STEP_SUMMARY=" + path.string()});
    EXPECT_EQ(e2e::slurp(path).rfind("| 1 | 2 |\n## diffeval gate: PASS", 0), 0u)
        << e2e::slurp(path);
    // A gate that cannot run says so there too, not only on stderr.
    o = gate({"--expect", "0.0", "--group", "nope/chat"}, {"GITHUB_STEP_SUMMARY=" + path.string()});
    EXPECT_EQ(o.exit_code, 2) << o.out;
    EXPECT_NE(e2e::slurp(path).find("## diffeval gate: could not run (exit 2)\n\n`"),
              std::string::npos)
        << e2e::slurp(path);
}

// The step summary's why and note are one sentence, and a rate check's
// measured change is the change of the rates printed beside it: an audit
// read "... mid-p 1.09e-29.; this run detects ..." in the table, and
// "+9.90% of questions (218.00 -> 348.67 per run)" whose counts give 9.91.
TEST_F(Gate, StepSummaryNotesAndRateChangesReadAsPrinted) {
    auto path = *dir / "step-note.md";
    auto o = gate({"--baseline", "default/raw/256", "--candidate", "worse", "--max-drop", "1",
                   "--max-never-finished-increase", "50%"},
                  {"GITHUB_STEP_SUMMARY=" + path.string()});
    EXPECT_NE(o.exit_code, 2) << o.out << o.err;
    const auto md = e2e::slurp(path);
    EXPECT_NE(md.find("; this run"), std::string::npos) << md;
    EXPECT_EQ(md.find(".;"), std::string::npos) << md;
    std::smatch m;
    const std::regex measured(
        R"(measured: +([-+])([0-9.]+)% of questions \(([0-9.]+)% -> ([0-9.]+)%\))");
    ASSERT_TRUE(std::regex_search(o.out, m, measured)) << o.out;
    const double change = (m[1] == "-" ? -1 : 1) * std::stod(m[2]);
    EXPECT_NEAR(change, std::stod(m[4]) - std::stod(m[3]), 1e-9) << m[0];
}

// A '|' in a server's name is escaped once in the step summary's checks
// table, as in its breakdown table: escaped twice, GitHub showed "b\\|x".
TEST(GateStepSummary, APipeInANameIsEscapedOnce) {
    auto dir = e2e::scratch("gate-pipe");
    e2e::Sim sim;
    auto db = (dir / "r.sqlite").string();
    auto r = e2e::run({"run", "--server", "b|x=" + sim.url(), "--framing", "raw", "--limit", "3",
                       "--db", db, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto path = dir / "summary.md";
    auto o =
        e2e::run({"gate", "--db", db, "--expect", "0.0"}, {"GITHUB_STEP_SUMMARY=" + path.string()});
    EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
    const auto md = e2e::slurp(path);
    EXPECT_NE(md.find("| accuracy b\\|x/raw/256 | PASS |"), std::string::npos) << md;
    EXPECT_NE(md.find("| b\\|x/raw/256 |"), std::string::npos) << md;
    EXPECT_EQ(md.find("\\\\"), std::string::npos) << md;
}

TEST_F(Gate, UsageAndDataErrorsExitTwoWithOneLine) {
    auto expect_usage = [](const e2e::Outcome& o, const std::string& says) {
        EXPECT_EQ(o.exit_code, 2) << o.out << o.err;
        EXPECT_EQ(count(o.err, "\n"), 1u) << o.err;
        EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
        EXPECT_EQ(o.out, "");
    };
    expect_usage(gate({}), "no checks requested");
    expect_usage(gate({"--expect", "0.8", "--group", "nosuch"}), "--group nosuch matches no group");
    expect_usage(gate({"--baseline", "default", "--candidate", "nosuch", "--max-drop", "1"}),
                 "no server 'nosuch'");
    expect_usage(gate({"--max-drop", "1"}), "give --baseline and --candidate");
    expect_usage(gate({"--baseline", "default", "--candidate", "deepgemm"}),
                 "--baseline/--candidate need a check");
    expect_usage(gate({"--baseline", "default", "--candidate", "deepgemm",
                       "--max-never-finished-increase", "5x"}),
                 "--max-never-finished-increase '5x'");
    expect_usage(gate({"--expect", "82"}), "--expect 82: a proportion from 0 to 1");
    // --tolerance names its own bounds: "--expect is a proportion in [0, 1]
    // and --tolerance >= 0" was true of 0.8 and 1.5.
    expect_usage(gate({"--expect", "0.8", "--tolerance", "1.5"}),
                 "--tolerance 1.5: a proportion from 0 to 1");
    expect_usage(gate({"--baseline", "default/raw", "--candidate", "deepgemm/raw",
                       "--max-never-finished-increase", "250%"}),
                 "--max-never-finished-increase '250%': a percentage of questions is at most 100%");
    expect_usage(
        gate({"--baseline", "default", "--candidate", "deepgemm", "--max-token-increase", "-5"}),
        "--max-token-increase -5 is not a percentage");
    expect_usage(gate({"--expect", "0.8", "--scorer", "vlm"}), "unknown scorer 'vlm'");

    auto empty = *dir / "empty.sqlite";
    std::ofstream(empty).close();
    expect_usage(e2e::run({"gate", "--db", empty.string(), "--expect", "0.8"}),
                 "holds no responses");
    expect_usage(e2e::run({"gate", "--db", (*dir / "none.sqlite").string(), "--expect", "0.8"}),
                 "no database");
    // An SQLite file with no table (as sqlite3 leaves one) is not given
    // diffeval's schema by a command that only reads it.
    auto bare = *dir / "bare.sqlite";
    {
        sqlite3* h = nullptr;
        ASSERT_EQ(sqlite3_open(bare.c_str(), &h), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(h, "PRAGMA journal_mode=WAL; CREATE TABLE t (x); DROP TABLE t",
                               nullptr, nullptr, nullptr),
                  SQLITE_OK);
        sqlite3_close(h);
    }
    const auto size = std::filesystem::file_size(bare);
    expect_usage(e2e::run({"gate", "--db", bare.string(), "--expect", "0.8"}),
                 "holds no diffeval results");
    expect_usage(e2e::run({"summary", "--db", bare.string()}), "holds no diffeval results");
    EXPECT_EQ(e2e::query(bare, "SELECT count(*) FROM sqlite_master"), "0");
    EXPECT_EQ(e2e::query(bare, "PRAGMA user_version"), "0");
    EXPECT_EQ(std::filesystem::file_size(bare), size);
}

// A margin of 0 is printed as 0, never "-0.0" or "above -0.0 points".
// Two sides that agree on every question: an audit's gate printed "drop 0.0
// points" beside behaviour checks that said "did not change".
TEST_F(Gate, AnUnchangedAccuracyIsNotCalledADrop) {
    auto o = gate(
        {"--baseline", "default/chat/128", "--candidate", "deepgemm/chat/128", "--max-drop", "2"});
    EXPECT_NE(o.out.find("measured:  change 0.0 points ("), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find("drop 0.0"), std::string::npos) << o.out;
    // Said once, in the verdict's sentence, not again as the note (docs
    // audit: "...; the two sides agree on every question; the two sides
    // agree on every question" in CI's step summary).
    const std::string agree = "the two sides agree on every question";
    ASSERT_NE(o.out.find(agree), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find(agree), o.out.rfind(agree)) << o.out;
}

TEST_F(Gate, AZeroMarginPrintsNoNegativeZero) {
    auto o = gate({"--baseline", "default/raw/256", "--candidate", "deepgemm", "--max-drop", "0"});
    EXPECT_NE(o.out.find("lower bound above 0.0 points"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("against the 0.0-point margin"), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find("-0.0"), std::string::npos) << o.out;
    // No run detects a 0-point drop: saying this one is too small to says
    // nothing (statistics audit).
    EXPECT_EQ(o.out.find("too small to detect a 0.0-point drop"), std::string::npos) << o.out;
    // Any other margin prints as given in every line: "above -0.12 points"
    // would pass a lower bound of -0.123, which is not above -0.12.
    auto m =
        gate({"--baseline", "default/raw/256", "--candidate", "deepgemm", "--max-drop", "0.125"});
    EXPECT_NE(m.out.find("lower bound above -0.125 points"), std::string::npos) << m.out;
    EXPECT_NE(m.out.find("against the 0.125-point margin"), std::string::npos) << m.out;
    EXPECT_NE(m.out.find("too small to detect a 0.125-point drop"), std::string::npos) << m.out;
    EXPECT_EQ(m.out.find("0.12 "), std::string::npos) << m.out;
}

TEST_F(Gate, DeepgemmRawDropOnTheSampleSetIsInconclusiveAndTheRunIsTooSmall) {
    const std::vector<std::string> args = {"--baseline", "default/raw/256", "--candidate",
                                           "deepgemm",   "--max-drop",      "1"};
    // Inconclusive counts as a failure unless asked otherwise.
    auto o = gate(args);
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("FAIL (inconclusive)  paired default/raw/256 -> deepgemm/raw/256"),
              std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("inconclusive against the 1.0-point margin"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("No detectable difference between deepgemm/raw/256 and default/raw/256"),
              std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("this run is too small to detect a 1.0-point drop"), std::string::npos)
        << o.out;
    auto lenient = args;
    lenient.insert(lenient.end(), {"--inconclusive", "pass"});
    auto p = gate(lenient);
    EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
    EXPECT_NE(p.out.find("PASS (inconclusive)"), std::string::npos) << p.out;

    auto j = gate_json(args);
    ASSERT_EQ(j["checks"].size(), 1u);
    const auto& c = j["checks"][0];
    EXPECT_EQ(c["kind"], "paired");
    EXPECT_EQ(c["detail"]["outcome"], "inconclusive");
    EXPECT_EQ(c["inconclusive"], true);
    EXPECT_GT(c["measured"].get<double>(), 1.0);                   // deepgemm is worse...
    EXPECT_EQ(c["detail"]["verdict"], "no detectable difference"); // ...48 questions cannot show it
    EXPECT_GE(c["detail"]["ci95_points"][1].get<double>(), 0.0);
    EXPECT_EQ(c["detail"]["too_small"], true);
    EXPECT_GT(c["detail"]["minimum_detectable_difference_points"].get<double>(), 1.0);
    // The paired numbers are diff's numbers.
    auto d = json::parse(e2e::run({"diff", "--db", *db, "default/raw/256", "deepgemm", "--format",
                                   "json", "--resamples", "2000"})
                             .out);
    const auto& dc = d["comparisons"][0];
    EXPECT_NEAR(c["measured"].get<double>(),
                (dc["accuracy_a"].get<double>() - dc["accuracy_b"].get<double>()) * 100, 1e-9);
    EXPECT_EQ(c["detail"]["p_mid"], dc["test"]["p_mid"]);
    EXPECT_EQ(c["detail"]["verdict_sentence"], dc["verdict"]["sentence"]);

    // Chat is unaffected: a generous margin passes on both max_tokens.
    auto chat = gate({"--baseline", "default/chat", "--candidate", "deepgemm", "--max-drop", "10"});
    EXPECT_EQ(chat.exit_code, 0) << chat.out << chat.err;
    EXPECT_EQ(count(chat.out, "PASS  paired default/chat/"), 2u) << chat.out;
    EXPECT_NE(chat.out.find("within the 10.0-point margin"), std::string::npos) << chat.out;
}

TEST_F(Gate, PairedFailsWhenTheDropIsShownBeyondTheMargin) {
    auto o = gate({"--baseline", "default/raw/256", "--candidate", "worse", "--max-drop", "1"});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("FAIL  paired default/raw/256 -> worse/raw/256"), std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("worse than the 1.0-point margin"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("worse/raw/256 is worse than default/raw/256"), std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("FAIL: 1 of 1 check failed"), std::string::npos) << o.out;
    auto j =
        gate_json({"--baseline", "default/raw/256", "--candidate", "worse", "--max-drop", "1"});
    const auto& c = j["checks"][0];
    EXPECT_EQ(c["detail"]["outcome"], "fail");
    EXPECT_EQ(c["detail"]["verdict"], "worse");
    // A margin beyond the interval's lower bound passes even though the drop
    // is significant: the gate tests the margin, not zero.
    const double lower = -c["detail"]["one_sided_points"][0].get<double>();
    auto lenient = gate({"--baseline", "default/raw/256", "--candidate", "worse", "--max-drop",
                         std::to_string(lower + 1)});
    EXPECT_EQ(lenient.exit_code, 0) << lenient.out;
    EXPECT_NE(lenient.out.find("PASS  paired"), std::string::npos) << lenient.out;
    // And a margin inside the interval is inconclusive, not a pass.
    const double drop = c["measured"].get<double>();
    auto between = gate({"--baseline", "default/raw/256", "--candidate", "worse", "--max-drop",
                         std::to_string(drop)});
    EXPECT_EQ(between.exit_code, 1) << between.out;
    EXPECT_NE(between.out.find("inconclusive against"), std::string::npos) << between.out;
}

TEST_F(Gate, ThresholdsThatMeanNothingAreUsageErrorsAndStillWriteJunit) {
    auto expect_usage = [](const e2e::Outcome& o, const std::string& says) {
        EXPECT_EQ(o.exit_code, 2) << o.out << o.err;
        EXPECT_EQ(count(o.err, "\n"), 1u) << o.err;
        EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
    };
    const std::vector<std::string> pair = {"--baseline", "default/raw/256", "--candidate", "worse"};
    for (const std::string bad : {"nan", "inf", "-inf", "1e400", "-1", "101"}) {
        auto args = pair;
        args.insert(args.end(), {"--max-drop", bad});
        auto o = gate(args);
        EXPECT_EQ(o.exit_code, 2) << bad << ": " << o.out << o.err;
        EXPECT_EQ(count(o.err, "\n"), 1u) << o.err;
    }
    auto with = [&](std::vector<std::string> extra) {
        auto args = pair;
        args.insert(args.end(), extra.begin(), extra.end());
        return gate(args);
    };
    expect_usage(with({"--max-drop", "1", "--alpha", "nan"}), "--alpha");
    expect_usage(with({"--max-drop", "1", "--alpha", "0.7"}), "--alpha");
    expect_usage(with({"--max-drop", "1", "--inconclusive", "maybe"}), "--inconclusive 'maybe'");
    expect_usage(with({"--max-token-increase", "inf"}), "--max-token-increase");
    expect_usage(with({"--max-token-increase", "%"}), "--max-token-increase");
    // Echoed as typed, not with one '%' taken off.
    expect_usage(with({"--max-token-increase", "10%%"}), "--max-token-increase '10%%'");
    expect_usage(with({"--max-never-finished-increase", "inf"}), "--max-never-finished-increase");
    expect_usage(gate({"--expect", "nan"}), "--expect 'nan': expected a number");
    expect_usage(gate({"--expect", "0x1"}), "--expect '0x1': expected a number");
    // The number is checked before the gate runs, and its JUnit file says so.
    auto nan_junit = *dir / "nan.xml";
    expect_usage(gate({"--expect", "nan", "--junit", nan_junit.string()}), "--expect 'nan'");
    EXPECT_NE(e2e::slurp(nan_junit).find("expected a number"), std::string::npos);
    expect_usage(gate({"--expect", "0.8", "--tolerance", "-0.1"}), "--tolerance");
    // Flags without their check.
    expect_usage(gate({"--require-complete", "--tolerance", "0.01"}),
                 "--tolerance is the allowed shortfall below --expect");
    expect_usage(gate({"--expect", "0.5", "--alpha", "0.01"}), "--alpha belongs to the --max-drop");
    expect_usage(gate({"--expect", "0.5", "--inconclusive", "pass"}),
                 "--inconclusive belongs to the --max-drop");

    // A file that is not a database is bad input (2), not a regression (1),
    // and the JUnit file says so with an <error>.
    auto notdb = *dir / "verdict.json";
    std::ofstream(notdb) << "{\"schema\": \"diffeval.gate/2\", \"passed\": true}\n";
    auto junit = *dir / "error.xml";
    auto o =
        e2e::run({"gate", "--db", notdb.string(), "--expect", "0.8", "--junit", junit.string()});
    expect_usage(o, "is not a diffeval database");
    const auto xml = e2e::slurp(junit);
    EXPECT_NE(xml.find("<error message=\"" + notdb.string() + " is not a diffeval database"),
              std::string::npos)
        << xml;
    EXPECT_NE(xml.find("errors=\"1\""), std::string::npos) << xml;
    EXPECT_NE(xml.find(" time=\""), std::string::npos) << xml;
    EXPECT_NE(xml.find(" timestamp=\""), std::string::npos) << xml;

    // So does --json: a passing verdict an earlier gate left there (the CI
    // workflow of docs/ci.md uploads it whatever the exit) was kept beside
    // the JUnit error, and read as this gate's pass.
    auto verdict = *dir / "gate.json";
    ASSERT_EQ(
        e2e::run({"gate", "--db", *db, "--expect", "0", "--json", verdict.string()}).exit_code, 0);
    ASSERT_TRUE(nlohmann::json::parse(e2e::slurp(verdict))["passed"].get<bool>());
    ASSERT_TRUE(nlohmann::json::parse(e2e::slurp(verdict))["error"].is_null());
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--expect", "0.5", "--group", "nope/raw/256"}, // refused by the gate
             {"--expect", "0.5", "--tolerence", "0.02"}}) {  // refused by the parser
        auto line = args;
        line.insert(line.begin(), {"gate", "--db", *db, "--json", verdict.string()});
        auto r = e2e::run(line);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        const auto doc = nlohmann::json::parse(e2e::slurp(verdict));
        EXPECT_FALSE(doc["passed"].get<bool>()) << doc.dump();
        EXPECT_EQ(doc["schema"], "diffeval.gate/2");
        EXPECT_EQ(doc["checks"].size(), 0u);
        // Every key of a verdict's document, null where there is none.
        EXPECT_TRUE(doc.contains("score_text") && doc["score_text"].is_null()) << doc.dump();
        // The line printed, without its "diffeval: " and newline.
        EXPECT_EQ("diffeval: " + doc["error"].get<std::string>() + "\n", r.err) << doc.dump();
    }

    // A --db path with a terminal escape: XML 1.0 holds no such character,
    // not even as a reference, and the file a CI parses was no XML at all.
    auto odd = *dir / "odd\x1b[2J.sqlite";
    auto odd_junit = *dir / "odd.xml";
    expect_usage(
        e2e::run({"gate", "--db", odd.string(), "--expect", "0.8", "--junit", odd_junit.string()}),
        "no database");
    const auto odd_xml = e2e::slurp(odd_junit);
    EXPECT_NE(odd_xml.find("<error message=\"no database"), std::string::npos) << odd_xml;
    EXPECT_EQ(odd_xml.find('\x1b'), std::string::npos) << odd_xml;

    // A command line the parser refuses (a mistyped flag, one given twice)
    // writes the file too, in either spelling of --junit, and never over a
    // database: a CI job showed "no test results" for its likeliest mistake.
    const std::vector<std::vector<std::string>> refused = {
        {"--expect", "0.5", "--tolerence", "0.02", "--junit"},
        {"--expect", "0.5", "--expect", "0.6", "--junit"}};
    for (const auto& args : refused) {
        auto file = *dir / "refused.xml";
        std::filesystem::remove(file);
        auto line = args;
        line.insert(line.begin(), {"gate", "--db", *db});
        line.push_back(file.string());
        auto r = e2e::run(line);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        const auto refused_xml = e2e::slurp(file);
        EXPECT_NE(refused_xml.find("errors=\"1\""), std::string::npos) << r.err;
        EXPECT_NE(refused_xml.find(args[2] == "--tolerence" ? "did you mean &#39;--tolerance&#39;"
                                                            : "--expect given more than once"),
                  std::string::npos)
            << refused_xml;
        std::filesystem::remove(file);
        line.back() = "--junit=" + file.string();
        line.erase(line.end() - 2);
        EXPECT_EQ(e2e::run(line).exit_code, 2);
        EXPECT_TRUE(std::filesystem::exists(file)) << "--junit=FILE";
    }
    const auto before = e2e::slurp(*db);
    EXPECT_EQ(e2e::run({"gate", "--db", *db, "--tolerence", "1", "--junit", *db}).exit_code, 2);
    EXPECT_TRUE(before == e2e::slurp(*db));
}

TEST_F(Gate, BehaviourChecksFailOnRawAndPassOnChat) {
    const std::vector<std::string> limits = {"--max-never-finished-increase",  "5%",
                                             "--max-reasoning-start-increase", "2",
                                             "--max-token-increase",           "10"};
    auto raw_args = limits;
    raw_args.insert(raw_args.end(),
                    {"--baseline", "default/raw/256", "--candidate", "deepgemm/raw/256"});
    auto raw = gate(raw_args);
    EXPECT_EQ(raw.exit_code, 1) << raw.out << raw.err;
    EXPECT_NE(raw.out.find("FAIL  never_finished default/raw/256 -> deepgemm/raw/256"),
              std::string::npos)
        << raw.out;
    EXPECT_NE(raw.out.find("FAIL  reasoning_start"), std::string::npos) << raw.out;
    EXPECT_NE(raw.out.find("FAIL  tokens"), std::string::npos) << raw.out;
    auto j = gate_json(raw_args);
    // The token limit is a percentage, also written as one, like the
    // behaviour limits beside it.
    auto pct_args = raw_args;
    pct_args[5] = "10%";
    const auto j_pct = gate_json(pct_args);
    EXPECT_EQ(j_pct["checks"], j["checks"]) << j_pct.dump();
    for (const auto& c : j["checks"]) {
        EXPECT_GT(c["measured"].get<double>(), c["threshold"].get<double>()) << c["name"];
    }
    EXPECT_EQ(j["checks"][0]["unit"], "%");
    EXPECT_EQ(j["checks"][1]["unit"], "responses");
    // The change per run printed is that of the two means printed beside it.
    const std::string per_run = j["checks"][1]["measured_text"];
    double change = 0, a = 0, b = 0;
    ASSERT_EQ(std::sscanf(per_run.c_str(), "%lf per run (%lf -> %lf)", &change, &a, &b), 3)
        << per_run;
    EXPECT_NEAR(change, b - a, 1e-9) << per_run;
    EXPECT_NE(j["checks"][1]["why"].get<std::string>().find(fmt::format("rose by {:.2f}", b - a)),
              std::string::npos)
        << j["checks"][1]["why"];
    // A change in percent is that of the two rates printed in its why, within
    // a rounding of the exact one ("+8.4%" beside "6.2% -> 14.6%" was 8.33).
    const std::string pct_text = j["checks"][0]["measured_text"];
    const std::string pct_why = j["checks"][0]["why"];
    double pct = 0, rate_a = 0, rate_b = 0;
    ASSERT_EQ(std::sscanf(pct_text.c_str(), "%lf%% of questions", &pct), 1) << pct_text;
    const auto open = pct_why.find(" (");
    ASSERT_NE(open, std::string::npos) << pct_why;
    ASSERT_EQ(std::sscanf(pct_why.c_str() + open, " (%lf%% -> %lf%%", &rate_a, &rate_b), 2)
        << pct_why;
    EXPECT_NEAR(pct, rate_b - rate_a, 1e-9) << pct_text << " / " << pct_why;
    EXPECT_NEAR(pct, j["checks"][0]["measured"].get<double>(), 0.01) << pct_text;
    // So is a change in tokens, of the two means printed beside it.
    const std::string tokens_text = j["checks"][2]["measured_text"];
    double tokens_pct = 0, tokens_a = 0, tokens_b = 0;
    ASSERT_EQ(
        std::sscanf(tokens_text.c_str(), "%lf%% (%lf -> %lf", &tokens_pct, &tokens_a, &tokens_b), 3)
        << tokens_text;
    EXPECT_EQ(fmt::format("{:+.2f}", tokens_pct),
              fmt::format("{:+.2f}", (tokens_b - tokens_a) / tokens_a * 100))
        << tokens_text;

    auto chat_args = limits;
    chat_args.insert(chat_args.end(), {"--baseline", "default/chat", "--candidate", "deepgemm"});
    auto chat = gate(chat_args);
    EXPECT_EQ(chat.exit_code, 0) << chat.out << chat.err;
    EXPECT_NE(chat.out.find("PASS: all 6 checks passed"), std::string::npos) << chat.out;

    // Behaviour limits need a pair to compare.
    auto alone = gate({"--max-token-increase", "10"});
    EXPECT_EQ(alone.exit_code, 2);
}

namespace {

// A database in scratch directory `name` where server `default` and server
// `deepgemm` (the simulator's profiles of those names) answered the first
// `limit` official questions `repeats` times, raw at 256 tokens; empty when
// GSM8K_DIR is unset.
std::string official_pair_db(const std::string& name, const std::string& limit,
                             const std::string& repeats) {
    const char* gsm8k = std::getenv("GSM8K_DIR");
    if (!gsm8k || !*gsm8k) {
        return {};
    }
    const std::string test = std::string(gsm8k) + "/test.jsonl";
    const std::string train = std::string(gsm8k) + "/train.jsonl";
    auto db = (e2e::scratch(name) / "g.sqlite").string();
    e2e::Sim a({"--profile", "default", "--dataset", test, "--fewshot-from", train});
    e2e::Sim b({"--profile", "deepgemm", "--dataset", test, "--fewshot-from", train});
    auto r = e2e::run({"run",
                       "--server",
                       "default=" + a.url(),
                       "--server",
                       "deepgemm=" + b.url(),
                       "--framing",
                       "raw",
                       "--max-tokens",
                       "256",
                       "--repeats",
                       repeats,
                       "--dataset",
                       test,
                       "--fewshot-from",
                       train,
                       "--limit",
                       limit,
                       "--db",
                       db,
                       "--quiet"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return db;
}

} // namespace

TEST(GateOfficial, DeepgemmDropOn400QuestionsIsSignificant) {
    const auto db = official_pair_db("gate-official", "400", "3");
    if (db.empty()) {
        GTEST_SKIP() << "GSM8K_DIR is not set; the official-set gate test needs it";
    }
    ASSERT_FALSE(HasFailure()) << "the run that fills the database failed";
    auto o = e2e::run({"gate", "--db", db, "--baseline", "default", "--candidate", "deepgemm",
                       "--max-drop", "5", "--resamples", "2000"});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("worse than the 5.0-point margin"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("deepgemm/raw/256 is worse than default/raw/256"), std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("this run detects differences of"), std::string::npos) << o.out;
    // A FAIL past a 1-point margin detected the drop: it was noted "too
    // small to detect a 1.0-point drop", the sd inflated by the drop itself
    // (statistics audit).
    auto one = e2e::run({"gate", "--db", db, "--baseline", "default", "--candidate", "deepgemm",
                         "--max-drop", "1", "--resamples", "2000"});
    EXPECT_EQ(one.exit_code, 1) << one.out << one.err;
    EXPECT_NE(one.out.find("worse than the 1.0-point margin"), std::string::npos) << one.out;
    EXPECT_EQ(one.out.find("too small"), std::string::npos) << one.out;
}

// Requests a baseline's run never sent (it was killed) are left out of the
// pairing, not counted as its wrong answers: counted so, a killed baseline
// passed a candidate 13 points worse on the questions both answered as
// "better" (gate audit). A candidate's count as wrong answers: left out, a
// candidate that ran 3 of 100 questions passed as inconclusive (the next
// audit).
TEST(GateOfficial, RequestsAKilledRunNeverSentAreLeftOutOfThePairing) {
    const auto db = official_pair_db("gate-killed-baseline", "200", "1");
    if (db.empty()) {
        GTEST_SKIP() << "GSM8K_DIR is not set; the official-set gate test needs it";
    }
    ASSERT_FALSE(HasFailure()) << "the run that fills the database failed";
    const auto dir = std::filesystem::path(db).parent_path();
    const std::vector<std::string> gate = {
        "gate", "--db", db, "--baseline", "default", "--candidate", "deepgemm", "--max-drop", "1"};
    auto whole = e2e::run(gate);
    ASSERT_EQ(whole.exit_code, 1) << whole.out; // the drop, with every request answered
    // A baseline whose server failed its last 80 requests (it died: they
    // are stored as failures) is compared on what it answered: counted as
    // its wrong answers, they passed the drop as 50 points "better" (audit).
    {
        const auto failed = (dir / "failed.sqlite").string();
        std::filesystem::copy_file(db, failed);
        e2e::exec(failed, "UPDATE responses SET ok = 0, status = 500, error = 'HTTP 500: down', "
                          "error_kind = 'http' WHERE response_id IN (SELECT response_id FROM "
                          "requests WHERE server = 'default' AND question_idx >= 120)");
        ASSERT_EQ(e2e::run({"rescore", "--db", failed}).exit_code, 0);
        auto with_failed = gate;
        with_failed[2] = failed;
        auto f = e2e::run(with_failed);
        EXPECT_EQ(f.exit_code, 1) << f.out;
        EXPECT_NE(f.out.find("Left out of the pairing, the baseline default/raw/256's requests "
                             "without a successful response: 80 failed."),
                  std::string::npos)
            << f.out;
    }
    // What a baseline run killed after 120 of its 200 requests leaves.
    e2e::unsend(db, "server = 'default' AND question_idx >= 120");
    auto o = e2e::run(gate);
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("deepgemm/raw/256 is worse than default/raw/256"), std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("Left out of the pairing, the baseline default/raw/256's requests "
                         "without a successful response: 80 with no response stored (a run "
                         "stopped before sending them, or while they were in flight; the command "
                         "that asked for them sends them)."),
              std::string::npos)
        << o.out;
    // "holds" for both read as if the baseline alone had stopped (an audit).
    EXPECT_NE(o.out.find("Paired on the 120 questions both groups hold: default/raw/256 has a "
                         "successful response on 120 and deepgemm/raw/256 asked 200"),
              std::string::npos)
        << o.out;
    // The paired accuracies are those of the 120 questions both sent.
    auto d = e2e::run({"diff", "default", "deepgemm", "--db", db, "--format", "json"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    const auto c = json::parse(d.out)["comparisons"][0];
    EXPECT_EQ(c["questions"], 120) << c;
    EXPECT_EQ(c["never_sent"], json({{"a", 80}, {"b", 0}})) << c;
    const auto right = [&](const std::string& server) {
        return std::stod(e2e::query(
            db, "SELECT avg(correct) FROM v_scores WHERE scorer = 'vllm' AND server = '" + server +
                    "' AND question_idx < 120"));
    };
    EXPECT_NEAR(c["accuracy_a"].get<double>(), right("default"), 1e-12) << c;
    EXPECT_NEAR(c["accuracy_b"].get<double>(), right("deepgemm"), 1e-12) << c;
    // A killed candidate: what it never sent counts against it, and says so,
    // however --inconclusive is set.
    e2e::exec(db, "DELETE FROM requests WHERE server = 'default' AND response_id IS NULL");
    e2e::unsend(db, "server = 'deepgemm' AND question_idx >= 3");
    d = e2e::run({"diff", "default", "deepgemm", "--db", db, "--format", "json"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    const auto k = json::parse(d.out)["comparisons"][0];
    EXPECT_EQ(k["questions"], 120) << k;
    EXPECT_EQ(k["never_sent"], json({{"a", 0}, {"b", 117}})) << k;
    EXPECT_EQ(k["without_b_unsent"]["questions"], 3) << k;
    EXPECT_EQ(k["without_b_unsent"]["a_better_questions"], 2) << k;
    EXPECT_NEAR(k["without_b_unsent"]["difference"].get<double>(), -2.0 / 3.0, 1e-12) << k;
    EXPECT_TRUE(c["without_b_unsent"].is_null()) << c;
    // Its transitions say unsent, not a server's error.
    bool unsent = false;
    for (const auto& t : k["transitions"]) {
        EXPECT_NE(t["b"], "error") << t;
        unsent = unsent || t["b"] == "unsent";
    }
    EXPECT_TRUE(unsent) << k["transitions"];
    auto killed = gate;
    killed.insert(killed.end(), {"--inconclusive", "pass"});
    o = e2e::run(killed);
    EXPECT_EQ(o.exit_code, 1) << o.out;
    // With what the answers it has say beside it: a killed A/A pair read
    // "worse, -41.7 points" and nothing else (an audit).
    EXPECT_NE(o.out.find("117 of deepgemm/raw/256's 120 requests here have no response stored (a "
                         "run stopped before sending them, or while they were in flight; the "
                         "command that asked for them sends them), each counted as a wrong "
                         "answer; on the 3 questions where it has every response the difference "
                         "is -66.7 points (2 right more often in default/raw/256, 0 in "
                         "deepgemm/raw/256)."),
              std::string::npos)
        << o.out;
    // Its behaviour among what it answered is not measured: a killed run's
    // unanswered requests are its slowest (an audit's killed candidate
    // passed --max-token-increase 5 at +2.8%, +8.5% once resumed).
    auto tokens = e2e::run({"gate", "--db", db, "--baseline", "default", "--candidate", "deepgemm",
                            "--max-token-increase", "50"});
    EXPECT_EQ(tokens.exit_code, 1) << tokens.out;
    EXPECT_NE(tokens.out.find("deepgemm/raw/256 has 117 requests never sent on the paired "
                              "questions (a run stopped first)"),
              std::string::npos)
        << tokens.out;
    // --require-complete still fails on what was never sent.
    auto complete = gate;
    complete.emplace_back("--require-complete");
    EXPECT_EQ(e2e::run(complete).exit_code, 1);
}

namespace {

// A database in scratch directory `name` where server `good` answered
// `limit` questions and `dead` failed every request with an HTTP 500.
std::string with_a_dead_server(const std::string& name, const std::string& good,
                               const std::string& dead, const std::string& limit) {
    auto dir = e2e::scratch(name);
    auto profile = dir / "fail.toml";
    std::ofstream(profile) << "version = 1\nname = \"fail\"\n[faults]\nhttp_500 = 1.0\n";
    e2e::Sim answering;
    e2e::Sim failing({"--profile", profile.string()});
    auto db = (dir / "r.sqlite").string();
    auto r = e2e::run({"run", "--server", good + "=" + answering.url(), "--server",
                       dead + "=" + failing.url(), "--framing", "raw", "--limit", limit,
                       "--retries", "0", "--db", db, "--quiet"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    return db;
}

} // namespace

// A candidate that answered nothing has no behaviour to compare: its checks
// fail saying so, never "fell by 100%" from an absent count taken as 0.
TEST(GateUnmeasured, ACandidateWithNoAnswerFailsItsBehaviourChecks) {
    const auto db = with_a_dead_server("gate-unmeasured", "a", "fail", "4");
    auto o = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "fail",
                       "--max-never-finished-increase", "5%", "--max-token-increase", "10"});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("fail/raw/256 answered none of the 4 questions both sides were asked"),
              std::string::npos)
        << o.out;
    EXPECT_EQ(o.out.find("fell by 100"), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find("PASS"), std::string::npos) << o.out;
    // The JSON gives the limit the check was held to, in its unit: it was
    // 0 `responses` beside "<= 5% of questions" (docs audit).
    const auto json_path = db + ".gate.json";
    ASSERT_EQ(e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "fail",
                        "--max-never-finished-increase", "5%", "--max-reasoning-start-increase",
                        "3", "--max-token-increase", "10", "--json", json_path})
                  .exit_code,
              1);
    const auto j = nlohmann::json::parse(e2e::slurp(json_path));
    std::map<std::string, std::pair<double, std::string>> limits;
    for (const auto& c : j["checks"]) {
        EXPECT_TRUE(c["measured"].is_null()) << c;
        limits[c["kind"].get<std::string>()] = {c["threshold"].get<double>(),
                                                c["unit"].get<std::string>()};
    }
    EXPECT_EQ(limits["never_finished"], std::make_pair(5.0, std::string("%"))) << j;
    EXPECT_EQ(limits["reasoning_start"], std::make_pair(3.0, std::string("responses"))) << j;
    EXPECT_EQ(limits["tokens"], std::make_pair(10.0, std::string("%"))) << j;
}

// A server that never answered gives no evidence: its failures count as
// wrong answers, so a dead baseline made any candidate "better" and passed
// the margin, and two dead servers were "equivalent" and passed it too.
TEST(GateUnmeasured, ASideThatNeverAnsweredPassesNoMarginWhateverInconclusiveSays) {
    const auto db = with_a_dead_server("gate-no-evidence", "good", "dead", "6");
    auto o = e2e::run({"gate", "--db", db, "--baseline", "dead", "--candidate", "good",
                       "--max-drop", "5", "--inconclusive", "pass"});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("no evidence against the 5.0-point margin: A has no successful response "
                         "on these 6 questions"),
              std::string::npos)
        << o.out;
    EXPECT_EQ(o.out.find("PASS"), std::string::npos) << o.out;
    // More questions would not help: the note says what would, not that
    // the run is too small to detect a 5-point drop.
    EXPECT_EQ(o.out.find("too small"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("no run size detects a drop while a side has no successful response"),
              std::string::npos)
        << o.out;
    EXPECT_EQ(e2e::run({"gate", "--db", db, "--baseline", "dead", "--candidate", "good",
                        "--max-drop", "5", "--json", db + ".gate.json"})
                  .exit_code,
              1);
    const auto gj = nlohmann::json::parse(e2e::slurp(db + ".gate.json"));
    EXPECT_TRUE(gj["checks"][0]["detail"]["minimum_detectable_difference_points"].is_null()) << gj;
    EXPECT_EQ(gj["checks"][0]["detail"]["too_small"], false) << gj;
    auto d = e2e::run({"diff", "dead", "good", "--db", db, "--format", "json"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    const auto j = json::parse(d.out);
    EXPECT_EQ(j["comparisons"][0]["verdict"]["kind"], "no evidence") << d.out;
    auto self = e2e::run({"diff", "dead", "dead", "--db", db});
    EXPECT_EQ(self.exit_code, 2) << self.out; // a group against itself stays refused
    // Nor does plan size a run from failures.
    auto plan = e2e::run({"plan", "good", "dead", "--db", db});
    EXPECT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_NE(plan.out.find("dead/raw/256 has no successful response in the pilot, so its "
                            "differences are failed requests"),
              std::string::npos)
        << plan.out;
    EXPECT_EQ(plan.out.find("To detect"), std::string::npos) << plan.out;
    // summary says the 0.0 is of failures, which only its err column said
    // (engine audit), and of the dead server only.
    auto sum = e2e::run({"summary", "--db", db});
    EXPECT_EQ(sum.exit_code, 0) << sum.err;
    EXPECT_NE(sum.out.find("dead/raw/256: no request has a successful response, so its accuracy "
                           "of 0 is of failed requests, not of answers"),
              std::string::npos)
        << sum.out;
    EXPECT_EQ(sum.out.find("good/raw/256: no request"), std::string::npos) << sum.out;
}

// Requests a run planned and never sent (it was killed first) count as
// failed, wrong answers, as docs/ci.md says: the summary dropped them, so
// a killed run's accuracy was that of the answers that came back first.
TEST(GateUnmeasured, PlannedRequestsNeverSentCountAsWrongAnswersAndAsErrors) {
    auto dir = e2e::scratch("gate-unsent");
    e2e::Sim good;
    auto db = (dir / "r.sqlite").string();
    auto r = e2e::run({"run", "--server", "s=" + good.url(), "--framing", "raw", "--limit", "10",
                       "--db", db, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // What a run killed after sending five of its ten leaves: request rows
    // without a response.
    e2e::unsend(db, "question_idx >= 5");
    const int right = std::stoi(
        e2e::query(db, "SELECT count(*) FROM v_scores WHERE scorer = 'vllm' AND correct = 1"));
    auto s = e2e::run({"summary", "--db", db, "--format", "json"});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const auto g = json::parse(s.out)["groups"][0];
    EXPECT_EQ(g["questions"], 10) << s.out;
    EXPECT_EQ(g["breakdown"]["mean"]["errors"], 5.0) << s.out;
    EXPECT_DOUBLE_EQ(g["accuracy"]["vllm"]["mean"].get<double>(), right / 10.0) << s.out;
    auto o = e2e::run({"gate", "--db", db, "--expect", fmt::format("{}", right / 10.0 + 0.01)});
    EXPECT_EQ(o.exit_code, 1) << o.out;
}

// With two pairs, a FAIL of the per-pair margin beside a verdict the Holm
// adjustment left without a difference says which check is which (a
// statistics audit: "worse than the 0.0-point margin" on the raw mid-p
// 0.0574 beside "Holm-adjusted 0.115 over 2 comparisons").
TEST(GateMargin, AFailBesideAHolmAdjustedVerdictSaysItIsThePairsAlone) {
    auto dir = e2e::scratch("gate-margin-holm");
    e2e::Sim sim;
    auto db = (dir / "r.sqlite").string();
    auto r = e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(), "--limit",
                       "30", "--db", db, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // On raw, b loses ten questions a answers and gains three; on chat
    // both answer every question.
    const auto questions = [](const std::string& server, const std::string& framing,
                              const std::string& range) {
        return "response_id IN (SELECT response_id FROM requests WHERE server = '" + server +
               "' AND framing = '" + framing + "' AND question_idx " + range + ")";
    };
    e2e::exec(db, "UPDATE scores SET correct = 1 WHERE scorer = 'vllm'; UPDATE scores SET correct "
                  "= 0 WHERE scorer = 'vllm' AND (" +
                      questions("b", "raw", "< 10") + " OR " +
                      questions("a", "raw", "BETWEEN 10 AND 12") + ")");
    auto o =
        e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "b", "--max-drop", "0"});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("worse than the 0.0-point margin"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("(a one-sided check at 5% of this pair alone, stricter on this side than "
                         "the two-sided verdict that follows, whose p-value is Holm-adjusted over "
                         "the gate's 2 pairs). No detectable difference"),
              std::string::npos)
        << o.out;
}

// A candidate whose run stopped while planning: the places it asked for and
// never planned have no request row, so they are in no pairing (its planned
// but unsent requests count as wrong). The paired check says how many, as
// the accuracy check does: a statistics audit's gate passed such a
// candidate on 45 of 1,319 questions without a word of the rest.
TEST(GateUnmeasured, APairedCheckSaysWhatTheCandidatesRunNeverPlanned) {
    auto dir = e2e::scratch("gate-unplanned-pair");
    e2e::Sim sim;
    auto db = (dir / "r.sqlite").string();
    for (const std::string limit : {"10", "6"}) {
        const std::string name = limit == "10" ? "a" : "b";
        auto r = e2e::run({"run", "--server", name + "=" + sim.url(), "--framing", "raw", "--limit",
                           limit, "--db", db, "--quiet"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    // What b's run leaves when it asked for 10 questions and stopped while
    // planning, after its first 6.
    e2e::exec(db, "UPDATE runs SET config_json = json_set(config_json, '$.limit', 10) WHERE "
                  "config_json LIKE '%\"b\"%'");
    const auto json_path = (dir / "gate.json").string();
    auto o = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "b", "--max-drop",
                       "50", "--inconclusive", "pass", "--json", json_path});
    EXPECT_NE(o.out.find("4 requests b/raw/256's run asked for were never planned (the run "
                         "stopped first) and are in no pairing: run the command that asked for "
                         "them again, or gate with --require-complete."),
              std::string::npos)
        << o.out;
    const auto doc = json::parse(e2e::slurp(json_path));
    EXPECT_EQ(doc["checks"][0]["detail"]["candidate_never_planned"], 4) << doc.dump();
    // A baseline's places never planned are left out as its unsent ones are.
    auto swapped = e2e::run({"gate", "--db", db, "--baseline", "b", "--candidate", "a",
                             "--max-drop", "50", "--inconclusive", "pass"});
    EXPECT_EQ(swapped.out.find("never planned"), std::string::npos) << swapped.out;
}

// A candidate whose server reports no usage.completion_tokens answered, but
// has no token count to compare: the token check fails saying so, never
// "fell by 100%" from counts taken as 0.
// The behaviour checks compare the questions both sides answered, and rates
// among the responses each answered there: an audit's gate failed a clean
// candidate that ran three times the baseline's questions ("+26% of
// questions") and passed one whose truncations rose among fewer answers
// ("fell by 1.00 per run").
TEST(GateBehaviour, OnlyThePairedQuestionsAndTheAnsweredResponsesCount) {
    auto dir = e2e::scratch("gate-behaviour");
    auto profile = dir / "flaky.toml";
    std::ofstream(profile) << "version = 1\nname = \"flaky\"\n[faults]\nhttp_500 = 0.5\n";
    e2e::Sim good;
    e2e::Sim flaky({"--profile", profile.string()});
    auto db = (dir / "r.sqlite").string();
    // At 16 tokens every answer is cut by the length limit.
    const std::vector<std::string> common = {
        "--framing", "raw", "--max-tokens", "16", "--retries", "0", "--db", db, "--quiet"};
    auto run = [&](std::vector<std::string> args) {
        args.insert(args.end(), common.begin(), common.end());
        return e2e::run(args);
    };
    ASSERT_EQ(run({"run", "--server", "a=" + good.url(), "--limit", "8"}).exit_code, 0);
    ASSERT_EQ(run({"run", "--server", "more=" + good.url(), "--limit", "24"}).exit_code, 0);
    ASSERT_EQ(run({"run", "--server", "errs=" + flaky.url(), "--limit", "8"}).exit_code, 1);
    ASSERT_NE(e2e::query(db, "SELECT count(*) FROM v_responses WHERE server = 'errs' AND ok = 1"),
              "0");
    for (const std::string candidate : {"more", "errs"}) {
        auto o = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", candidate,
                           "--max-never-finished-increase", "0", "--max-reasoning-start-increase",
                           "0%"});
        EXPECT_EQ(o.exit_code, 0) << candidate << ": " << o.out << o.err;
        EXPECT_NE(o.out.find("(100.0% -> 100.0% of the responses each answered there)"),
                  std::string::npos)
            << o.out;
    }
    auto more = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "more",
                          "--max-never-finished-increase", "0"});
    EXPECT_NE(more.out.find("+0.00 per run (8.00 -> 8.00)"), std::string::npos) << more.out;
    // A change that prints as 0 is no rise.
    EXPECT_NE(
        more.out.find("responses that never finished did not change over the 8 paired questions "
                      "(100.0% -> 100.0%"),
        std::string::npos)
        << more.out;
    EXPECT_EQ(more.out.find("rose by 0.00"), std::string::npos) << more.out;
}

TEST(GateUnmeasured, ACandidateWithoutTokenCountsFailsTheTokenCheck) {
    auto dir = e2e::scratch("gate-no-usage");
    e2e::Sim a;
    e2e::Sim b;
    auto db = (dir / "r.sqlite").string();
    auto r = e2e::run({"run", "--server", "a=" + a.url(), "--server", "b=" + b.url(), "--framing",
                       "raw", "--limit", "4", "--db", db, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    e2e::exec(db, "UPDATE responses SET completion_tokens = NULL WHERE request_id IN "
                  "(SELECT request_id FROM requests WHERE server = 'b')");
    auto o = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "b",
                       "--max-token-increase", "10", "--json", (dir / "g.json").string()});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("no completion token counts in the candidate"), std::string::npos)
        << o.out;
    EXPECT_EQ(o.out.find("fell by 100"), std::string::npos) << o.out;
    const auto j = nlohmann::json::parse(e2e::slurp(dir / "g.json"));
    EXPECT_TRUE(j["checks"][0]["detail"]["candidate_mean_completion_tokens"].is_null()) << j;
    EXPECT_EQ(j["checks"][0]["detail"]["candidate_counted"], 0) << j;
    EXPECT_EQ(j["checks"][0]["detail"]["baseline_counted"], 4) << j;
    // Nothing was measured: null, not a 0% change that reads as within the limit.
    EXPECT_TRUE(j["checks"][0]["measured"].is_null()) << j;
}

// The token check compares the questions both sides answered with a count:
// each side's mean over its own answers passed a candidate that wrote 20%
// more on every question it answered and failed on the baseline's longest
// half ("fell by 52.00%").
TEST(GateBehaviour, TheTokenCheckComparesTheQuestionsBothAnswered) {
    auto dir = e2e::scratch("gate-tokens");
    e2e::Sim sim;
    auto db = (dir / "r.sqlite").string();
    auto r = e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(),
                       "--framing", "raw", "--limit", "16", "--db", db, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // A writes 50 tokens on questions 0-7 and 200 on 8-15; B writes 60 on
    // 0-7 and fails on 8-15.
    e2e::exec(db, "UPDATE responses SET completion_tokens = CASE WHEN (SELECT question_idx FROM "
                  "requests q WHERE q.request_id = responses.request_id) < 8 THEN 50 ELSE 200 END "
                  "WHERE request_id IN (SELECT request_id FROM requests WHERE server = 'a');"
                  "UPDATE responses SET completion_tokens = 60 WHERE request_id IN (SELECT "
                  "request_id FROM requests WHERE server = 'b' AND question_idx < 8);"
                  "UPDATE responses SET ok = 0, status = 500, completion_tokens = NULL, error = "
                  "'HTTP 500' WHERE request_id IN (SELECT request_id FROM requests WHERE server = "
                  "'b' AND question_idx >= 8);"
                  "UPDATE classifications SET outcome = 'error' WHERE response_id IN (SELECT "
                  "response_id FROM responses WHERE ok = 0)");
    auto o = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "b",
                       "--max-token-increase", "10", "--json", (dir / "g.json").string()});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("FAIL  tokens a/raw/256 -> b/raw/256"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("+20.00% (50.00 -> 60.00 tokens per answer, over 8 questions)"),
              std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("mean completion tokens rose by 20.00% over the 8 questions both "
                         "answered with a token count (of the 16 both were asked"),
              std::string::npos)
        << o.out;
    const auto j = nlohmann::json::parse(e2e::slurp(dir / "g.json"));
    EXPECT_EQ(j["checks"][0]["detail"]["questions"], 8) << j;
    EXPECT_EQ(j["checks"][0]["detail"]["baseline_mean_completion_tokens"], 50.0) << j;
    EXPECT_EQ(j["checks"][0]["detail"]["candidate_mean_completion_tokens"], 60.0) << j;
}

// The behaviour checks compare the questions both sides answered, as the
// token check does: a candidate that timed out on exactly the questions the
// baseline reasoned long on read as "fell by 3.00 per run" and passed,
// each side's rate being over its own answered questions.
TEST(GateBehaviour, TheRatesCompareTheQuestionsBothAnswered) {
    auto dir = e2e::scratch("gate-behaviour-both");
    e2e::Sim sim;
    auto db = (dir / "r.sqlite").string();
    auto r = e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(),
                       "--framing", "raw", "--limit", "16", "--db", db, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // A reasons to the length limit on questions 8-15, where B fails; on
    // 0-7, which both answer, B does so on questions 0 and 1 and A never.
    const auto side = [](const std::string& server, const std::string& where) {
        return fmt::format("response_id IN (SELECT response_id FROM requests WHERE server = '{}' "
                           "AND {})",
                           server, where);
    };
    e2e::exec(db, "UPDATE classifications SET outcome = 'finished', reasoning_started = 0;" +
                      fmt::format("UPDATE classifications SET outcome = 'length_truncated', "
                                  "reasoning_started = 1 WHERE {} OR {};",
                                  side("a", "question_idx >= 8"), side("b", "question_idx < 2")) +
                      fmt::format("UPDATE responses SET ok = 0, status = 500, error = 'HTTP 500' "
                                  "WHERE {0}; UPDATE classifications SET outcome = 'error', "
                                  "reasoning_started = 0 WHERE {0}",
                                  side("b", "question_idx >= 8")));
    auto o = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "b",
                       "--max-never-finished-increase", "0", "--max-reasoning-start-increase", "0",
                       "--json", (dir / "g.json").string()});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("FAIL  never_finished a/raw/256 -> b/raw/256"), std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("responses that never finished rose by 2.00 per run of the 8 questions "
                         "both answered (0.0% -> 25.0% of the responses each answered there) (of "
                         "the 16 both were asked, those where a side has none are left out)"),
              std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("FAIL  reasoning_start a/raw/256 -> b/raw/256"), std::string::npos)
        << o.out;
    const auto j = nlohmann::json::parse(e2e::slurp(dir / "g.json"));
    EXPECT_EQ(j["checks"][0]["detail"]["questions"], 8) << j;
    EXPECT_EQ(j["checks"][0]["detail"]["paired_questions"], 16) << j;
    EXPECT_EQ(j["checks"][0]["detail"]["candidate_mean"], 2.0) << j;
    // The responses the rates are over: those on the 8 questions compared.
    EXPECT_EQ(j["checks"][0]["detail"]["baseline_answered"], 8) << j;
    EXPECT_EQ(j["checks"][0]["detail"]["candidate_answered"], 8) << j;
}

// A change the check counts never prints as 0: the baseline's 141 of 143
// and the candidate's 142 of 144 responses that never finished are 47.329
// and 47.333 per run of 48 questions, which printed "+0.00 per run (47.33
// -> 47.33)" and "rose by 0.00 per run ..., more than the limit of 0 per
// run" beside FAIL.
TEST(GateBehaviour, AChangeTheCheckCountsNeverPrintsAsZero) {
    auto dir = e2e::scratch("gate-rounding");
    e2e::Sim sim;
    auto db = (dir / "r.sqlite").string();
    // At 16 tokens every answer is cut by the length limit.
    auto r = e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(),
                       "--framing", "raw", "--max-tokens", "16", "--repeats", "8", "--limit", "4",
                       "--db", db, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(
        e2e::query(db, "SELECT count(*) FROM v_responses WHERE outcome != 'length_truncated'"),
        "0");
    const auto place = [](const std::string& server, int question, int repeat) {
        return fmt::format("(SELECT response_id FROM requests WHERE server = '{}' AND "
                           "question_idx = {} AND repeat = {})",
                           server, question, repeat);
    };
    const auto fail = [&](const std::string& server, int question, int repeat) {
        e2e::exec(db, fmt::format("UPDATE responses SET ok = 0, status = 500, error = 'HTTP 500' "
                                  "WHERE response_id = {0}; UPDATE classifications SET outcome = "
                                  "'error' WHERE response_id = {0}",
                                  place(server, question, repeat)));
    };
    const auto finish = [&](const std::string& server, int question, int repeat) {
        e2e::exec(db, fmt::format("UPDATE classifications SET outcome = 'finished' WHERE "
                                  "response_id = {}",
                                  place(server, question, repeat)));
    };
    // Each question's share of its answers that never finished: a 5/6 and
    // 5/7, b 4/5 and 6/8, the other two questions 1 on both sides. Per run
    // (the shares summed) 3.5476 against 3.55: a rise of 0.0024.
    fail("a", 0, 0), fail("a", 0, 1), finish("a", 0, 2);
    fail("a", 1, 0), finish("a", 1, 1), finish("a", 1, 2);
    fail("b", 0, 0), fail("b", 0, 1), fail("b", 0, 2), finish("b", 0, 3);
    finish("b", 1, 0), finish("b", 1, 1);
    auto o = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "b",
                       "--max-never-finished-increase", "0"});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("+0.002 per run (3.548 -> 3.550)"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("responses that never finished rose by 0.002 per run of the 4 paired "
                         "questions (88.7% -> 88.8% of each question's responses answered "
                         "there, averaged over the questions)"),
              std::string::npos)
        << o.out;
    EXPECT_EQ(o.out.find("by 0.00 "), std::string::npos) << o.out;
}

// With uneven repeats the gate's "per run" is summary's mean for the group:
// each question counts once. Pooling the responses, the gate said +0.56 per
// run where summary showed 1.0 for one unfinished answer to a question asked
// once, beside four questions asked three times.
TEST(GateBehaviour, UnevenRepeatsCountEachQuestionOnceAsSummaryDoes) {
    auto dir = e2e::scratch("gate-uneven-behaviour");
    e2e::Sim sim;
    auto db = (dir / "r.sqlite").string();
    for (const auto& [limit, repeats] : {std::pair{"10", "1"}, std::pair{"4", "3"}}) {
        auto r = e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(),
                           "--framing", "raw", "--limit", limit, "--repeats", repeats, "--db", db,
                           "--quiet"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    e2e::exec(db, "UPDATE classifications SET outcome = 'finished';"
                  "UPDATE classifications SET outcome = 'length_truncated' WHERE response_id = "
                  "(SELECT response_id FROM requests WHERE server = 'b' AND question_idx = 7)");
    auto summary = e2e::run({"summary", "--db", db, "--format", "json"});
    ASSERT_EQ(summary.exit_code, 0) << summary.err;
    double mean_b = -1;
    const auto doc = json::parse(summary.out);
    for (const auto& g : doc["groups"]) {
        if (g["server"] == "b") {
            mean_b = g["breakdown"]["mean"]["never_finished"].get<double>();
        }
    }
    EXPECT_EQ(mean_b, 1.0) << summary.out;
    auto o = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "b",
                       "--max-never-finished-increase", "0.8"});
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    EXPECT_NE(o.out.find("+1.00 per run (0.00 -> 1.00)"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("averaged over the questions"), std::string::npos) << o.out;
}

// What a run asked is read from its stored configuration: one that is no
// configuration a run writes (`{}`, cut JSON, repeats of another type) left
// that run out, and a file missing requests it planned and never stored
// passed --require-complete (a hostile-file audit). The check cannot pass.
TEST(GateCompleteness, CannotPassOnARunWhoseConfigurationIsUnreadable) {
    auto dir = e2e::scratch("gate-config-unreadable");
    e2e::Sim sim;
    const auto db = (dir / "r.sqlite").string();
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--limit", "3", "--framing", "raw",
                       "--db", db, "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    ASSERT_EQ(e2e::run({"gate", "--db", db, "--require-complete"}).exit_code, 0);
    // One question the run planned and never stored.
    e2e::unsend(db, "question_idx = 2");
    e2e::exec(db, "DELETE FROM requests WHERE question_idx = 2");
    EXPECT_EQ(e2e::run({"gate", "--db", db, "--require-complete"}).exit_code, 1);
    const auto config = e2e::query(db, "SELECT config_json FROM runs");
    for (const std::string& edited :
         {std::string("{}"), std::string("[]"), config.substr(0, config.size() / 2),
          std::string(R"({"servers":[{"name":"a"}],"framings":["raw"],"max_tokens":[256],)"
                      R"("repeats":1e300})")}) {
        e2e::exec(db, "UPDATE runs SET config_json = '" + edited + "'");
        auto g = e2e::run({"gate", "--db", db, "--require-complete"});
        EXPECT_EQ(g.exit_code, 1) << edited << ": " << g.out;
        EXPECT_NE(g.out.find("cannot tell: what run 1 asked is not known"), std::string::npos)
            << g.out << g.err;
    }
}

// `--junit backup.sqlite` was refused as read-only, then written anyway by
// the error path that tells a CI why the gate could not run: a new file
// renamed over the database (as root, or by anyone who may write its
// directory), and a file made in a directory nobody may write (an outside
// audit). Neither file may replace an SQLite database of any name, nor be
// written where the verdict could not be.
TEST_F(Gate, JunitAndJsonReplaceNoDatabaseAndNoFileTheyMayNotWrite) {
    const auto backup = *dir / "backup.sqlite";
    const auto readonly = *dir / "readonly.sqlite";
    std::filesystem::copy_file(*db, backup, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(*db, readonly, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::permissions(readonly, std::filesystem::perms::owner_read |
                                               std::filesystem::perms::group_read |
                                               std::filesystem::perms::others_read);
    const auto closed = *dir / "closed";
    std::filesystem::create_directories(closed);
    std::filesystem::permissions(closed, std::filesystem::perms::owner_exec |
                                             std::filesystem::perms::group_exec |
                                             std::filesystem::perms::others_exec);
    const auto backup_bytes = e2e::slurp(backup);
    const auto readonly_bytes = e2e::slurp(readonly);
    for (const auto& flag : {"--junit", "--json"}) {
        for (const auto& [path, says] : std::vector<std::pair<std::filesystem::path, std::string>>{
                 {backup, "it is an SQLite database"},
                 {readonly, "it is an SQLite database"},
                 {backup.string() + "-wal", "it is the database " + backup.string()},
                 {closed / "j.xml", "cannot write in " + closed.string()}}) {
            // Refused as a path, and with a gate that cannot run for
            // another reason (no such database) alike.
            for (const auto& db_flag : {*db, (*dir / "none.sqlite").string()}) {
                auto o =
                    e2e::run({"gate", "--db", db_flag, "--expect", "0.5", flag, path.string()});
                EXPECT_EQ(o.exit_code, 2) << flag << " " << path << ": " << o.out << o.err;
                EXPECT_EQ(count(o.err, "\n"), 1u) << o.err;
                EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
            }
        }
    }
    EXPECT_TRUE(e2e::slurp(backup) == backup_bytes) << "the backup database was replaced";
    EXPECT_TRUE(e2e::slurp(readonly) == readonly_bytes) << "the read-only database was replaced";
    EXPECT_FALSE(std::filesystem::exists(backup.string() + "-wal") &&
                 std::filesystem::file_size(backup.string() + "-wal") > 0);
    EXPECT_TRUE(std::filesystem::is_empty(closed));
    EXPECT_EQ(e2e::run({"summary", "--db", backup.string()}).exit_code, 0);
    std::filesystem::permissions(closed, std::filesystem::perms::owner_all);
}

// A check green only because --inconclusive pass asks so, beside a drop the
// comparison finds significant, says so where its sentence says "is worse"
// (a reports audit: a 12-point drop read "PASS (inconclusive)" and nothing
// more). Here b loses 9 of the 48 questions and gains none.
TEST(GateVerdictWords, AnInconclusivePassOfASignificantDropSaysSo) {
    auto dir = e2e::scratch("gate-inconclusive-worse");
    e2e::Sim sim;
    const auto db = (dir / "r.sqlite").string();
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(),
                       "--framing", "chat", "--db", db, "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    e2e::exec(db, "UPDATE scores SET correct = 0 WHERE scorer = 'vllm' AND response_id IN "
                  "(SELECT response_id FROM requests WHERE server = 'b' AND question_idx < 9)");
    auto g = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "b", "--max-drop", "2",
                       "--inconclusive", "pass"});
    EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
    EXPECT_NE(g.out.find("PASS (inconclusive)  paired a/chat/256 -> b/chat/256"), std::string::npos)
        << g.out;
    EXPECT_NE(g.out.find("; it passes only because --inconclusive pass asks so, though the "
                         "comparison finds B worse. b/chat/256 is worse than a/chat/256"),
              std::string::npos)
        << g.out;
}

// A gate that passes on a database its runs left short says so in its last
// line, not only inside the check's long `why` (an audit's killed run passed
// with 58% of its requests unsent); the report calls the candidate's unsent
// requests so; and `plan` sizes no run from the variance a stopped
// candidate's unsent requests make.
TEST(GateKilled, APassOnAShortDatabaseSaysSoAndPlanLeavesTheStopOut) {
    auto dir = e2e::scratch("gate-killed-pass");
    const auto db = (dir / "k.sqlite").string();
    e2e::Sim sim;
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--server", "b=" + sim.url(),
                       "--framing", "raw", "--max-tokens", "256", "--limit", "30", "--repeats", "2",
                       "--db", db, "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    // Both stopped part-way, the candidate earlier.
    e2e::unsend(db, "server = 'a' AND question_idx >= 20");
    e2e::unsend(db, "server = 'b' AND question_idx >= 15");
    const std::vector<std::string> gate = {"gate",        "--db", db,           "--baseline", "a",
                                           "--candidate", "b",    "--max-drop", "60"};
    auto g = e2e::run(gate);
    // b's 10 unanswered paired questions count as wrong: -33 points.
    ASSERT_EQ(g.exit_code, 0) << g.out;
    EXPECT_NE(g.out.find("PASS: the one check passed, on a database that lacks 50 requests its "
                         "runs asked for (run the command that asked for them again; "
                         "--require-complete fails on them)\n"),
              std::string::npos)
        << g.out;
    const auto json_path = (dir / "g.json").string();
    auto with_json = gate;
    with_json.insert(with_json.end(), {"--json", json_path});
    ASSERT_EQ(e2e::run(with_json).exit_code, 0);
    EXPECT_EQ(json::parse(e2e::slurp(json_path))["lacking_requests"], 50);
    // The step summary says which of its breakdown's errors are unsent, as
    // report.md does (a reader audit).
    const auto step = (dir / "step.md").string();
    ASSERT_EQ(e2e::run(gate, {"GITHUB_STEP_SUMMARY=" + step}).exit_code, 0);
    EXPECT_NE(e2e::slurp(step).find("Errors include planned requests without a response (never "
                                    "sent, or in flight when a run stopped), over all repeats: "
                                    "a/raw/256 20, b/raw/256 30."),
              std::string::npos)
        << e2e::slurp(step);
    auto complete = gate;
    complete.push_back("--require-complete");
    auto c = e2e::run(complete);
    EXPECT_EQ(c.exit_code, 1) << c.out;
    EXPECT_EQ(c.out.find("on a database that lacks"), std::string::npos) << c.out;
    // The transitions and carried-by column say unsent, and the pair whose
    // answers agree is carried by nothing.
    auto r = e2e::run({"report", "--db", db, "--out", (dir / "out").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto md = e2e::slurp(dir / "out" / "report.md");
    EXPECT_NE(md.find("finished -\\> unsent"), std::string::npos) << md;
    EXPECT_EQ(md.find("-\\> error"), std::string::npos) << md;
    EXPECT_NE(md.find("10 of b/raw/256's 40 requests here have no response stored"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("on the 15 questions where it has every response the difference is "),
              std::string::npos)
        << md;
    // plan: the pilot is the 15 questions b answered, not the 20 with b's
    // stop counted wrong.
    auto p = e2e::run({"plan", "--db", db, "a", "b", "--drop", "2"});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    EXPECT_NE(p.out.find("pilot of 15 questions"), std::string::npos) << p.out;
    EXPECT_NE(p.out.find("Left out of the pilot, b/raw/256's 10 requests with no response "
                         "stored"),
              std::string::npos)
        << p.out;
    // A candidate that sent nothing is a stopped run, not one with errors
    // to see (an audit: "see its errors" of 40 requests never sent).
    e2e::unsend(db, "server = 'b'");
    auto t = e2e::run(
        {"gate", "--db", db, "--baseline", "a", "--candidate", "b", "--max-token-increase", "5"});
    EXPECT_EQ(t.exit_code, 1) << t.out;
    EXPECT_NE(t.out.find("b/raw/256 has 40 requests never sent on the paired questions (a run "
                         "stopped first)"),
              std::string::npos)
        << t.out;
    EXPECT_EQ(t.out.find("see its errors"), std::string::npos) << t.out;
}

// A drop the sign-flip test finds beside bounds that cannot place it
// against the margin (uneven repeats loosen the exact count bound): the
// note says both, not "too small to detect" alone beside a measured drop
// of several points (an audit passed a 9.5-point drop at mid-p 0.000244
// with --inconclusive pass and that sentence).
TEST(GateOfficial, AnInconclusiveDropTheTestFindsIsSaidSo) {
    const char* gsm8k = std::getenv("GSM8K_DIR");
    if (!gsm8k || !*gsm8k) {
        GTEST_SKIP() << "GSM8K_DIR is not set; this gate test needs the official set";
    }
    const std::string test = std::string(gsm8k) + "/test.jsonl";
    const std::string train = std::string(gsm8k) + "/train.jsonl";
    auto dir = e2e::scratch("gate-test-finds");
    const auto db = (dir / "u.sqlite").string();
    e2e::Sim base({"--profile", "default", "--dataset", test, "--fewshot-from", train});
    e2e::Sim dg({"--profile", "deepgemm", "--dataset", test, "--fewshot-from", train});
    const auto run = [&](const std::string& server, const std::string& repeats,
                         const std::string& limit) {
        return e2e::run({"run", "--server", server, "--framing", "raw", "--max-tokens", "256",
                         "--repeats", repeats, "--limit", limit, "--dataset", test,
                         "--fewshot-from", train, "--db", db, "--quiet"})
            .exit_code;
    };
    ASSERT_EQ(run("a=" + base.url(), "3", "120"), 0);
    ASSERT_EQ(run("dg=" + dg.url(), "1", "120"), 0);
    ASSERT_EQ(run("dg=" + dg.url(), "4", "30"), 0);
    auto g = e2e::run({"gate", "--db", db, "--baseline", "a", "--candidate", "dg", "--max-drop",
                       "2", "--inconclusive", "pass"});
    ASSERT_EQ(g.exit_code, 0) << g.out;
    ASSERT_NE(g.out.find("PASS (inconclusive)"), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("note:      the sign-flip test finds the candidate worse (mid-p "),
              std::string::npos)
        << g.out;
    EXPECT_NE(g.out.find("but the bounds, which assume less (docs/statistics.md), cannot tell a "
                         "drop beyond 2.0 points from one within it; this run is too small"),
              std::string::npos)
        << g.out;
}
