// The CLI as a person types it: a mistyped command or flag is answered with
// the closest known name, every --help shows its defaults and an example,
// and a command that fails on its arguments leaves nothing behind.
#include "e2e.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

namespace {

namespace fs = std::filesystem;

TEST(Cli, MistypedSubcommandSuggestsTheClosestOne) {
    auto o = e2e::run({"sumary", "--db", "x.sqlite"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("unknown command 'sumary'"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("did you mean 'summary'?"), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
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

TEST(Cli, MistypedFlagSuggestsTheClosestOne) {
    auto o = e2e::run({"report", "--fromat", "md"});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("did you mean '--format'?"), std::string::npos) << o.err;
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
         {"--framing TEXT=raw,chat", "--max-tokens TEXT=256", "--dataset TEXT=sample"}) {
        EXPECT_NE(run.out.find(shown), std::string::npos) << shown << "\n" << run.out;
    }
    EXPECT_EQ(run.out.find("=[]"), std::string::npos) << run.out;
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
