// `diffeval export --format lm-eval-samples` and `diffeval import lm-eval`:
// the files carry lm-eval's fields and hashes, and a run exported then
// imported gets the same verdicts from every scorer as the run itself, keeps
// lm-eval's own verdicts, and compares with it in `diff` with no flips.
#include "e2e.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <re2/re2.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

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
    // A dataset of one question, which the documents below are.
    const auto dataset = (dir / "qa.jsonl").string();
    std::ofstream(dataset) << "{\"question\": \"Q\", \"answer\": \"A\"}\n";
    auto bad = dir / "samples_gsm8k_2026.jsonl";
    std::ofstream(bad) << "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A\"}, "
                          "\"resps\": [[\"x\"]]}\nnot json\n";
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", "--dataset",
                       dataset, bad.string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find(bad.string() + ":2: not valid JSON at byte 2: invalid literal"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1);
    // A line of the wrong shape is named as such; one cut short by a killed
    // lm-eval, or not UTF-8, was sent looking for keys it has.
    const std::string first =
        "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A\"}, \"resps\": [[\"x\"]]";
    for (const auto& [line, said] : std::vector<std::pair<std::string, std::string>>{
             {"{\"doc_id\": 1}", ":2: not an lm-eval samples line (needs doc_id, doc, resps)"},
             {first.substr(0, 40), ":2: not valid JSON (cut off?"},
             // A whole line holding an unpaired surrogate escape is not
             // said to be cut off (audit): where and what is wrong.
             {"{\"doc_id\": 0, \"doc\": {}, \"resps\": [[\"#### 36 \\ud800\"]]}",
              ":2: not valid JSON at byte 52: invalid string: surrogate U+D800..U+DBFF must be "
              "followed by U+DC00..U+DFFF"},
             {"{\"doc_id\": 0 \"doc\": {}}",
              ":2: not valid JSON at byte 18: unexpected string literal"},
             {first + ", \"note\": \"caf\xe9\"}", ":2: not UTF-8"}}) {
        std::ofstream(bad) << first << "}\n" << line << "\n";
        auto r = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", "--dataset",
                           dataset, bad.string()});
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find(bad.string() + said), std::string::npos) << r.err;
    }
    // The database the failed import would have created is not left behind.
    for (const auto* suffix : {"", "-wal", "-shm", ".lock"}) {
        EXPECT_FALSE(std::filesystem::exists(db.string() + suffix)) << suffix;
    }
    auto dir_given = e2e::run(
        {"import", "lm-eval", "--db", db.string(), "--name", "x", "--dataset", dataset, "/tmp"});
    EXPECT_EQ(dir_given.exit_code, 2);
    EXPECT_NE(dir_given.err.find("/tmp is a directory"), std::string::npos) << dir_given.err;
    // A database that was there keeps what it held.
    auto good = dir / "samples_gsm8k_good.jsonl";
    std::ofstream(good) << "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A\"}, "
                           "\"resps\": [[\"x\"]]}\n";
    ASSERT_EQ(e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", "--dataset",
                        dataset, good.string()})
                  .exit_code,
              0);
    o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "y", "--dataset", dataset,
                  bad.string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "1");
    // While another diffeval writes the file (a run, or a merge that will
    // replace it), an import is refused and stores nothing.
    {
        const int held = ::open((db.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
        ASSERT_GE(held, 0);
        ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
        auto busy = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "z", "--dataset",
                              dataset, good.string()});
        ::close(held);
        EXPECT_EQ(busy.exit_code, 2);
        EXPECT_NE(busy.err.find("in use by another diffeval process (which did not say who it is)"),
                  std::string::npos)
            << busy.err;
        EXPECT_NE(busy.err.find("then import again"), std::string::npos) << busy.err;
        EXPECT_EQ(std::count(busy.err.begin(), busy.err.end(), '\n'), 1) << busy.err;
        EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "1");
    }
    auto f = e2e::run({"export", "--db", db.string(), "--format", "csv", "--out", dir.string()});
    EXPECT_EQ(f.exit_code, 2);
    EXPECT_NE(f.err.find("lm-eval-samples"), std::string::npos) << f.err;
}

// One samples file per repeat (as export writes them): the second is another
// run of the same requests. Under another name (as lm-eval would log it), with
// answers of its own, it is refused, not taken as "already stored"; with
// --first-repeat it is stored as further repeats, and so is the file export
// wrote for repeat 1 (its task ends "-r1") without it.
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
    auto renamed = dir / "samples_gsm8k_2026-01-01T00-00-00.000000.jsonl";
    std::filesystem::copy_file(second, renamed);
    auto refused = with({renamed.string()});
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_NE(refused.err.find("is stored with another answer, so this file is another run of "
                               "the same requests; import it as further repeats with "
                               "--first-repeat 1"),
              std::string::npos)
        << refused.err;
    EXPECT_EQ(query(im, "SELECT count(*) FROM responses"), "4");
    auto more = with({"--first-repeat", "1", renamed.string()});
    EXPECT_EQ(more.exit_code, 0) << more.err;
    EXPECT_EQ(query(im, "SELECT count(*) FROM responses"), "8");
    EXPECT_EQ(query(im, "SELECT count(DISTINCT repeat) FROM requests"), "2");
    // export's own file for repeat 1 is repeat 1 without being told.
    auto im2 = dir / "im2.sqlite";
    for (const auto& file : {first, second}) {
        auto o = e2e::run({"import", "lm-eval", "--db", im2.string(), "--name", "ib", "--framing",
                           "raw", "--dataset", "sample", file.string()});
        EXPECT_EQ(o.exit_code, 0) << o.err;
    }
    EXPECT_EQ(query(im2, "SELECT group_concat(repeat || ':' || n) FROM (SELECT repeat, count(*) "
                         "AS n FROM requests GROUP BY repeat ORDER BY repeat)"),
              "0:4,1:4");
}

namespace {

// The samples file export wrote for server `server` in `dir`.
std::filesystem::path exported(const std::filesystem::path& dir, const std::string& server) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        if (e.path().filename().string().starts_with("samples_gsm8k-" + server + "-")) {
            return e.path();
        }
    }
    return {};
}

// Run server "a" on `sim` over `limit` questions of `dataset` (raw
// framing, `repeats` repeats) into `db`, export it to `out`, and give a
// samples file written (any one of them when there is one per repeat).
std::filesystem::path run_and_export(const e2e::Sim& sim, const std::filesystem::path& db,
                                     const std::filesystem::path& out, int limit,
                                     const std::string& dataset = "sample", int repeats = 1) {
    const auto ran = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw", "--limit",
                               std::to_string(limit), "--repeats", std::to_string(repeats),
                               "--dataset", dataset, "--db", db.string(), "--quiet"});
    EXPECT_EQ(ran.exit_code, 0) << ran.err;
    const auto exp = e2e::run(
        {"export", "--db", db.string(), "--format", "lm-eval-samples", "--out", out.string()});
    EXPECT_EQ(exp.exit_code, 0) << exp.err;
    return exported(out, "a");
}

// Samples `text` with `edit` applied to each line's JSON.
std::string edited_lines(const std::string& text, const std::function<void(json&)>& edit) {
    std::istringstream in(text);
    std::string out;
    for (std::string line; std::getline(in, line);) {
        auto j = json::parse(line);
        edit(j);
        out += j.dump() + "\n";
    }
    return out;
}

// `text` with its first `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
    auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

} // namespace

