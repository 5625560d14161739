// `diffeval run --shard` and `diffeval merge` end to end: shards merged equal
// one unsharded run row for row (their bodies' bytes too, stored after a
// shared prefix), merging is idempotent, and a conflict is
// one line, exit 2, with the output file left as it was.
#include "e2e.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

using e2e::query;
using e2e::query_rows;

namespace {

// Every stored column but surrogate ids and timings, keyed by request key.
// The server's response id names one send (the simulator numbers repeated
// sightings of a body), so it is masked like a timing.
const char* k_rows =
    "SELECT q.request_key, q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, "
    "q.dataset, q.body_sha256, q.request_json, r.ok, r.status, json_remove(r.response_json, "
    "'$.id'), r.text, "
    "r.reasoning, r.finish_reason, r.stop_reason, typeof(r.stop_reason), r.prompt_tokens, "
    "r.completion_tokens, r.attempts, r.streamed, r.error, r.error_kind "
    "FROM v_requests q LEFT JOIN responses r ON r.response_id = q.response_id "
    "ORDER BY q.request_key";

std::vector<std::string> run_args(const e2e::Sim& sim, const std::filesystem::path& db) {
    return {"run",       "--server",         "default=" + sim.url(),
            "--framing", "raw,lm-eval-chat", "--repeats",
            "2",         "--limit",          "7",
            "--dataset", "sample",           "--db",
            db.string(), "--quiet"};
}

// Shard `which` ("I/N") of run_args' run into `db`.
std::filesystem::path run_shard(const e2e::Sim& sim, const std::filesystem::path& db,
                                const std::string& which) {
    auto args = run_args(sim, db);
    args.insert(args.end(), {"--shard", which});
    EXPECT_EQ(e2e::run(args).exit_code, 0);
    return db;
}

} // namespace

TEST(Merge, ShardedRunsMergedEqualOneUnshardedRunRowForRow) {
    auto dir = e2e::scratch("merge-shards");
    e2e::Sim sim;
    auto whole = dir / "whole.sqlite";
    auto o = e2e::run(run_args(sim, whole));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    std::vector<std::string> merge = {"merge", (dir / "merged.sqlite").string()};
    std::set<std::string> questions_seen;
    for (int i = 0; i < 3; ++i) {
        auto shard = dir / ("shard" + std::to_string(i) + ".sqlite");
        auto args = run_args(sim, shard);
        args.push_back("--shard");
        args.push_back(std::to_string(i) + "/3");
        auto s = e2e::run(args);
        ASSERT_EQ(s.exit_code, 0) << s.err;
        // By question: a shard holds every framing and repeat of its questions.
        for (const auto& q : query_rows(shard, "SELECT DISTINCT question_idx FROM requests")) {
            EXPECT_EQ(std::stoi(q) % 3, i) << "shard " << i;
            EXPECT_TRUE(questions_seen.insert(q).second) << "question " << q << " in two shards";
        }
        EXPECT_EQ(query(shard, "SELECT count(*) FROM requests GROUP BY question_idx LIMIT 1"), "4");
        merge.push_back(shard.string());
    }
    auto m = e2e::run(merge);
    ASSERT_EQ(m.exit_code, 0) << m.err;
    EXPECT_NE(m.out.find("28 requests and 28 responses added"), std::string::npos) << m.out;
    auto merged = dir / "merged.sqlite";
    EXPECT_EQ(query_rows(merged, k_rows), query_rows(whole, k_rows));
    EXPECT_EQ(query(merged, "SELECT count(*) FROM requests"), "28");
    // Each distinct body once, as in the whole run (schema 9).
    EXPECT_EQ(query(merged, "SELECT count(*) FROM request_bodies"),
              query(whole, "SELECT count(*) FROM request_bodies"));
    // raw's shared prefix once, though every shard stored it (schema 12),
    // and its 7 bodies after it; lm-eval-chat draws each question's shots,
    // so its 7 bodies share no prefix and are stored whole.
    EXPECT_EQ(query(merged, "SELECT count(*) FROM body_prefixes"), "1");
    EXPECT_EQ(query_rows(merged, "SELECT q.framing, b.prefix_id IS NULL, count(*) FROM requests q "
                                 "JOIN request_bodies b USING (body_id) WHERE q.repeat = 0 "
                                 "GROUP BY 1, 2 ORDER BY 1"),
              (std::vector<std::string>{"lm-eval-chat|1|7", "raw|0|7"}));
    EXPECT_EQ(query_rows(merged, "SELECT * FROM questions ORDER BY dataset, question_idx"),
              query_rows(whole, "SELECT * FROM questions ORDER BY dataset, question_idx"));
    EXPECT_EQ(query_rows(merged, "SELECT name, url, model FROM servers"),
              query_rows(whole, "SELECT name, url, model FROM servers"));
    EXPECT_EQ(query(merged, "SELECT count(*) FROM runs"), "3");
    // The merged file reads like any run: the same summary as the whole run,
    // up to its latency table.
    auto a = e2e::run({"summary", "--db", merged.string()});
    auto b = e2e::run({"summary", "--db", whole.string()});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_NE(a.out.find("p50"), std::string::npos) << a.out;
    EXPECT_EQ(a.out.substr(0, a.out.find("p50")), b.out.substr(0, b.out.find("p50")));

    // Idempotent: merging the same shards again adds nothing.
    auto again = e2e::run(merge);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("0 requests and 0 responses added"), std::string::npos) << again.out;
    EXPECT_EQ(query_rows(merged, k_rows), query_rows(whole, k_rows));
    EXPECT_EQ(query(merged, "SELECT count(*) FROM responses"), "28");
    EXPECT_EQ(query(merged, "SELECT count(*) FROM request_bodies"),
              query(whole, "SELECT count(*) FROM request_bodies"));
    EXPECT_EQ(query(merged, "SELECT count(*) FROM body_prefixes"), "1");
    EXPECT_EQ(query(merged, "SELECT count(*) FROM runs"), "3");
    EXPECT_FALSE(std::filesystem::exists(merged.string() + ".merge-tmp"));
}

