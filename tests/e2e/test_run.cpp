// `diffeval run` end to end against the real simulator: the matrix is sent
// and stored row by row, a killed run resumes with nothing lost or doubled,
// and bad input gets one clear line, exit code 2, and leaves the store as it
// was.
#include "e2e.hpp"

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using e2e::query;
using e2e::query_rows;

namespace {

std::string profile_file(const std::filesystem::path& dir, const std::string& name,
                         const std::string& body) {
    auto p = dir / (name + ".toml");
    std::ofstream(p) << "version = 1\nname = \"" << name << "\"\n" << body;
    return p.string();
}

} // namespace

TEST(Run, TwoServersTwoFramingsTwoRepeatsStoreEveryRow) {
    auto dir = e2e::scratch("matrix");
    e2e::Sim a({"--profile", "default"});
    e2e::Sim b({"--profile", "deepgemm"});
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "default=" + a.url(), "--server", "deepgemm=" + b.url(),
                       "--framing", "raw,chat", "--max-tokens", "64", "--repeats", "2", "--limit",
                       "6", "--dataset", "sample", "--db", db.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    EXPECT_NE(o.out.find("stored 48 responses"), std::string::npos) << o.out;
    // 2 servers x 2 framings x 1 limit x 2 repeats x 6 questions, each once.
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses"), "48");
    EXPECT_EQ(query(db, "SELECT count(*) FROM requests"), "48");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1 AND status = 200"), "48");
    EXPECT_EQ(
        query(
            db,
            "SELECT count(DISTINCT server || framing || repeat || question_idx) FROM v_responses"),
        "48");
    // Every row holds the exact body and a parsed response.
    EXPECT_EQ(query(db,
                    "SELECT count(*) FROM v_responses WHERE framing = 'raw' AND request_json LIKE "
                    "'{\"prompt\": \"Question: %' AND request_json LIKE '%\"seed\": 42}'"),
              "24");
    EXPECT_EQ(query(db,
                    "SELECT count(*) FROM v_responses WHERE framing = 'chat' AND request_json LIKE "
                    "'{\"messages\": [%\"chat_template_kwargs\": {\"enable_thinking\": false}}'"),
              "24");
    EXPECT_EQ(query(db,
                    "SELECT count(*) FROM v_responses WHERE text IS NULL OR response_json = '' OR "
                    "finish_reason NOT IN ('stop', 'length') OR completion_tokens IS NULL OR "
                    "completion_tokens > 64 OR prompt_tokens IS NULL"),
              "0");
    // Length cuts say so and stop-string cuts keep the string as stop_reason.
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE finish_reason = 'length' AND "
                        "(completion_tokens != 64 OR stop_reason IS NOT NULL)"),
              "0");
    EXPECT_EQ(
        query(db,
              "SELECT count(*) FROM v_responses WHERE typeof(stop_reason) NOT IN ('text', 'null')"),
        "0");
    // The chat framing asks for the served model by name, found at preflight.
    EXPECT_EQ(
        query(db,
              "SELECT count(*) FROM v_responses WHERE framing = 'chat' AND request_json NOT LIKE "
              "'%\"model\": \"Qwen/Qwen3.5-35B-A3B-FP8\"%'"),
        "0");
    EXPECT_EQ(query(db, "SELECT count(*) FROM servers WHERE info_json LIKE '%\"version\"%'"), "2");
    EXPECT_EQ(query(db, "SELECT status FROM runs"), "complete");
}

// The classifications and scores a run stores with each response are what
// scoring the stored text again gives.
TEST(Run, ScoresStoredWithTheResponsesEqualARescore) {
    auto dir = e2e::scratch("inline-scores");
    e2e::Sim a({"--profile", "deepgemm"});
    auto db = dir / "r.sqlite";
    for (bool stream : {false, true}) {
        std::vector<std::string> args = {
            "run",          "--server", "a=" + a.url(), "--framing", "raw,chat,lm-eval-chat",
            "--max-tokens", "32,256",   "--repeats",    "2",         "--dataset",
            "sample",       "--db",     db.string()};
        if (stream) {
            args.push_back("--stream");
        }
        auto o = e2e::run(args);
        ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
        const std::string derived = "SELECT group_concat(row, char(10)) FROM (SELECT "
                                    "c.response_id || ':' || c.opened || c.closed || "
                                    "c.reasoning_started || c.outcome || ifnull(c.stop_cause, '-') "
                                    "AS row FROM classifications c UNION ALL SELECT s.response_id "
                                    "|| ':' || s.scorer || s.scorer_version || s.score_text || "
                                    "s.extracted || s.valid || s.correct FROM scores s ORDER BY 1)";
        const auto stored = query(db, derived);
        EXPECT_EQ(query(db, "SELECT count(*) FROM scores"),
                  std::to_string(3 * std::stoi(query(db, "SELECT count(*) FROM responses"))));
        auto r = e2e::run({"rescore", "--db", db.string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(query(db, derived), stored) << stream;
        std::filesystem::remove(db);
    }
}

// A few-shot file is read as far as the run's framings take shots from it:
// with the first N (the built-in raw and chat framings) its first N
// examples, which the bodies carry, so a bad line past them does not stop
// the run; a framing that draws shots (lm-eval-chat) reads it all and is
// refused at that line.
TEST(Run, AFewShotFileIsReadAsFarAsTheFramingsTakeShots) {
    auto dir = e2e::scratch("fewshot-prefix");
    const auto shots = dir / "shots.jsonl";
    {
        std::ofstream out(shots);
        for (int i = 0; i < 8; ++i) {
            out << R"({"question": "Shot question )" << i << R"(?", "answer": "#### )" << i
                << "\"}\n";
        }
        out << "{\"question\": \"cut\n";
    }
    e2e::Sim a;
    auto db = (dir / "r.sqlite").string();
    auto o =
        e2e::run({"run", "--server", "a=" + a.url(), "--framing", "raw,chat", "--limit", "2",
                  "--dataset", "sample", "--fewshot-from", shots.string(), "--db", db, "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_requests WHERE request_json LIKE "
                        "'%Shot question 4?%' AND request_json NOT LIKE '%Shot question 5?%'"),
              "4");
    auto drawn =
        e2e::run({"run", "--server", "a=" + a.url(), "--framing", "lm-eval-chat", "--limit", "2",
                  "--dataset", "sample", "--fewshot-from", shots.string(), "--db", db, "--quiet"});
    EXPECT_EQ(drawn.exit_code, 2) << drawn.err;
    EXPECT_NE(drawn.err.find(shots.string() + ":9: not a JSON object"), std::string::npos)
        << drawn.err;
}

namespace {

// A run of server "a" on the sample set's first five questions, raw framing.
std::vector<std::string> five_raw_questions(const e2e::Sim& a, const std::string& db) {
    return {"run", "--server", "a=" + a.url(), "--framing", "raw", "--limit", "5", "--db", db};
}

} // namespace

TEST(Run, RerunSendsNothingAndSaysSo) {
    auto dir = e2e::scratch("rerun");
    e2e::Sim a;
    auto db = (dir / "r.sqlite").string();
    const auto args = five_raw_questions(a, db);
    ASSERT_EQ(e2e::run(args).exit_code, 0);
    auto again = e2e::run(args);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.err.find("5 already stored (skipped), 0 sent"), std::string::npos) << again.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "5");
}

// A run with a lower --limit than an interrupted one ends without sending
// what that one planned: it says so, and what to do, where it said nothing
// and summary told the user to rerun it, which sends nothing.
TEST(Run, ALowerLimitRunSaysWhatAnEarlierRunLeftUnsent) {
    auto dir = e2e::scratch("lower-limit-unsent");
    e2e::Sim a;
    const auto db = (dir / "r.sqlite").string();
    auto run = [&](const std::string& limit) {
        return e2e::run({"run", "--server", "a=" + a.url(), "--framing", "raw", "--limit", limit,
                         "--db", db, "--quiet"});
    };
    ASSERT_EQ(run("4").exit_code, 0);
    // As a run stopped before sending them leaves them, and itself.
    e2e::unsend(db, "question_idx IN (2, 3)");
    e2e::exec(db, "UPDATE runs SET status = 'interrupted'");
    auto o = run("2");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("note: a/raw/256 also holds 2 requests an earlier run planned and no run "
                         "sent (it asked for more questions or repeats than this one); they count "
                         "as failed: run the command that asked for them again"),
              std::string::npos)
        << o.out;
    // Sent, the note is gone.
    ASSERT_EQ(run("4").exit_code, 0);
    o = run("2");
    EXPECT_EQ(o.out.find("note:"), std::string::npos) << o.out;
}