// Docs audit: an export's files, one per repeat, imported as they are (no
// --framing, no --first-repeat), are the groups and repeats they came from,
// not one group per repeat file ("...-raw-256-r1" as a framing).
TEST(LmEvalSamples, AnExportsRepeatFilesImportAsItsRepeats) {
    auto dir = e2e::scratch("lm-eval-export-repeats");
    e2e::Sim sim;
    auto out = dir / "samples";
    ASSERT_FALSE(run_and_export(sim, dir / "r.sqlite", out, 3, "sample", 3).empty());
    auto im = dir / "im.sqlite";
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(out)) {
        files.push_back(e.path());
    }
    ASSERT_EQ(files.size(), 3u);
    std::sort(files.begin(), files.end());
    std::reverse(files.begin(), files.end()); // in any order
    for (const auto& file : files) {
        auto o = e2e::run({"import", "lm-eval", "--db", im.string(), "--name", "ib", "--dataset",
                           "sample", file.string()});
        ASSERT_EQ(o.exit_code, 0) << o.err;
        EXPECT_NE(o.out.find("as ib/gsm8k-a-raw-256/256:"), std::string::npos) << o.out;
    }
    EXPECT_EQ(query(im, "SELECT group_concat(g) FROM (SELECT DISTINCT server || '/' || framing || "
                        "'/' || max_tokens || ' x' || (SELECT count(DISTINCT repeat) FROM "
                        "requests) AS g FROM requests)"),
              "ib/gsm8k-a-raw-256/256 x3");
    auto summary = e2e::run({"summary", "--db", im.string()});
    ASSERT_EQ(summary.exit_code, 0) << summary.err;
    EXPECT_EQ(summary.out.find("-r1"), std::string::npos) << summary.out;
}

// Each document is checked against the dataset named by --dataset: a
// question edited in the file, a doc_id past the dataset's end, or the sample
// set's questions imported as another dataset are refused with one line, and
// nothing is stored. They used to be stored as the dataset's questions.
TEST(LmEvalSamples, DocumentsThatAreNotTheDatasetsQuestionsAreRefused) {
    auto dir = e2e::scratch("lm-eval-check");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    auto out = dir / "samples";
    const auto file = run_and_export(sim, db, out, 3);
    ASSERT_FALSE(file.empty());
    const auto text = e2e::slurp(file);
    auto fresh = dir / "fresh.sqlite";
    auto try_import = [&](const std::string& content, const std::string& dataset,
                          const std::vector<std::string>& env = {}) {
        auto f = dir / "samples_edited_2026.jsonl";
        std::ofstream(f, std::ios::trunc) << content;
        return e2e::run({"import", "lm-eval", "--db", fresh.string(), "--name", "lm", "--framing",
                         "raw", "--dataset", dataset, f.string()},
                        env);
    };
    auto refused = [&](const e2e::Outcome& o, const std::string& says) {
        EXPECT_EQ(o.exit_code, 2) << o.out << o.err;
        EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_FALSE(std::filesystem::exists(fresh)) << "a refused import left a database";
    };
    // The question replaced in both of document 0's lines.
    auto edited = edited_lines(text, [](json& j) {
        if (j["doc_id"] == 0) {
            j["doc"]["question"] = "Something else?";
        }
    });
    refused(try_import(edited, "sample"),
            "document 0: its question is not that of question 0 of dataset 'sample'");
    refused(try_import(edited, "sample"), "at character 1 it has \"S\" where the dataset has");
    // Texts that differ past their first 40 bytes, or in a space, are said
    // where they differ, each character beyond doubt (an interop audit:
    // both were cut at 40 bytes, or their spaces collapsed, and read the
    // same).
    auto late = edited_lines(text, [](json& j) {
        if (j["doc_id"] == 1) {
            j["doc"]["question"] = j["doc"]["question"].get<std::string>() + " (edited)";
        }
    });
    {
        auto o = try_import(late, "sample");
        refused(o, "document 1: its question is not that of question 1 of dataset 'sample'");
        EXPECT_NE(o.err.find("?\") it has U+0020 where the dataset has nothing (the text ends)"),
                  std::string::npos)
            << o.err;
        EXPECT_NE(o.err.find("(after \"..."), std::string::npos) << o.err;
    }
    auto spaced = edited_lines(text, [](json& j) {
        if (j["doc_id"] == 2) {
            auto q = j["doc"]["question"].get<std::string>();
            q.replace(q.find(' '), 1, "\n");
            j["doc"]["question"] = q;
        }
    });
    refused(try_import(spaced, "sample"), "it has U+000A where the dataset has U+0020");
    refused(try_import(edited, "sample"), "pass --dataset with the dataset lm-eval ran on");
    // A doc_id the dataset does not have (the sample set has 48 questions).
    auto beyond = edited_lines(text, [](json& j) {
        if (j["doc_id"] == 2) {
            j["doc_id"] = 99999;
        }
    });
    refused(try_import(beyond, "sample"),
            "document 99999: doc_id 99999 is beyond dataset 'sample' (built-in sample set), "
            "which has 48 questions");
    // The sample set's questions are not another dataset's: here a cache
    // whose gsm8k holds other questions.
    auto cache = dir / "cache";
    std::filesystem::create_directories(cache / "gsm8k");
    std::ofstream(cache / "gsm8k" / "test.jsonl")
        << "{\"question\": \"Other 0\", \"answer\": \"#### 0\"}\n"
           "{\"question\": \"Other 1\", \"answer\": \"#### 1\"}\n"
           "{\"question\": \"Other 2\", \"answer\": \"#### 2\"}\n";
    refused(try_import(text, "gsm8k", {"DIFFEVAL_DATA=" + cache.string()}),
            "of question 0 of dataset 'gsm8k' (" + (cache / "gsm8k").string() +
                "): at character 1 it has \"N\" where the dataset has \"O\"");
    // Without the dataset there is nothing to check against.
    refused(try_import(text, "gsm8k", {"DIFFEVAL_DATA=" + (dir / "empty").string()}),
            "GSM8K is not in the cache");
    // The file as exported imports, with its questions hashed as a run
    // hashes them.
    auto ok = try_import(text, "sample");
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_EQ(query(fresh, "SELECT count(*) FROM questions WHERE question_sha256 IS NULL"), "0");
    EXPECT_EQ(query(fresh, "SELECT count(*) FROM requests WHERE question_sha256 IS NULL"), "0");
    EXPECT_EQ(query(fresh, "SELECT group_concat(question_sha256) FROM (SELECT question_sha256 "
                           "FROM questions ORDER BY question_idx)"),
              query(db, "SELECT group_concat(question_sha256) FROM (SELECT question_sha256 FROM "
                        "questions WHERE question_idx < 3 ORDER BY question_idx)"));
    // What an older import left without hashes gets them when imported again.
    e2e::exec(fresh, "UPDATE questions SET question_sha256 = NULL; UPDATE requests SET "
                     "question_sha256 = NULL");
    auto again = try_import(text, "sample");
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("0 responses stored, 3 already stored"), std::string::npos)
        << again.out;
    EXPECT_EQ(query(fresh, "SELECT count(*) FROM questions WHERE question_sha256 IS NULL"), "0");
    EXPECT_EQ(query(fresh, "SELECT count(*) FROM requests WHERE question_sha256 IS NULL"), "0");
}

// A file imported as the official set (the cache `data fetch` fills) and a
// run on the same official file by its path are one set of questions to
// `diff`: the import's questions are hashed as the run's. The import's were
// NULL, and diff refused ("3 of 3 questions differ") though the texts were
// byte-identical.
// A name that holds answers imported from lm-eval is not a live server's: a
// run under it would count the server's answers with the file's and
// rewrite the row saying where they came from. It is refused, as an import
// under a name diffeval ran is.
TEST(LmEvalSamples, ARunUnderAnImportedNameIsRefused) {
    auto dir = e2e::scratch("lm-eval-then-run");
    e2e::Sim sim;
    const auto file = run_and_export(sim, dir / "r.sqlite", dir / "samples", 3);
    ASSERT_FALSE(file.empty());
    auto db = dir / "im.sqlite";
    auto im = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "lm", "--framing",
                        "raw", "--dataset", "sample", file.string()});
    ASSERT_EQ(im.exit_code, 0) << im.err;
    auto o = e2e::run({"run", "--server", "lm=" + sim.url(), "--framing", "raw", "--limit", "5",
                       "--dataset", "sample", "--db", db.string(), "--quiet"});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("server 'lm' has origin live server, but the responses " + db.string() +
                         " holds under that name came from one with origin lm-eval import"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) || ' ' || substr(url, 1, 8) FROM responses, servers"),
              "3 lm-eval:");
}

