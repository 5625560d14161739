// Helpers for the tests against a real inference engine: llama.cpp's
// llama-server from Debian sid, in the chroot scripts/engine-chroot.sh
// provisions, serving the tiny models scripts/tiny_models.py builds. Every
// server is started by diffeval's own launcher from an experiment file.
#pragma once

#include "../e2e/e2e.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace engine_test {

// The provisioned chroot, or nullopt with `why` set to the script's one-line
// reason (not root, no network, ...). Provisions on first use.
std::optional<std::filesystem::path> chroot_dir(std::string& why);

// Skips the current test, visibly, when the chroot cannot be had; else sets
// `dir`. Use as: ENGINE_OR_SKIP(dir);
#define ENGINE_OR_SKIP(dir)                                                                        \
    std::filesystem::path dir;                                                                     \
    {                                                                                              \
        std::string why_;                                                                          \
        auto d_ = engine_test::chroot_dir(why_);                                                   \
        if (!d_) {                                                                                 \
            GTEST_SKIP() << "real-engine test skipped: " << why_;                                  \
        }                                                                                          \
        dir = *d_;                                                                                 \
    }

// A port nothing listens on right now.
int free_port();

// One llama-server for an experiment file.
struct Server {
    std::string name = "llama";
    std::string model = "/opt/diffeval/models/outcomes.gguf"; // path inside the chroot
    int slots = 1;
    int context = 4096; // total, shared by the slots
    std::vector<std::string> extra_args;
    int port = 0; // 0: a free one
};

// A llama-server started by the test itself (for runs against a server
// diffeval does not launch); stopped when destroyed.
class RunningServer {
public:
    RunningServer(const std::filesystem::path& root, Server spec, const std::filesystem::path& log);
    ~RunningServer();
    RunningServer(const RunningServer&) = delete;
    RunningServer& operator=(const RunningServer&) = delete;
    // Wait (up to 30 s) until GET /health answers 200.
    bool healthy();
    std::string url() const;

private:
    int m_pid = -1;
    int m_port = 0;
};

// The argv that starts `spec` (its port chosen) inside the chroot `root`.
std::vector<std::string> server_argv(const std::filesystem::path& root, Server& spec);

// An experiment file's text with `servers` launched in the chroot `root`
// (`-t 1 -tb 1` each: several servers share these cores) and `settings`
// (TOML lines such as `framings = ["raw"]`) before them.
std::string experiment(const std::filesystem::path& root, std::vector<Server> servers,
                       const std::string& settings);

// The questions the outcomes model answers in known ways (each selects its
// chain by a marker byte; see scripts/tiny_models.py), as test.jsonl and
// train.jsonl (few-shot examples without markers) in `dir`; returns the
// test file.
std::filesystem::path write_outcome_dataset(const std::filesystem::path& dir);

// What the outcomes model was built to say for question `idx` of that
// dataset, per framing.
struct Expected {
    std::string name;
    std::string raw_text;
    std::string raw_outcome;
    std::string chat_text;
    std::string chat_outcome;
};
const std::vector<Expected>& expected_outcomes();

} // namespace engine_test