// A run without preflight learns nothing about its server: the model and
// /version an earlier run stored stay, and still refuse another server under
// the name. They were overwritten with '' and {}, after which a vLLM 0.29.0
// was taken for the 0.28.0 that gave the answers, and the report said 0.29.0.
TEST(Run, ARunWithoutPreflightKeepsWhatTheDatabaseKnowsOfItsServer) {
    auto dir = e2e::scratch("no-preflight-keeps");
    e2e::Sim a;
    e2e::Sim newer(
        {"--profile", profile_file(dir, "newer", "[server]\nvllm_version = \"0.29.0\"\n")});
    const auto db = (dir / "r.sqlite").string();
    auto run = [&](const e2e::Sim& sim, int limit, std::vector<std::string> extra) {
        std::vector<std::string> args = {
            "run",       "--server", "s=" + sim.url(), "--limit", std::to_string(limit),
            "--framing", "raw",      "--db",           db,        "--quiet"};
        args.insert(args.end(), extra.begin(), extra.end());
        return e2e::run(args);
    };
    ASSERT_EQ(run(a, 2, {}).exit_code, 0);
    const auto known = "SELECT model || ' ' || json_extract(info_json, '$.version.version') "
                       "FROM servers";
    const auto before = query(db, known);
    ASSERT_EQ(before, "Qwen/Qwen3.5-35B-A3B-FP8 0.28.0");
    auto o = run(a, 3, {"--no-preflight"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(query(db, known), before);
    o = run(newer, 4, {});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("server 's' has version 0.29.0, but the responses " + db +
                         " holds under that name came from one with version 0.28.0"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "3");
    EXPECT_EQ(query(db, known), before);
}

// A finished run whose server is gone runs again with --no-preflight, as the
// unreachable server's message advises: the chat framing's bodies name the
// model the database stores for the server. It asked for --model, which then
// named the model in the raw framing's bodies too, and was refused: no way
// through but a run per framing (reliability audit).
TEST(Run, AFinishedRunRunsAgainWithoutItsServerUnderNoPreflight) {
    auto dir = e2e::scratch("rerun-no-server");
    const auto db = (dir / "r.sqlite").string();
    std::string url;
    const auto run = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {"run", "--server", "s=" + url, "--limit",
                                         "3",   "--db",     db,         "--quiet"};
        args.insert(args.end(), extra.begin(), extra.end());
        return e2e::run(args);
    };
    {
        e2e::Sim sim;
        url = sim.url();
        ASSERT_EQ(run({}).exit_code, 0);
    }
    auto gone = run({});
    EXPECT_EQ(gone.exit_code, 2) << gone.err;
    EXPECT_NE(gone.err.find("pass --no-preflight"), std::string::npos) << gone.err;
    auto again = run({"--no-preflight"});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.err.find("6 already stored (skipped), 0 sent"), std::string::npos) << again.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "6");
    EXPECT_EQ(query(db, "SELECT group_concat(status) FROM runs"), "complete,complete");
    // A database that stores no model for the name still asks for one.
    auto fresh = e2e::run(
        {"run", "--server", "t=" + url, "--limit", "3", "--db", db, "--no-preflight", "--quiet"});
    EXPECT_EQ(fresh.exit_code, 2) << fresh.err;
    EXPECT_NE(fresh.err.find("framing 'chat' needs a model name for server 't': pass --model "
                             "(preflight is off, and " +
                             db + " stores no model for 't')"),
              std::string::npos)
        << fresh.err;
}

// A server that publishes its context but cannot count a prompt's tokens (no
// /tokenize: the simulator) gets a line saying the prompts' length is not
// checked; the check was skipped in silence, and every over-long request
// came back HTTP 400 (docs audit). One whose context holds any prompt of
// the run's size in bytes is not asked at all.
TEST(Run, AContextCheckThatCannotCountTokensSaysSo) {
    auto dir = e2e::scratch("context-uncounted");
    e2e::Sim small({"--profile", profile_file(dir, "small", "[server]\nmax_model_len = 300\n")});
    const auto db = (dir / "r.sqlite").string();
    auto o = e2e::run({"run", "--server", "s=" + small.url(), "--framing", "raw", "--limit", "2",
                       "--db", db, "--quiet"});
    EXPECT_NE(o.err.find("server 's': note: the raw prompts' length is not checked against its "
                         "context of 300 tokens (max_model_len in /v1/models) before sending: "
                         "POST /tokenize answered HTTP 404"),
              std::string::npos)
        << o.err;
    e2e::Sim roomy;
    auto quiet = e2e::run({"run", "--server", "r=" + roomy.url(), "--framing", "raw", "--limit",
                           "2", "--db", db, "--quiet"});
    EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
    EXPECT_EQ(quiet.err.find("not checked"), std::string::npos) << quiet.err;
}

// A server URL no connection can be made to is a usage error naming what is
// wrong (it said "unreachable ... start the server"), with the password it
// carries masked however short, and nothing stored.
TEST(Run, AMalformedServerUrlSaysWhatIsWrongAndHidesItsPassword) {
    auto dir = e2e::scratch("bad-url");
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "a=http://me:pw@127.0.0.1:99999", "--dataset", "sample",
                       "--db", db.string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_EQ(o.err, "diffeval: server 'a': 'http://me:[REDACTED]@127.0.0.1:99999' is not a valid "
                     "URL: Port number was not a decimal number between 0 and 65535\n");
    EXPECT_FALSE(std::filesystem::exists(db));
}

// Commands that fail before creating their database leave nothing in its
// directory: each left "<db>.lock", the lock it took.
TEST(Run, ACommandThatFailsBeforeItsDatabaseLeavesNoFileBehind) {
    auto dir = e2e::scratch("no-leftovers");
    const auto port = std::to_string(e2e::free_port());
    auto o = e2e::run({"run", "--server", "a=http://127.0.0.1:" + port, "--dataset", "sample",
                       "--db", (dir / "r.sqlite").string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("is unreachable"), std::string::npos) << o.err;
    o = e2e::run({"merge", (dir / "m.sqlite").string(), "/etc/passwd"});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("/etc/passwd is not a diffeval database"), std::string::npos) << o.err;
    EXPECT_TRUE(std::filesystem::is_empty(dir));
}

// A file that is no diffeval database, given to a command that writes: it is
// refused, and no "<file>.lock" is left beside it (each of them left one,
// beside another program's database or a text file).
TEST(Run, AFileRefusedForWritingGetsNoLockFileBeside) {
    auto dir = e2e::scratch("refused-no-lock");
    e2e::Sim a;
    auto theirs = dir / "theirs.sqlite";
    e2e::exec(theirs, "CREATE TABLE mine(x); INSERT INTO mine VALUES (1)");
    auto text = dir / "notes.txt";
    std::ofstream(text) << "not a database\n";
    auto ours = dir / "ours.sqlite";
    ASSERT_EQ(e2e::run(five_raw_questions(a, ours.string())).exit_code, 0);
    for (const auto& file : {theirs, text}) {
        const auto before = e2e::slurp(file);
        for (const auto& args :
             std::vector<std::vector<std::string>>{five_raw_questions(a, file.string()),
                                                   {"rescore", "--db", file.string()},
                                                   {"merge", file.string(), ours.string()}}) {
            auto o = e2e::run(args);
            EXPECT_EQ(o.exit_code, 2) << args[0] << ": " << o.err;
            EXPECT_TRUE(o.err.find("not a diffeval database") != std::string::npos ||
                        o.err.find("not diffeval's") != std::string::npos)
                << args[0] << ": " << o.err;
            EXPECT_FALSE(std::filesystem::exists(file.string() + ".lock")) << args[0];
        }
        EXPECT_TRUE(e2e::slurp(file) == before) << file;
    }
    // A database diffeval wrote keeps its lock file, as before.
    EXPECT_TRUE(std::filesystem::exists(ours.string() + ".lock"));
}

// The same group sent again with other bodies (a sampling flag changed, a
// framing given twice) would count its questions twice: refused, exit 2,
// nothing sent; more questions of the same configuration are still welcome.
TEST(Run, ChangedBodiesForStoredQuestionsAreRefused) {
    auto dir = e2e::scratch("changed-bodies");
    e2e::Sim a;
    auto db = (dir / "r.sqlite").string();
    const auto args = five_raw_questions(a, db);
    ASSERT_EQ(e2e::run(args).exit_code, 0);
    const auto served = [&a] {
        return nlohmann::json::parse(a.stats())["requests"]["completions"].get<int>();
    };
    const auto sent = served();
    auto hotter = args;
    hotter.insert(hotter.end(), {"--temperature", "0.5"});
    auto o = e2e::run(hotter);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("a/raw/256 already holds question 0 (repeat 0) sent with another "
                         "request body"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(served(), sent);
    // What changed is named, as merge names it: "the framing, a sampling
    // setting, the model or the question" was none of what --stream changes.
    EXPECT_NE(o.err.find("\"temperature\": 0.0 stored, \"temperature\": 0.5 now"),
              std::string::npos)
        << o.err;
    auto streamed = args;
    streamed.push_back("--stream");
    o = e2e::run(streamed);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("sent with another request body: no \"stream\" stored, \"stream\": "
                         "true now; run this configuration under another --server name"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(served(), sent);
    auto twice = args;
    twice[4] = "raw,raw";
    o = e2e::run(twice);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("--framing raw is given twice"), std::string::npos) << o.err;
    twice[4] = "raw";
    twice.insert(twice.end(), {"--max-tokens", "256,256"});
    o = e2e::run(twice);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("--max-tokens 256 is given twice"), std::string::npos) << o.err;
    // A framing file named like another framing of the run.
    auto raw = e2e::slurp(std::filesystem::path(DIFFEVAL_SOURCE_DIR) / "prompts/raw.toml");
    ASSERT_NE(raw.find("seed = 42"), std::string::npos);
    raw.replace(raw.find("seed = 42"), 9, "seed = 7");
    std::ofstream(dir / "raw.toml") << raw;
    twice = args;
    twice[4] = "raw," + (dir / "raw.toml").string();
    o = e2e::run(twice);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("its name 'raw' is that of another framing of this run"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(served(), sent);
    auto more = args;
    more[6] = "8";
    ASSERT_EQ(e2e::run(more).exit_code, 0);
    EXPECT_EQ(query(db, "SELECT count(*) FROM requests"), "8");
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "8");
}

