// Black-box test helpers: run the real `diffeval` binary (DIFFEVAL_BIN), start
// `diffeval sim` on a free loopback port, and read the resulting database.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace e2e {

// The diffeval binary under test.
std::string binary();

struct Outcome {
    int exit_code = -1;
    std::string out;
    std::string err;
};

// Run diffeval with `args` to completion, capturing output.
Outcome run(const std::vector<std::string>& args, const std::vector<std::string>& env = {});

// Run diffeval as an unprivileged user (nobody) when the tests run as root,
// otherwise as run(): permissions on files then bind it.
Outcome run_unprivileged(const std::vector<std::string>& args);

// A child process running in the background with captured output.
class Child {
public:
    Child(const std::vector<std::string>& args, const std::vector<std::string>& env = {});
    ~Child();
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    int pid() const { return m_pid; }
    // Send `sig` and wait for exit; returns the exit status as run() would.
    int stop(int sig);
    // Wait for exit without a signal; returns the exit status as run() would.
    int wait();
    // The exit status as wait() gives it, if the child exits within `limit`
    // (looked at every 10 ms); nullopt while it still runs.
    std::optional<int> wait_for(std::chrono::milliseconds limit);
    std::string out() const;
    std::string err() const;

private:
    int m_pid = -1;
    std::string m_out_path;
    std::string m_err_path;
};

// `diffeval sim` listening on a free port.
class Sim {
public:
    explicit Sim(std::vector<std::string> extra_args = {});
    std::string url() const { return m_url; }
    int port() const { return m_port; }
    std::string stats(); // GET the simulator's stats endpoint

private:
    std::unique_ptr<Child> m_child;
    std::string m_url;
    int m_port = 0;
};

// A loopback port nothing listens on right now.
int free_port();

// A fresh scratch directory for one test.
std::filesystem::path scratch(const std::string& name);

// Single-value query on the database at `db`.
std::string query(const std::filesystem::path& db, const std::string& sql);
// All rows of a query, columns joined by '|'.
std::vector<std::string> query_rows(const std::filesystem::path& db, const std::string& sql);
// Run `sql` (any statements) on the database at `db`; a failure fails the test.
void exec(const std::filesystem::path& db, const std::string& sql);
// Make the requests `where` (a condition on table requests) planned and
// never sent, as a run killed before sending them leaves them: no response,
// classification or score.
void unsend(const std::filesystem::path& db, const std::string& where);
// The bytes of the file at `path` ("" when it cannot be read).
std::string slurp(const std::filesystem::path& path);

} // namespace e2e
