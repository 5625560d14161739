// `diffeval export --format lm-eval-samples` and `diffeval import lm-eval`:
// the files carry lm-eval's fields and hashes, and a run exported then
// imported gets the same verdicts from every scorer as the run itself, keeps
// lm-eval's own verdicts, and compares with it in `diff` with no flips.
#include "e2e.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

using e2e::query;
using e2e::query_rows;
using nlohmann::json;

namespace {

std::vector<json> read_lines(const std::filesystem::path& p) {
    std::vector<json> out;
    std::ifstream in(p);
    for (std::string line; std::getline(in, line);) {
        out.push_back(json::parse(line));
    }
    return out;
}

// Verdicts of every scorer, by question: identical groups give identical rows.
std::vector<std::string> verdicts(const std::filesystem::path& db, const std::string& server,
                                  const std::string& framing) {
    return query_rows(db, "SELECT question_idx, repeat, scorer, extracted, correct, valid FROM "
                          "v_scores WHERE server = '" +
                              server + "' AND framing = '" + framing +
                              "' ORDER BY question_idx, repeat, scorer");
}

} // namespace

TEST(LmEvalSamples, ExportThenImportGivesIdenticalVerdicts) {
    auto dir = e2e::scratch("lm-eval-io");
    e2e::Sim sim({"--profile", "deepgemm"}); // some wrong answers, so verdicts differ
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "default=" + sim.url(), "--framing", "raw,lm-eval-chat",
                       "--limit", "12", "--dataset", "sample", "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;

    // Export: one file per group, lm-eval's name pattern, two filters per doc.
    auto out = dir / "samples";
    auto ex = e2e::run(
        {"export", "--db", db.string(), "--format", "lm-eval-samples", "--out", out.string()});
    ASSERT_EQ(ex.exit_code, 0) << ex.err;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(out)) {
        files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    ASSERT_EQ(files.size(), 2u);
    EXPECT_TRUE(files[1].filename().string().starts_with("samples_gsm8k-default-raw-256_"))
        << files[1];
    auto lines = read_lines(files[1]);
    ASSERT_EQ(lines.size(), 24u);
    const std::vector<std::string> keys = {
        "doc_id", "doc",     "target",   "arguments",   "resps",       "filtered_resps",
        "filter", "metrics", "doc_hash", "prompt_hash", "target_hash", "exact_match"};
    std::vector<std::string> got;
    for (const auto& [k, v] : lines[0].items()) {
        got.push_back(k);
    }
    std::sort(got.begin(), got.end());
    auto want = keys;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want);
    EXPECT_EQ(lines[0]["filter"], "strict-match");
    EXPECT_EQ(lines[1]["filter"], "flexible-extract");
    // Hashes as lm-eval computes them; these two were printed by CPython:
    // sha256(json.dumps(doc, indent=2, ensure_ascii=False)) and
    // sha256(target) for the sample set's first question.
    EXPECT_EQ(lines[0]["doc_hash"],
              "a4cfd0efe683cbd91c44fcc69f4ceea22ed24e6f9945347b02c2f862e3e4fc95");
    EXPECT_EQ(lines[0]["target_hash"],
              "2cbb32625ac0ee15430b0315318235fc1735f01321e55a7c93c92866ec58d653");
    // The context is the exact prompt sent.
    EXPECT_EQ(lines[0]["arguments"]["gen_args_0"]["arg_0"],
              json::parse(query(db, "SELECT request_json FROM v_requests WHERE framing = 'raw' AND "
                                    "question_idx = 0"))["prompt"]);

    // Import into a fresh database and into the run's own.
    auto fresh = dir / "fresh.sqlite";
    for (const auto& target : {fresh, db}) {
        auto im = e2e::run({"import", "lm-eval", "--db", target.string(), "--name", "lmeval",
                            "--framing", "raw", "--dataset", "sample", files[1].string()});
        ASSERT_EQ(im.exit_code, 0) << im.err;
        EXPECT_NE(im.out.find("as lmeval/raw/256: 12 documents, 12 responses stored"),
                  std::string::npos)
            << im.out;
        ASSERT_EQ(e2e::run({"summary", "--db", target.string()}).exit_code, 0);
    }
    auto original = verdicts(db, "default", "raw");
    ASSERT_EQ(original.size(), 36u);
    EXPECT_EQ(verdicts(fresh, "lmeval", "raw"), original);
    EXPECT_EQ(verdicts(db, "lmeval", "raw"), original);
    // The run had wrong answers, so equal verdicts are not trivially all-correct.
    EXPECT_NE(query(db, "SELECT count(*) FROM v_scores WHERE server = 'default' AND correct = 0"),
              "0");
    // lm-eval's own verdicts are kept and agree with our lm-eval scorers.
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses r JOIN v_scores s USING (response_id) "
                        "WHERE r.server = 'lmeval' AND s.scorer = 'lm-eval-strict' AND "
                        "json_extract(r.response_json, "
                        "'$.lm_eval.filters.\"strict-match\".exact_match') != s.correct"),
              "0");
    EXPECT_EQ(query(db,
                    "SELECT count(*) FROM v_responses WHERE server = 'lmeval' AND "
                    "json_extract(response_json, '$.lm_eval.filters.\"strict-match\"') IS NULL"),
              "0");
    // diff compares the imported group with diffeval's own run: no flips.
    auto d = e2e::run(
        {"diff", "--db", db.string(), "default/raw/256", "lmeval/raw/256", "--format", "json"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    auto dj = json::parse(d.out);
    EXPECT_TRUE(dj["comparisons"][0]["flips"]["a_better"].empty()) << d.out;
    EXPECT_TRUE(dj["comparisons"][0]["flips"]["b_better"].empty()) << d.out;

    // Importing again stores nothing new.
    auto again = e2e::run({"import", "lm-eval", "--db", fresh.string(), "--name", "lmeval",
                           "--framing", "raw", "--dataset", "sample", files[1].string()});
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("0 responses stored, 12 already stored"), std::string::npos)
        << again.out;
    EXPECT_EQ(query(fresh, "SELECT count(*) FROM responses"), "12");
}

