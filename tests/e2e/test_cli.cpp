// The CLI as a person types it: a mistyped command or flag is answered with
// the closest known name, every --help shows its defaults and an example,
// and a command that fails on its arguments leaves nothing behind.
#include "e2e.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <sstream>

namespace {

namespace fs = std::filesystem;

TEST(Cli, MistypedSubcommandSuggestsTheClosestOne) {
    auto o = e2e::run({"sumary", "--db", "x.sqlite"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("unknown command 'sumary'"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("did you mean 'summary'?"), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
}

// A command's own subcommands too: `import lm_eval` (lm-eval's own
// spelling) was told only that 'import' needs a subcommand.
TEST(Cli, MistypedInnerSubcommandSuggestsTheClosestOne) {
    for (const auto& [args, said] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"import", "lm_eval", "--db", "x.sqlite"},
              "diffeval: unknown command 'import lm_eval'; did you mean 'import lm-eval'? see "
              "'diffeval import --help'\n"},
             {{"data", "fech", "gsm8k"},
              "diffeval: unknown command 'data fech'; did you mean 'data fetch'? see 'diffeval "
              "data --help'\n"},
             {{"data", "xyzzy"},
              "diffeval: unknown command 'data xyzzy'; see 'diffeval data "
              "--help'\n"}}) {
        auto o = e2e::run(args);
        EXPECT_EQ(o.exit_code, 2);
        EXPECT_EQ(o.err, said);
    }
}

TEST(Cli, UnknownWordIsNamedWithoutAGuess) {
    auto o = e2e::run({"xyzzy"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("unknown command 'xyzzy'"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("did you mean"), std::string::npos) << o.err;
}

TEST(Cli, UnderscoreFlagSuggestsTheDashedOne) {
    auto o = e2e::run({"run", "--max_tokens", "256"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("unknown flag '--max_tokens': did you mean '--max-tokens'?"),
              std::string::npos)
        << o.err;
    EXPECT_NE(o.err.find("see 'diffeval run --help'"), std::string::npos) << o.err;
}

// A command of commands given alone names them (CLI11: "A subcommand is
// required").
TEST(Cli, ACommandOfCommandsGivenAloneNamesThem) {
    auto o = e2e::run({"data"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_EQ(o.err, "diffeval: 'data' needs a subcommand: fetch; see 'diffeval data --help'\n");
    o = e2e::run({"import"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_EQ(o.err,
              "diffeval: 'import' needs a subcommand: lm-eval; see 'diffeval import --help'\n");
    // diffeval alone: the binary's path as typed is no name for the tool
    // ("diffeval: '/work/build/diffeval' needs a subcommand").
    o = e2e::run({});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_TRUE(o.err.starts_with("diffeval: a command is needed: run, sim, data, summary,"))
        << o.err;
    EXPECT_NE(o.err.find("; see 'diffeval --help'\n"), std::string::npos) << o.err;
    // A mistyped flag of diffeval's own, alone or before a command, is
    // named: it was "a command is needed", or CLI11's "The following
    // argument was not expected".
    for (const auto& args : {std::vector<std::string>{"--bogus"}, {"--bogus", "summary"}}) {
        o = e2e::run(args);
        EXPECT_EQ(o.exit_code, 2);
        EXPECT_EQ(o.err, "diffeval: unknown flag '--bogus': no such flag; see 'diffeval --help'\n");
    }
    o = e2e::run({"--verison"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_EQ(
        o.err,
        "diffeval: unknown flag '--verison': did you mean '--version'? see 'diffeval --help'\n");
}

// An argument given by its place and left out is named with what it holds
// (CLI11: "a is required"); a missing flag keeps CLI11's words.
TEST(Cli, AMissingArgumentIsNamedWithWhatItHolds) {
    auto o = e2e::run({"diff", "--db", "x.sqlite", "default"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_EQ(o.err, "diffeval: missing B: Candidate: SERVER[/FRAMING[/MAX_TOKENS]]; see "
                     "'diffeval diff --help'\n");
    o = e2e::run({"merge", "out.sqlite"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_EQ(o.err, "diffeval: missing IN: Databases to merge; see 'diffeval merge --help'\n");
    o = e2e::run({"import", "lm-eval", "samples.jsonl"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_EQ(o.err, "diffeval: --name is required; see 'diffeval import lm-eval --help'\n");
}

TEST(Cli, MistypedFlagSuggestsTheClosestOne) {
    auto o = e2e::run({"report", "--fromat", "md"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_EQ(o.err, "diffeval: unknown flag '--fromat': did you mean '--format'? see 'diffeval "
                     "report --help'\n");
    // A flag no known one resembles is no typo of one: it was taken for
    // '--scorer', its dashes making every flag look alike.
    o = e2e::run({"plan", "--db", "x.sqlite", "a", "b", "--power", "0.9"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_EQ(o.err,
              "diffeval: unknown flag '--power': no such flag; see 'diffeval plan --help'\n");
}

// The simulator's timing flags take the ranges its profile's keys take; a
// value outside printed the largest double, 309 digits, as the bound. They
// are said as every number flag's are (docs/cli.md): the flag, the value and
// both bounds; and text that is no number is named as such, where CLI11's
// Range answered "--port: Value abc not in range 0 to 65535".
TEST(Cli, SimulatorFlagsOutOfRangeNameTheirRange) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"sim", "--ttft-ms", "-5"}, "--ttft-ms -5: must be between 0 and 600000"},
        {{"sim", "--per-token-ms", "60001"}, "--per-token-ms 60001: must be between 0 and 60000"},
        {{"sim", "--retry-after-s", "-1"}, "--retry-after-s -1: must be between 0 and 3600"},
        {{"sim", "--stall-ms", "-1"}, "--stall-ms -1: must be between 0 and 3600000"},
        {{"sim", "--port", "70000"}, "--port 70000: must be between 0 and 65535"},
        {{"sim", "--fault-http-500", "2"}, "--fault-http-500 2: must be between 0 and 1"},
        // Each within its range, together more than every request: the
        // simulator failed every request and no kind at its share.
        {{"sim", "--fault-http-500", "0.6", "--fault-http-503", "0.6", "--port", "0"},
         "the fault shares add up to 1.2 (http_500 0.6, http_503 0.6); a request gets one fault "
         "at most: lower them"},
        {{"sim", "--port", "abc"}, "--port 'abc': expected a whole number"},
        {{"sim", "--fault-markup", "lots"}, "--fault-markup 'lots': expected a number"},
        {{"import", "lm-eval", "--name", "x", "--first-repeat", "abc", "f.jsonl"},
         "--first-repeat 'abc': expected a whole number"},
        {{"import", "lm-eval", "--name", "x", "--first-repeat", "1000001", "f.jsonl"},
         "--first-repeat 1000001: must be between 0 and 1000000"},
    };
    for (const auto& [args, says] : cases) {
        auto o = e2e::run(args);
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
        EXPECT_EQ(o.err.find("not in range"), std::string::npos) << o.err;
        EXPECT_LT(o.err.size(), 120u) << o.err;
    }
}

// A flag that takes one value, given twice, is named as such in every
// command, nested ones too (CLI11 says "At Most 1 required but received 2").
TEST(Cli, AFlagGivenTwiceIsNamed) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"gate", "--junit", "a.xml", "--junit", "b.xml"}, "--junit"},
        {{"diff", "x", "y", "--db", "a", "--db", "b"}, "--db"},
        {{"import", "lm-eval", "--name", "a", "--name", "b", "f.jsonl"}, "--name"},
        {{"sim", "--port", "1", "--port", "2"}, "--port"},
    };
    for (const auto& [args, flag] : cases) {
        auto o = e2e::run(args);
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_NE(o.err.find("diffeval: " + flag +
                             " given more than once; give it once; see "
                             "'diffeval " +
                             (args[0] == "import" ? "import lm-eval" : args[0]) + " --help'"),
                  std::string::npos)
            << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    }
}

TEST(Cli, HelpShowsDefaultsAndAnExample) {
    for (const char* cmd : {"run", "summary", "diff", "plan", "rescore", "report", "gate",
                            "fingerprint", "merge", "export", "import", "demo", "sim"}) {
        auto o = e2e::run({cmd, "--help"});
        EXPECT_EQ(o.exit_code, 0) << cmd;
        EXPECT_NE(o.out.find("Example:\n  diffeval " + std::string(cmd)), std::string::npos)
            << cmd << ":\n"
            << o.out;
        // A list flag's default is shown as nothing, never as "=[]".
        EXPECT_EQ(o.out.find("=[]"), std::string::npos) << cmd << ":\n" << o.out;
    }
    auto lm = e2e::run({"import", "lm-eval", "--help"});
    EXPECT_NE(lm.out.find("Example:\n  diffeval import lm-eval "), std::string::npos) << lm.out;
    auto report = e2e::run({"report", "--help"});
    EXPECT_NE(report.out.find("--db TEXT=diffeval.sqlite"), std::string::npos) << report.out;
    // The defaults cli.md's table gives, where the flag alone does not hold
    // them (a file's value may replace them); no list shows an empty "[]".
    auto run = e2e::run({"run", "--help"});
    for (const char* shown :
         {"--framing LIST=raw,chat", "--max-tokens LIST=256", "--dataset TEXT=sample"}) {
        EXPECT_NE(run.out.find(shown), std::string::npos) << shown << "\n" << run.out;
    }
    EXPECT_EQ(run.out.find("=[]"), std::string::npos) << run.out;
}

// Every flag that takes a comma list says so in --help (LIST), and every
// such flag refuses an empty item, naming the flag: one line, exit 2. The
// check once named its flags, so the next list flag would have read
// `a,,b` as a,b.
TEST(Cli, EveryCommaListRefusesAnEmptyItem) {
    std::vector<std::pair<std::vector<std::string>, std::string>> lists;
    const std::vector<std::vector<std::string>> commands = {
        {"run"},  {"summary"},     {"diff"},  {"plan"},   {"rescore"},           {"report"},
        {"gate"}, {"fingerprint"}, {"merge"}, {"export"}, {"import", "lm-eval"}, {"data", "fetch"},
        {"demo"}, {"sim"}};
    for (const auto& cmd : commands) {
        auto args = cmd;
        args.push_back("--help");
        auto help = e2e::run(args).out;
        // One entry per flag: its line, and the description CLI11 puts on
        // the next line when the flag's column is full.
        std::vector<std::string> entries;
        std::istringstream lines(help);
        for (std::string line; std::getline(lines, line);) {
            const auto text = line.find_first_not_of(' ');
            if (text == std::string::npos || text == 0) {
                continue;
            }
            if (line.compare(text, 2, "--") == 0) {
                entries.push_back(line.substr(text));
            } else if (!entries.empty()) {
                entries.back() += " " + line.substr(text);
            }
        }
        for (const auto& entry : entries) {
            const std::string flag = entry.substr(0, entry.find(' '));
            const bool list = entry.find(flag + " LIST") == 0;
            EXPECT_EQ(entry.find("comma-separated") != std::string::npos, list)
                << "a comma-separated flag's type is LIST: " << entry;
            if (list) {
                lists.emplace_back(cmd, flag);
            }
        }
    }
    const std::vector<std::pair<std::vector<std::string>, std::string>> known = {
        {{"run"}, "--framing"}, {{"run"}, "--max-tokens"}, {{"report"}, "--format"}};
    for (const auto& k : known) {
        EXPECT_NE(std::find(lists.begin(), lists.end(), k), lists.end()) << k.second;
    }
    for (const auto& [cmd, flag] : lists) {
        for (const std::string bad : {"a,,b", ",a", "a,"}) {
            auto args = cmd;
            args.insert(args.end(), {flag, bad});
            auto o = e2e::run(args);
            EXPECT_EQ(o.exit_code, 2) << flag << " " << bad << ": " << o.err;
            EXPECT_NE(o.err.find("diffeval: " + flag + " '" + bad +
                                 "': an empty item in the list; give comma-separated values"),
                      std::string::npos)
                << o.err;
            EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        }
    }
}

TEST(Cli, FailedReportLeavesNoDirectoryBehind) {
    auto dir = e2e::scratch("cli_report_no_side_effects");
    auto db = dir / "r.sqlite";
    {
        e2e::Sim a({"--profile", "default"});
        auto o = e2e::run({"run", "--server", "a=" + a.url(), "--dataset", "sample", "--limit", "2",
                           "--framing", "raw", "--db", db.string(), "--quiet"});
        ASSERT_EQ(o.exit_code, 0) << o.err;
    }
    auto out = dir / "report";
    auto o = e2e::run({"report", "--db", db.string(), "--baseline", "nope", "--out", out.string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("--baseline 'nope' is not in the database"), std::string::npos) << o.err;
    EXPECT_FALSE(fs::exists(out));
    // Nor the parent it made on the way.
    o = e2e::run({"report", "--db", db.string(), "--baseline", "nope", "--out",
                  (dir / "new" / "report").string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_FALSE(fs::exists(dir / "new"));
    // A directory the user already had is kept, with what it held.
    fs::create_directories(out);
    std::ofstream(out / "keep.txt") << "mine";
    o = e2e::run({"report", "--db", db.string(), "--baseline", "nope", "--out", out.string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_EQ(e2e::slurp(out / "keep.txt"), "mine");
    // An --out that cannot be a directory is the user's to change: exit 2, as
    // gate and export say of their outputs.
    for (const auto& bad : {(out / "keep.txt").string(), std::string("/dev/null")}) {
        o = e2e::run({"report", "--db", db.string(), "--out", bad});
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_NE(o.err.find("choose another --out"), std::string::npos) << o.err;
    }
    EXPECT_EQ(e2e::slurp(out / "keep.txt"), "mine");
}

// A results database of two servers, two questions each, in `dir`.
fs::path two_server_db(const fs::path& dir) {
    auto db = dir / "r.sqlite";
    e2e::Sim a({"--profile", "default"});
    auto o =
        e2e::run({"run", "--server", "a=" + a.url(), "--server", "b=" + a.url(), "--dataset",
                  "sample", "--limit", "2", "--framing", "raw", "--db", db.string(), "--quiet"});
    EXPECT_EQ(o.exit_code, 0) << o.err;
    return db;
}

// A directory nobody may write (root included: diffeval refuses it).
fs::path locked_dir(const fs::path& dir) {
    auto locked = dir / "locked";
    fs::create_directories(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    return locked;
}

// The files report writes at the end of its analysis are checked before it:
// a report.html in the way as a directory let report.md and summary.json be
// written first, then failed.
TEST(Cli, ReportRefusesAnOutItCannotWriteBeforeItsWork) {
    auto dir = e2e::scratch("cli_report_out_checked");
    auto db = two_server_db(dir);
    auto out = dir / "out";
    fs::create_directories(out / "report.html");
    auto locked = locked_dir(dir);
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--out", out.string()},
         "--out " + out.string() + ": " + (out / "report.html").string() +
             " is a directory, where a file goes; remove it or choose "
             "another --out"},
        {{"--out", out.string(), "--format", "md"}, ""},
        {{"--out", (locked / "new").string()},
         "--out " + (locked / "new").string() + ": cannot write in " + locked.string()},
    };
    for (const auto& [args, says] : cases) {
        std::vector<std::string> cmd = {"report", "--db", db.string()};
        cmd.insert(cmd.end(), args.begin(), args.end());
        auto o = e2e::run(cmd);
        if (says.empty()) {
            // Without report.html, the directory in its place is no matter.
            EXPECT_EQ(o.exit_code, 0) << o.err;
            fs::remove(out / "report.md");
            continue;
        }
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_NE(o.err.find("diffeval: " + says), std::string::npos) << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_EQ(o.out, "") << "nothing written";
    }
    EXPECT_FALSE(fs::exists(out / "report.md"));
    EXPECT_FALSE(fs::exists(out / "summary.json"));
    EXPECT_TRUE(fs::is_empty(locked));
    fs::permissions(locked, fs::perms::owner_all);
}

// gate's --junit and --json are written after its verdict is printed: it
// printed PASS, then exited 2 on a --junit that was a directory. Now it is
// refused first, and a --junit that can be written says why.
TEST(Cli, GateRefusesAnOutputFileItCannotWriteBeforeItsVerdict) {
    auto dir = e2e::scratch("cli_gate_outputs_checked");
    auto db = two_server_db(dir);
    fs::create_directories(dir / "a-dir.xml");
    std::ofstream(dir / "a-file") << "mine\n";
    auto locked = locked_dir(dir);
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--junit", (dir / "a-dir.xml").string()},
         "--junit " + (dir / "a-dir.xml").string() +
             ": it is a directory; give the path of a file, or choose another --junit"},
        {{"--junit", (dir / "nodir" / "j.xml").string()},
         "there is no directory " + (dir / "nodir").string() +
             "; create it or choose another "
             "--junit"},
        {{"--json", (dir / "a-file" / "g.json").string()},
         (dir / "a-file").string() + " is a file, not a directory; choose another --json"},
        {{"--json", (locked / "g.json").string(), "--junit", (dir / "j.xml").string()},
         "--json " + (locked / "g.json").string() + ": cannot write in " + locked.string()},
    };
    for (const auto& [args, says] : cases) {
        std::vector<std::string> cmd = {"gate", "--db", db.string(), "--expect", "0.1"};
        cmd.insert(cmd.end(), args.begin(), args.end());
        auto o = e2e::run(cmd);
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_EQ(o.out, "") << "no verdict before the refusal";
    }
    // The --junit that can be written says why the gate did not run.
    EXPECT_NE(e2e::slurp(dir / "j.xml").find("--json " + (locked / "g.json").string()),
              std::string::npos);
    // `--json /dev/stdout` (a CI step piping the verdict on): the JSON
    // follows the printed verdict on standard output, and /dev/stdout stays
    // what it was. Replacing it, as a report file is replaced, made it a
    // regular file for every later process on the machine (as root).
    struct stat before {};
    const bool had_stdout = ::lstat("/dev/stdout", &before) == 0;
    auto piped =
        e2e::run({"gate", "--db", db.string(), "--expect", "0.1", "--json", "/dev/stdout"});
    EXPECT_EQ(piped.exit_code, 0) << piped.err;
    const auto json_at = piped.out.find("{\n  \"checks\"");
    ASSERT_NE(json_at, std::string::npos) << piped.out;
    EXPECT_NE(piped.out.rfind("PASS", json_at), std::string::npos) << piped.out;
    EXPECT_EQ(nlohmann::json::parse(piped.out.substr(json_at))["schema"], "diffeval.gate/2");
    if (had_stdout) {
        struct stat after {};
        ASSERT_EQ(::lstat("/dev/stdout", &after), 0);
        EXPECT_EQ(after.st_mode, before.st_mode);
        EXPECT_EQ(after.st_ino, before.st_ino);
    }
    // The step summary is a file the environment names: refused alike.
    auto o = e2e::run({"gate", "--db", db.string(), "--expect", "0.1"},
                      {"GITHUB_STEP_SUMMARY=" + (dir / "gone" / "summary.md").string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("$GITHUB_STEP_SUMMARY " + (dir / "gone" / "summary.md").string() +
                         ": there is no directory " + (dir / "gone").string()),
              std::string::npos)
        << o.err;
    EXPECT_EQ(o.out, "") << "no verdict before the refusal";
    EXPECT_EQ(e2e::slurp(dir / "a-file"), "mine\n");
    EXPECT_TRUE(fs::is_empty(locked));
    fs::permissions(locked, fs::perms::owner_all);
}

// An output named like the database, its side files or a link to it would
// replace the stored results: `gate --junit r.sqlite` left XML where the
// database was. Refused, and the database is still one afterwards.
TEST(Cli, AnOutputNamedLikeTheDatabaseIsRefusedAndTheDatabaseKept) {
    auto dir = e2e::scratch("cli_output_is_db");
    auto db = two_server_db(dir);
    fs::create_hard_link(db, dir / "hard.sqlite");
    fs::create_symlink(db, dir / "soft.sqlite");
    const auto says = [&](const std::string& flag, const std::string& path) {
        return "diffeval: " + flag + " " + path + ": it is the database " + db.string() +
               " or one of its files; writing there would replace the stored results: choose "
               "another " +
               flag + "\n";
    };
    const std::vector<std::pair<std::string, std::string>> outputs = {
        {"--junit", db.string()},
        {"--json", db.string() + "-wal"},
        {"--json", (dir / "hard.sqlite").string()},
        {"--junit", (dir / "soft.sqlite").string()},
    };
    for (const auto& [flag, path] : outputs) {
        auto o = e2e::run({"gate", "--db", db.string(), "--expect", "0.1", flag, path});
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_EQ(o.err, says(flag, path));
        EXPECT_EQ(o.out, "");
    }
    auto o = e2e::run({"gate", "--db", db.string(), "--expect", "0.1"},
                      {"GITHUB_STEP_SUMMARY=" + db.string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_EQ(o.err, says("$GITHUB_STEP_SUMMARY", db.string()));
    // Both files at one path: the second would replace the first.
    o = e2e::run({"gate", "--db", db.string(), "--expect", "0.1", "--junit",
                  (dir / "o.xml").string(), "--json", (dir / "o.xml").string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("--junit and --json both name"), std::string::npos) << o.err;
    // A report whose file would be the database.
    auto named = dir / "r" / "report.md";
    fs::create_directories(named.parent_path());
    fs::copy_file(db, named);
    o = e2e::run({"report", "--db", named.string(), "--out", (dir / "r").string()});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find(" is the database " + named.string()), std::string::npos) << o.err;
    for (const auto& file : {db, named}) {
        EXPECT_EQ(e2e::query(file, "SELECT count(*) > 0 FROM responses"), "1") << file;
    }
    // A link to the database's -wal that is not there yet (reports audit
    // #10): the report opened the database, which made the -wal, and wrote
    // report.md into it.
    fs::remove(db.string() + "-wal");
    fs::create_directories(dir / "linked");
    fs::create_symlink(db.string() + "-wal", dir / "linked" / "report.md");
    o = e2e::run(
        {"report", "--db", db.string(), "--out", (dir / "linked").string(), "--format", "md"});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find(" is the database " + db.string() + " or one of its files"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(e2e::slurp(db.string() + "-wal").find("diffeval report"), std::string::npos);
}

// export writes its files after scoring what is not scored yet: an --out
// that cannot take them is refused first, naming --out.
TEST(Cli, ExportRefusesAnOutItCannotWriteBeforeItsWork) {
    auto dir = e2e::scratch("cli_export_out_checked");
    auto db = two_server_db(dir);
    std::ofstream(dir / "a-file") << "mine\n";
    auto locked = locked_dir(dir);
    const std::vector<std::pair<fs::path, std::string>> cases = {
        {dir / "a-file", "it is a file, not a directory; choose another --out"},
        {locked / "new", "cannot write in " + locked.string() + ": "},
    };
    for (const auto& [out, says] : cases) {
        auto o = e2e::run(
            {"export", "--db", db.string(), "--format", "lm-eval-samples", "--out", out.string()});
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_NE(o.err.find("diffeval: --out " + out.string() + ": " + says), std::string::npos)
            << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    }
    EXPECT_EQ(e2e::slurp(dir / "a-file"), "mine\n");
    EXPECT_TRUE(fs::is_empty(locked));
    fs::permissions(locked, fs::perms::owner_all);
}

} // namespace

namespace {

TEST(Cli, PipedVerdictsCarryNoColourCodes) {
    auto dir = e2e::scratch("cli_no_colour_in_pipes");
    auto db = dir / "r.sqlite";
    e2e::Sim a({"--profile", "default"});
    e2e::Sim b({"--profile", "deepgemm"});
    auto o =
        e2e::run({"run", "--server", "a=" + a.url(), "--server", "b=" + b.url(), "--dataset",
                  "sample", "--limit", "8", "--framing", "raw", "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"diff", "--db", db.string(), "a", "b"},
                                               {"gate", "--db", db.string(), "--baseline", "a",
                                                "--candidate", "b", "--max-drop", "50"}}) {
        o = e2e::run(args);
        EXPECT_FALSE(o.out.empty()) << o.err;
        EXPECT_EQ(o.out.find('\033'), std::string::npos) << o.out;
    }
    EXPECT_NE(o.out.find("PASS"), std::string::npos) << o.out; // the gate's verdict, plain
}

} // namespace

// Every error is one line: a path or a word as typed, holding a line end
// or a terminal escape (a name pasted from elsewhere, a generated path),
// split the message over lines and reached the terminal as an escape.
TEST(Cli, AnErrorNamingTextWithControlCharactersIsOneLine) {
    auto dir = e2e::scratch("cli_error_line");
    const std::string odd = (dir / "x\x1b[2Jy\nz").string();
    const std::vector<std::vector<std::string>> cases = {
        {"summary", "--db", odd},
        {"fingerprint", odd},
        {"run", "--server", "a=http://127.0.0.1:9", "--db", (dir / "r.sqlite").string(),
         "--dataset", odd},
        {"report", "--db", odd, "--out", (dir / "out").string()},
        {"import", "lm-eval", "--db", (dir / "i.sqlite").string(), "--name", "a", odd},
        {"summary", "--format", "x\x1b[2J\nmd"},
        {"x\x1b[2J\nsummary"},
    };
    for (const auto& args : cases) {
        auto o = e2e::run(args);
        EXPECT_EQ(o.exit_code, 2) << args[0] << ": " << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_TRUE(o.err.starts_with("diffeval: ")) << o.err;
        EXPECT_EQ(o.err.find('\x1b'), std::string::npos) << o.err;
    }
}

// The lines a command prints on success name its files as one line each
// too: a database or an output directory with a terminal escape in its
// path reached the terminal raw in "stored ... in PATH" and "wrote PATH".
TEST(Cli, PathsWithControlCharactersArePrintedAsOneLine) {
    auto dir = e2e::scratch("cli_path_line");
    e2e::Sim sim;
    const std::string db = (dir / "r\x1b[2J\n.sqlite").string();
    auto run = e2e::run(
        {"run", "--server", "s=" + sim.url(), "--dataset", "sample", "--limit", "1", "--db", db});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    auto report = e2e::run({"report", "--db", db, "--out", (dir / "o\x1b[2J").string()});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    for (const auto* out : {&run.out, &report.out}) {
        EXPECT_EQ(out->find('\x1b'), std::string::npos) << *out;
    }
    EXPECT_NE(run.out.find("r [2J .sqlite ("), std::string::npos) << run.out;
    EXPECT_EQ(std::count(report.out.begin(), report.out.end(), '\n'), 3) << report.out;
}

// With HOME unset (cron, some systemd units and containers) the GSM8K
// cache was ./.cache/diffeval/gsm8k, a new one in each working directory:
// it is the account's home directory's, as getpwuid says.
TEST(Cli, TheDatasetCacheWithoutHomeIsTheAccountsHome) {
    const passwd* pw = getpwuid(getuid());
    ASSERT_NE(pw, nullptr);
    const auto cache = std::filesystem::path(pw->pw_dir) / ".cache" / "diffeval" / "gsm8k";
    if (std::filesystem::exists(cache)) {
        GTEST_SKIP() << cache << " holds GSM8K already: this test reads its absence";
    }
    auto dir = e2e::scratch("cli_home_unset");
    auto o = e2e::run({"run", "--server", "a=http://127.0.0.1:9", "--dataset", "gsm8k", "--db",
                       (dir / "r.sqlite").string()},
                      {"HOME=", "XDG_CACHE_HOME=", "DIFFEVAL_DATA="});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("GSM8K is not in the cache (" + cache.string()), std::string::npos)
        << o.err;
}

// A --db name within the file system's 255 bytes but too long for the
// files kept beside it (SQLite's -journal, merge's .merge-tmp-journal) was
// called "not a diffeval database", and an empty file and its lock stayed
// (a user-side audit). It is refused first, naming the longest it can be.
TEST(Cli, ADatabaseNameTooLongForItsSideFilesIsRefusedFirst) {
    auto dir = e2e::scratch("cli_long_db_name");
    const auto named = [&](size_t bytes) {
        return (dir / (std::string(bytes - 7, 'g') + ".sqlite")).string();
    };
    auto run = e2e::run({"run", "--server", "a=http://127.0.0.1:9", "--db", named(250)});
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_NE(run.err.find("is 250 bytes: the files kept beside it add up to 8 more (-journal), "
                           "past the 255 a name may hold there; give a name of at most 247 bytes"),
              std::string::npos)
        << run.err;
    auto merge = e2e::run({"merge", named(240), named(20)});
    EXPECT_EQ(merge.exit_code, 2) << merge.err;
    EXPECT_NE(merge.err.find("add up to 18 more (.merge-tmp-journal)"), std::string::npos)
        << merge.err;
    EXPECT_TRUE(std::filesystem::is_empty(dir));
}

// A flag pasted from a document or a chat, where "--limit" became
// "—limit": CLI11 said "The following arguments were not expected: 4
// —limit", the two reversed and no word of the dash (a user-side audit).
TEST(Cli, AFlagWithAUnicodeDashSaysSo) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"run", "\u2014limit", "4"},
         "'\u2014limit' starts with a Unicode dash ('\u2014'), not '-' (a word processor or chat "
         "app may have changed it); type --limit"},
        {{"summary", "\u2010\u2010db", "x.sqlite"},
         "'\u2010\u2010db' starts with a Unicode dash ('\u2010'), not '-' (a word processor or "
         "chat app may have changed it); type --db"},
    };
    for (const auto& [args, says] : cases) {
        auto o = e2e::run(args);
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
    }
}

// A file a user names that is no file of its kind (a mistyped /dev/zero, a
// directory) is one line, exit 2, before anything is stored: reading
// /dev/zero whole took all memory until the kernel killed the process.
TEST(Cli, AnInputThatIsNoFileOfItsKindIsOneLine) {
    auto dir = e2e::scratch("cli_input_kinds");
    const auto db = (dir / "r.sqlite").string();
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--framing", "/dev/zero"},
         "cannot read framing file /dev/zero: it holds more than 16 MiB"},
        {{"--scorer-file", "/dev/zero"}, "cannot read scorer file /dev/zero: it holds more than"},
        {{"--config", dir.string()},
         "cannot read experiment file " + dir.string() + ": it is a directory"},
    };
    for (const auto& [args, says] : cases) {
        std::vector<std::string> cmd = {"run", "--server", "a=http://127.0.0.1:9", "--db", db};
        cmd.insert(cmd.end(), args.begin(), args.end());
        auto o = e2e::run(cmd);
        EXPECT_EQ(o.exit_code, 2) << o.err;
        EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
        EXPECT_FALSE(fs::exists(db)) << args[0];
    }
    // A simulator profile that is a path: it said "unknown profile
    // '/dev/zero'", as it does of a mistyped built-in name.
    for (const auto& [path, says] : std::vector<std::pair<std::string, std::string>>{
             {"/dev/zero", "cannot read profile file /dev/zero: it holds more than 16 MiB"},
             {dir.string(), "cannot read profile file " + dir.string() + ": it is a directory"},
             {"defualt", "unknown profile 'defualt': built-in profiles are"}}) {
        auto sim = e2e::run({"sim", "--port", "0", "--profile", path});
        EXPECT_EQ(sim.exit_code, 2) << sim.err;
        EXPECT_EQ(std::count(sim.err.begin(), sim.err.end(), '\n'), 1) << sim.err;
        EXPECT_NE(sim.err.find(says), std::string::npos) << sim.err;
    }
    auto log = e2e::run({"fingerprint", dir.string()});
    EXPECT_EQ(log.exit_code, 2);
    EXPECT_NE(log.err.find("cannot read log file " + dir.string() + ": it is a directory"),
              std::string::npos)
        << log.err;
}

// A FIFO no process writes to (a mistyped `mkfifo` name) held open(2)
// forever, deaf to Ctrl-C: now it reads at once as an empty file does, and
// each command says what it says of one (a run's in one line, exit 2).
TEST(Cli, AFifoNoProcessWritesToReadsAsAnEmptyFileAtOnce) {
    auto dir = e2e::scratch("cli_fifo");
    const auto jsonl = (dir / "f.jsonl").string();
    const auto toml = (dir / "f.toml").string();
    const auto log = (dir / "f.log").string();
    for (const auto& fifo : {jsonl, toml, log}) {
        ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    }
    const auto db = (dir / "r.sqlite").string();
    auto run = [&](std::vector<std::string> args) {
        std::vector<std::string> cmd = {"run", "--db", db};
        cmd.insert(cmd.end(), args.begin(), args.end());
        return cmd;
    };
    const std::string server = "a=http://127.0.0.1:9";
    struct Case {
        std::vector<std::string> args;
        int exit_code;
        std::string says;
    };
    const std::vector<Case> cases = {
        {run({"--server", server, "--dataset", jsonl}), 2, jsonl + ": no questions in the file"},
        {run({"--config", toml}), 2, "no servers: pass --server NAME=URL"},
        {run({"--server", server, "--framing", toml}), 2,
         toml + ": endpoint must be a path such as"},
        {run({"--server", server, "--scorer-file", toml}), 2, toml + ":1: missing key 'version'"},
        // An empty log is no error: the run goes on to ask the server.
        {run({"--server", server, "--server-log", "a=" + log}), 2,
         "server 'a' at http://127.0.0.1:9 is unreachable"},
        {{"import", "lm-eval", "--name", "x", "--dataset", "sample", "--db", db, jsonl},
         2,
         jsonl + " holds no samples"},
        {{"fingerprint", log}, 0, log + ": no engine recognised"},
    };
    for (const auto& c : cases) {
        e2e::Child child(c.args);
        const auto code = child.wait_for(std::chrono::seconds{20});
        if (!code) {
            child.stop(SIGKILL);
        }
        ASSERT_TRUE(code.has_value()) << c.says << ": still waiting";
        const auto said = child.out() + child.err();
        EXPECT_EQ(*code, c.exit_code) << said;
        EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
        EXPECT_NE(said.find(c.says), std::string::npos) << said;
    }
    EXPECT_FALSE(fs::exists(db));
}

// A log that is no file and never ends (/dev/zero) was read forever at
// full CPU: a stream is read up to 1 GiB, then refused in one line.
TEST(Cli, ALogThatNeverEndsIsRefused) {
    auto dir = e2e::scratch("cli_endless_log");
    const std::string says = "/dev/zero: it is no regular file and streams more than 1024 MiB; "
                             "save it to a file and give that";
    auto log = e2e::run({"fingerprint", "/dev/zero"});
    EXPECT_EQ(log.exit_code, 2) << log.err;
    EXPECT_EQ(log.err, "diffeval: cannot read log file " + says + "\n");
    auto run = e2e::run({"run", "--server", "a=http://127.0.0.1:9", "--server-log", "a=/dev/zero",
                         "--db", (dir / "r.sqlite").string()});
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_EQ(run.err, "diffeval: --server-log: cannot read " + says + "\n");
}

// A --junit file another user may write, in a directory that user may not
// write (a CI workspace owned by root, the file made writable for the job):
// no new file can be made beside it, so it is written in place, whole, and
// no temporary is left.
TEST(Cli, AnOutputFileInADirectoryItsUserMayNotWriteIsWrittenInPlace) {
    if (::geteuid() != 0) {
        GTEST_SKIP() << "needs root, to run diffeval as another user";
    }
    auto dir = e2e::scratch("cli_output_in_place");
    const auto data = dir / "data";
    fs::create_directories(data);
    auto db = two_server_db(data);
    fs::permissions(dir, fs::perms::all);
    fs::permissions(data, fs::perms::all);
    for (const auto& f : fs::directory_iterator(data)) {
        fs::permissions(f.path(), fs::perms::all & ~fs::perms::owner_exec & ~fs::perms::group_exec &
                                      ~fs::perms::others_exec);
    }
    const auto shared = dir / "shared";
    fs::create_directories(shared);
    fs::permissions(shared, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
    const auto junit = shared / "junit.xml";
    std::ofstream(junit) << "an earlier job's file\n";
    fs::permissions(junit, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                               fs::perms::group_write | fs::perms::others_read |
                               fs::perms::others_write);
    struct stat before {};
    ASSERT_EQ(::stat(junit.c_str(), &before), 0);
    auto o = e2e::run_unprivileged(
        {"gate", "--db", db.string(), "--expect", "0.1", "--junit", junit.string()});
    EXPECT_EQ(o.exit_code, 0) << o.err;
    const auto xml = e2e::slurp(junit);
    EXPECT_EQ(xml.rfind("<?xml", 0), 0U) << xml;
    EXPECT_NE(xml.find("</testsuites>"), std::string::npos) << xml;
    struct stat after {};
    ASSERT_EQ(::stat(junit.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino) << "written in place";
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(shared)) {
        ++entries;
    }
    EXPECT_EQ(entries, 1U);
}
