// Whether a launch can start, checked before the run opens its database: the
// program where execvp would look (the path given, from the server's cwd;
// the PATH of the server's env, else diffeval's), a cwd that is a directory,
// a launch string that splits. Each refusal names the server and says what
// to give instead.
#include <harness/engine/launcher.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace diffeval;
namespace fs = std::filesystem;

namespace {

// A fresh directory holding bin/serve (executable) and bin/notes (not).
fs::path programs() {
    const auto dir = fs::temp_directory_path() / ("diffeval_launcher_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "bin");
    std::ofstream(dir / "bin" / "serve") << "#!/bin/sh\n";
    fs::permissions(dir / "bin" / "serve", fs::perms::owner_all);
    std::ofstream(dir / "bin" / "notes") << "not a program\n";
    return dir;
}

engine::ServerSpec spec(std::vector<std::string> launch) {
    engine::ServerSpec s;
    s.name = "x";
    s.url = "http://127.0.0.1:9";
    s.launch = std::move(launch);
    return s;
}

std::string problem(const engine::ServerSpec& s) {
    auto r = engine::check_launchable(s);
    return r ? "" : r.error().message;
}

} // namespace

TEST(CheckLaunchable, FindsTheProgramWhereExecvpWouldLook) {
    const auto dir = programs();
    // By its path, and by a path from the server's cwd.
    EXPECT_EQ(problem(spec({(dir / "bin" / "serve").string(), "--port", "9"})), "");
    auto from_cwd = spec({"bin/serve"});
    from_cwd.cwd = dir.string();
    EXPECT_EQ(problem(from_cwd), "");
    // By name in the PATH of the server's env (diffeval's own does not hold it).
    auto by_name = spec({"serve"});
    by_name.env = {{"PATH", "/nonexistent:" + (dir / "bin").string()}};
    EXPECT_EQ(problem(by_name), "");
    // One launch string, split into words first.
    by_name.launch = {"serve --port 9"};
    EXPECT_EQ(problem(by_name), "");
    // diffeval's PATH when the env sets none.
    EXPECT_EQ(problem(spec({"sh", "-c", "true"})), "");
    fs::remove_all(dir);
}

TEST(CheckLaunchable, APlaceItCannotStartIsNamed) {
    const auto dir = programs();
    EXPECT_EQ(problem(spec({"no-such-vllm-program", "serve"})),
              "server 'x': cannot run 'no-such-vllm-program': no such program in PATH; install "
              "it, or give its full path in 'launch'");
    // --vllm-config's server has no 'launch': its program is --vllm-bin's.
    auto vllm = spec({"no-such-vllm-program", "serve"});
    vllm.launch_named_by = "--vllm-bin";
    EXPECT_EQ(problem(vllm),
              "server 'x': cannot run 'no-such-vllm-program': no such program in PATH; install "
              "it, or give its full path in --vllm-bin");
    // Not in the server's PATH, though diffeval's own would hold a program
    // of that name: the server runs with its env's.
    auto elsewhere = spec({"sh"});
    elsewhere.env = {{"PATH", (dir / "bin").string()}};
    EXPECT_NE(problem(elsewhere).find("cannot run 'sh': no such program in PATH"),
              std::string::npos);
    EXPECT_EQ(problem(spec({(dir / "bin" / "notes").string()})),
              "server 'x': cannot run '" + (dir / "bin" / "notes").string() +
                  "': Permission denied; give the path of the server's program in 'launch'");
    EXPECT_EQ(problem(spec({(dir / "bin").string()})),
              "server 'x': cannot run '" + (dir / "bin").string() +
                  "': Is a directory; give the path of the server's program in 'launch'");
    auto bad_cwd = spec({"bin/serve"});
    bad_cwd.cwd = (dir / "missing").string();
    EXPECT_EQ(problem(bad_cwd), "server 'x': its cwd '" + bad_cwd.cwd +
                                    "' is not a directory; give the directory the server is to "
                                    "start in");
    EXPECT_EQ(problem(spec({"serve --model 'unterminated"})),
              "server 'x': unterminated ' quote in launch command: serve --model 'unterminated");
    auto shell = spec({"a", "b"});
    shell.launch_shell = true;
    EXPECT_EQ(problem(shell), "server 'x': shell = true needs launch as one command string");
    // A shell launch's program is the shell's to find.
    shell.launch = {"no-such-vllm-program serve"};
    EXPECT_EQ(problem(shell), "");
    fs::remove_all(dir);
}