TEST(LmEvalSamples, ImportedOfficialQuestionsPairWithARunOnTheFile) {
    const char* gsm = std::getenv("GSM8K_DIR");
    if (!gsm || !*gsm) {
        GTEST_SKIP() << "GSM8K_DIR not set: the official set's import is not checked";
    }
    const std::filesystem::path official(gsm);
    auto dir = e2e::scratch("lm-eval-official");
    auto cache = dir / "cache";
    std::filesystem::create_directories(cache / "gsm8k");
    for (const auto* name : {"test.jsonl", "train.jsonl"}) {
        std::filesystem::copy_file(official / name, cache / "gsm8k" / name);
    }
    const std::vector<std::string> env = {"DIFFEVAL_DATA=" + cache.string()};
    const auto test = (official / "test.jsonl").string();
    e2e::Sim sim({"--dataset", test, "--fewshot-from", (official / "train.jsonl").string()});
    auto db = dir / "r.sqlite";
    auto out = dir / "samples";
    const auto file = run_and_export(sim, db, out, 3, test);
    ASSERT_FALSE(file.empty());
    auto im = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "lm", "--framing",
                        "raw", "--dataset", "gsm8k", file.string()},
                       env);
    ASSERT_EQ(im.exit_code, 0) << im.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM questions WHERE dataset = 'gsm8k' AND "
                        "question_sha256 IS NOT NULL"),
              "3");
    auto d = e2e::run({"diff", "--db", db.string(), "a/raw/256", "lm/raw/256", "--format", "json"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    auto dj = json::parse(d.out);
    EXPECT_TRUE(dj["comparisons"][0]["flips"]["a_better"].empty()) << d.out;
    EXPECT_TRUE(dj["comparisons"][0]["flips"]["b_better"].empty()) << d.out;
    // The official set's questions: the sample set's under that name are refused.
    auto sample_db = dir / "s.sqlite";
    ASSERT_EQ(e2e::run({"run", "--server", "s=" + sim.url(), "--framing", "raw", "--limit", "2",
                        "--dataset", "sample", "--db", sample_db.string(), "--quiet"})
                  .exit_code,
              0);
    auto sample_out = dir / "sample-samples";
    ASSERT_EQ(e2e::run({"export", "--db", sample_db.string(), "--format", "lm-eval-samples",
                        "--out", sample_out.string()})
                  .exit_code,
              0);
    auto wrong = e2e::run({"import", "lm-eval", "--db", (dir / "w.sqlite").string(), "--name", "lm",
                           "--dataset", "gsm8k", exported(sample_out, "s").string()},
                          env);
    EXPECT_EQ(wrong.exit_code, 2) << wrong.err;
    EXPECT_NE(wrong.err.find("is not that of question 0 of dataset 'gsm8k'"), std::string::npos)
        << wrong.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "w.sqlite"));
}

// Servers whose names differ only where a file name cannot show it (`a_b`
// and `a-b`; `a-b` and `A-B` on a case-insensitive file system) get files
// of their own. `a_b` and `a-b` were both written to `gsm8k-a-b-raw-256`:
// "wrote 2 samples files" and one file on disk.
TEST(LmEvalSamples, ExportWritesOneFilePerGroupWhateverTheNames) {
    auto dir = e2e::scratch("lm-eval-names");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    ASSERT_EQ(e2e::run({"run", "--server", "a_b=" + sim.url(), "--server", "a-b=" + sim.url(),
                        "--server", "A-B=" + sim.url(), "--framing", "raw", "--limit", "2",
                        "--dataset", "sample", "--db", db.string(), "--quiet"})
                  .exit_code,
              0);
    auto out = dir / "samples";
    auto ex = e2e::run(
        {"export", "--db", db.string(), "--format", "lm-eval-samples", "--out", out.string()});
    ASSERT_EQ(ex.exit_code, 0) << ex.err;
    EXPECT_NE(ex.err.find("wrote 3 samples files (12 lines)"), std::string::npos) << ex.err;
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(out)) {
        names.push_back(e.path().filename().string());
        EXPECT_EQ(read_lines(e.path()).size(), 4u) << names.back();
    }
    ASSERT_EQ(names.size(), 3u);
    std::sort(names.begin(), names.end());
    // a_b is spelled out; a-b and A-B, equal ignoring case, carry their hashes.
    EXPECT_TRUE(names[0].starts_with("samples_gsm8k-A-B-raw-256-")) << names[0];
    EXPECT_TRUE(names[1].starts_with("samples_gsm8k-a-b-raw-256-")) << names[1];
    EXPECT_TRUE(names[2].starts_with("samples_gsm8k-a_5Fb-raw-256_")) << names[2];
    std::set<std::string> lowered;
    for (auto n : names) {
        std::transform(n.begin(), n.end(), n.begin(), ::tolower);
        lowered.insert(n);
    }
    EXPECT_EQ(lowered.size(), 3u);
}

// A name the run takes makes a file name a file system takes: each escaped
// byte is three, so 40 Cyrillic letters (75 bytes) made 225 and the export
// failed with "File name too long", the groups before it already written.
// Long tasks are cut and kept apart by their group's hash; an import of the
// file finds its group's task in it.
TEST(LmEvalSamples, ExportTakesEveryNameTheRunTakes) {
    auto dir = e2e::scratch("lm-eval-long");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    const std::string cyrillic = "сервер-для-проверки-точности-модели-qwen";
    const std::string long_a(300, 'x');
    const std::string long_b = long_a + "y";
    ASSERT_EQ(e2e::run({"run", "--server", "a=" + sim.url(), "--server", cyrillic + "=" + sim.url(),
                        "--server", long_a + "=" + sim.url(), "--server", long_b + "=" + sim.url(),
                        "--framing", "raw", "--limit", "2", "--dataset", "sample", "--db",
                        db.string(), "--quiet"})
                  .exit_code,
              0);
    auto out = dir / "samples";
    auto ex = e2e::run(
        {"export", "--db", db.string(), "--format", "lm-eval-samples", "--out", out.string()});
    ASSERT_EQ(ex.exit_code, 0) << ex.err;
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(out)) {
        names.push_back(e.path().filename().string());
        EXPECT_LE(names.back().size(), 255u) << names.back();
        EXPECT_EQ(read_lines(e.path()).size(), 4u) << names.back(); // as the test above
    }
    EXPECT_EQ(names.size(), 4u);
}