// A run refused at planning (exit 2) changes nothing stored: no run row is
// left whose places, never planned, would fail the completeness gate with
// advice to run the refused command again.
TEST(Run, ARunRefusedAtPlanningLeavesNoRunBehind) {
    auto dir = e2e::scratch("refused-run");
    e2e::Sim a;
    auto db = (dir / "r.sqlite").string();
    const auto args = five_raw_questions(a, db);
    ASSERT_EQ(e2e::run(args).exit_code, 0);
    const std::vector<std::string> gate = {"gate", "--db", db, "--require-complete"};
    ASSERT_EQ(e2e::run(gate).exit_code, 0);
    const auto runs = query(db, "SELECT group_concat(status) FROM runs");
    ASSERT_EQ(runs, "complete");

    auto more = args;
    more[6] = "8";
    more.insert(more.end(), {"--temperature", "0.5"});
    auto o = e2e::run(more);
    ASSERT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("already holds question 0 (repeat 0)"), std::string::npos) << o.err;
    EXPECT_EQ(query(db, "SELECT group_concat(status) FROM runs"), runs);
    auto g = e2e::run(gate);
    EXPECT_EQ(g.exit_code, 0) << g.out;
    EXPECT_EQ(query(db, "SELECT count(*) FROM pragma_foreign_key_check"), "0");
}

// A group holds one configuration's requests, also when a run's places do not
// meet the stored ones: another shard, or the questions after a --limit, sent
// with another sampling setting is refused before anything is sent.
TEST(Run, AnotherShardWithAnotherBodyIsRefusedBeforeSending) {
    auto dir = e2e::scratch("shard-other-body");
    e2e::Sim a;
    auto db = (dir / "r.sqlite").string();
    auto shard = [&](const std::string& which) {
        return std::vector<std::string>{"run",     "--server", "a=" + a.url(), "--framing", "raw",
                                        "--limit", "6",        "--shard",      which,       "--db",
                                        db,        "--quiet"};
    };
    ASSERT_EQ(e2e::run(shard("0/2")).exit_code, 0);
    const auto served = [&a] {
        return nlohmann::json::parse(a.stats())["requests"]["completions"].get<int>();
    };
    const auto sent = served();
    auto hotter = shard("1/2");
    hotter.insert(hotter.end(), {"--temperature", "0.5"});
    auto o = e2e::run(hotter);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("a/raw/256 already holds question 0 (repeat 0) sent with another "
                         "request body"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(served(), sent);
    EXPECT_EQ(query(db, "SELECT count(*) FROM requests"), "3");
    // The same configuration's other shard, and more questions, are added.
    ASSERT_EQ(e2e::run(shard("1/2")).exit_code, 0);
    auto more = shard("1/2");
    more[6] = "10";
    ASSERT_EQ(e2e::run(more).exit_code, 0);
    EXPECT_EQ(query(db, "SELECT count(DISTINCT json_extract(request_json, '$.temperature')) || ' ' "
                        "|| count(*) FROM v_requests"),
              "1 8");
}

// A command refused the lock of a database its holder has not created yet
// (a merge builds OUT beside it; a run creates it after preflight) leaves the
// holder's lock file alone: removed, the next command would lock a new file,
// write the database meanwhile, and the holder's rename or writes would
// replace what it stored.
TEST(Run, ARefusedCommandLeavesTheHoldersLockFile) {
    auto dir = e2e::scratch("refused-lock");
    e2e::Sim a;
    const auto db = (dir / "new.sqlite").string();
    const auto lock_path = db + ".lock";
    const int held = ::open(lock_path.c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(held, 0);
    const std::string who = "pid 4242, started 2026-12-05T00:00:00.000Z, diffeval merge\n";
    ASSERT_EQ(::write(held, who.data(), who.size()), static_cast<ssize_t>(who.size()));
    ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
    struct stat before {};
    ASSERT_EQ(::fstat(held, &before), 0);
    const std::vector<std::string> run = {
        "run",     "--server", "a=" + a.url(), "--framing", "raw",
        "--limit", "2",        "--db",         db,          "--quiet"};
    for (int i = 0; i < 2; ++i) {
        auto o = e2e::run(run);
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_NE(o.err.find("is in use by diffeval merge (pid 4242"), std::string::npos) << o.err;
        struct stat named {};
        ASSERT_EQ(::stat(lock_path.c_str(), &named), 0) << "the holder's lock file was removed";
        EXPECT_EQ(named.st_ino, before.st_ino);
    }
    auto m = e2e::run({"merge", db, (dir / "none.sqlite").string()});
    EXPECT_EQ(m.exit_code, 2) << m.err;
    EXPECT_FALSE(std::filesystem::exists(db));
    struct stat named {};
    ASSERT_EQ(::stat(lock_path.c_str(), &named), 0);
    EXPECT_EQ(named.st_ino, before.st_ino);
    ::close(held);
}

// A server slower than diffeval reads has --concurrency requests in flight
// at once: sending at most 32 a turn must not hold the count below it.
TEST(Run, ASlowServerGetsTheWholeConcurrencyAtOnce) {
    auto dir = e2e::scratch("in-flight");
    e2e::Sim sim({"--ttft-ms", "300"});
    auto db = (dir / "r.sqlite").string();
    auto o =
        e2e::run({"run", "--server", "a=" + sim.url(), "--dataset", "sample", "--framing",
                  "raw,chat", "--max-tokens", "64", "--concurrency", "80", "--db", db, "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses WHERE ok = 1"), "96");
    auto stats = nlohmann::json::parse(sim.stats());
    EXPECT_EQ(stats["in_flight"]["peak"].get<int>(), 80) << stats.dump();
    EXPECT_EQ(stats["in_flight"]["now"].get<int>(), 0) << stats.dump();
}

TEST(Run, KilledRunResumesWithNothingLostOrDuplicated) {
    auto dir = e2e::scratch("resume");
    // A little latency so the kill lands mid-run.
    e2e::Sim a({"--profile", profile_file(dir, "slow", "[latency]\nttft_ms = 20\n")});
    auto db = dir / "r.sqlite";
    std::vector<std::string> args = {
        "run",       "--server", "a=" + a.url(),  "--framing", "raw,chat", "--max-tokens", "32",
        "--repeats", "2",        "--concurrency", "4",         "--db",     db.string()};
    {
        e2e::Child child(args);
        for (int i = 0; i < 1000; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            // The file exists before its schema does: poll until both do.
            try {
                if (std::filesystem::exists(db) &&
                    std::stoi("0" + query(db, "SELECT count(*) FROM responses")) >= 20) {
                    break;
                }
            } catch (const std::runtime_error&) {
            }
        }
        child.stop(SIGKILL);
    }
    auto partial = std::stoi(query(db, "SELECT count(*) FROM responses"));
    ASSERT_GT(partial, 0);
    ASSERT_LT(partial, 192) << "the run finished before it could be killed";
    EXPECT_EQ(query(db, "PRAGMA integrity_check"), "ok");
    // Every id a row holds names a row that exists, though the run has
    // SQLite skip checking them (Store::check_references).
    EXPECT_EQ(query(db, "SELECT count(*) FROM pragma_foreign_key_check"), "0");
    // Each response was stored with its classification and scores, so the
    // killed run's views are complete without another command.
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses r LEFT JOIN classifications c "
                        "USING (response_id) WHERE c.response_id IS NULL"),
              "0");
    EXPECT_EQ(query(db, "SELECT count(*) FROM scores"), std::to_string(3 * partial));

    auto o = e2e::run(args);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.err.find(std::to_string(partial) + " already stored (skipped)"), std::string::npos)
        << o.err;
    EXPECT_EQ(query(db, "PRAGMA integrity_check"), "ok");
    EXPECT_EQ(query(db, "SELECT count(*) FROM pragma_foreign_key_check"), "0");
    // 48 questions x 2 framings x 2 repeats, each answered exactly once.
    EXPECT_EQ(query(db, "SELECT count(*) FROM requests"), "192");
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "192");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), "192");
}

