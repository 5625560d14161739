// Launching the servers an experiment describes: refuse a local port
// another process already answers on, start the command in its own process
// group with the given environment and directory, capture its output to a
// log file, wait until it is healthy, notice if it dies, and stop it
// (SIGTERM to the group, SIGKILL after a grace period; on Linux the kernel
// sends SIGTERM when diffeval dies, so a killed run leaves no server behind).
#pragma once

#include <harness/engine/config.hpp>
#include <harness/util/result.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace diffeval::engine {

// Split a command string into words as a POSIX shell would for plain words,
// '...' and "..." quotes and backslash escapes (no expansion of any kind).
util::Result<std::vector<std::string>> split_command(const std::string& command);

// The argv `spec.launch` starts: its words (a list, or one string split as
// above), or /bin/sh -c with the string when `spec.launch_shell`. A usage
// error naming the server when the string cannot be split or holds nothing.
util::Result<std::vector<std::string>> launch_argv(const ServerSpec& spec);

// Whether `spec`'s launch can start before anything else does (the run
// checks every launched server before it opens the database): its words
// split, its `cwd` is a directory, and its program is an executable file
// where execvp would look for it (the path given, from `cwd`; else each
// directory of the PATH in the server's `env`, or in diffeval's). A shell
// launch's program is the shell's to find. A usage error saying which.
util::Result<void> check_launchable(const ServerSpec& spec);

// A usage error when `spec.url` is on this machine and its port already
// answers: the server about to start could not bind it. Only numeric
// addresses and "localhost" are resolved: a launch on another machine is
// not ours to check, and a DNS query could hang.
util::Result<void> check_port_free(const ServerSpec& spec);

// Whether a launched server may outlive diffeval (--keep-servers).
enum class Outlive { no, yes };

// What diffeval keeps of a server's log (launched, or attached with
// --server-log): its first k_log_head and last k_log_tail bytes in whole
// lines, with a line for what was left out between them. A log grows with
// every request a verbose server serves, and what is read is held in memory
// and stored in `servers.log_text`; the facts fingerprinting reads are
// stated at start-up, and a failure's account at the end. From byte `from`
// on, for a launched server (its file keeps every launch's lines). A usage
// error "PATH: REASON" when the file cannot be read (a directory, no such
// file).
constexpr size_t k_log_head = size_t{2} << 20;
constexpr size_t k_log_tail = size_t{512} << 10;
// `launches`, when given, gets where each launch starts from `from` on
// (launch_offsets; empty for a file that is no regular file).
util::Result<std::string> read_server_log(const std::filesystem::path& path, uint64_t from = 0,
                                          std::vector<uint64_t>* launches = nullptr);

// Where each launch a server was restarted into its log file (`>>`) starts,
// at byte `from` or after (its lead lines, such as a llama-server's
// backends, with it); empty when none does.
std::vector<uint64_t> launch_offsets(const std::filesystem::path& path, uint64_t from);

class LaunchedServer {
public:
    // Start `spec.launch`, appending its stdout and stderr to `log_path`.
    // A usage error when `spec.url` is on this host and its port already
    // answers. With `outlive` = Outlive::no the server gets SIGTERM when
    // diffeval ends, however it ends (Linux).
    static util::Result<std::unique_ptr<LaunchedServer>>
    start(const ServerSpec& spec, const std::filesystem::path& log_path, Outlive outlive);
    ~LaunchedServer();
    LaunchedServer(const LaunchedServer&) = delete;
    LaunchedServer& operator=(const LaunchedServer&) = delete;

    // Poll the health paths until each answers 2xx, the process exits, the
    // timeout passes, or `stop` is set. A process that has exited once they
    // answer (another process answered them) is an error too. Errors carry
    // the log's last lines.
    util::Result<void> wait_healthy(const std::atomic<bool>* stop);
    // The process has exited (reaped); `exit_description` says how.
    bool exited();
    std::string exit_description() const { return m_exit; }
    // SIGTERM the process group, then SIGKILL after `grace`, or at once
    // when `hurry` says so meanwhile; `waiting` is called once when the
    // server has not stopped after a second (a llama-server answering a
    // request ignores SIGTERM until it is done).
    void stop(std::chrono::milliseconds grace = std::chrono::milliseconds{10'000},
              const std::function<bool()>& hurry = {}, const std::function<void()>& waiting = {});
    // Let the process run on after this object and diffeval are gone
    // (--keep-servers): the destructor no longer stops it.
    void release() { m_pid = -1; }
    // What is kept of the log this launch wrote (the file is appended to,
    // and an earlier run's server said what that server ran): its first
    // k_log_head and last k_log_tail bytes, as read_server_log keeps a log.
    std::string log_text() const;
    // The last `lines` lines of the log this launch wrote.
    std::string log_tail(size_t lines) const;
    const std::filesystem::path& log_path() const { return m_log_path; }
    int pid() const { return m_pid; }

private:
    LaunchedServer() = default;
    const ServerSpec* m_spec = nullptr;
    int m_pid = -1;
    bool m_reaped = false;
    std::string m_exit;
    std::filesystem::path m_log_path;
    uint64_t m_log_from = 0; // the log's size when this launch began
};

} // namespace diffeval::engine
