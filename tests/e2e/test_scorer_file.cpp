// `--scorer-file`: a user's own scorer is stored in the database beside the
// built-in ones, so every later scoring pass (a resumed run, an import, a
// merge) scores with it too; a changed definition scores everything again; a
// name clash or a malformed file is one line, exit 2, and changes nothing.
#include "e2e.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

using e2e::query;

namespace fs = std::filesystem;

namespace {

const fs::path k_source = DIFFEVAL_SOURCE_DIR;

// The built-in vllm scorer with another rule: the first integer of the text
// instead of the last, at `version`. Written as `dir`/`name`.toml.
fs::path first_number_scorer(const fs::path& dir, const std::string& name, int version) {
    auto text = e2e::slurp(k_source / "scorers/vllm.toml");
    auto at = text.find("match = \"last\"");
    EXPECT_NE(at, std::string::npos);
    text.replace(at, 14, "match = \"first\"");
    at = text.find("version = 1");
    EXPECT_NE(at, std::string::npos);
    text.replace(at, 11, "version = " + std::to_string(version));
    auto path = dir / (name + ".toml");
    std::ofstream(path) << text;
    return path;
}

e2e::Outcome run_sim(const e2e::Sim& sim, const fs::path& db, const std::string& server, int limit,
                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"run",
                                     "--server",
                                     server + "=" + sim.url(),
                                     "--limit",
                                     std::to_string(limit),
                                     "--framing",
                                     "raw",
                                     "--db",
                                     db.string(),
                                     "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return e2e::run(args);
}

int64_t count(const fs::path& db, const std::string& sql) {
    return std::stoll(query(db, sql));
}

// Responses that count, times the scorers every one of them must have.
void expect_every_response_scored(const fs::path& db, int scorers) {
    const auto responses = count(db, "SELECT count(*) FROM v_responses");
    ASSERT_GT(responses, 0);
    EXPECT_EQ(count(db, "SELECT count(*) FROM v_responses WHERE outcome IS NULL"), 0);
    EXPECT_EQ(count(db, "SELECT count(*) FROM v_scores"), responses * scorers);
}

// An error is one line on stderr.
void expect_one_line(const e2e::Outcome& o) {
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_TRUE(o.err.starts_with("diffeval: ")) << o.err;
}

} // namespace

