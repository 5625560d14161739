// Engine test helpers; see engine.hpp.
#include "engine.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <httplib.h>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace engine_test {

namespace fs = std::filesystem;

std::optional<fs::path> chroot_dir(std::string& why) {
    static std::once_flag once;
    static std::optional<fs::path> dir;
    static std::string reason;
    std::call_once(once, [] {
        // The source tree's script (DIFFEVAL_SOURCE_DIR is set by CMake).
        std::string cmd = std::string(DIFFEVAL_SOURCE_DIR) + "/scripts/engine-chroot.sh 2>&1";
        FILE* p = popen(cmd.c_str(), "r");
        std::string out;
        char buf[4096];
        while (p && fgets(buf, sizeof buf, p)) {
            out += buf;
        }
        int rc = p ? pclose(p) : -1;
        while (!out.empty() && out.back() == '\n') {
            out.pop_back();
        }
        auto last = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
        if (rc == 0 && fs::exists(fs::path(last) / "usr/bin/llama-server")) {
            dir = last;
            return;
        }
        auto at = out.find("engine chroot unavailable: ");
        reason = at == std::string::npos ? out : out.substr(at);
    });
    why = reason;
    return dir;
}

std::vector<std::string> server_argv(const fs::path& root, Server& s) {
    if (s.port == 0) {
        s.port = e2e::free_port();
    }
    std::vector<std::string> argv = {"chroot",
                                     root.string(),
                                     "llama-server",
                                     "-m",
                                     s.model,
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(s.port),
                                     "-t",
                                     "1",
                                     "-tb",
                                     "1",
                                     "-np",
                                     std::to_string(s.slots),
                                     "-c",
                                     std::to_string(s.context)};
    argv.insert(argv.end(), s.extra_args.begin(), s.extra_args.end());
    return argv;
}

std::string experiment(const fs::path& root, std::vector<Server> servers,
                       const std::string& settings) {
    auto q = [](const std::string& s) { return nlohmann::json(s).dump(); };
    std::string out = "version = 1\n" + settings + "\n";
    for (auto& s : servers) {
        auto argv = server_argv(root, s);
        out += "\n[[servers]]\nname = " + q(s.name) +
               "\nurl = " + q("http://127.0.0.1:" + std::to_string(s.port)) +
               "\nready_timeout = 60\nlaunch = [";
        for (size_t i = 0; i < argv.size(); ++i) {
            out += (i ? ", " : "") + q(argv[i]);
        }
        out += "]\n";
    }
    return out;
}

RunningServer::RunningServer(const fs::path& root, Server spec, const fs::path& log) {
    auto argv = server_argv(root, spec);
    m_port = spec.port;
    // Built before the fork: nothing may throw in the child.
    std::vector<char*> args;
    for (auto& a : argv) {
        args.push_back(a.data());
    }
    args.push_back(nullptr);
    m_pid = fork();
    if (m_pid == 0) {
        setpgid(0, 0);
        int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execvp(args[0], args.data());
        _exit(127);
    }
}

RunningServer::~RunningServer() {
    if (m_pid > 0) {
        kill(-m_pid, SIGTERM);
        int status = 0;
        waitpid(m_pid, &status, 0);
    }
}

bool RunningServer::healthy() {
    httplib::Client c("127.0.0.1", m_port);
    for (int i = 0; i < 300; ++i) {
        if (auto r = c.Get("/health"); r && r->status == 200) {
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

std::string RunningServer::url() const {
    return "http://127.0.0.1:" + std::to_string(m_port);
}

namespace {

// Question text with the marker byte that selects the chain (see
// scripts/tiny_models.py), and the gold answer.
struct Item {
    const char* marker;
    const char* answer;
};
constexpr Item k_items[] = {{"", "12"},  {"~", "9"}, {"^", "7"},
                            {"@", "12"}, {"`", "3"}, {"|", "5"}};

} // namespace

fs::path write_outcome_dataset(const fs::path& dir) {
    {
        std::ofstream test(dir / "test.jsonl");
        int i = 0;
        for (const auto& item : k_items) {
            nlohmann::json j = {{"question", "Sam packs " + std::to_string(i++) + " " +
                                                 item.marker +
                                                 "boxes of pens. How many pens are there?"},
                                {"answer", std::string("Count them.\n#### ") + item.answer}};
            test << j.dump() << "\n";
        }
    }
    std::ofstream train(dir / "train.jsonl");
    for (int i = 0; i < 5; ++i) {
        nlohmann::json j = {
            {"question", "Ann has " + std::to_string(i + 2) + " cats. How many cats?"},
            {"answer",
             "She has " + std::to_string(i + 2) + " cats.\n#### " + std::to_string(i + 2)}};
        train << j.dump() << "\n";
    }
    return dir / "test.jsonl";
}

const std::vector<Expected>& expected_outcomes() {
    static const std::vector<Expected> k = {
        {"finished by EOS",
         " Each box holds 6 pens, so 2 boxes hold 2 * 6 = <<2*6=12>>12 pens.\n#### 12", "finished",
         " Each box holds 6 pens, so 2 boxes hold 2 * 6 = <<2*6=12>>12 pens.\n#### 12", "finished"},
        {"finished, stop string after the answer", " 5 + 4 = <<5+4=9>>9 apples.\n#### 9\n\n",
         "finished", " 5 + 4 = <<5+4=9>>9 apples.\n#### 9\n\n", "finished"},
        {"empty answer cut by a stop string", "", "stop_truncated", "", "stop_truncated"},
        {"think block cut by a stop string (raw) or the length limit (chat)",
         "<think>\nThe boxes hold 12 pens. Wait, let me check the ", "stop_truncated",
         "<think>\nThe boxes hold 12 pens. Wait, let me check the Question again. Hmm and Hmm and "
         "Hmm and Hmm and Hmm and Hmm and Hmm",
         "length_truncated"},
        {"length cut", " 1 2 3 1 2 3 1 2 3 1 2 3 1 2 3 1", "length_truncated",
         " 1 2 3 1 2 3 1 2 3 1 2 3 1 2 3 1", "length_truncated"},
        {"EOS inside an unclosed think block", "<think>\nLet me think", "stop_truncated",
         "<think>\nLet me think", "stop_truncated"},
    };
    return k;
}

} // namespace engine_test
