// Process and database helpers for the black-box tests; see e2e.hpp.
#include "e2e.hpp"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <grp.h>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace e2e {

namespace fs = std::filesystem;

std::string binary() {
    const char* b = std::getenv("DIFFEVAL_BIN");
    if (!b || !*b) {
        throw std::runtime_error("DIFFEVAL_BIN is not set (run the tests through ctest)");
    }
    return b;
}

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

namespace {

int spawn(const std::vector<std::string>& args, const std::vector<std::string>& env,
          const std::string& out, const std::string& err, bool unprivileged = false) {
    // Everything that can throw happens before the fork: an exception in the
    // child would return into the test runner, which would go on running
    // tests (and forking) in two processes. Run outside ctest without
    // DIFFEVAL_BIN, that made thousands of test_e2e processes.
    std::string bin = binary();
    std::vector<char*> argv;
    argv.push_back(bin.data());
    for (const auto& a : args) {
        argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int n = open("/dev/null", O_RDONLY);
        dup2(n, 0);
        dup2(o, 1);
        dup2(e, 2);
        for (const auto& kv : env) {
            putenv(const_cast<char*>(kv.c_str()));
        }
        // As root, file permissions bind nobody: become the unprivileged
        // user so read-only and unreadable files mean what they say.
        if (unprivileged && geteuid() == 0 &&
            (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) {
            _exit(126);
        }
        execv(bin.c_str(), argv.data());
        _exit(127);
    }
    return pid;
}

int decode(int status) {
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return -1;
}

int counter = 0;

} // namespace

int free_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    return ntohs(addr.sin_port);
}

namespace {

// Removes the scratch directories of a test that passed or was skipped (a
// whole suite's, of a suite with no failed test) and names those of one that
// failed, so a run of the suite leaves only what a failure needs read (it
// left 688 MB). DIFFEVAL_KEEP_SCRATCH=1 keeps them all.
class ScratchCleaner : public ::testing::EmptyTestEventListener {
public:
    void add(const fs::path& dir) { (m_in_test ? m_test : m_suite).push_back(dir); }

private:
    void OnTestStart(const ::testing::TestInfo&) override { m_in_test = true; }
    void OnTestEnd(const ::testing::TestInfo& info) override {
        m_in_test = false;
        settle(m_test, !info.result()->Failed());
    }
    void OnTestSuiteEnd(const ::testing::TestSuite& suite) override {
        settle(m_suite, !suite.Failed());
    }
    static void settle(std::vector<fs::path>& dirs, bool passed) {
        const char* keep = std::getenv("DIFFEVAL_KEEP_SCRATCH");
        for (const auto& dir : dirs) {
            if (passed && !(keep && std::string(keep) == "1")) {
                std::error_code ignored;
                fs::remove_all(dir, ignored);
            } else {
                std::cerr << "scratch directory kept: " << dir.string() << "\n";
            }
        }
        dirs.clear();
    }

    bool m_in_test = false;
    std::vector<fs::path> m_test, m_suite;
};

ScratchCleaner& scratch_cleaner() {
    // Handed to gtest, which deletes it at exit.
    static auto* cleaner = [] {
        auto* c = new ScratchCleaner;
        ::testing::UnitTest::GetInstance()->listeners().Append(c);
        return c;
    }();
    return *cleaner;
}

// Registered before any test runs, so the first test's directories count.
const bool g_cleaner_registered = (scratch_cleaner(), true);

} // namespace