// The bytes of a line are json.dumps(..., ensure_ascii=False)'s: a text
// with quotes, a backslash, control characters, DEL and non-ASCII is written
// as CPython writes it (the expected strings are what CPython 3.11 prints),
// and invalid UTF-8 becomes U+FFFD, as a Python str never holds it.
TEST(LmEvalSamples, ExportedTextsAreEscapedAsPythonWritesThem) {
    auto dir = e2e::scratch("lm-eval-escapes");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    ASSERT_EQ(e2e::run({"run", "--server", "s=" + sim.url(), "--framing", "raw", "--limit", "2",
                        "--dataset", "sample", "--db", db.string(), "--quiet"})
                  .exit_code,
              0);
    // json.dumps('a"b\\c\x01\x1f\x7f\tn\u00e9 \u201cq\u201d \U0001F600\n', ensure_ascii=False)
    const std::string of_question =
        " WHERE response_id = (SELECT response_id FROM requests WHERE question_idx = ";
    e2e::exec(db, "UPDATE responses SET text = 'a\"b\\c' || char(1) || char(31) || char(127) || "
                  "char(9) || 'né “q” 😀' || char(10)" +
                      of_question + "0)");
    e2e::exec(db, "UPDATE responses SET text = CAST(x'41ff42c3' AS TEXT)" + of_question + "1)");
    auto out = dir / "samples";
    auto ex = e2e::run(
        {"export", "--db", db.string(), "--format", "lm-eval-samples", "--out", out.string()});
    ASSERT_EQ(ex.exit_code, 0) << ex.err;
    std::vector<std::string> lines;
    for (const auto& e : std::filesystem::directory_iterator(out)) {
        std::ifstream in(e.path());
        for (std::string line; std::getline(in, line);) {
            lines.push_back(line);
        }
    }
    ASSERT_EQ(lines.size(), 4u);
    const auto resps = [](const std::string& line) {
        const auto from = line.find("\"resps\": ");
        const auto to = line.find(", \"filtered_resps\"");
        return from == std::string::npos || to == std::string::npos ? std::string()
                                                                    : line.substr(from, to - from);
    };
    EXPECT_EQ(resps(lines[0]), "\"resps\": [[\"a\\\"b\\\\c\\u0001\\u001f\x7f\\tné “q” 😀\\n\"]]");
    EXPECT_EQ(resps(lines[1]), resps(lines[0])) << "both filters' lines carry the response";
    EXPECT_EQ(resps(lines[2]), "\"resps\": [[\"A\xef\xbf\xbd"
                               "B\xef\xbf\xbd\"]]");
    // Every line is one JSON object with lm-eval's keys in lm-eval's order.
    for (const auto& line : lines) {
        auto j = nlohmann::ordered_json::parse(line);
        std::vector<std::string> keys;
        for (const auto& [k, v] : j.items()) {
            keys.push_back(k);
        }
        EXPECT_EQ(keys, (std::vector<std::string>{"doc_id", "doc", "target", "arguments", "resps",
                                                  "filtered_resps", "filter", "metrics", "doc_hash",
                                                  "prompt_hash", "target_hash", "exact_match"}));
    }
}

// A document logged twice with other answers is another run in the same
// file: refused naming the document, where the first line's answers were
// kept without a word.
TEST(LmEvalSamples, ADocumentWithTwoSetsOfAnswersIsRefused) {
    auto dir = e2e::scratch("lm-eval-twice");
    const auto dataset = (dir / "qa.jsonl").string();
    std::ofstream(dataset) << "{\"question\": \"Q\", \"answer\": \"A #### 1\"}\n";
    const std::string line0 = "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A "
                              "#### 1\"}, \"filter\": \"strict-match\", \"resps\": [[\"#### 1\"]]}";
    const std::string line1 = "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A "
                              "#### 1\"}, \"filter\": \"flexible-extract\", \"resps\": [[\"#### "
                              "2\"]]}";
    auto file = dir / "samples_gsm8k_2026.jsonl";
    std::ofstream(file) << line0 << "\n" << line1 << "\n";
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", "--dataset",
                       dataset, file.string()});
    EXPECT_EQ(o.exit_code, 2) << o.out << o.err;
    EXPECT_NE(o.err.find(file.string() +
                         ":2: document 0 is logged again with other resps than on line 1"),
              std::string::npos)
        << o.err;
    EXPECT_FALSE(std::filesystem::exists(db));
    // The same answers on both lines (one per filter) are one document.
    std::ofstream(file, std::ios::trunc) << line0 << "\n"
                                         << replaced(line1, "#### 2", "#### 1") << "\n";
    auto same = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", "--dataset",
                          dataset, file.string()});
    EXPECT_EQ(same.exit_code, 0) << same.err;
    EXPECT_NE(same.out.find("1 document, 1 response stored"), std::string::npos) << same.out;
    // One filter's verdict logged twice, the second flipped: the later was
    // stored silently, a correct answer's exact_match 0 (an outside audit).
    const std::string judged = replaced(line0, "\"resps\"",
                                        "\"exact_match\": 1.0, \"metrics\": "
                                        "[\"exact_match\"], \"resps\"");
    auto twice = dir / "samples_gsm8k_2027.jsonl";
    std::ofstream(twice) << judged << "\n"
                         << replaced(judged, "\"exact_match\": 1.0", "\"exact_match\": 0.0")
                         << "\n";
    auto other = dir / "s.sqlite";
    auto flipped = e2e::run({"import", "lm-eval", "--db", other.string(), "--name", "x",
                             "--dataset", dataset, twice.string()});
    EXPECT_EQ(flipped.exit_code, 2) << flipped.out << flipped.err;
    EXPECT_NE(flipped.err.find(twice.string() + ":2: document 0 is logged again under filter "
                                                "'strict-match' with another verdict than on "
                                                "line 1"),
              std::string::npos)
        << flipped.err;
    EXPECT_FALSE(std::filesystem::exists(other));
    // The same line twice is one verdict.
    std::ofstream(twice, std::ios::trunc) << judged << "\n" << judged << "\n";
    EXPECT_EQ(e2e::run({"import", "lm-eval", "--db", other.string(), "--name", "x", "--dataset",
                        dataset, twice.string()})
                  .exit_code,
              0);
}

// A max_gen_toks that is no token limit: -5 made the group lm/raw/-5, and
// "abc" or 1e20 became 256 without a word. Each is one line naming the file
// and line, exit 2, nothing stored; a document without one takes lm-eval's
// default 256.
TEST(LmEvalSamples, AMaxGenToksThatIsNoTokenLimitIsRefused) {
    auto dir = e2e::scratch("lm-eval-max-gen-toks");
    const auto dataset = (dir / "qa.jsonl").string();
    std::ofstream(dataset) << "{\"question\": \"Q\", \"answer\": \"A #### 1\"}\n";
    auto line = [](const std::string& gen) {
        return "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A #### 1\"}, "
               "\"arguments\": {\"gen_args_0\": {\"arg_0\": \"Q\", \"arg_1\": {" +
               gen + "}}}, \"resps\": [[\"#### 1\"]]}\n";
    };
    auto file = dir / "samples_gsm8k_2026.jsonl";
    auto db = dir / "r.sqlite";
    for (const std::string value : {"-5", "0", "\"abc\"", "1e20", "256.0", "20000000"}) {
        std::ofstream(file, std::ios::trunc)
            << line("\"until\": [], \"max_gen_toks\": 256") << line("\"max_gen_toks\": " + value);
        auto o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", "--dataset",
                           dataset, file.string()});
        EXPECT_EQ(o.exit_code, 2) << value << ": " << o.out << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_NE(o.err.find(file.string() + ":2: max_gen_toks "), std::string::npos) << o.err;
        EXPECT_NE(o.err.find(" is no token limit (a whole number from 1 to 10000000); correct "
                             "it, or remove it for lm-eval's default 256"),
                  std::string::npos)
            << o.err;
        EXPECT_FALSE(std::filesystem::exists(db)) << value;
    }
    std::ofstream(file, std::ios::trunc) << line("\"until\": []");
    auto none = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", "--dataset",
                          dataset, file.string()});
    EXPECT_EQ(none.exit_code, 0) << none.err;
    EXPECT_EQ(query(db, "SELECT DISTINCT max_tokens FROM requests"), "256");
}