// A database renamed while a run writes it, and another put in its place
// (`mv r.sqlite keep.sqlite; mv other.sqlite r.sqlite`): the run used to
// finish with exit 0 saying it stored everything in r.sqlite, and the next
// open of r.sqlite replayed the run's log, left under that name, over the
// other database, whose results were gone.
TEST(Run, DatabaseReplacedWhileARunWritesItIsLeftAsItIs) {
    auto dir = e2e::scratch("replaced");
    e2e::Sim a({"--profile", profile_file(dir, "slow", "[latency]\nttft_ms = 20\n")});
    auto other = dir / "other.sqlite";
    auto o = e2e::run({"run", "--server", "b=" + a.url(), "--framing", "raw", "--max-tokens", "32",
                       "--limit", "3", "--db", other.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto other_bytes = e2e::slurp(other);
    ASSERT_FALSE(other_bytes.empty());

    auto db = dir / "r.sqlite";
    auto kept = dir / "kept.sqlite";
    e2e::Child child({"run", "--server", "a=" + a.url(), "--framing", "raw,chat", "--max-tokens",
                      "32", "--repeats", "2", "--concurrency", "4", "--db", db.string(),
                      "--quiet"});
    int seen = 0;
    for (int i = 0; i < 1000 && seen < 20; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        try {
            if (std::filesystem::exists(db)) {
                seen = std::stoi("0" + query(db, "SELECT count(*) FROM responses"));
            }
        } catch (const std::runtime_error&) {
        }
    }
    ASSERT_GE(seen, 20);
    std::filesystem::rename(db, kept);
    std::filesystem::rename(other, db);
    const int code = child.wait();
    EXPECT_EQ(code, 1) << child.err() << child.out();
    EXPECT_NE(child.err().find("r.sqlite was removed or replaced while this run wrote it"),
              std::string::npos)
        << child.err();
    EXPECT_EQ(child.out().find("stored"), std::string::npos) << child.out();
    // The database now under the name is as it was, and still reads so.
    EXPECT_TRUE(e2e::slurp(db) == other_bytes) << "r.sqlite's bytes changed";
    EXPECT_EQ(query(db, "PRAGMA integrity_check"), "ok");
    EXPECT_EQ(query(db, "SELECT group_concat(DISTINCT server) FROM requests"), "b");
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "3");
    // The renamed file holds what the run stored, its run marked failed.
    EXPECT_EQ(query(kept, "PRAGMA integrity_check"), "ok");
    EXPECT_GE(std::stoi(query(kept, "SELECT count(*) FROM responses")), seen);
    EXPECT_EQ(query(kept, "SELECT status FROM runs"), "failed");
    // Every answer is accounted for: stored in the renamed file, or named as
    // received and not stored (2 to 7 of them went without a word:
    // reliability audit).
    const std::string err = child.err();
    std::smatch sent, lost;
    ASSERT_TRUE(
        std::regex_search(err, sent, std::regex(R"(, (\d+) sent(?: \((\d+) of them unanswered)?)")))
        << err;
    const int answered = std::stoi(sent[1]) - (sent[2].matched ? std::stoi(sent[2]) : 0);
    const int not_stored =
        std::regex_search(err, lost, std::regex(R"(\((\d+) responses? received w)"))
            ? std::stoi(lost[1])
            : 0;
    EXPECT_EQ(std::stoi(query(kept, "SELECT count(*) FROM responses")) + not_stored, answered)
        << err;
}

// A run reads its plan as it sends, so one killed early leaves places it
// asked for with no request row: they are in no group's accuracy, and the
// gate's completeness check and accuracy check and summary say so (an audit's
// gate passed --expect on 57 of 150 questions with --require-complete's
// count blind to the rest).
TEST(Run, PlacesAKilledRunNeverPlannedAreCountedMissing) {
    auto dir = e2e::scratch("unplanned");
    // Four requests in five stall, so the run stores a few answers and then
    // waits on 32 stalled connections; its plan stops where the loop's queue
    // is full (twice the in-flight limit of 2,048), short of 48 questions x
    // 100 repeats, whatever the machine's speed.
    auto stuck = std::make_unique<e2e::Sim>(std::vector<std::string>{
        "--profile", profile_file(dir, "stuck", "[faults]\nstall = 0.8\nstall_ms = 600000\n")});
    auto db = dir / "r.sqlite";
    std::vector<std::string> args = {
        "run",       "--server", "a=" + stuck->url(), "--framing", "raw",
        "--repeats", "100",      "--max-tokens",      "32",        "--concurrency",
        "32",        "--db",     db.string(),         "--quiet"};
    {
        e2e::Child child(args);
        std::string last;
        for (int i = 0; i < 1000; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            try {
                // The plan stopped growing, and an answer is stored.
                const auto now = std::filesystem::exists(db)
                                     ? query(db, "SELECT count(*) || ' ' || (SELECT count(*) "
                                                 "FROM responses) FROM requests")
                                     : std::string();
                if (!now.empty() && std::stoi(now) >= 2048 && now == last &&
                    now.substr(now.find(' ') + 1) != "0") {
                    break;
                }
                last = now;
            } catch (const std::runtime_error&) {
            }
        }
        child.stop(SIGKILL);
    }
    stuck.reset();
    const int planned = std::stoi(query(db, "SELECT count(*) FROM requests"));
    ASSERT_LT(planned, 4800) << "the run planned everything before it was killed";
    const int unplanned = 4800 - planned;
    auto gate = e2e::run({"gate", "--db", db.string(), "--require-complete"});
    EXPECT_EQ(gate.exit_code, 1) << gate.out << gate.err;
    EXPECT_NE(gate.out.find("of 4800 requests without a successful response"), std::string::npos)
        << gate.out;
    EXPECT_NE(gate.out.find("never planned " + std::to_string(unplanned)), std::string::npos)
        << gate.out;
    auto expect = e2e::run({"gate", "--db", db.string(), "--expect", "0", "--group", "a/raw/32"});
    EXPECT_NE(expect.out.find(std::to_string(unplanned) + " requests its run asked for were never "
                                                          "planned"),
              std::string::npos)
        << expect.out;
    auto summary = e2e::run({"summary", "--db", db.string()});
    EXPECT_NE(summary.out.find("a/raw/32: " + std::to_string(unplanned) +
                               " requests a run asked "
                               "for were never planned"),
              std::string::npos)
        << summary.out;
    // The stalled requests were planned and never answered: counted as err
    // in the breakdown, which a reader took for the server's errors. The
    // summary, its JSON and the report's headline give both counts.
    const int unsent =
        std::stoi(query(db, "SELECT count(*) FROM requests WHERE response_id IS NULL"));
    ASSERT_GT(unsent, 0);
    EXPECT_NE(
        summary.out.find("a/raw/32: " + std::to_string(unsent) +
                         " planned requests without a response (never sent, or in flight, "
                         "when a run stopped, or a run still runs) count as err above: run the "
                         "command that asked for them again"),
        std::string::npos)
        << summary.out;
    auto json = e2e::run({"summary", "--db", db.string(), "--format", "json"});
    ASSERT_EQ(json.exit_code, 0) << json.err;
    const auto groups = nlohmann::json::parse(json.out)["completeness"];
    ASSERT_EQ(groups.size(), 1u) << json.out;
    EXPECT_EQ(groups[0]["requests"], planned);
    EXPECT_EQ(groups[0]["not_sent"], unsent);
    EXPECT_EQ(groups[0]["without_success"], unsent);
    EXPECT_EQ(groups[0]["never_planned"], unplanned);
    EXPECT_EQ(groups[0]["shards_not_run"], 0);
    auto report = e2e::run({"report", "--db", db.string(), "--out", (dir / "report").string()});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    const std::string lacks =
        "The database lacks part of what its runs asked: a/raw/32 has " + std::to_string(unsent) +
        " planned requests without a response (never sent, or in flight when a run stopped), " +
        std::to_string(unplanned) +
        " requests never planned (the run stopped first); requests without a response count as "
        "wrong answers (in a comparison only the candidate's: the baseline's are left out), the "
        "others count nowhere: run the command that asked for them again.";
    EXPECT_NE(e2e::slurp(dir / "report" / "report.md").find(lacks), std::string::npos);
    const auto report_json = nlohmann::json::parse(e2e::slurp(dir / "report" / "summary.json"));
    EXPECT_EQ(report_json["headline_sentences"][0], lacks);
    EXPECT_EQ(report_json["summary"]["completeness"], groups);

    // Resumed to the end on a server that answers (with more connections:
    // the same requests), nothing is missing.
    e2e::Sim a;
    args[2] = "a=" + a.url();
    args[10] = "256";
    auto o = e2e::run(args);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto done = e2e::run({"gate", "--db", db.string(), "--require-complete"});
    EXPECT_EQ(done.exit_code, 0) << done.out << done.err;
    EXPECT_EQ(e2e::run({"summary", "--db", db.string()}).out.find("never planned"),
              std::string::npos);
    EXPECT_EQ(e2e::run({"summary", "--db", db.string()}).out.find("never sent"), std::string::npos);
    report = e2e::run({"report", "--db", db.string(), "--out", (dir / "done").string()});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    EXPECT_EQ(e2e::slurp(dir / "done" / "report.md").find("lacks"), std::string::npos);
}

TEST(RunBadInput, MalformedDatasetLineNamesFileAndLine) {
    auto dir = e2e::scratch("malformed");
    auto test = dir / "test.jsonl";
    std::ofstream(test)
        << "{\"question\": \"Q1?\", \"answer\": \"#### 1\"}\n{\"question\": oops}\n";
    std::ofstream(dir / "train.jsonl") << "{\"question\": \"E?\", \"answer\": \"#### 2\"}\n";
    auto o = e2e::run({"run", "--server", "a=http://127.0.0.1:9", "--dataset", test.string(),
                       "--db", (dir / "r.sqlite").string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find(test.string() + ":2"), std::string::npos) << o.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "r.sqlite")) << "nothing may be sent or stored";
}