fs::path scratch(const std::string& name) {
    auto dir = fs::temp_directory_path() / "diffeval-e2e" / (name + "-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    scratch_cleaner().add(dir);
    return dir;
}

namespace {

Outcome run_as(const std::vector<std::string>& args, const std::vector<std::string>& env,
               bool unprivileged) {
    auto base = fs::temp_directory_path() /
                ("diffeval-e2e-run-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    std::string out = base.string() + ".out", err = base.string() + ".err";
    int pid = spawn(args, env, out, err, unprivileged);
    int status = 0;
    waitpid(pid, &status, 0);
    Outcome o{decode(status), slurp(out), slurp(err)};
    fs::remove(out);
    fs::remove(err);
    return o;
}

} // namespace

Outcome run(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    return run_as(args, env, false);
}

Outcome run_unprivileged(const std::vector<std::string>& args) {
    return run_as(args, {}, true);
}

Child::Child(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    auto base = fs::temp_directory_path() / ("diffeval-e2e-child-" + std::to_string(getpid()) +
                                             "-" + std::to_string(counter++));
    m_out_path = base.string() + ".out";
    m_err_path = base.string() + ".err";
    m_pid = spawn(args, env, m_out_path, m_err_path);
}

Child::~Child() {
    if (m_pid > 0) {
        stop(SIGKILL);
    }
    fs::remove(m_out_path);
    fs::remove(m_err_path);
}

int Child::stop(int sig) {
    if (m_pid <= 0) {
        return -1;
    }
    kill(m_pid, sig);
    int status = 0;
    waitpid(m_pid, &status, 0);
    m_pid = -1;
    return decode(status);
}

int Child::wait() {
    if (m_pid <= 0) {
        return -1;
    }
    int status = 0;
    waitpid(m_pid, &status, 0);
    m_pid = -1;
    return decode(status);
}

std::optional<int> Child::wait_for(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (m_pid > 0) {
        int status = 0;
        if (waitpid(m_pid, &status, WNOHANG) == m_pid) {
            m_pid = -1;
            return decode(status);
        }
        if (std::chrono::steady_clock::now() > deadline) {
            return std::nullopt;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
    return std::nullopt;
}

std::string Child::out() const {
    return slurp(m_out_path);
}
std::string Child::err() const {
    return slurp(m_err_path);
}

Sim::Sim(std::vector<std::string> extra_args) {
    std::vector<std::string> args = {"sim", "--port", "0", "--host", "127.0.0.1"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    m_child = std::make_unique<Child>(args);
    // The simulator prints "... listening on http://HOST:PORT" once ready.
    for (int i = 0; i < 500; ++i) {
        auto out = m_child->out();
        auto pos = out.find("http://");
        if (pos != std::string::npos && out.find('\n', pos) != std::string::npos) {
            m_url = out.substr(pos, out.find_first_of(" \n", pos) - pos);
            m_port = std::stoi(m_url.substr(m_url.rfind(':') + 1));
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("diffeval sim did not start: " + m_child->err());
}

std::string Sim::stats() {
    httplib::Client c("127.0.0.1", m_port);
    auto r = c.Get("/stats");
    return r ? r->body : "";
}

std::vector<std::string> query_rows(const fs::path& db, const std::string& sql) {
    sqlite3* h = nullptr;
    std::vector<std::string> rows;
    if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        sqlite3_close(h);
        throw std::runtime_error("cannot open " + db.string());
    }
    sqlite3_busy_timeout(h, 5000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
        std::string msg = sqlite3_errmsg(h);
        sqlite3_close(h);
        throw std::runtime_error("bad query: " + msg);
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        std::string row;
        for (int c = 0; c < sqlite3_column_count(st); ++c) {
            if (c) {
                row += '|';
            }
            auto* t = sqlite3_column_text(st, c);
            row += t ? reinterpret_cast<const char*>(t) : "NULL";
        }
        rows.push_back(row);
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return rows;
}

std::string query(const fs::path& db, const std::string& sql) {
    auto rows = query_rows(db, sql);
    return rows.empty() ? "" : rows.front();
}

void exec(const fs::path& db, const std::string& sql) {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(h);
}

void unsend(const fs::path& db, const std::string& where) {
    const std::string ids = "(SELECT response_id FROM requests WHERE " + where + ")";
    exec(db, "DELETE FROM scores WHERE response_id IN " + ids +
                 "; DELETE FROM classifications WHERE response_id IN " + ids +
                 "; UPDATE requests SET response_id = NULL WHERE " + where +
                 "; DELETE FROM responses WHERE response_id NOT IN (SELECT response_id FROM "
                 "requests WHERE response_id IS NOT NULL)");
}

} // namespace e2e