// An exported file imported without --framing is named after its task, the
// exported group's name; --framing gives the group its framing back.
TEST(LmEvalSamples, AnExportedFileKeepsItsTaskAsFramingUnlessGivenOne) {
    auto dir = e2e::scratch("lm-eval-framing");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    auto out = dir / "samples";
    const auto file = run_and_export(sim, db, out, 2).string();
    auto fresh = (dir / "fresh.sqlite").string();
    auto by_task =
        e2e::run({"import", "lm-eval", "--db", fresh, "--name", "a", "--dataset", "sample", file});
    ASSERT_EQ(by_task.exit_code, 0) << by_task.err;
    EXPECT_NE(by_task.out.find("as a/gsm8k-a-raw-256/256"), std::string::npos) << by_task.out;
    auto given = e2e::run({"import", "lm-eval", "--db", fresh, "--name", "a", "--framing", "raw",
                           "--dataset", "sample", file});
    ASSERT_EQ(given.exit_code, 0) << given.err;
    EXPECT_NE(given.out.find("as a/raw/256"), std::string::npos) << given.out;
}

// The task in a file's name is the group's framing when --framing is not
// given, so it is held to the names' rule: a terminal escape or a space in
// the file name became a group "a/gsm8k\x1b[2J x/256" in every table. And
// a path in another encoding, kept as JSON, ended the import as an internal
// error with an empty database left behind.
TEST(LmEvalSamples, AFileNameThatMakesNoGroupNameIsRefusedAndAnyPathIsStored) {
    auto dir = e2e::scratch("lm-eval-file-name");
    e2e::Sim sim;
    const auto file = run_and_export(sim, dir / "r.sqlite", dir / "samples", 2);
    const auto escaped = dir / "samples_gsm8k\x1b[2J x_2026.jsonl";
    std::filesystem::copy_file(file, escaped);
    const auto db = (dir / "i.sqlite").string();
    auto bad = e2e::run(
        {"import", "lm-eval", "--db", db, "--name", "a", "--dataset", "sample", escaped.string()});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
    EXPECT_NE(bad.err.find("pass --framing NAME"), std::string::npos) << bad.err;
    EXPECT_FALSE(std::filesystem::exists(db));
    auto given = e2e::run({"import", "lm-eval", "--db", db, "--name", "a", "--framing", "raw",
                           "--dataset", "sample", escaped.string()});
    EXPECT_EQ(given.exit_code, 0) << given.err;

    const auto latin1 = dir / "samples_gsm8k_caf\xe9.jsonl";
    std::filesystem::copy_file(file, latin1);
    const auto db2 = (dir / "i2.sqlite").string();
    auto other = e2e::run(
        {"import", "lm-eval", "--db", db2, "--name", "a", "--dataset", "sample", latin1.string()});
    ASSERT_EQ(other.exit_code, 0) << other.err;
    auto summary = e2e::run({"summary", "--db", db2, "--format", "json"});
    EXPECT_EQ(summary.exit_code, 0) << summary.err;
    EXPECT_NE(e2e::query(db2, "SELECT config_json FROM runs").find("caf\xef\xbf\xbd"),
              std::string::npos);
}