// A scorer added to a database scored on the text after the think block
// keeps that text: without --score-text, rescore went back to the full text
// (an audit: "text: full", and summary's score_text switched).
TEST(ScorerFileFlag, AddingAScorerKeepsTheTextTheDatabaseWasScoredOn) {
    auto dir = e2e::scratch("scorer-file-text");
    e2e::Sim sim({"--profile", "deepgemm"});
    auto db = dir / "r.sqlite";
    ASSERT_EQ(run_sim(sim, db, "default", 3).exit_code, 0);
    ASSERT_EQ(e2e::run({"rescore", "--db", db.string(), "--score-text", "after-think"}).exit_code,
              0);
    const auto file = first_number_scorer(dir, "first-number", 1);
    auto r = e2e::run({"rescore", "--db", db.string(), "--scorer-file", file.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("text: after-think"), std::string::npos) << r.out;
    EXPECT_EQ(query(db, "SELECT group_concat(DISTINCT score_text) FROM scores"), "after-think");
    // Asked for, the full text is taken.
    r = e2e::run({"rescore", "--db", db.string(), "--score-text", "full"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(query(db, "SELECT group_concat(DISTINCT score_text) FROM scores"), "full");
}

TEST(ScorerFileFlag, RescoreStoresItAndLaterRunsAndImportsScoreWithIt) {
    auto dir = e2e::scratch("scorer-file");
    e2e::Sim sim({"--profile", "deepgemm"});
    auto db = dir / "r.sqlite";
    ASSERT_EQ(run_sim(sim, db, "default", 3).exit_code, 0);
    const auto file = first_number_scorer(dir, "first-number", 1);

    auto r = e2e::run({"rescore", "--db", db.string(), "--scorer-file", file.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("rescored 3 responses (12 scores, text: full)"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("scorer 'first-number' is stored in"), std::string::npos) << r.out;
    expect_every_response_scored(db, 4);
    EXPECT_EQ(query(db, "SELECT name || ' ' || version || ' ' || origin FROM scorers"),
              "first-number 1 " + file.string());
    EXPECT_EQ(query(db, "SELECT definition FROM scorers"), e2e::slurp(file));
    // The user's rule, not vllm's: some response's first number is not its last.
    EXPECT_GT(count(db, "SELECT count(*) FROM v_scores f JOIN v_scores v USING (response_id) "
                        "WHERE f.scorer = 'first-number' AND v.scorer = 'vllm' AND "
                        "f.extracted != v.extracted"),
              0);

    auto summary = e2e::run({"summary", "--db", db.string(), "--scorer", "first-number"});
    ASSERT_EQ(summary.exit_code, 0) << summary.err;
    EXPECT_NE(summary.out.find("accuracy by first-number"), std::string::npos) << summary.out;
    auto report = e2e::run({"report", "--db", db.string(), "--out", (dir / "report").string()});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    EXPECT_NE(e2e::slurp(dir / "report/report.md").find("first-number"), std::string::npos);

    // A resumed run without the flag scores its new responses with it.
    ASSERT_EQ(run_sim(sim, db, "default", 5).exit_code, 0);
    EXPECT_EQ(count(db, "SELECT count(*) FROM v_responses"), 5);
    expect_every_response_scored(db, 4);

    // So does an import (lm-eval's samples of the run, as another group).
    auto out = dir / "samples";
    ASSERT_EQ(e2e::run({"export", "--db", db.string(), "--format", "lm-eval-samples", "--out",
                        out.string()})
                  .exit_code,
              0);
    const auto samples = fs::directory_iterator(out)->path();
    auto im = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "lmeval", "--framing",
                        "raw", "--dataset", "sample", samples.string()});
    ASSERT_EQ(im.exit_code, 0) << im.err;
    EXPECT_EQ(count(db, "SELECT count(*) FROM v_responses"), 10);
    expect_every_response_scored(db, 4);
    EXPECT_EQ(count(db, "SELECT count(*) FROM v_scores WHERE server = 'lmeval' AND scorer = "
                        "'first-number'"),
              5);
}

TEST(ScorerFileFlag, RunStoresItAndAChangedDefinitionScoresEverythingAgain) {
    auto dir = e2e::scratch("scorer-file-run");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    auto file = first_number_scorer(dir, "first-number", 1);
    auto first = run_sim(sim, db, "default", 2, {"--scorer-file", file.string()});
    ASSERT_EQ(first.exit_code, 0) << first.err;
    EXPECT_NE(first.out.find("scorer 'first-number' is stored in"), std::string::npos) << first.out;
    expect_every_response_scored(db, 4);

    // Version 2 of the file, from the experiment file's key: the next run
    // replaces the stored definition and scores every response with it.
    file = first_number_scorer(dir, "first-number", 2);
    auto experiment = dir / "experiment.toml";
    std::ofstream(experiment) << "version = 1\nscorer_files = [\"" << file.string() << "\"]\n";
    auto second = run_sim(sim, db, "default", 3, {"--config", experiment.string()});
    ASSERT_EQ(second.exit_code, 0) << second.err;
    EXPECT_NE(second.out.find("scorer 'first-number' has a new definition in " + db.string() +
                              ": all 3 responses were scored again"),
              std::string::npos)
        << second.out;
    expect_every_response_scored(db, 4);
    EXPECT_EQ(query(db, "SELECT version FROM scorers WHERE name = 'first-number'"), "2");
    EXPECT_EQ(count(db, "SELECT count(*) FROM scores WHERE scorer = 'first-number' AND "
                        "scorer_version = 2"),
              3);
    EXPECT_NE(query(db, "SELECT config_json FROM runs ORDER BY run_id DESC LIMIT 1")
                  .find("\"scorer_files\""),
              std::string::npos);

    // The same definition again changes nothing and says nothing.
    auto third = run_sim(sim, db, "default", 3, {"--scorer-file", file.string()});
    ASSERT_EQ(third.exit_code, 0) << third.err;
    EXPECT_EQ(third.out.find("scorer '"), std::string::npos) << third.out;
}

TEST(ScorerFileFlag, ANameClashOrAMalformedFileIsOneLineAndChangesNothing) {
    auto dir = e2e::scratch("scorer-file-bad");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    ASSERT_EQ(run_sim(sim, db, "default", 2).exit_code, 0);
    e2e::exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    const auto before = e2e::slurp(db);

    // A built-in's name.
    fs::create_directories(dir / "mine");
    const auto clash = dir / "mine/vllm.toml";
    fs::copy_file(k_source / "scorers/vllm.toml", clash);
    auto named = e2e::run({"rescore", "--db", db.string(), "--scorer-file", clash.string()});
    EXPECT_EQ(named.exit_code, 2);
    expect_one_line(named);
    EXPECT_NE(named.err.find(clash.string() + ": a scorer named 'vllm' already exists"),
              std::string::npos)
        << named.err;

    // Two files of one name.
    const auto twice = first_number_scorer(dir / "mine", "first-number", 1);
    auto two = e2e::run({"rescore", "--db", db.string(), "--scorer-file", twice.string(),
                         "--scorer-file", first_number_scorer(dir, "first-number", 1).string()});
    EXPECT_EQ(two.exit_code, 2);
    expect_one_line(two);

    // A misspelt key on line 3, to rescore and to run.
    const auto bad = dir / "bad.toml";
    std::ofstream(bad) << "version = 1\n[extract]\npatern = '[0-9]+'\n";
    auto malformed = e2e::run({"rescore", "--db", db.string(), "--scorer-file", bad.string()});
    EXPECT_EQ(malformed.exit_code, 2);
    expect_one_line(malformed);
    EXPECT_NE(malformed.err.find(bad.string() + ":3: unknown key 'patern'"), std::string::npos)
        << malformed.err;
    auto run = run_sim(sim, db, "default", 4, {"--scorer-file", bad.string()});
    EXPECT_EQ(run.exit_code, 2);
    expect_one_line(run);
    auto missing =
        e2e::run({"rescore", "--db", db.string(), "--scorer-file", (dir / "none.toml").string()});
    EXPECT_EQ(missing.exit_code, 2);
    expect_one_line(missing);

    EXPECT_TRUE(before == e2e::slurp(db)) << "a refused scorer file changed the database";
    EXPECT_EQ(count(db, "SELECT count(*) FROM responses"), 2);

    // Nor is an older database migrated for a file that is refused.
    auto v8 = dir / "v8.sqlite";
    e2e::exec(v8, e2e::slurp(k_source / "tests/e2e/fixtures/schema_v8/v8.sql"));
    auto old = e2e::run({"rescore", "--db", v8.string(), "--scorer-file", bad.string()});
    EXPECT_EQ(old.exit_code, 2);
    EXPECT_EQ(query(v8, "PRAGMA user_version"), "8");
}

// The scorer's name is its file's stem, and it reaches every table, terminal
// line and JSON document: a stem with a terminal escape or a line end, or
// with bytes that are not UTF-8 (which made every later `summary --format
// json` and `report` of the database an internal error), is refused.
TEST(ScorerFileFlag, ANameWithControlCharactersOrNotUtf8IsRefused) {
    auto dir = e2e::scratch("scorer-file-name");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    ASSERT_EQ(run_sim(sim, db, "default", 2).exit_code, 0);
    e2e::exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    const auto before = e2e::slurp(db);

    for (const std::string name : {"clear\x1b[2J", "two\nlines", "latin1-\xff\xfe"}) {
        const auto file = first_number_scorer(dir, name, 1);
        auto r = e2e::run({"rescore", "--db", db.string(), "--scorer-file", file.string()});
        EXPECT_EQ(r.exit_code, 2) << name;
        expect_one_line(r);
        EXPECT_NE(r.err.find("must be UTF-8 text without control characters"), std::string::npos)
            << r.err;
        EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
        auto run = run_sim(sim, db, "default", 3, {"--scorer-file", file.string()});
        EXPECT_EQ(run.exit_code, 2) << name;
        expect_one_line(run);
    }
    EXPECT_TRUE(before == e2e::slurp(db)) << "a refused scorer file changed the database";
    EXPECT_EQ(query(db, "SELECT count(*) FROM scorers"), "0");

    // A name of other scripts and punctuation is a name.
    const auto fine = first_number_scorer(dir, "erste-Zahl_ü", 1);
    auto ok = e2e::run({"rescore", "--db", db.string(), "--scorer-file", fine.string()});
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
    auto json = e2e::run({"summary", "--db", db.string(), "--format", "json"});
    EXPECT_EQ(json.exit_code, 0) << json.err;
    EXPECT_NE(json.out.find("\"erste-Zahl_ü\""), std::string::npos);
}

TEST(ScorerFileFlag, MergeCarriesItAndRefusesTwoDefinitionsOfOneName) {
    auto dir = e2e::scratch("scorer-file-merge");
    e2e::Sim sim;
    auto with = dir / "with.sqlite";
    auto without = dir / "without.sqlite";
    ASSERT_EQ(run_sim(sim, with, "a", 3,
                      {"--scorer-file", first_number_scorer(dir, "first-number", 1).string()})
                  .exit_code,
              0);
    ASSERT_EQ(run_sim(sim, without, "b", 2).exit_code, 0);
    expect_every_response_scored(without, 3);

    // Into a database scored without it: every response gets its scores.
    auto m = e2e::run({"merge", without.string(), with.string()});
    ASSERT_EQ(m.exit_code, 0) << m.err;
    EXPECT_EQ(count(without, "SELECT count(*) FROM v_responses"), 5);
    expect_every_response_scored(without, 4);
    EXPECT_EQ(query(without, "SELECT name FROM scorers"), "first-number");

    // Another definition under the same name is a conflict.
    auto other = dir / "other.sqlite";
    ASSERT_EQ(run_sim(sim, other, "c", 2,
                      {"--scorer-file", first_number_scorer(dir, "first-number", 2).string()})
                  .exit_code,
              0);
    auto conflict =
        e2e::run({"merge", (dir / "out.sqlite").string(), with.string(), other.string()});
    EXPECT_EQ(conflict.exit_code, 2);
    expect_one_line(conflict);
    EXPECT_NE(conflict.err.find("scorer 'first-number' has another definition"), std::string::npos)
        << conflict.err;
    EXPECT_FALSE(fs::exists(dir / "out.sqlite"));
}

// Concurrency audit D1: an input holding a stored scorer this diffeval
// cannot load (made by another version, or by hand) was refused only after
// the merge had replaced OUT with it, so every reading command and run then
// refused OUT; a run on such a file sent its requests, stored them unscored
// and only then exited 2. Both are refused before anything changes.
TEST(ScorerFileFlag, AStoredScorerThatCannotLoadIsRefusedBeforeAnythingChanges) {
    auto dir = e2e::scratch("scorer-unloadable");
    e2e::Sim sim;
    auto good = dir / "good.sqlite";
    ASSERT_EQ(run_sim(sim, good, "a", 4).exit_code, 0);
    auto bad = dir / "in.sqlite";
    fs::copy_file(good, bad);
    e2e::exec(bad, "INSERT INTO scorers VALUES ('bad', 1, 'version = 1\n[extract]\npattern = "
                   "''(''\n', 'bad.toml', '2026-01-01T00:00:00Z')");
    auto out = dir / "out.sqlite";
    fs::copy_file(good, out);
    const auto before = e2e::slurp(out);
    auto m = e2e::run({"merge", out.string(), bad.string()});
    EXPECT_EQ(m.exit_code, 2) << m.err;
    EXPECT_NE(m.err.find(bad.string() + ": the stored scorer 'bad' cannot be used by this "
                                        "diffeval: "),
              std::string::npos)
        << m.err;
    EXPECT_NE(m.err.find("; use the diffeval that stored it, or delete its row from the scorers "
                         "table and rescore (docs/scorers.md)"),
              std::string::npos)
        << m.err;
    EXPECT_EQ(e2e::slurp(out), before) << "OUT was left as it was";
    auto fresh = dir / "fresh.sqlite";
    EXPECT_EQ(e2e::run({"merge", fresh.string(), bad.string()}).exit_code, 2);
    EXPECT_FALSE(fs::exists(fresh));
    // A run on it sends nothing and records no run.
    const auto runs = query(bad, "SELECT count(*) FROM runs");
    auto r = run_sim(sim, bad, "a", 6);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("the stored scorer 'bad' cannot be used"), std::string::npos) << r.err;
    EXPECT_EQ(query(bad, "SELECT count(*) FROM responses"), "4");
    EXPECT_EQ(query(bad, "SELECT count(*) FROM runs"), runs);
    // A stored row under a built-in's name is no file to rename (audit D6):
    // the fix given is the row's.
    auto clash = dir / "clash.sqlite";
    fs::copy_file(good, clash);
    std::string definition = e2e::slurp(first_number_scorer(dir, "mine", 1));
    for (size_t at = definition.find('\''); at != std::string::npos;
         at = definition.find('\'', at + 2)) {
        definition.insert(at, 1, '\'');
    }
    e2e::exec(clash, "INSERT INTO scorers VALUES ('vllm', 1, '" + definition +
                         "', 'mine.toml', '2026-01-01T00:00:00Z')");
    auto c = e2e::run({"rescore", "--db", clash.string()});
    EXPECT_EQ(c.exit_code, 2) << c.err;
    expect_one_line(c);
    EXPECT_NE(c.err.find("a scorer named 'vllm' already exists (from scorers/vllm.toml); use the "
                         "diffeval that stored it, or delete its row"),
              std::string::npos)
        << c.err;
    EXPECT_EQ(c.err.find("rename"), std::string::npos) << c.err;
}

// A scorer's name is the user's file stem, backticks allowed: summary's
// Markdown fenced it in single backticks, so one in the name ended the code
// span and the rest was raw HTML (an audit: "a`<details>..." folded the
// table under a toggle). It is fenced as report.md and the gate fence it.
TEST(ScorerFile, ANameWithABacktickStaysCodeInSummaryMarkdown) {
    auto dir = e2e::scratch("scorer-file-backtick");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    const std::string name = "a`<details>b";
    const auto file = first_number_scorer(dir, name, 1);
    ASSERT_EQ(run_sim(sim, db, "s", 2, {"--scorer-file", file.string()}).exit_code, 0);
    auto md = e2e::run({"summary", "--db", db.string(), "--scorer", name, "--format", "md"});
    ASSERT_EQ(md.exit_code, 0) << md.err;
    EXPECT_NE(md.out.find("accuracy by ``a`<details>b``)"), std::string::npos) << md.out;
}