// No value falls back to a default: an empty one, or an empty item in a
// comma list, is one line and exit 2, with nothing created. An audit's
// `--db ""` wrote ./diffeval.sqlite, `--api-key-env ""` sent no key, and
// `--max-tokens 256,,1024` ran 256 and 1024.
TEST(RunBadInput, EmptyValuesAreRefusedNotDefaulted) {
    auto dir = e2e::scratch("empty-values");
    const std::string url = "a=http://127.0.0.1:9";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"run", "--server", url, "--db", ""}, "--db '': empty; give a value"},
        {{"run", "--server", url, "--api-key-env", ""}, "--api-key-env '': empty"},
        {{"run", "--server", url, "--repeats", ""}, "--repeats '': empty"},
        {{"run", "--server", url, "--max-tokens", "256,,1024"},
         "--max-tokens '256,,1024': an empty item in the list"},
        {{"run", "--server", url, "--framing", ",raw"}, "--framing ',raw': an empty item"},
        {{"summary", "--db", ""}, "--db '': empty"},
        {{"report", "--format", "", "--out", (dir / "r").string()}, "--format '': empty"},
        {{"diff", "", "b"}, "is empty; give a value"},
    };
    for (const auto& [args, says] : cases) {
        auto with_db = args;
        if (args[0] == "run" && std::find(args.begin(), args.end(), "--db") == args.end()) {
            with_db.insert(with_db.end(), {"--db", (dir / "r.sqlite").string()});
        }
        auto o = e2e::run(with_db);
        EXPECT_EQ(o.exit_code, 2) << args[1] << ": " << o.err;
        EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    }
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "nothing may be created";
}

// A number is the plain decimal text typed, within range, named as typed:
// CLI11 alone read 0x10 as 16, -1 for an unsigned flag as 2^64 - 1, and
// nan, and printed 1e400 as "inf"; a flag given twice said "At Most 1
// required but received 2".
TEST(RunBadInput, NumbersAreReadAsTyped) {
    const std::string url = "a=http://127.0.0.1:9";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"run", "--server", url, "--repeats", "0x10"},
         "--repeats '0x10': expected a whole number"},
        {{"run", "--server", url, "--timeout", "nan"}, "--timeout 'nan': expected a number"},
        {{"run", "--server", url, "--timeout", "1e400"},
         "--timeout '1e400': too large a number for this flag"},
        {{"run", "--server", url, "--max-response-bytes", "99999999999999999999"},
         "--max-response-bytes '99999999999999999999': too large a number"},
        {{"diff", "a", "b", "--seed", "-1"},
         "--seed '-1': expected a whole number, not a negative one"},
        {{"diff", "a", "b", "--resamples", "-1"},
         "--resamples '-1': expected a whole number, not a negative one"},
        {{"sim", "--fault-http-500", "nan"}, "--fault-http-500 'nan': expected a number"},
        {{"run", "--server", url, "--limit", "3", "--limit", "4"},
         "--limit given more than once; give it once"},
        // A sign is a minus alone, and no number is padded: flags read as
        // text (a list, "auto", I/N) took " 256", "+4" and "0 /3".
        {{"run", "--server", url, "--limit", "+3"}, "--limit '+3': expected a whole number"},
        {{"run", "--server", url, "--timeout", "+5"}, "--timeout '+5': expected a number"},
        {{"run", "--server", url, "--max-tokens", " 256"},
         "--max-tokens ' 256': expected integers such as 256,1024"},
        {{"run", "--server", url, "--max-tokens", "256, 512"},
         "--max-tokens ' 512': expected integers such as 256,1024"},
        {{"run", "--server", url, "--max-tokens", "+256"},
         "--max-tokens '+256': expected integers such as 256,1024"},
        {{"run", "--server", url, "--concurrency", " 4"},
         "--concurrency: ' 4' is not a number from 1 to"},
        {{"run", "--server", url, "--concurrency", "+4"},
         "--concurrency: '+4' is not a number from 1 to"},
        {{"run", "--server", url, "--shard", " 0/3"}, "--shard ' 0/3': expected I/N"},
        {{"run", "--server", url, "--shard", "0 /3"}, "--shard '0 /3': expected I/N"},
        {{"run", "--server", url, "--shard", "0/ 3"}, "--shard '0/ 3': expected I/N"},
        {{"run", "--server", url, "--shard", "+0/+3"}, "--shard '+0/+3': expected I/N"},
        {{"run", "--server", url, "--shard", "-0/3"}, "--shard '-0/3': expected I/N"},
        // Said as typed, not through a double (...807 printed as ...808) or
        // as the bound CLI11 clamped a signed flag's value to; nearer 0
        // than a double holds is too small, not 0 and not too large (an
        // outside audit).
        {{"run", "--server", url, "--limit", "9223372036854775807"},
         "--limit 9223372036854775807: must be between 1 and 2147483647"},
        {{"run", "--server", url, "--repeats", "12345678901234567"},
         "--repeats 12345678901234567: must be between 1 and 1000000"},
        {{"run", "--server", url, "--limit", "18446744073709551615"},
         "--limit '18446744073709551615': too large a number for this flag"},
        {{"run", "--server", url, "--max-tokens", "99999999999"},
         "--max-tokens 99999999999: must be between 1 and 10000000"},
        {{"run", "--server", url, "--timeout", "1e-400"},
         "--timeout '1e-400': too small a number for this flag"},
        {{"plan", "a/raw", "b/raw", "--alpha", "4.9e-324"},
         "--alpha '4.9e-324': too small a number for this flag"},
        {{"plan", "a/raw", "b/raw", "--alpha", "5e-17"},
         "--alpha 5e-17: too small to leave a confidence below 1"},
        {{"diff", "a/raw/99999999999999999999", "b"},
         "max_tokens 99999999999999999999 is larger than any token limit"},
    };
    for (const auto& [args, says] : cases) {
        auto o = e2e::run(args);
        EXPECT_EQ(o.exit_code, 2) << args[0] << ": " << o.err;
        EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    }
}

// Framings that take no shot need no few-shot file: a test file with no
// train.jsonl beside it ran with --num-shots 0 only once one was given
// (an outside audit). One shot or more still needs the file; the demo,
// which has no --fewshot-from, says what it needs in its own words.
TEST(RunBadInput, ZeroShotsNeedNoFewShotFile) {
    auto dir = e2e::scratch("zero-shots");
    e2e::Sim sim;
    const auto test = dir / "mine.jsonl";
    std::ofstream(test) << R"({"question": "Tom has 3 apples and buys 2 more. How many?", )"
                        << R"("answer": "3+2=5\n#### 5"})"
                        << "\n";
    auto o = e2e::run({"run", "--server", "c=" + sim.url(), "--dataset", test.string(),
                       "--num-shots", "0", "--db", (dir / "r.sqlite").string(), "--quiet"});
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(query(dir / "r.sqlite", "SELECT count(*) FROM responses WHERE ok = 1"), "2");
    auto shots = e2e::run({"run", "--server", "c=" + sim.url(), "--dataset", test.string(), "--db",
                           (dir / "s.sqlite").string(), "--quiet"});
    EXPECT_EQ(shots.exit_code, 2) << shots.err;
    EXPECT_NE(shots.err.find("no few-shot examples for " + test.string() + ": pass --fewshot-from"),
              std::string::npos)
        << shots.err;
    auto demo = e2e::run({"demo", "--dataset", test.string(), "--out", (dir / "d").string()});
    EXPECT_EQ(demo.exit_code, 2) << demo.err;
    EXPECT_EQ(std::count(demo.err.begin(), demo.err.end(), '\n'), 1) << demo.err;
    EXPECT_NE(demo.err.find("the demo's framings take their few-shot examples from train.jsonl "
                            "beside it"),
              std::string::npos)
        << demo.err;
    EXPECT_EQ(demo.err.find("--fewshot-from"), std::string::npos) << demo.err;
}

// A framing that always names the model has none without preflight or
// --model: exit 2 with nothing stored (an audit's run created a 416 KiB
// database holding a failed run, a server and 48 questions).
TEST(RunBadInput, AChatFramingWithoutAModelStoresNothing) {
    auto dir = e2e::scratch("no-model");
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "e=http://127.0.0.1:9", "--no-preflight", "--limit", "2",
                       "--db", db.string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("framing 'chat' needs a model name for server 'e': pass --model"),
              std::string::npos)
        << o.err;
    EXPECT_FALSE(std::filesystem::exists(db));
}