TEST(LmEvalSamples, BadInputIsOneLineAndExitTwo) {
    auto dir = e2e::scratch("lm-eval-bad");
    auto bad = dir / "samples_gsm8k_2026.jsonl";
    std::ofstream(bad) << "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A\"}, "
                          "\"resps\": [[\"x\"]]}\nnot json\n";
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", bad.string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find(bad.string() + ":2: not an lm-eval samples line"), std::string::npos)
        << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1);
    // The database the failed import would have created is not left behind.
    for (const auto* suffix : {"", "-wal", "-shm", ".lock"}) {
        EXPECT_FALSE(std::filesystem::exists(db.string() + suffix)) << suffix;
    }
    auto dir_given = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", "/tmp"});
    EXPECT_EQ(dir_given.exit_code, 2);
    EXPECT_NE(dir_given.err.find("/tmp is a directory"), std::string::npos) << dir_given.err;
    // A database that was there keeps what it held.
    auto good = dir / "samples_gsm8k_good.jsonl";
    std::ofstream(good) << "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A\"}, "
                           "\"resps\": [[\"x\"]]}\n";
    ASSERT_EQ(e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", good.string()})
                  .exit_code,
              0);
    o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "y", bad.string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "1");
    auto f = e2e::run({"export", "--db", db.string(), "--format", "csv", "--out", dir.string()});
    EXPECT_EQ(f.exit_code, 2);
    EXPECT_NE(f.err.find("lm-eval-samples"), std::string::npos) << f.err;
}

// One samples file per repeat (as export writes them): the second is another
// run of the same requests. With answers of its own it is refused, not taken
// as "already stored"; with --first-repeat it is stored as further repeats.
TEST(LmEvalSamples, AnotherRunOfTheSameRequestsIsFurtherRepeats) {
    auto dir = e2e::scratch("lm-eval-repeats");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    ASSERT_EQ(e2e::run({"run", "--server", "b=" + sim.url(), "--framing", "raw", "--limit", "4",
                        "--repeats", "2", "--dataset", "sample", "--db", db.string(), "--quiet"})
                  .exit_code,
              0);
    auto out = dir / "samples";
    ASSERT_EQ(e2e::run({"export", "--db", db.string(), "--format", "lm-eval-samples", "--out",
                        out.string()})
                  .exit_code,
              0);
    std::filesystem::path first, second;
    for (const auto& e : std::filesystem::directory_iterator(out)) {
        (e.path().filename().string().find("-r1_") != std::string::npos ? second : first) =
            e.path();
    }
    ASSERT_FALSE(first.empty() || second.empty());
    // The simulator answers repeats alike: make the second run's answers its own.
    auto text = e2e::slurp(second);
    for (size_t at = 0; (at = text.find("\"resps\": [[\"", at)) != std::string::npos; ++at) {
        text.insert(at + 12, "Again: ");
    }
    std::ofstream(second, std::ios::trunc) << text;

    auto im = dir / "im.sqlite";
    const std::vector<std::string> import = {"import", "lm-eval",   "--db", im.string(), "--name",
                                             "ib",     "--framing", "raw",  "--dataset", "sample"};
    auto with = [&](std::vector<std::string> more) {
        auto args = import;
        args.insert(args.end(), more.begin(), more.end());
        return e2e::run(args);
    };
    ASSERT_EQ(with({first.string()}).exit_code, 0);
    auto again = with({first.string()});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("nothing new"), std::string::npos) << again.out;
    auto refused = with({second.string()});
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_NE(refused.err.find("is stored with another answer, so this file is another run of "
                               "the same requests; import it as further repeats with "
                               "--first-repeat 1"),
              std::string::npos)
        << refused.err;
    EXPECT_EQ(query(im, "SELECT count(*) FROM responses"), "4");
    auto more = with({"--first-repeat", "1", second.string()});
    EXPECT_EQ(more.exit_code, 0) << more.err;
    EXPECT_EQ(query(im, "SELECT count(*) FROM responses"), "8");
    EXPECT_EQ(query(im, "SELECT count(DISTINCT repeat) FROM requests"), "2");
}