// A shard merged while its run still wrote it, merged again once that run
// ended: the merged file says how the run ended, as the shard does; a
// shard's run whose process died (no one holds its lock) is `killed`, not
// `running` forever.
TEST(Merge, ARunsStatusIsTheOneItEndedWith) {
    auto dir = e2e::scratch("merge-run-status");
    e2e::Sim sim;
    auto shard = run_shard(sim, dir / "shard.sqlite", "1/2");
    // The shard as it read while its run wrote it.
    auto midway = dir / "midway.sqlite";
    std::filesystem::copy_file(shard, midway);
    e2e::exec(midway, "UPDATE runs SET status = 'running', finished_at = NULL");
    e2e::unsend(midway, "question_idx = 1");
    const auto status = "SELECT status, finished_at IS NULL FROM runs";

    auto merged = dir / "merged.sqlite";
    {
        const int held = ::open((midway.string() + ".lock").c_str(), O_RDWR | O_CREAT, 0644);
        ASSERT_GE(held, 0);
        ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
        auto m = e2e::run({"merge", merged.string(), midway.string()});
        ::close(held);
        ASSERT_EQ(m.exit_code, 0) << m.err;
        EXPECT_NE(m.err.find("is still being written"), std::string::npos) << m.err;
    }
    EXPECT_EQ(query(merged, status), "running|1");
    // What it had not answered yet fails the gate, which says why.
    auto g = e2e::run({"gate", "--db", merged.string(), "--require-complete"});
    EXPECT_EQ(g.exit_code, 1) << g.out;
    EXPECT_NE(g.out.find("; 1 run still marked running: merged in while it still wrote its "
                         "database (merge it again once it has ended)"),
              std::string::npos)
        << g.out;
    auto again = e2e::run({"merge", merged.string(), shard.string()});
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_EQ(query(merged, status), "complete|0");
    // Only its shard 0/2 is missing now.
    g = e2e::run({"gate", "--db", merged.string(), "--require-complete"});
    EXPECT_EQ(g.out.find("still marked running"), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("no run of shard 0/2 of default/raw/256"), std::string::npos) << g.out;
    EXPECT_EQ(query(merged, "SELECT finished_at FROM runs"),
              query(shard, "SELECT finished_at FROM runs"));

    // Nobody writes the input: its run's process is gone.
    auto dead = dir / "dead.sqlite";
    auto d = e2e::run({"merge", dead.string(), midway.string()});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_EQ(d.err, "");
    EXPECT_EQ(query(dead, status), "killed|1");
}