// Requests to a port nothing listens on were never sent: "3 sent" said
// they were (reliability audit). They are stored as failures, and counted so.
TEST(RunBadInput, RequestsRefusedAtConnectAreNotCountedSent) {
    auto dir = e2e::scratch("refused-unsent");
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "e=http://127.0.0.1:9", "--no-preflight", "--framing",
                       "raw", "--limit", "3", "--retries", "1", "--retry-backoff-ms", "1", "--db",
                       db.string()});
    EXPECT_EQ(o.exit_code, 1) << o.err;
    EXPECT_NE(o.err.find("3 requests planned, 0 already stored (skipped), 0 sent, 3 never sent "
                         "(every attempt refused at connect; stored as failed)"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 0"), "3");
}

TEST(RunBadInput, UnknownFramingListsKnownOnes) {
    auto o = e2e::run({"run", "--server", "a=http://127.0.0.1:9", "--framing", "chta"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("unknown framing 'chta' (did you mean 'chat'?)"), std::string::npos)
        << o.err;
}

TEST(RunBadInput, BadUrlIsRejected) {
    auto o = e2e::run({"run", "--server", "a=gpu1:8000"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("'gpu1:8000' is not an http:// or https:// URL"), std::string::npos)
        << o.err;
    auto no_eq = e2e::run({"run", "--server", "http://gpu1:8000"});
    EXPECT_EQ(no_eq.exit_code, 2);
    EXPECT_NE(no_eq.err.find("expected NAME=URL"), std::string::npos) << no_eq.err;
    // A scheme alone is named as typed, as a URL with no host (the trailing
    // slashes trimmed from a URL once cut it to 'http:', "not an http:// URL").
    auto no_host = e2e::run({"run", "--server", "a=http://"});
    EXPECT_EQ(no_host.exit_code, 2);
    EXPECT_NE(no_host.err.find("'http://' is not a valid URL"), std::string::npos) << no_host.err;
}

TEST(RunBadInput, UnreachableServerFailsFastAndKeepsStoredData) {
    auto dir = e2e::scratch("unreachable");
    e2e::Sim a;
    auto db = (dir / "r.sqlite").string();
    ASSERT_EQ(e2e::run({"run", "--server", "a=" + a.url(), "--limit", "3", "--framing", "raw",
                        "--db", db})
                  .exit_code,
              0);
    // Port 9 (discard) has no listener here.
    auto o = e2e::run({"run", "--server", "a=" + a.url(), "--server", "b=http://127.0.0.1:9",
                       "--limit", "3", "--framing", "raw", "--db", db});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("server 'b' at http://127.0.0.1:9 is unreachable"), std::string::npos)
        << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), "3");
}

TEST(RunBadInput, UnknownModelFailsAtPreflight) {
    e2e::Sim a;
    auto o =
        e2e::run({"run", "--server", "a=" + a.url(), "--model", "no/such-model", "--limit", "1"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("does not serve model 'no/such-model'"), std::string::npos) << o.err;
}

TEST(RunBadInput, NonJsonResponsesAreStoredAsErrorsWithTheirBody) {
    auto dir = e2e::scratch("nonjson");
    e2e::Sim a({"--profile", profile_file(dir, "garbled", "[faults]\nmalformed_json = 1.0\n")});
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + a.url(), "--framing", "raw", "--limit", "4",
                       "--retries", "1", "--retry-backoff-ms", "1", "--db", db.string()});
    EXPECT_EQ(o.exit_code, 1) << o.err;
    EXPECT_NE(o.out.find("4 requests have no successful response"), std::string::npos) << o.out;
    // Retried like a 5xx, then kept as an error with the raw body.
    EXPECT_EQ(query(db,
                    "SELECT count(*) FROM v_responses WHERE ok = 0 AND error_kind = 'parse' AND "
                    "status = 200 AND attempts = 2 AND length(response_json) > 0"),
              "4");
}

TEST(RunBadInput, Http500StormIsRetriedThenStoredAsErrors) {
    auto dir = e2e::scratch("storm");
    e2e::Sim a({"--profile", profile_file(dir, "storm", "[faults]\nhttp_500 = 1.0\n")});
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + a.url(), "--framing", "raw", "--limit", "3",
                       "--retries", "2", "--retry-backoff-ms", "1", "--db", db.string()});
    EXPECT_EQ(o.exit_code, 1) << o.err;
    EXPECT_EQ(
        query(db, "SELECT count(*) FROM v_responses WHERE ok = 0 AND status = 500 AND attempts = 3 "
                  "AND error LIKE 'HTTP 500: %'"),
        "3");
    EXPECT_EQ(query(db, "SELECT status FROM runs"), "incomplete");
    // The closing summary says why, not only how many.
    EXPECT_NE(o.out.find("3 requests have no successful response"), std::string::npos) << o.out;
    const auto kind = query(db, "SELECT error_kind FROM responses LIMIT 1");
    EXPECT_NE(o.out.find("  3 x " + kind + ": HTTP 500: "), std::string::npos) << o.out;
}

TEST(RunBadInput, ApiKeyIsSentButNeverStoredOrPrinted) {
    auto dir = e2e::scratch("apikey");
    e2e::Sim a;
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + a.url(), "--api-key-env", "DE_TEST_KEY", "--limit",
                       "2", "--framing", "raw", "--db", db.string()},
                      {"DE_TEST_KEY=sk-secret-4242"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out.find("sk-secret"), std::string::npos);
    EXPECT_EQ(o.err.find("sk-secret"), std::string::npos);
    std::ifstream in(db, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(bytes.find("sk-secret"), std::string::npos);
    // The run records which variable the key came from, from the flag as
    // from a config file (docs audit: only a config's was recorded).
    EXPECT_EQ(query(db, "SELECT json_extract(config_json, '$.servers[0].api_key_env') FROM runs"),
              "DE_TEST_KEY");
    auto missing = e2e::run({"run", "--server", "a=" + a.url(), "--api-key-env", "DE_UNSET_KEY"});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_NE(missing.err.find("DE_UNSET_KEY is not set"), std::string::npos) << missing.err;
}

// Ctrl-C, and a closed terminal or ssh session (SIGHUP), which killed the
// run without a word: answers not yet committed lost, the run left
// `running`, and answered requests sent again by the resume (a user-side
// audit: 91 sent twice at --concurrency 32).
class RunStopSignal : public ::testing::TestWithParam<int> {};

TEST_P(RunStopSignal, StopsCleanlyAndTheRerunCompletes) {
    auto dir = e2e::scratch("stop-signal-" + std::to_string(GetParam()));
    e2e::Sim a({"--profile", profile_file(dir, "slow", "[latency]\nttft_ms = 10\n")});
    auto db = dir / "r.sqlite";
    std::vector<std::string> args = {
        "run",       "--server", "a=" + a.url(),  "--framing", "raw,chat", "--max-tokens", "32",
        "--repeats", "2",        "--concurrency", "2",         "--db",     db.string()};
    e2e::Child child(args);
    for (int i = 0; i < 1000; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        try {
            if (std::filesystem::exists(db) &&
                std::stoi("0" + query(db, "SELECT count(*) FROM responses")) >= 10) {
                break;
            }
        } catch (const std::runtime_error&) {
        }
    }
    EXPECT_EQ(child.stop(GetParam()), 130) << child.err();
    EXPECT_NE(child.out().find("interrupted: run the same command again"), std::string::npos)
        << child.out();
    // What it says it sent is what the server received, those in flight
    // when it stopped included.
    const auto counts = nlohmann::json::parse(a.stats())["requests"];
    const int received = counts.value("completions", 0) + counts.value("chat", 0);
    // (A request handed to the client as the run stopped may not have
    // left: the count is at least what the server received.)
    std::smatch m;
    const std::string err = child.err();
    ASSERT_TRUE(std::regex_search(err, m, std::regex(R"(\(skipped\), (\d+) sent)"))) << err;
    EXPECT_GE(std::stoi(m[1]), received) << err;
    EXPECT_LE(std::stoi(m[1]), received + 2) << err; // at most --concurrency unsent
    EXPECT_EQ(query(db, "SELECT status FROM runs"), "interrupted");
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses WHERE ok = 0"), "0");
    EXPECT_EQ(query(db, "PRAGMA integrity_check"), "ok");
    EXPECT_EQ(query(db, "SELECT count(*) FROM pragma_foreign_key_check"), "0");
    auto o = e2e::run(args);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "192");
}

INSTANTIATE_TEST_SUITE_P(Run, RunStopSignal, ::testing::Values(SIGINT, SIGHUP),
                         [](const auto& test_info) {
                             return test_info.param == SIGINT ? "Int" : "Hup";
                         });