// lm-eval's samples keep each answer's text, not how it ended nor how long
// it took. An imported run of diffeval's own answers showed "never fin.
// 30/30" where the run had 22 finished, diff "finished -> other" and "p50 240
// -> 0 ms", the report "regressed ... mostly finished -> other", and the
// gate's never-finished check failed on an increase nobody measured. Now the
// answers are `unrecorded` (not never finished), their latency is NULL and
// shown as "-", and the gate says the check cannot be measured.
TEST(LmEvalSamples, AnImportRecordsNoFinishStateAndNoLatency) {
    auto dir = e2e::scratch("lm-eval-unrecorded");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    auto out = dir / "samples";
    run_and_export(sim, db, out, 30);
    auto im = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "lm", "--framing",
                        "raw", "--dataset", "sample", exported(out, "a").string()});
    ASSERT_EQ(im.exit_code, 0) << im.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE server = 'lm' AND "
                        "latency_ms IS NULL AND outcome = 'unrecorded'"),
              "30");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE server = 'a' AND "
                        "(latency_ms IS NULL OR outcome = 'unrecorded')"),
              "0");

    // The summary: none of the import never finished; 30 unrecorded; no latency.
    auto sj = e2e::run({"summary", "--db", db.string(), "--format", "json"});
    ASSERT_EQ(sj.exit_code, 0) << sj.err;
    const auto groups = json::parse(sj.out)["groups"];
    ASSERT_EQ(groups.size(), 2u) << sj.out;
    const auto& lm = groups[1];
    ASSERT_EQ(lm["server"], "lm");
    EXPECT_EQ(lm["breakdown"]["mean"]["never_finished"], 0.0) << sj.out;
    EXPECT_EQ(lm["breakdown"]["mean"]["unrecorded"], 30.0) << sj.out;
    EXPECT_EQ(lm["breakdown"]["per_repeat"][0]["unrecorded"], 30) << sj.out;
    EXPECT_EQ(lm["latency"]["responses"], 0) << sj.out;
    EXPECT_TRUE(lm["latency"]["p50_ms"].is_null()) << sj.out;
    EXPECT_TRUE(lm["latency"]["requests_per_s"].is_null()) << sj.out;
    EXPECT_EQ(groups[0]["breakdown"]["mean"]["unrecorded"], 0.0) << sj.out;
    EXPECT_GT(groups[0]["latency"]["responses"], 0) << sj.out;
    auto st = e2e::run({"summary", "--db", db.string()});
    ASSERT_EQ(st.exit_code, 0) << st.err;
    EXPECT_NE(st.out.find("unrec."), std::string::npos) << st.out;
    // The import's rows: never finished 0, unrecorded 30; latency "-".
    EXPECT_TRUE(RE2::PartialMatch(st.out, R"((?m)^lm/raw/256 +\d+ +0 +0 +0 +0 +0 +30 +0 )"))
        << st.out;
    EXPECT_TRUE(RE2::PartialMatch(st.out, R"((?m)^lm/raw/256 +0 +- +- +- +- )")) << st.out;

    // diff: no transition to `other`, no latency compared with 0 ms.
    auto d = e2e::run({"diff", "--db", db.string(), "a/raw/256", "lm/raw/256"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_EQ(d.out.find("-> other"), std::string::npos) << d.out;
    EXPECT_EQ(d.out.find("Latency p50"), std::string::npos) << d.out;
    auto dj =
        e2e::run({"diff", "--db", db.string(), "a/raw/256", "lm/raw/256", "--format", "json"});
    ASSERT_EQ(dj.exit_code, 0) << dj.err;
    const auto cmp = json::parse(dj.out)["comparisons"][0];
    EXPECT_TRUE(cmp["latency"].is_null()) << dj.out;
    for (const auto& t : cmp["transitions"]) {
        EXPECT_EQ(t["b"], "unrecorded") << dj.out;
    }

    // The report's headline and tables blame no outcome on the import.
    auto rep = e2e::run({"report", "--db", db.string(), "--out", (dir / "report").string()});
    ASSERT_EQ(rep.exit_code, 0) << rep.err;
    const auto md = e2e::slurp(dir / "report/report.md");
    EXPECT_EQ(md.find("-> other"), std::string::npos) << md;
    EXPECT_EQ(md.find("regressed"), std::string::npos) << md;

    // The gate: the never-finished check says it cannot measure the import
    // (a gate that cannot measure does not pass), not that it rose; the
    // import's reasoning starts are measured as any answers are.
    auto g =
        e2e::run({"gate", "--db", db.string(), "--baseline", "a", "--candidate", "lm",
                  "--max-never-finished-increase", "0", "--max-reasoning-start-increase", "0"});
    EXPECT_EQ(g.exit_code, 1) << g.out << g.err;
    EXPECT_NE(g.out.find("lm/raw/256 recorded no finish state"), std::string::npos) << g.out;
    EXPECT_EQ(g.out.find("never finished rose"), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("PASS  reasoning_start a/raw/256 -> lm/raw/256"), std::string::npos)
        << g.out;
}

// A request that failed is exported as lm-eval counts it (no answer,
// exact_match 0) and marked, so an import stores the failure: imported as
// an answer "", five HTTP 500s became stored successes and the imported
// database passed --require-complete.
TEST(LmEvalSamples, AFailedRequestStaysAFailureThroughExportAndImport) {
    auto dir = e2e::scratch("lm-eval-failed");
    auto profile = dir / "flaky.toml";
    std::ofstream(profile) << "version = 1\nname = \"flaky\"\n[faults]\nhttp_500 = 0.5\n";
    e2e::Sim sim({"--profile", profile.string()});
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "s=" + sim.url(), "--framing", "raw", "--limit", "12",
                       "--dataset", "sample", "--retries", "0", "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 1) << o.err;
    const auto failed = e2e::query(db, "SELECT count(*) FROM v_responses WHERE ok = 0");
    ASSERT_NE(failed, "0");
    auto out = dir / "samples";
    ASSERT_EQ(e2e::run({"export", "--db", db.string(), "--format", "lm-eval-samples", "--out",
                        out.string()})
                  .exit_code,
              0);
    const auto file = std::filesystem::directory_iterator(out)->path();
    size_t marked = 0;
    for (const auto& line : read_lines(file)) {
        if (line.contains("diffeval_error")) {
            ++marked;
            EXPECT_EQ(line["diffeval_error_kind"], "http") << line.dump();
            EXPECT_EQ(line["exact_match"], 0.0) << line.dump();
        }
    }
    EXPECT_EQ(marked, 2 * std::stoul(failed)); // a line per filter
    auto imported = dir / "imported.sqlite";
    auto i = e2e::run({"import", "lm-eval", "--db", imported.string(), "--name", "lm", "--framing",
                       "raw", "--dataset", "sample", file.string()});
    ASSERT_EQ(i.exit_code, 0) << i.err;
    EXPECT_EQ(e2e::query(imported, "SELECT count(*) FROM v_responses WHERE ok = 0 AND "
                                   "error_kind = 'http' AND error LIKE '%500%'"),
              failed);
    auto gate = e2e::run({"gate", "--db", imported.string(), "--require-complete"});
    EXPECT_EQ(gate.exit_code, 1) << gate.out;
    // The same file again stores nothing: each import stored its failed
    // lines once more, and said "N responses stored".
    const auto rows = e2e::query(imported, "SELECT count(*) FROM responses");
    i = e2e::run({"import", "lm-eval", "--db", imported.string(), "--name", "lm", "--framing",
                  "raw", "--dataset", "sample", file.string()});
    ASSERT_EQ(i.exit_code, 0) << i.err;
    EXPECT_NE(i.out.find("nothing new"), std::string::npos) << i.out << i.err;
    EXPECT_EQ(e2e::query(imported, "SELECT count(*) FROM responses"), rows);
    // An import killed while it wrote leaves its run `running` (its lock
    // gone with its process): the next import marks it killed, as a run
    // does, where it stayed running for good.
    e2e::exec(imported, "UPDATE runs SET status = 'running' WHERE run_id = 1");
    i = e2e::run({"import", "lm-eval", "--db", imported.string(), "--name", "lm", "--framing",
                  "raw", "--dataset", "sample", file.string()});
    ASSERT_EQ(i.exit_code, 0) << i.err;
    EXPECT_EQ(e2e::query(imported, "SELECT status FROM runs WHERE run_id = 1"), "killed");
}

// A database with planned requests and no response (a run killed while
// planning) has nothing to export: said, exit 2, as summary and gate say.
TEST(LmEvalSamples, ExportingADatabaseWithoutResponsesIsADataError) {
    auto dir = e2e::scratch("lm-eval-empty-export");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    ASSERT_EQ(e2e::run({"run", "--server", "s=" + sim.url(), "--framing", "raw", "--limit", "2",
                        "--db", db.string(), "--quiet"})
                  .exit_code,
              0);
    e2e::unsend(db, "1");
    auto o = e2e::run({"export", "--db", db.string(), "--format", "lm-eval-samples", "--out",
                       (dir / "out").string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("holds no response to export"), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
}

// A killed run exports the lines it has: lm-eval reads the files as the
// whole run, so its 6 answered questions of 60 came back from an import at
// 100% with no word (an outside audit). The export counts what is missing.
TEST(LmEvalSamples, AnExportOfAnUnfinishedRunCountsWhatIsMissing) {
    auto dir = e2e::scratch("lm-eval-partial-export");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    ASSERT_EQ(e2e::run({"run", "--server", "s=" + sim.url(), "--framing", "raw", "--limit", "6",
                        "--db", db.string(), "--quiet"})
                  .exit_code,
              0);
    e2e::unsend(db, "question_idx >= 2");
    auto o = e2e::run({"export", "--db", db.string(), "--format", "lm-eval-samples", "--out",
                       (dir / "out").string()});
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.err.find("note: 4 requests planned in " + db.string() +
                         " were never sent (a run stopped first), and have no line"),
              std::string::npos)
        << o.err;
    // While a run still writes the file, they are not answered yet, and
    // running it again is not the advice (a hostile-input audit).
    {
        const int held = ::open((db.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
        ASSERT_GE(held, 0);
        const std::string who = "pid 4242, started 2026-12-07T00:00:00.000Z, diffeval run\n";
        ASSERT_EQ(::write(held, who.data(), who.size()), static_cast<ssize_t>(who.size()));
        ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
        auto live = e2e::run({"export", "--db", db.string(), "--format", "lm-eval-samples", "--out",
                              (dir / "live-out").string()});
        ::close(held);
        EXPECT_EQ(live.exit_code, 0) << live.err;
        EXPECT_NE(live.err.find("note: 4 requests planned in " + db.string() +
                                " were not answered yet (diffeval run (pid 4242, started "
                                "2026-12-07T00:00:00.000Z) still writes it), and have no line"),
                  std::string::npos)
            << live.err;
        EXPECT_NE(live.err.find("wait for it to finish, then export"), std::string::npos)
            << live.err;
        EXPECT_EQ(live.err.find("a run stopped first"), std::string::npos) << live.err;
    }
    // A merge writing it sends nothing: the stopped run's advice stands.
    {
        const int held = ::open((db.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
        ASSERT_GE(held, 0);
        const std::string who = "pid 4243, started 2026-12-07T00:00:00.000Z, diffeval merge\n";
        ASSERT_EQ(::write(held, who.data(), who.size()), static_cast<ssize_t>(who.size()));
        ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
        auto merging = e2e::run({"export", "--db", db.string(), "--format", "lm-eval-samples",
                                 "--out", (dir / "merge-out").string()});
        ::close(held);
        EXPECT_EQ(merging.exit_code, 0) << merging.err;
        EXPECT_NE(merging.err.find("were never sent (a run stopped first)"), std::string::npos)
            << merging.err;
        EXPECT_EQ(merging.err.find("not answered yet"), std::string::npos) << merging.err;
    }
    // A finished run's export says nothing of the kind.
    auto whole = dir / "whole.sqlite";
    ASSERT_EQ(e2e::run({"run", "--server", "s=" + sim.url(), "--framing", "raw", "--limit", "2",
                        "--db", whole.string(), "--quiet"})
                  .exit_code,
              0);
    auto w = e2e::run({"export", "--db", whole.string(), "--format", "lm-eval-samples", "--out",
                       (dir / "whole-out").string()});
    EXPECT_EQ(w.exit_code, 0) << w.err;
    EXPECT_EQ(w.err.find("note:"), std::string::npos) << w.err;
}

// Interop audit: a samples line without `arguments` (or with lm-eval's
// pre-0.4.3 list of arguments) was imported, and any later export of the
// database crashed (SIGSEGV) or stopped as an internal error. Now each is
// exported with its arguments as stored, and a prompt_hash of its context.
TEST(LmEvalSamples, AnImportWithoutUsualArgumentsIsExported) {
    auto dir = e2e::scratch("lm-eval-no-arguments");
    const auto dataset = (dir / "qa.jsonl").string();
    std::ofstream(dataset) << "{\"question\": \"Q\", \"answer\": \"A #### 1\"}\n";
    const std::string doc = "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A #### "
                            "1\"}, \"resps\": [[\"#### 1\"]]";
    for (const std::string& arguments :
         {std::string(), std::string(", \"arguments\": {}"),
          std::string(", \"arguments\": {\"gen_args_0\": {}}"),
          std::string(", \"arguments\": [[\"ctx\", {\"until\": []}]]"),
          std::string(", \"arguments\": \"ctx\"")}) {
        std::filesystem::remove_all(dir / "out");
        auto db = dir / "r.sqlite";
        std::filesystem::remove(db);
        auto file = dir / "samples_gsm8k_2026.jsonl";
        std::ofstream(file, std::ios::trunc) << doc << arguments << "}\n";
        auto in = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "lm", "--dataset",
                            dataset, file.string()});
        ASSERT_EQ(in.exit_code, 0) << arguments << ": " << in.err;
        auto ex = e2e::run({"export", "--db", db.string(), "--format", "lm-eval-samples", "--out",
                            (dir / "out").string()});
        ASSERT_EQ(ex.exit_code, 0) << arguments << ": " << ex.err;
        std::vector<json> lines;
        for (const auto& e : std::filesystem::directory_iterator(dir / "out")) {
            lines = read_lines(e.path());
        }
        ASSERT_EQ(lines.size(), 2u) << arguments;
        EXPECT_EQ(lines[0]["resps"], json::parse("[[\"#### 1\"]]")) << arguments;
        // The list form's context is "ctx", as lm-eval hashed it.
        if (arguments.find("[[\"ctx\"") != std::string::npos) {
            EXPECT_EQ(lines[0]["prompt_hash"],
                      "0230c6b1d833c51cc426492022677b74c60d82891931221a42db9e7bb06205e9")
                << "sha256 of 'ctx'";
        }
    }
}

// Interop audit: answers that are not strings (null, 123, an object, a
// list) were stored as successes holding their JSON text ("null" scored as
// an answer); a doc_id of the wrong type was called missing; a document
// without an answer was left out, and a file of them imported as nothing.
TEST(LmEvalSamples, AFieldOfTheWrongTypeIsNamed) {
    auto dir = e2e::scratch("lm-eval-types");
    const auto dataset = (dir / "qa.jsonl").string();
    std::ofstream(dataset) << "{\"question\": \"Q\", \"answer\": \"A #### 1\"}\n";
    const std::string doc = "\"doc\": {\"question\": \"Q\", \"answer\": \"A #### 1\"}";
    auto file = dir / "samples_gsm8k_2026.jsonl";
    auto db = dir / "r.sqlite";
    for (const auto& [line, said] : std::vector<std::pair<std::string, std::string>>{
             {"{\"doc_id\": 0, " + doc + ", \"resps\": [[null]]}",
              "resps holds something other than answer strings"},
             {"{\"doc_id\": 0, " + doc + ", \"resps\": [[123]]}",
              "resps holds something other than answer strings"},
             {"{\"doc_id\": 0, " + doc + ", \"resps\": [[{\"text\": \"#### 1\"}]]}",
              "resps holds something other than answer strings"},
             {"{\"doc_id\": 0, " + doc + ", \"resps\": [[[\"#### 1\"]]]}",
              "resps holds something other than answer strings"},
             // No answer at all: imported, the group held nothing and the
             // import said it stored a complete run (reliability session).
             {"{\"doc_id\": 0, " + doc + ", \"resps\": [[]]}", "resps holds no answer"},
             {"{\"doc_id\": 0, " + doc + ", \"resps\": []}", "resps holds no answer"},
             {"{\"doc_id\": \"0\", " + doc + ", \"resps\": [[\"#### 1\"]]}",
              "doc_id is not an integer"},
             {"{\"doc_id\": 0, " + doc + ", \"resps\": \"#### 1\"}", "resps is not a list"},
             // An internal error, exit 1, and an empty database left behind
             // (an outside audit).
             {"{\"doc_id\": 0, " + doc +
                  ", \"filter\": [\"strict-match\"], \"resps\": [[\"#### 1\"]]}",
              "filter is not a string"},
             {"{\"doc_id\": 0, " + doc + ", \"filter\": null, \"resps\": [[\"#### 1\"]]}",
              "filter is not a string"},
             // lm-eval's own verdict, stored as it was (an interop audit:
             // "yes" was kept as an exact_match).
             {"{\"doc_id\": 0, " + doc +
                  ", \"resps\": [[\"#### 1\"]], \"metrics\": [\"exact_match\"], "
                  "\"exact_match\": \"yes\"}",
              "metric exact_match is not a number"},
             {"{\"doc_id\": 0, " + doc + ", \"resps\": [[\"#### 1\"]], \"filtered_resps\": [7]}",
              "filtered_resps is not a list of answer strings"},
             {"{\"doc_id\": 0, " + doc + ", \"resps\": [[\"#### 1\"]], \"filtered_resps\": \"1\"}",
              "filtered_resps is not a list of answer strings"}}) {
        std::ofstream(file, std::ios::trunc) << line << "\n";
        auto o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", "--dataset",
                           dataset, file.string()});
        EXPECT_EQ(o.exit_code, 2) << line << ": " << o.out << o.err;
        EXPECT_NE(o.err.find(file.string() + ":1: " + said + ", as lm-eval never writes it"),
                  std::string::npos)
            << o.err;
        EXPECT_FALSE(std::filesystem::exists(db)) << line;
    }
}

// Interop audit: a second file of the same task logged with other
// arguments (another temperature) got new request keys and was stored
// beside the first in repeat 0, each question answered twice in one repeat
// and its accuracy the mean of two configurations. It is refused; files
// whose documents differ in max_gen_toks are named as the groups they are.
TEST(LmEvalSamples, AFileOfAnotherConfigurationIsRefused) {
    auto dir = e2e::scratch("lm-eval-other-config");
    const auto dataset = (dir / "qa.jsonl").string();
    std::ofstream(dataset) << "{\"question\": \"Q0\", \"answer\": \"A #### 1\"}\n"
                           << "{\"question\": \"Q1\", \"answer\": \"A #### 2\"}\n";
    auto line = [](int id, const std::string& gen, const std::string& answer) {
        return fmt::format("{{\"doc_id\": {0}, \"doc\": {{\"question\": \"Q{0}\", \"answer\": "
                           "\"A #### {1}\"}}, \"arguments\": {{\"gen_args_0\": {{\"arg_0\": "
                           "\"Q{0}\", \"arg_1\": {{{2}}}}}}}, \"resps\": [[\"{3}\"]]}}\n",
                           id, id + 1, gen, answer);
    };
    auto first = dir / "run1" / "samples_gsm8k_2026.jsonl";
    auto second = dir / "run2" / "samples_gsm8k_2026.jsonl";
    std::filesystem::create_directories(first.parent_path());
    std::filesystem::create_directories(second.parent_path());
    std::ofstream(first) << line(0, "\"temperature\": 0.0", "#### 1")
                         << line(1, "\"temperature\": 0.0", "#### 2");
    std::ofstream(second) << line(0, "\"temperature\": 0.7", "#### 0")
                          << line(1, "\"temperature\": 0.7", "#### 0");
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "lm", "--dataset",
                       dataset, first.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "lm", "--dataset", dataset,
                  second.string()});
    EXPECT_EQ(o.exit_code, 2) << o.out << o.err;
    EXPECT_NE(o.err.find(second.string() + ": document 0 (repeat 0) is stored in lm/gsm8k/256 "
                                           "from a file logged with other arguments (another "
                                           "configuration); import it under another --name or "
                                           "into another --db"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "2");
    // Under another name it is its own group.
    o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "warm", "--dataset", dataset,
                  second.string()});
    EXPECT_EQ(o.exit_code, 0) << o.err;

    // Two token limits in one file: two groups, both named.
    auto both = dir / "samples_gsm8k_2027.jsonl";
    std::ofstream(both) << line(0, "\"max_gen_toks\": 512", "#### 1")
                        << line(1, "\"max_gen_toks\": 1024", "#### 2");
    o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "two", "--dataset", dataset,
                  both.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("as two/gsm8k/512, two/gsm8k/1024: 2 documents"), std::string::npos)
        << o.out;
}