TEST(Merge, ConflictingServerIsRefusedInOneLineAndOutputIsUnchanged) {
    auto dir = e2e::scratch("merge-conflict");
    e2e::Sim a;
    e2e::Sim b({"--model", "other/model"});
    auto da = dir / "a.sqlite";
    auto db = dir / "b.sqlite";
    ASSERT_EQ(e2e::run(run_args(a, da)).exit_code, 0);
    ASSERT_EQ(e2e::run(run_args(b, db)).exit_code, 0);
    auto out = dir / "out.sqlite";
    // What a killed merge leaves behind is only its temporary file; the next
    // merge starts afresh.
    std::ofstream(out.string() + ".merge-tmp") << "half-written";
    ASSERT_EQ(e2e::run({"merge", out.string(), da.string()}).exit_code, 0);
    EXPECT_EQ(query(out, "SELECT count(*) FROM requests"), "28");
    const auto before = e2e::slurp(out);
    auto o = e2e::run({"merge", out.string(), db.string()});
    EXPECT_EQ(o.exit_code, 2) << o.out;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_NE(o.err.find("server 'default' has model"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find(db.string()), std::string::npos) << o.err;
    EXPECT_EQ(e2e::slurp(out), before);
    EXPECT_FALSE(std::filesystem::exists(out.string() + ".merge-tmp"));
    // The merge's own name is no database's (concurrency audit D3): a run
    // stored its answers in out.sqlite.merge-tmp, and the next merge into
    // out.sqlite removed them without a word.
    auto taken = e2e::run(run_args(a, dir / "out.sqlite.merge-tmp"));
    EXPECT_EQ(taken.exit_code, 2) << taken.err;
    EXPECT_NE(taken.err.find("out.sqlite.merge-tmp is the name 'diffeval merge " + out.string() +
                             "' builds its result in, and removes first; give the database "
                             "another name"),
              std::string::npos)
        << taken.err;
    EXPECT_FALSE(std::filesystem::exists(out.string() + ".merge-tmp"));
}

// OUT given as a symbolic link: the file it points to is merged into and
// keeps its permissions; the link stays a link.
TEST(Merge, ALinkedOutputStaysALinkAndAPrivateFileStaysPrivate) {
    auto dir = e2e::scratch("merge-link");
    e2e::Sim sim;
    auto target = dir / "private.sqlite";
    auto input = dir / "in.sqlite";
    ASSERT_EQ(e2e::run(run_args(sim, target)).exit_code, 0);
    std::filesystem::permissions(target, std::filesystem::perms::owner_read |
                                             std::filesystem::perms::owner_write);
    auto other = run_args(sim, input);
    other[2] = "other=" + sim.url();
    ASSERT_EQ(e2e::run(other).exit_code, 0);
    auto link = dir / "link.sqlite";
    std::filesystem::create_symlink(target.filename(), link);
    auto o = e2e::run({"merge", link.string(), input.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_TRUE(std::filesystem::is_symlink(link));
    EXPECT_EQ(query(target, "SELECT count(DISTINCT server) FROM requests"), "2");
    EXPECT_EQ(std::filesystem::status(target).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

TEST(Merge, MissingInputAndBadShardAreUsageErrors) {
    auto dir = e2e::scratch("merge-usage");
    auto o = e2e::run({"merge", (dir / "out.sqlite").string(), (dir / "nope.sqlite").string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("nope.sqlite does not exist; give the path of a database 'diffeval "
                         "run' wrote"),
              std::string::npos)
        << o.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "out.sqlite"));
    // An empty input says so, not "schema version 0; run rescore".
    std::ofstream(dir / "empty.sqlite").close();
    o = e2e::run({"merge", (dir / "out.sqlite").string(), (dir / "empty.sqlite").string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("empty.sqlite is empty: no diffeval results are stored in it"),
              std::string::npos)
        << o.err;
    // OUT in a directory that does not exist: the advice names the database
    // as merge was given it, not --db, which merge has not.
    o = e2e::run(
        {"merge", (dir / "absent" / "out.sqlite").string(), (dir / "empty.sqlite").string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("; put the database " + (dir / "absent" / "out.sqlite").string() +
                         " in a directory that exists"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(o.err.find("--db"), std::string::npos) << o.err;
    auto s = e2e::run({"run", "--server", "x=http://127.0.0.1:1", "--shard", "3/3", "--db",
                       (dir / "r.sqlite").string()});
    EXPECT_EQ(s.exit_code, 2);
    EXPECT_NE(s.err.find("--shard '3/3'"), std::string::npos) << s.err;
}

// A CI matrix of more shards than questions is valid: a shard that holds
// none says so in one line and exits 0, sending nothing, and its run is
// recorded so the merged database shows the shard ran. A shard numbered as
// a matrix that counts from 1 is told shards count from 0.
TEST(Merge, ShardHoldingNoQuestionSaysSoAndIsRecorded) {
    auto dir = e2e::scratch("merge-empty-shard");
    e2e::Sim sim;
    const auto db = dir / "s5.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw", "--limit", "4",
                       "--shard", "5/8", "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.err.find("shard 5/8 holds none of the 4 questions"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("sends nothing"), std::string::npos) << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM requests"), "0");
    EXPECT_EQ(query(db, "SELECT status || ' ' || json_extract(config_json, '$.shard') FROM runs"),
              "complete 5/8");
    // Read on its own, it says why it holds nothing and what to read: it
    // said "run 'diffeval run' first" to a user who just had (docs audit).
    auto summary = e2e::run({"summary", "--db", db.string()});
    EXPECT_EQ(summary.exit_code, 2) << summary.err;
    EXPECT_NE(summary.err.find("holds no responses: its run was of shard 5/8, which held none of "
                               "the run's questions; read the database the shards are merged "
                               "into (diffeval merge)"),
              std::string::npos)
        << summary.err;
    // Nor is a server it would launch started: one that cannot start
    // fails only the shards that hold questions.
    const auto experiment = dir / "launch.toml";
    std::ofstream(experiment) << "framings = [\"raw\"]\nlimit = 2\n[[servers]]\nname = \"x\"\n"
                              << "url = \"http://127.0.0.1:" << e2e::free_port() << "\"\n"
                              << "launch = [\"false\"]\nready_timeout = 5\n";
    o = e2e::run({"run", "--config", experiment.string(), "--shard", "3/4", "--db",
                  (dir / "launch3.sqlite").string(), "--quiet"});
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.err.find("starting server"), std::string::npos) << o.err;
    o = e2e::run({"run", "--config", experiment.string(), "--shard", "1/4", "--db",
                  (dir / "launch1.sqlite").string(), "--quiet"});
    EXPECT_NE(o.exit_code, 0) << o.err;
    EXPECT_NE(o.err.find("starting server 'x'"), std::string::npos) << o.err;
    // A shard that holds questions says nothing of the kind.
    o = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw", "--limit", "4",
                  "--shard", "3/8", "--db", (dir / "s3.sqlite").string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.err.find("holds none"), std::string::npos) << o.err;
    o = e2e::run({"run", "--server", "a=" + sim.url(), "--shard", "4/4", "--db",
                  (dir / "s4.sqlite").string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("--shard '4/4': shards count from 0, so the 4 shards are 0/4 to 3/4"),
              std::string::npos)
        << o.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "s4.sqlite"));
    o = e2e::run({"run", "--server", "a=" + sim.url(), "--shard", "1/1", "--db",
                  (dir / "s1.sqlite").string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("--shard '1/1': shards count from 0, so the one shard is 0/1"),
              std::string::npos)
        << o.err;
}

// A merged database that lacks a shard of its runs is incomplete: the gate's
// completeness check fails naming the shard and saying to merge it, as do
// shards of different counts that leave questions out; the same shard
// merged twice counts once, and shards of different counts that cover
// every question are complete.
TEST(Merge, RequireCompleteFailsOnAMergeThatLacksAShard) {
    auto dir = e2e::scratch("merge-lacks-shard");
    e2e::Sim sim;
    const auto shard = [&](const std::string& which) {
        auto db = dir / ("s" + std::to_string(which[0] - '0') + "-" + which.substr(2) + ".sqlite");
        auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw", "--limit", "8",
                           "--shard", which, "--db", db.string(), "--quiet"});
        EXPECT_EQ(o.exit_code, 0) << o.err;
        return db.string();
    };
    const auto gate = [&](const std::vector<std::string>& inputs, const std::string& name) {
        const auto out = dir / (name + ".sqlite");
        std::vector<std::string> args = {"merge", out.string()};
        args.insert(args.end(), inputs.begin(), inputs.end());
        auto m = e2e::run(args);
        EXPECT_EQ(m.exit_code, 0) << m.err;
        return e2e::run({"gate", "--db", out.string(), "--require-complete", "--json",
                         (dir / (name + ".json")).string()});
    };
    const auto s0 = shard("0/4"), s1 = shard("1/4"), s2 = shard("2/4"), s3 = shard("3/4");
    auto g = gate({s0, s1, s2, s0}, "three");
    EXPECT_EQ(g.exit_code, 1) << g.out << g.err;
    EXPECT_NE(g.out.find("2 of 8 requests without a successful response"), std::string::npos)
        << g.out;
    EXPECT_NE(g.out.find("the database holds no run of shard 3/4 of a/raw/256: merge the missing "
                         "shards' databases into it"),
              std::string::npos)
        << g.out;
    const auto detail =
        nlohmann::json::parse(e2e::slurp(dir / "three.json"))["checks"][0]["detail"];
    EXPECT_EQ(detail["missing_shards"].dump(), R"({"a/raw/256":["3/4"]})");
    EXPECT_EQ(detail["by_error_kind"].dump(), R"({"never run":2})");
    auto s = e2e::run({"summary", "--db", (dir / "three.sqlite").string()});
    EXPECT_NE(s.out.find("a/raw/256: the database holds no run of shard 3/4"), std::string::npos)
        << s.out;
    // Its JSON and the report say so too: the report's verdicts rest on 6
    // of the 8 questions.
    s = e2e::run({"summary", "--db", (dir / "three.sqlite").string(), "--format", "json"});
    const auto groups = nlohmann::json::parse(s.out)["completeness"];
    EXPECT_EQ(groups.dump(),
              R"([{"framing":"raw","max_tokens":256,"missing_shards":["3/4"],"never_planned":0,)"
              R"("not_sent":0,"requests":6,"server":"a","shards_not_run":2,"without_success":0}])");
    auto r = e2e::run({"report", "--db", (dir / "three.sqlite").string(), "--out",
                       (dir / "three-report").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(e2e::slurp(dir / "three-report" / "report.md")
                  .find("The database lacks part of what its runs asked: a/raw/256 has no run "
                        "of shard 3/4 (2 requests); they count nowhere: merge the missing "
                        "shards' databases into it."),
              std::string::npos);
    g = gate({s0, s1, s2, s3}, "four");
    EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
    // Halves and quarters: 0/2 with 1/4 leaves the questions of 3/4 out;
    // with 3/4 too, every question ran.
    const auto h0 = shard("0/2");
    g = gate({h0, s1}, "mixed");
    EXPECT_EQ(g.exit_code, 1) << g.out;
    EXPECT_NE(g.out.find("no run of shards 1/2, 3/4 of a/raw/256"), std::string::npos) << g.out;
    g = gate({h0, s1, s3}, "mixed-whole");
    EXPECT_EQ(g.exit_code, 0) << g.out;
    // A configuration another program wrote, asking for more repeats than
    // a run may: the counts are held to a run's limit, never overflowing.
    const auto hostile = dir / "hostile.sqlite";
    std::filesystem::copy_file(dir / "three.sqlite", hostile);
    e2e::exec(hostile, "UPDATE runs SET config_json = json_set(config_json, '$.repeats', "
                       "9000000000000000000)");
    g = e2e::run({"gate", "--db", hostile.string(), "--require-complete"});
    EXPECT_EQ(g.exit_code, 1) << g.out;
    EXPECT_NE(g.out.find("measured:  3999998 of 4000004 requests without a successful response"),
              std::string::npos)
        << g.out;
    // A shard run with more repeats than the others asked a whole the
    // others did not.
    const auto more = (dir / "s3-more.sqlite").string();
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw", "--limit", "8",
                       "--shard", "3/4", "--repeats", "2", "--db", more, "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    g = gate({s0, s1, s2, more}, "uneven");
    EXPECT_EQ(g.exit_code, 1) << g.out;
    EXPECT_NE(g.out.find("6 of 16 requests without a successful response"), std::string::npos)
        << g.out;
    EXPECT_NE(g.out.find("the shards of a/raw/256 ran different --limit or --repeats"),
              std::string::npos)
        << g.out;
}

// Shards run with different flags are refused in one line naming the group
// and what differs, exit 2, with the output left as it was: a sampling
// setting, streaming, the few-shot prompt or the dataset. Shards of one
// configuration, and groups of different token limits, still merge.
TEST(Merge, ShardsOfDifferentConfigurationsAreRefused) {
    auto dir = e2e::scratch("merge-configurations");
    e2e::Sim sim;
    std::filesystem::create_directories(dir / "copy");
    std::filesystem::copy_file(std::filesystem::path(DIFFEVAL_SOURCE_DIR) /
                                   "datasets/sample/test.jsonl",
                               dir / "copy" / "test.jsonl");
    std::filesystem::copy_file(std::filesystem::path(DIFFEVAL_SOURCE_DIR) /
                                   "datasets/sample/train.jsonl",
                               dir / "copy" / "train.jsonl");
    // The same questions with one gold answer changed: another dataset.
    std::filesystem::create_directories(dir / "edited");
    std::filesystem::copy_file(dir / "copy" / "train.jsonl", dir / "edited" / "train.jsonl");
    {
        auto test = e2e::slurp(dir / "copy" / "test.jsonl");
        const auto gold = test.find("#### ");
        ASSERT_NE(gold, std::string::npos);
        test.insert(gold + 5, "9");
        std::ofstream(dir / "edited" / "test.jsonl") << test;
    }
    // The built-in raw framing with another text after the question.
    std::filesystem::create_directories(dir / "framing");
    auto raw = e2e::slurp(std::filesystem::path(DIFFEVAL_SOURCE_DIR) / "prompts/raw.toml");
    const std::string asked = "question_template = \"Question: {question}\\nAnswer:";
    ASSERT_NE(raw.find(asked), std::string::npos);
    raw.replace(raw.find(asked), asked.size(),
                "question_template = \"Question: {question}\\nSolution:");
    std::ofstream(dir / "framing" / "raw.toml") << raw;
    const auto shard = [&](const std::string& name, const std::string& which,
                           const std::vector<std::string>& extra) {
        auto db = (dir / (name + ".sqlite")).string();
        std::vector<std::string> args = {
            "run",     "--server", "a=" + sim.url(), "--limit", "6",
            "--shard", which,      "--db",           db,        "--quiet"};
        args.insert(args.end(), extra.begin(), extra.end());
        if (std::find(extra.begin(), extra.end(), "--framing") == extra.end()) {
            args.insert(args.end(), {"--framing", "raw"});
        }
        auto o = e2e::run(args);
        EXPECT_EQ(o.exit_code, 0) << name << ": " << o.err;
        return db;
    };
    const auto first = shard("first", "0/2", {});
    const auto out = dir / "out.sqlite";
    auto o = e2e::run({"merge", out.string(), first});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto before = e2e::slurp(out);
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--temperature", "0.7"}, R"("temperature": 0.0 before, "temperature": 0.7 in it)"},
        {{"--stream"}, R"(no "stream" before, "stream": true in it)"},
        {{"--num-shots", "3"}, "another prompt around the question in it"},
        {{"--framing", (dir / "framing" / "raw.toml").string()},
         "another prompt around the question in it"},
        {{"--dataset", (dir / "edited" / "test.jsonl").string()},
         "dataset 'sample' before, '" + (dir / "edited" / "test.jsonl").string() + "' in it"},
    };
    int i = 0;
    for (const auto& [flags, what] : cases) {
        const auto other = shard("other" + std::to_string(i++), "1/2", flags);
        o = e2e::run({"merge", out.string(), other});
        EXPECT_EQ(o.exit_code, 2) << flags[0] << ": " << o.out;
        EXPECT_NE(o.err.find("conflicts with what is merged before it: group a/raw/256 was sent "
                             "with another request configuration: " +
                             what),
                  std::string::npos)
            << flags[0] << ": " << o.err;
        EXPECT_NE(o.err.find("; its answers would not be comparable"), std::string::npos) << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_EQ(e2e::slurp(out), before) << flags[0];
    }
    // The same file under another name (a shard run where the checkout
    // sits at another path) is told what to change, not that its answers
    // are not comparable.
    const auto copy = shard("copy", "1/2", {"--dataset", (dir / "copy" / "test.jsonl").string()});
    o = e2e::run({"merge", out.string(), copy});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("group a/raw/256 was sent with dataset 'sample' before, '" +
                         (dir / "copy" / "test.jsonl").string() +
                         "' in it, the same questions under two names (a dataset given as a "
                         "path is named by the path as written); run every shard with the same "
                         "--dataset text"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(o.err.find("not be comparable"), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(e2e::slurp(out), before);
    // The same configuration merges, and so does another token limit: that
    // is another group.
    o = e2e::run({"merge", out.string(), shard("same", "1/2", {}),
                  shard("longer", "1/2", {"--max-tokens", "512"})});
    EXPECT_EQ(o.exit_code, 0) << o.err;
}

// A framing that draws each question's shots from the pool (lm-eval-chat)
// shares no prompt between its bodies, so the group check cannot see a
// shard run with an edited few-shot file: the merge mixed two pools in one
// group without a word. Each run records its pool; another is refused.
TEST(Merge, ShardsThatDrewFromAnotherFewShotPoolAreRefused) {
    auto dir = e2e::scratch("merge-pool");
    e2e::Sim sim;
    const auto sample = std::filesystem::path(DIFFEVAL_SOURCE_DIR) / "datasets/sample";
    std::filesystem::copy_file(sample / "test.jsonl", dir / "test.jsonl");
    std::filesystem::copy_file(sample / "train.jsonl", dir / "train.jsonl");
    const auto shard = [&](const std::string& name, const std::string& which) {
        auto db = (dir / (name + ".sqlite")).string();
        auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "lm-eval-chat",
                           "--dataset", (dir / "test.jsonl").string(), "--limit", "6", "--shard",
                           which, "--db", db, "--quiet"});
        EXPECT_EQ(o.exit_code, 0) << name << ": " << o.err;
        return db;
    };
    const auto first = shard("first", "0/2");
    const auto same = shard("same", "1/2");
    // One example's answer reworded in the few-shot file.
    auto train = e2e::slurp(dir / "train.jsonl");
    const auto at = train.rfind("\"answer\": \"");
    ASSERT_NE(at, std::string::npos) << train;
    train.insert(at + 11, "Thus. ");
    std::ofstream(dir / "train.jsonl") << train;
    const auto edited = shard("edited", "1/2");
    const auto out = dir / "out.sqlite";
    auto o = e2e::run({"merge", out.string(), first});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto before = e2e::slurp(out);
    o = e2e::run({"merge", out.string(), edited});
    EXPECT_EQ(o.exit_code, 2) << o.out;
    EXPECT_NE(o.err.find("conflicts with what is merged before it: dataset '" +
                         (dir / "test.jsonl").string() +
                         "' drew its few-shot examples from one pool before (run 1) and "
                         "from another in it (its run 1), so their prompts differ"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(e2e::slurp(out), before);
    // The shard of the same pool merges.
    o = e2e::run({"merge", out.string(), same});
    EXPECT_EQ(o.exit_code, 0) << o.err;
}

// OUT is built in OUT.merge-tmp, which a merge removes first: an input of
// that name (left by a stopped merge, or named so by hand) is refused
// before anything is removed, and stays as it was.
TEST(Merge, AnInputNamedLikeTheTemporaryFileIsRefusedAndKept) {
    auto dir = e2e::scratch("merge-tmp-input");
    e2e::Sim sim;
    // A database under that name (no run writes one: a killed merge left it).
    const auto input = dir / "out.sqlite.merge-tmp";
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw", "--limit", "2",
                       "--db", (dir / "made.sqlite").string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    std::filesystem::rename(dir / "made.sqlite", input);
    const auto before = e2e::slurp(input);
    o = e2e::run({"merge", (dir / "out.sqlite").string(), input.string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find(input.string() + " is the file this merge builds " +
                         (dir / "out.sqlite").string() + " in"),
              std::string::npos)
        << o.err;
    EXPECT_TRUE(e2e::slurp(input) == before) << input << " changed";
    EXPECT_FALSE(std::filesystem::exists(dir / "out.sqlite"));
}

// Shards of one server agree on each fact both fingerprints hold; a fact
// only one of them holds (a launched server's log tells more than an
// attached one's /props) is no conflict, a fact they hold with two values is.
TEST(Merge, FingerprintsAreComparedFactByFact) {
    auto dir = e2e::scratch("merge-facts");
    e2e::Sim sim;
    const auto one = run_shard(sim, dir / "one.sqlite", "0/2");
    const auto two = run_shard(sim, dir / "two.sqlite", "1/2");
    e2e::exec(one, R"(UPDATE servers SET facts_json = '{"engine": "llamacpp", "facts": )"
                   R"({"engine_version": "b11669-Debian"}, "conflicts": []}')");
    e2e::exec(two, R"(UPDATE servers SET facts_json = '{"engine": "llamacpp", "facts": )"
                   R"({"engine_version": "b11669-Debian", "kv_cache_type_k": "q4_0"}, )"
                   R"("conflicts": []}')");
    auto out = dir / "out.sqlite";
    auto o = e2e::run({"merge", out.string(), one.string(), two.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(query(out, "SELECT count(*) FROM requests"), "28");

    e2e::exec(two, R"(UPDATE servers SET facts_json = json_set(facts_json, )"
                   R"('$.facts.engine_version', 'b11700-Debian'))");
    auto clash = dir / "clash.sqlite";
    o = e2e::run({"merge", clash.string(), one.string(), two.string()});
    EXPECT_EQ(o.exit_code, 2) << o.out;
    EXPECT_NE(o.err.find("server 'default' has fingerprint fact engine_version b11669-Debian "
                         "there but b11700-Debian here"),
              std::string::npos)
        << o.err;
}

// A shard written before the build fact was rewritten holds it as
// llama.cpp's log writes it ("11669 (Debian)"); merged with a shard of the
// same server written since ("b11669-Debian"), it is the same build, and
// merged with another build it is refused naming both in one form.
TEST(Merge, ABuildStoredInTheLogsWordsMatchesTheSameBuildInItsOneForm) {
    auto dir = e2e::scratch("merge-old-build");
    e2e::Sim sim;
    const auto old_shard = run_shard(sim, dir / "old.sqlite", "0/2");
    const auto new_shard = run_shard(sim, dir / "new.sqlite", "1/2");
    e2e::exec(old_shard, R"x(UPDATE servers SET facts_json = '{"engine": "llamacpp", "facts": )x"
                         R"x({"engine_version": "11669 (Debian)", "slots": "2"}, )x"
                         R"x("conflicts": []}')x");
    e2e::exec(new_shard, R"x(UPDATE servers SET facts_json = '{"engine": "llamacpp", "facts": )x"
                         R"x({"engine_version": "b11669-Debian", "slots": "2"}, "stated": )x"
                         R"x({"engine_version": "11669 (Debian)"}, "conflicts": []}')x");
    auto out = dir / "out.sqlite";
    auto o = e2e::run({"merge", out.string(), old_shard.string(), new_shard.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(query(out, "SELECT count(*) FROM requests"), "28");
    // The stored row is what the first file held, not rewritten.
    EXPECT_EQ(query(out, "SELECT json_extract(facts_json, '$.facts.engine_version') FROM servers"),
              "11669 (Debian)");

    e2e::exec(new_shard, R"(UPDATE servers SET facts_json = json_set(facts_json, )"
                         R"('$.facts.engine_version', 'b11700-Debian'))");
    auto clash = dir / "clash.sqlite";
    o = e2e::run({"merge", clash.string(), old_shard.string(), new_shard.string()});
    EXPECT_EQ(o.exit_code, 2) << o.out;
    EXPECT_NE(o.err.find("server 'default' has fingerprint fact engine_version b11669-Debian "
                         "there but b11700-Debian here"),
              std::string::npos)
        << o.err;
}

// A shard written when llama.cpp's flash attention fact was what the server
// was asked (`auto`) merges with a shard of the same server written since,
// which holds what it resolved (`enabled`, `auto` as stated).
TEST(Merge, AFlashAttentionStoredAsAskedIsNoConflictWithWhatTheServerResolved) {
    auto dir = e2e::scratch("merge-old-flash");
    e2e::Sim sim;
    const auto old_shard = run_shard(sim, dir / "old.sqlite", "0/2");
    const auto new_shard = run_shard(sim, dir / "new.sqlite", "1/2");
    e2e::exec(old_shard, R"x(UPDATE servers SET facts_json = '{"engine": "llamacpp", "facts": )x"
                         R"x({"flash_attention": "auto", "slots": "2"}, "conflicts": []}')x");
    e2e::exec(new_shard, R"x(UPDATE servers SET facts_json = '{"engine": "llamacpp", "facts": )x"
                         R"x({"flash_attention": "enabled", "slots": "2"}, "stated": )x"
                         R"x({"flash_attention": "auto"}, "conflicts": []}')x");
    auto out = dir / "out.sqlite";
    auto o = e2e::run({"merge", out.string(), old_shard.string(), new_shard.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(query(out, "SELECT count(*) FROM requests"), "28");
}

// A database written as another's -wal file (`merge r.sqlite-wal ...`) was
// taken by SQLite for r.sqlite's log and thrown away the next time r.sqlite
// was written; merge said "merged" and exited 0. Any command given such a
// name is refused before it writes anything, lock file included.
TEST(Merge, ADatabasesSideFileIsNoDatabaseName) {
    e2e::Sim sim;
    auto dir = e2e::scratch("merge-side");
    const auto db = dir / "r.sqlite";
    run_shard(sim, db, "1/2");
    const auto before = query(db, k_rows);
    for (const char* side : {"-wal", "-shm", "-journal", ".lock"}) {
        const auto out = db.string() + side;
        auto o = e2e::run({"merge", out, db.string()});
        EXPECT_EQ(o.exit_code, 2) << side;
        EXPECT_EQ(o.err, "diffeval: " + out + " is the " + side + " file of the database " +
                             db.string() +
                             ", not a database; give the database's own path, or another name\n");
        EXPECT_FALSE(std::filesystem::exists(out + ".lock")) << side;
    }
    EXPECT_FALSE(std::filesystem::exists(db.string() + "-wal.merge-tmp"));
    // The same for a run, an import and a reading command.
    auto args = run_args(sim, dir / "r.sqlite-wal");
    EXPECT_EQ(e2e::run(args).exit_code, 2);
    auto o = e2e::run({"summary", "--db", db.string() + "-shm"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("is the -shm file of the database"), std::string::npos) << o.err;
    EXPECT_EQ(query(db, k_rows), before);
    // Through a symbolic link too: SQLite writes through a path's links, so a
    // run, merge or import into lnwal.sqlite -> r.sqlite-wal wrote r.sqlite's
    // log, which the next write of r.sqlite deleted (an audit).
    // Its -wal is there only while the database is open (a link to one that
    // is not there yet passed the check, and the run wrote it: an audit).
    e2e::exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    std::filesystem::remove(db.string() + "-wal");
    std::filesystem::remove(db.string() + "-shm");
    const auto link = dir / "lnwal.sqlite";
    std::filesystem::create_symlink("r.sqlite-wal", link); // relative, as `ln -s` writes it
    const auto wal_size = [&] {
        std::error_code ec;
        return std::filesystem::file_size(db.string() + "-wal", ec);
    };
    const auto wal_before = wal_size();
    for (auto& cmd :
         {run_args(sim, link), std::vector<std::string>{"merge", link.string(), db.string()}}) {
        o = e2e::run(cmd);
        EXPECT_EQ(o.exit_code, 2) << cmd[0] << ": " << o.err;
        EXPECT_NE(o.err.find(link.string() + " is the -wal file of the database "),
                  std::string::npos)
            << o.err;
        EXPECT_NE(o.err.find("(through a symbolic link)"), std::string::npos) << o.err;
        EXPECT_EQ(wal_size(), wal_before) << cmd[0]; // nothing written there
    }
    EXPECT_EQ(query(db, k_rows), before);
    // A name with such a suffix beside a file that is no database is a name.
    std::ofstream(dir / "notes") << "not a database\n";
    o = e2e::run({"merge", (dir / "notes-journal").string(), db.string()});
    EXPECT_EQ(o.exit_code, 0) << o.err;
}

// An input is read as every reading command reads it: a name SQLite takes
// for no file (":memory:") or a URI ("file:...") is the file of that name,
// and a file in a directory nobody can write is read without its -shm. Each
// was refused by merge alone, with exit 1 and SQLite's words ("near ",":
// syntax error").
TEST(Merge, AnInputIsReadAsTheReadingCommandsReadIt) {
    e2e::Sim sim;
    auto dir = e2e::scratch("merge-names");
    const auto db = dir / "r.sqlite";
    run_shard(sim, db, "1/2");
    e2e::exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    const auto before = query(db, k_rows);
    for (const char* name : {":memory:", "file:r.sqlite"}) {
        std::filesystem::copy_file(db, dir / name);
        const std::string out = std::string("out-") + (name[0] == ':' ? "memory" : "file");
        const std::string cmd = "cd '" + dir.string() + "' && '" + e2e::binary() + "' merge " +
                                out + ".sqlite '" + name + "' >/dev/null 2>&1";
        EXPECT_EQ(std::system(cmd.c_str()), 0) << name;
        EXPECT_EQ(query(dir / (out + ".sqlite"), k_rows), before) << name;
    }
    // Read-only, in a read-only directory, merged by a user who cannot
    // write either: the WAL database is read as immutable.
    auto ro_dir = dir / "read-only";
    std::filesystem::create_directories(ro_dir);
    std::filesystem::copy_file(db, ro_dir / "r.sqlite");
    auto out_dir = dir / "out";
    std::filesystem::create_directories(out_dir);
    using std::filesystem::perms;
    std::filesystem::permissions(out_dir, perms::all);
    std::filesystem::permissions(ro_dir / "r.sqlite",
                                 perms::owner_read | perms::group_read | perms::others_read);
    std::filesystem::permissions(ro_dir, perms::owner_read | perms::owner_exec | perms::group_read |
                                             perms::group_exec | perms::others_read |
                                             perms::others_exec);
    auto o = e2e::run_unprivileged(
        {"merge", (out_dir / "m.sqlite").string(), (ro_dir / "r.sqlite").string()});
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(query(out_dir / "m.sqlite", k_rows), before);
    EXPECT_FALSE(std::filesystem::exists(ro_dir / "r.sqlite-wal"));
}

// A merged file is scored on the text its inputs were rescored on: a fresh
// OUT held no score to say which, and scored the full text (an input that
// scored 0% after its think blocks merged as 100%). Inputs scored on
// different texts are refused.
TEST(Merge, TheScoredTextOfTheInputsIsKept) {
    e2e::Sim sim({"--profile", "deepgemm"});
    auto dir = e2e::scratch("merge-score-text");
    const auto a = dir / "a.sqlite";
    const auto b = dir / "b.sqlite";
    run_shard(sim, a, "0/2");
    run_shard(sim, b, "1/2");
    for (const auto& db : {a, b}) {
        ASSERT_EQ(
            e2e::run({"rescore", "--db", db.string(), "--score-text", "after-think"}).exit_code, 0);
    }
    const auto out = dir / "out.sqlite";
    auto m = e2e::run({"merge", out.string(), a.string(), b.string()});
    ASSERT_EQ(m.exit_code, 0) << m.err;
    EXPECT_EQ(query(out, "SELECT group_concat(DISTINCT score_text) FROM scores"), "after-think");
    // Every score as its input had it.
    const char* scores = "SELECT q.request_key, s.scorer, s.extracted, s.correct FROM v_requests q "
                         "JOIN scores s ON s.response_id = q.response_id ORDER BY 1, 2";
    auto merged = e2e::query_rows(out, scores);
    auto each = e2e::query_rows(a, scores);
    const auto from_b = e2e::query_rows(b, scores);
    each.insert(each.end(), from_b.begin(), from_b.end());
    std::sort(each.begin(), each.end());
    std::sort(merged.begin(), merged.end());
    EXPECT_EQ(merged, each);

    // One input rescored on the full text: refused, OUT left as it was.
    const auto c = dir / "c.sqlite";
    run_shard(sim, c, "0/2");
    const auto before = e2e::slurp(out);
    auto refused = e2e::run({"merge", out.string(), c.string()});
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_NE(refused.err.find("is scored on the after-think text and " + c.string() +
                               " on the full text"),
              std::string::npos)
        << refused.err;
    EXPECT_TRUE(before == e2e::slurp(out));
}

// Two runs of one configuration (two nights of the same server) merged:
// each request counts its newest answer, and the older run's count nowhere.
// The merge said "40 responses added" and nothing else; it says so now.
// Shards, which answer disjoint requests, say nothing of it.
TEST(Merge, TwoRunsOfOneConfigurationAreSaidToCountTheNewest) {
    e2e::Sim first({"--profile", "default"});
    e2e::Sim second({"--profile", "deepgemm"});
    auto dir = e2e::scratch("merge-twice");
    const auto a = dir / "night1.sqlite";
    const auto b = dir / "night2.sqlite";
    ASSERT_EQ(e2e::run(run_args(first, a)).exit_code, 0);
    ASSERT_EQ(e2e::run(run_args(second, b)).exit_code, 0);
    const auto requests = query(a, "SELECT count(*) FROM requests");
    auto m = e2e::run({"merge", (dir / "both.sqlite").string(), a.string(), b.string()});
    ASSERT_EQ(m.exit_code, 0) << m.err;
    EXPECT_NE(m.err.find("note: " + requests +
                         " requests already had a successful answer from "
                         "another input"),
              std::string::npos)
        << m.err;
    // One input into an OUT that holds the other night: OUT alone is named.
    const auto one = dir / "one.sqlite";
    ASSERT_EQ(e2e::run({"merge", one.string(), b.string()}).exit_code, 0);
    auto single = e2e::run({"merge", one.string(), a.string()});
    ASSERT_EQ(single.exit_code, 0) << single.err;
    EXPECT_NE(single.err.find("note: " + requests + " requests already had a successful answer " +
                              "from " + one.string() + " (another run"),
              std::string::npos)
        << single.err;
    // Shards: nothing to say.
    const auto s0 = run_shard(first, dir / "s0.sqlite", "0/2");
    const auto s1 = run_shard(first, dir / "s1.sqlite", "1/2");
    auto shards = e2e::run({"merge", (dir / "shards.sqlite").string(), s0.string(), s1.string()});
    ASSERT_EQ(shards.exit_code, 0) << shards.err;
    EXPECT_EQ(shards.err.find("note:"), std::string::npos) << shards.err;
}