namespace {

// Exit status of `diffeval ARGS` run with standard output on /dev/null and
// standard error on `err_fd`, or closed when it is -1.
int run_with_stderr(const std::vector<std::string>& args, int err_fd) {
    std::vector<std::string> argv_strings = {e2e::binary()};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int devnull = ::open("/dev/null", O_WRONLY);
        ::dup2(devnull, 1);
        if (err_fd >= 0) {
            ::dup2(err_fd, 2);
        } else {
            ::close(2);
        }
        std::vector<char*> argv;
        for (auto& x : argv_strings) {
            argv.push_back(x.data());
        }
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace

// A reader of the run's output that went away (`diffeval run 2>&1 | head`)
// made the next progress line raise SIGPIPE, which killed the run mid-send
// (exit 141, no word, the run left `running`). Here every write to stderr
// meets a pipe nobody reads: the run still ends and stores everything.
TEST(Run, AReaderThatWentAwayDoesNotStopTheRun) {
    auto dir = e2e::scratch("run-sigpipe");
    e2e::Sim a;
    const auto db = (dir / "r.sqlite").string();
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    ::close(fds[0]); // nobody will read
    EXPECT_EQ(run_with_stderr({"run", "--server", "a=" + a.url(), "--framing", "raw,chat",
                               "--limit", "3", "--db", db},
                              fds[1]),
              0);
    ::close(fds[1]);
    EXPECT_EQ(query(db, "SELECT status FROM runs"), "complete");
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses WHERE ok = 1"), "6");
    EXPECT_EQ(query(db, "SELECT count(*) FROM classifications"), "6"); // the scoring stage ran
}

// With standard error closed (`2>&-`) the lock file took descriptor 2 and
// the run's progress lines were written into it, over the record of who
// holds the database; a second run then named that text as the holder.
TEST(Run, AClosedStandardErrorIsNoFileTheRunOpens) {
    auto dir = e2e::scratch("run-closed-stderr");
    e2e::Sim a;
    const auto db = (dir / "r.sqlite").string();
    EXPECT_EQ(run_with_stderr({"run", "--server", "a=" + a.url(), "--limit", "2", "--db", db}, -1),
              0);
    std::ifstream in(db + ".lock");
    const std::string lock((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(lock.find("planned"), std::string::npos) << lock; // no progress line
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses WHERE ok = 1"), "4");
}

// A URL given with the API's /v1, as OpenAI clients take it: diffeval asked
// for /v1/v1/models and said "GET /v1/models answered HTTP 404", a path the
// server serves (a user-side audit).
TEST(Run, AServerUrlEndingInV1SaysToDropIt) {
    e2e::Sim sim;
    auto dir = e2e::scratch("run-url-v1");
    for (const std::string suffix : {"/v1", "/v1/"}) {
        auto o = e2e::run({"run", "--server", "a=" + sim.url() + suffix, "--limit", "1", "--db",
                           (dir / "r.sqlite").string()});
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_NE(o.err.find("server 'a': GET /v1/v1/models answered HTTP 404"), std::string::npos)
            << o.err;
        EXPECT_NE(o.err.find("give the URL without its /v1"), std::string::npos) << o.err;
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "r.sqlite"));
}

// A password in a server's URL is sent (Basic authentication) and kept out
// of the database: the stored URL and the run's configuration hold
// [REDACTED] where it was.
TEST(Run, APasswordInAServersUrlIsNotStored) {
    e2e::Sim sim;
    auto dir = e2e::scratch("run-url-password");
    auto db = dir / "r.sqlite";
    const std::string password = "pw-0123456789-secret";
    auto url = sim.url();
    url.insert(url.find("://") + 3, "ci:" + password + "@");
    auto o = e2e::run({"run", "--server", "a=" + url, "--framing", "raw", "--limit", "2", "--db",
                       db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(e2e::query(db, "SELECT count(*) FROM responses WHERE ok = 1"), "2");
    EXPECT_EQ(e2e::query(db, "SELECT url LIKE '%ci:[REDACTED]@%' FROM servers"), "1");
    EXPECT_EQ(
        e2e::query(db, "SELECT count(*) FROM runs WHERE config_json LIKE '%" + password + "%'"),
        "0");
    EXPECT_EQ(e2e::query(db, "SELECT count(*) FROM servers WHERE url LIKE '%" + password + "%'"),
              "0");
    EXPECT_EQ(o.err.find(password), std::string::npos) << o.err;
}

// Database names SQLite reads as something else, and files planted where
// the lock goes: a run stored into ':memory:' and lost everything, one
// through 'file:r.sqlite' wrote r.sqlite under another name's lock, and a
// lock file linked elsewhere (/etc/passwd, the database itself) was
// truncated and written over.
TEST(Run, SpecialDatabaseNamesAndPlantedLockFilesLoseNothing) {
    auto dir = e2e::scratch("run-db-names");
    e2e::Sim sim;
    // Relative names, as a user types them: run from the scratch directory.
    const auto run_in = [&](const std::string& db) {
        const auto here = std::filesystem::current_path();
        std::filesystem::current_path(dir);
        auto o = e2e::run({"run", "--server", "s=" + sim.url(), "--framing", "raw", "--limit", "2",
                           "--db", db, "--quiet"});
        std::filesystem::current_path(here);
        return o;
    };
    // ':memory:' and 'file:' are file names like any other.
    for (const std::string name : {":memory:", "file:u.sqlite"}) {
        auto o = run_in(name);
        ASSERT_EQ(o.exit_code, 0) << name << o.err;
        EXPECT_EQ(e2e::query(dir / name, "SELECT count(*) FROM responses"), "2") << name;
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "u.sqlite"));

    // A lock file that is a link, or another name of a file, is refused and
    // the file it names is left as it was.
    const auto victim = dir / "victim.txt";
    std::ofstream(victim) << "precious\n";
    std::filesystem::create_symlink(victim, dir / "l.sqlite.lock");
    auto linked = run_in("l.sqlite");
    EXPECT_EQ(linked.exit_code, 2) << linked.err;
    EXPECT_NE(linked.err.find("the lock file"), std::string::npos) << linked.err;
    EXPECT_NE(linked.err.find("is a symbolic link"), std::string::npos) << linked.err;
    EXPECT_EQ(e2e::slurp(victim), "precious\n");
    std::filesystem::create_hard_link(victim, dir / "h.sqlite.lock");
    auto hard = run_in("h.sqlite");
    EXPECT_EQ(hard.exit_code, 2) << hard.err;
    EXPECT_EQ(e2e::slurp(victim), "precious\n");

    // A database with two names would take two locks: refused for writing.
    ASSERT_EQ(run_in("one.sqlite").exit_code, 0);
    std::filesystem::create_hard_link(dir / "one.sqlite", dir / "two.sqlite");
    auto twice = run_in("two.sqlite");
    EXPECT_EQ(twice.exit_code, 2) << twice.err;
    EXPECT_NE(twice.err.find("has 2 names (hard links)"), std::string::npos) << twice.err;
    EXPECT_EQ(std::count(twice.err.begin(), twice.err.end(), '\n'), 1) << twice.err;
    auto read = e2e::run({"summary", "--db", (dir / "two.sqlite").string()});
    EXPECT_EQ(read.exit_code, 0) << read.err; // reading it is no harm
}

namespace {

void write_jsonl(const std::filesystem::path& path, const std::vector<nlohmann::json>& lines) {
    std::ofstream out(path);
    for (const auto& l : lines) {
        out << l.dump() << '\n';
    }
}

// `lines` as the dataset file `test`, with the sample set's train.jsonl
// beside it for the few-shot examples.
void write_dataset(const std::filesystem::path& test, const std::vector<nlohmann::json>& lines) {
    const auto sample = std::filesystem::path(DIFFEVAL_SOURCE_DIR) / "datasets/sample";
    std::filesystem::create_directories(test.parent_path());
    std::filesystem::copy_file(sample / "train.jsonl", test.parent_path() / "train.jsonl",
                               std::filesystem::copy_options::overwrite_existing);
    write_jsonl(test, lines);
}

// The sample set copied as `dir`/test.jsonl (write_dataset); its test
// questions as JSON lines to edit.
std::vector<nlohmann::json> copy_sample_set(const std::filesystem::path& dir) {
    const auto sample = std::filesystem::path(DIFFEVAL_SOURCE_DIR) / "datasets/sample";
    std::vector<nlohmann::json> lines;
    std::istringstream in(e2e::slurp(sample / "test.jsonl"));
    for (std::string line; std::getline(in, line);) {
        lines.push_back(nlohmann::json::parse(line));
    }
    write_dataset(dir / "test.jsonl", lines);
    return lines;
}

// A quiet raw run of server `a` on dataset file `test` into `db`, then
// `more`; its seventh argument (index 6) is the dataset.
std::vector<std::string> raw_run(const e2e::Sim& a, const std::filesystem::path& test,
                                 const std::string& db, const std::vector<std::string>& more = {}) {
    std::vector<std::string> args = {"run", "--server",  "a=" + a.url(), "--framing",
                                     "raw", "--dataset", test.string(),  "--db",
                                     db,    "--quiet"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

int completions_served(e2e::Sim& sim) {
    return nlohmann::json::parse(sim.stats())["requests"]["completions"].get<int>();
}

} // namespace

// A dataset file edited after a run stored its questions: resumed with more
// repeats, an audit's run sent the unchanged questions' new repeats (64
// requests) and then stopped at the edited one, exit 2, saying nothing of
// the 51 responses it had stored. The edit is found before anything is sent.
TEST(RunConflict, AnEditedDatasetIsRefusedBeforeAnythingIsSent) {
    auto dir = e2e::scratch("edited-dataset");
    e2e::Sim a;
    auto lines = copy_sample_set(dir);
    const auto test = dir / "test.jsonl";
    const auto db = (dir / "r.sqlite").string();
    const auto args = raw_run(a, test, db);
    ASSERT_EQ(e2e::run(args).exit_code, 0);
    const auto sent = completions_served(a);
    const auto runs = query(db, "SELECT group_concat(status) FROM runs");

    lines[40]["question"] = lines[40]["question"].get<std::string>() + " Think twice.";
    write_jsonl(test, lines);
    auto more = args;
    more.insert(more.end(), {"--repeats", "3"});
    auto o = e2e::run(more);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find(db + " holds question 40 of dataset " + test.string() +
                         " with another text than the dataset now has"),
              std::string::npos)
        << o.err;
    EXPECT_NE(o.err.find("another --db"), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(completions_served(a), sent);
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "48");
    EXPECT_EQ(query(db, "SELECT group_concat(status) FROM runs"), runs);

    // The same edit in another file (another dataset name): a group holds
    // one dataset, so it is refused at planning, before sending too.
    const auto other = dir / "other" / "test.jsonl";
    write_dataset(other, lines);
    more[6] = other.string();
    o = e2e::run(more);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("a/raw/256 holds questions of dataset " + test.string() +
                         ", and this run gives " + other.string() + ": a group holds one dataset"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(completions_served(a), sent);
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "48");
    EXPECT_EQ(query(db, "SELECT group_concat(status) FROM runs"), runs);
}

// A question is its text and its gold answer (questions.question_sha256).
// Another file with the same texts and other answers sends the same bodies:
// an audit's run skipped them all as already stored, called itself complete
// and left them scored against the first file's answers. Refused as another
// dataset in the group; the same file edited in place is refused naming
// both answers. The stored responses are not scored against a gold they
// were not asked for.
TEST(RunConflict, TheSameQuestionsWithOtherGoldAnswersAreRefused) {
    auto dir = e2e::scratch("other-gold");
    e2e::Sim a;
    auto lines = copy_sample_set(dir);
    const auto test = dir / "test.jsonl";
    const auto db = (dir / "r.sqlite").string();
    const auto args = raw_run(a, test, db, {"--limit", "5"});
    ASSERT_EQ(e2e::run(args).exit_code, 0);
    const auto sent = completions_served(a);
    const auto runs = query(db, "SELECT group_concat(status) FROM runs");
    const auto scores = query(db, "SELECT group_concat(correct) FROM scores");
    const auto gold = lines[3]["answer"].get<std::string>();
    const auto gold_number = gold.substr(gold.rfind("####") + 5);

    auto regraded = lines;
    regraded[3]["answer"] = gold.substr(0, gold.rfind("####")) + "#### 99999";
    const auto other = dir / "regraded" / "test.jsonl";
    write_dataset(other, regraded);
    auto again = args;
    again[6] = other.string();
    auto o = e2e::run(again);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("a/raw/256 holds questions of dataset " + test.string() +
                         ", and this run gives " + other.string() + ": a group holds one dataset"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(completions_served(a), sent);
    EXPECT_EQ(query(db, "SELECT group_concat(status) FROM runs"), runs);
    EXPECT_EQ(query(db, "SELECT group_concat(correct) FROM scores"), scores);
    // The same file edited in place: the questions it stored say otherwise.
    write_jsonl(test, regraded);
    o = e2e::run(args);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("holds question 3 of dataset " + test.string() + " with gold answer " +
                         gold_number +
                         ", but the dataset now gives it 99999: the file changed "
                         "since this database stored its questions (or the database itself "
                         "was changed), and the responses stored for it would be counted"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(completions_served(a), sent);
    // A question past --limit 5, never asked, is refused too, without
    // speaking of responses it has none of.
    auto past_limit = lines;
    const auto gold7 = lines[7]["answer"].get<std::string>();
    past_limit[7]["answer"] = gold7.substr(0, gold7.rfind("####")) + "#### 99999";
    write_jsonl(test, past_limit);
    o = e2e::run(args);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("holds question 7 of dataset " + test.string()), std::string::npos)
        << o.err;
    EXPECT_NE(o.err.find("though no request asked it yet"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("responses stored for it"), std::string::npos) << o.err;
    EXPECT_EQ(completions_served(a), sent);
    write_jsonl(test, regraded);
    EXPECT_EQ(query(db, "SELECT group_concat(status) FROM runs"), runs);
    EXPECT_EQ(query(db, "SELECT group_concat(correct) FROM scores"), scores);
    // Nothing of the refused file stays: its questions, stored before the
    // refusal, refused a later run of it, corrected, under a new name
    // ("the responses stored for it would be counted as the new question's").
    EXPECT_EQ(query(db, "SELECT count(*) FROM questions WHERE dataset = '" + other.string() + "'"),
              "0");
    auto corrected = regraded;
    corrected[3]["answer"] = gold.substr(0, gold.rfind("####")) + "#### 99998";
    write_jsonl(other, corrected);
    auto fresh = again;
    fresh[2] = "h=" + a.url();
    auto f = e2e::run(fresh);
    EXPECT_EQ(f.exit_code, 0) << f.err;
}

// The same file read from another path (a checkout elsewhere) is another
// dataset name: an audit's resumed run added its repeats under the second
// name and the summary counted 96 questions of 48, each with uneven
// repeats. Refused before sending, saying to give --dataset as before.
// A framing that draws each question's shots from the pool (lm-eval-chat):
// an edited few-shot example that only new questions draw changed no stored
// body, and a resumed run mixed two pools in one group without a word. The
// pool a run drew from is recorded, and another refused.
TEST(RunConflict, AnEditedFewShotPoolIsRefusedBeforeAnythingIsSent) {
    auto dir = e2e::scratch("edited-pool");
    e2e::Sim a;
    copy_sample_set(dir);
    const auto train = dir / "train.jsonl";
    const auto original = e2e::slurp(train);
    const auto db = (dir / "r.sqlite").string();
    auto run = [&](const std::string& limit) {
        return e2e::run({"run", "--server", "a=" + a.url(), "--framing", "lm-eval-chat",
                         "--dataset", (dir / "test.jsonl").string(), "--limit", limit, "--db", db,
                         "--quiet"});
    };
    ASSERT_EQ(run("3").exit_code, 0);
    const auto sent = completions_served(a);
    // One example's answer reworded, as the audit's "Thus." was.
    std::vector<nlohmann::json> pool;
    std::istringstream in(original);
    for (std::string line; std::getline(in, line);) {
        pool.push_back(nlohmann::json::parse(line));
    }
    auto edited = pool;
    auto& answer = edited.back()["answer"];
    answer = "Thus.\n" + answer.get<std::string>();
    write_jsonl(train, edited);
    auto o = run("4");
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_NE(o.err.find("the few-shot examples of dataset " + (dir / "test.jsonl").string() +
                         " (its train set) differ from those run 1 of " + db +
                         " drew its questions' shots from"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(completions_served(a), sent);
    EXPECT_EQ(query(db, "SELECT count(*) FROM requests"), "3");
    // Restored, the run goes on.
    std::ofstream(train) << original;
    o = run("4");
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "4");
}

TEST(RunConflict, TheSameFileAtAnotherPathIsNotCountedTwice) {
    auto dir = e2e::scratch("same-file-two-paths");
    e2e::Sim a;
    const auto lines = copy_sample_set(dir);
    const auto copy = dir / "elsewhere" / "test.jsonl";
    write_dataset(copy, lines);
    const auto db = (dir / "r.sqlite").string();
    const auto args = raw_run(a, dir / "test.jsonl", db);
    ASSERT_EQ(e2e::run(args).exit_code, 0);
    const auto sent = completions_served(a);
    auto more = args;
    more[6] = copy.string();
    more.insert(more.end(), {"--repeats", "2"});
    auto o = e2e::run(more);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("give --dataset as before if it is the same file"), std::string::npos)
        << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(completions_served(a), sent);
    EXPECT_EQ(query(db, "SELECT count(DISTINCT dataset) FROM requests"), "1");
    // Given as before, the repeats are added to the same 48 questions.
    more[6] = args[6];
    o = e2e::run(more);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto summary = e2e::run({"summary", "--db", db, "--format", "json"});
    const auto group = nlohmann::json::parse(summary.out)["groups"][0];
    EXPECT_EQ(group["questions"], 48);
    EXPECT_EQ(group["repeats"], 2);
    EXPECT_EQ(group["uneven_repeats"], false);
}

// A group an earlier diffeval filled from two files (before a group held
// one dataset): the place of the other file's question 3, whose body is the
// same and whose gold answer is not, is found at planning, before the
// questions before it are sent again, naming both answers.
TEST(RunConflict, AGroupFilledFromTwoFilesIsCheckedAtEveryPlace) {
    auto dir = e2e::scratch("two-files-one-group");
    e2e::Sim a;
    auto lines = copy_sample_set(dir);
    const auto test = dir / "test.jsonl";
    const auto db = (dir / "r.sqlite").string();
    const auto args = raw_run(a, test, db, {"--limit", "5"});
    ASSERT_EQ(e2e::run(args).exit_code, 0);
    e2e::exec(db, "INSERT INTO runs (started_at, dataset, config_json, diffeval_version, status) "
                  "VALUES ('2026-01-01T00:00:00.000', 'older.jsonl', '{}', '0', 'complete');"
                  "INSERT INTO questions (dataset, question_idx, question, answer, "
                  "question_sha256) SELECT 'older.jsonl', question_idx, question, answer || '0', "
                  "'older' FROM questions;"
                  "UPDATE requests SET dataset = 'older.jsonl', question_sha256 = 'older' WHERE "
                  "question_idx = 3");
    const auto sent = completions_served(a);
    const auto gold = lines[3]["answer"].get<std::string>();
    const auto gold_number = gold.substr(gold.rfind("####") + 5);
    auto more = args;
    more.insert(more.end(), {"--repeats", "2"});
    auto o = e2e::run(more);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("a/raw/256 holds question 3 of dataset older.jsonl with gold answer " +
                         gold_number + "0; " + test.string() +
                         " gives the same question the gold answer " + gold_number),
              std::string::npos)
        << o.err;
    EXPECT_EQ(completions_served(a), sent);
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "5");
}