// Interop audit #10: a gzipped samples file was "not UTF-8 ... converted to
// another encoding?", and lm-eval's pre-0.4.3 JSON array a line "cut off".
TEST(LmEvalSamples, AGzippedFileOrAJsonArrayIsNamedAsSuch) {
    auto dir = e2e::scratch("lm-eval-shapes");
    auto db = dir / "r.sqlite";
    const auto dataset = (dir / "qa.jsonl").string();
    std::ofstream(dataset) << "{\"question\": \"Q\", \"answer\": \"A #### 1\"}\n";
    const std::string doc = "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A #### "
                            "1\"}, \"resps\": [[\"#### 1\"]]}";
    auto plain = dir / "samples_gsm8k_2026.jsonl";
    std::ofstream(plain) << doc << "\n";
    ASSERT_EQ(std::system(("gzip -k -f '" + plain.string() + "'").c_str()), 0);
    auto o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", "--dataset",
                       dataset, plain.string() + ".gz"});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("the file is gzip-compressed; decompress it (gunzip)"), std::string::npos)
        << o.err;
    for (const std::string& text : {"[\n  " + doc + "\n]\n", "[" + doc + "]\n"}) {
        std::ofstream(plain, std::ios::trunc) << text;
        o = e2e::run({"import", "lm-eval", "--db", db.string(), "--name", "x", "--dataset", dataset,
                      plain.string()});
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_NE(o.err.find(":1: the file is one JSON array, as lm-eval wrote samples before "
                             "0.4.3"),
                  std::string::npos)
            << o.err;
    }
    EXPECT_FALSE(std::filesystem::exists(db));
}

// Interop audit #4: an imported gsm8k_cot file read 0% in lm-eval-strict
// (gsm8k's "#### N" rule) where lm-eval's own strict-match gave 100% ("The
// answer is N."), without a word: a note says where lm-eval's verdicts are.
TEST(LmEvalSamples, AChainOfThoughtTaskIsNotedForItsStrictRule) {
    auto dir = e2e::scratch("lm-eval-cot");
    const auto dataset = (dir / "qa.jsonl").string();
    std::ofstream(dataset) << "{\"question\": \"Q\", \"answer\": \"A #### 1\"}\n";
    const std::string doc = "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A #### "
                            "1\"}, \"resps\": [[\"The answer is 1.\"]]}\n";
    auto cot = dir / "samples_gsm8k_cot_2026.jsonl";
    auto plain = dir / "samples_gsm8k_2026.jsonl";
    std::ofstream(cot) << doc;
    std::ofstream(plain) << doc;
    const std::string note = "note: a chain-of-thought task's strict-match filter reads";
    auto o = e2e::run({"import", "lm-eval", "--db", (dir / "cot.sqlite").string(), "--name", "x",
                       "--dataset", dataset, cot.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find(note), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("reads \"The answer is N.\""), std::string::npos) << o.out;
    o = e2e::run({"import", "lm-eval", "--db", (dir / "plain.sqlite").string(), "--name", "x",
                  "--dataset", dataset, plain.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out.find(note), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find("several answers"), std::string::npos) << o.out;
    // gsm8k_cot_llama's filter reads "The final answer is N" (interop
    // audit, 2026-12-06: the note named gsm8k_cot's phrase).
    auto llama = dir / "samples_gsm8k_cot_llama_2026.jsonl";
    std::ofstream(llama) << doc;
    o = e2e::run({"import", "lm-eval", "--db", (dir / "llama.sqlite").string(), "--name", "x",
                  "--dataset", dataset, llama.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("reads \"The final answer is N\""), std::string::npos) << o.out;
}

// Interop audit (2026-12-06): a task logged with `repeats: 3` holds three
// answers a document; lm-eval's take_first scored the first (100%), and the
// import's accuracy, averaging the three as repeats, read 33.3% without a
// word: a note says why they differ.
TEST(LmEvalSamples, SeveralAnswersToADocumentAreNotedAsRepeatsLmEvalDoesNotAverage) {
    auto dir = e2e::scratch("lm-eval-repeats");
    const auto dataset = (dir / "qa.jsonl").string();
    std::ofstream(dataset) << "{\"question\": \"Q\", \"answer\": \"A #### 1\"}\n"
                           << "{\"question\": \"R\", \"answer\": \"B #### 2\"}\n";
    auto file = dir / "samples_gsm8k_2026.jsonl";
    std::ofstream(file) << "{\"doc_id\": 0, \"doc\": {\"question\": \"Q\", \"answer\": \"A #### "
                           "1\"}, \"resps\": [[\"#### 1\", \"#### 0\", \"#### 0\"]]}\n"
                        << "{\"doc_id\": 1, \"doc\": {\"question\": \"R\", \"answer\": \"B #### "
                           "2\"}, \"resps\": [[\"#### 2\"]]}\n";
    auto o = e2e::run({"import", "lm-eval", "--db", (dir / "r.sqlite").string(), "--name", "x",
                       "--dataset", dataset, file.string()});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("note: 1 document in the file holds several answers (up to 3), stored "
                         "as repeats 0 to 2: every accuracy diffeval prints averages a "
                         "document's repeats, where lm-eval's take_first filter scores its "
                         "first answer only"),
              std::string::npos)
        << o.out;
}

// Interop audit #5: after `rescore --score-text after-think` an export's
// verdicts are of the text after the think block beside the whole text in
// resps, which lm-eval's filters would read otherwise: a note says so.
TEST(LmEvalSamples, AnExportOfTheAfterThinkTextSaysSo) {
    auto dir = e2e::scratch("lm-eval-after-think");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    (void)run_and_export(sim, db, dir / "full", 2);
    const std::string note = "is scored on the text after the think block";
    auto full = e2e::run({"export", "--db", db.string(), "--format", "lm-eval-samples", "--out",
                          (dir / "again").string()});
    ASSERT_EQ(full.exit_code, 0) << full.err;
    EXPECT_EQ(full.err.find(note), std::string::npos) << full.err;
    ASSERT_EQ(e2e::run({"rescore", "--db", db.string(), "--score-text", "after-think"}).exit_code,
              0);
    auto after = e2e::run({"export", "--db", db.string(), "--format", "lm-eval-samples", "--out",
                           (dir / "after").string()});
    ASSERT_EQ(after.exit_code, 0) << after.err;
    EXPECT_NE(after.err.find("note: " + db.string() + " " + note), std::string::npos) << after.err;
}
