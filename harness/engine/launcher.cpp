// Server processes; see launcher.hpp.
//
// The child gets its own process group so that stopping it also stops what it
// started (vLLM's engine core is a child process of the API server).
//
// Two things keep diffeval from talking to a process it did not start. A
// launch whose URL is on this machine is refused while its port already
// answers: the new server could not bind it, and the health check would be
// answered by whatever holds it (an orphan of a killed run, a kept server).
// And the launched process gets SIGTERM from the kernel when diffeval dies,
// even by SIGKILL, so a killed run leaves no such orphan behind.
#include <harness/engine/launcher.hpp>

#include <harness/fingerprint/fingerprint.hpp>
#include <harness/http/client.hpp>
#include <harness/util/file.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>
#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace diffeval::engine {

using Clock = std::chrono::steady_clock;
using util::ErrorKind;
using util::make_error;

util::Result<std::vector<std::string>> split_command(const std::string& command) {
    std::vector<std::string> words;
    std::string word;
    bool in_word = false;
    char quote = 0;
    for (size_t i = 0; i < command.size(); ++i) {
        char c = command[i];
        if (quote == '\'') {
            if (c == '\'') {
                quote = 0;
            } else {
                word += c;
            }
        } else if (quote == '"') {
            if (c == '"') {
                quote = 0;
            } else if (c == '\\' && i + 1 < command.size() &&
                       std::strchr("\"\\$`", command[i + 1])) {
                word += command[++i];
            } else {
                word += c;
            }
        } else if (c == '\'' || c == '"') {
            quote = c;
            in_word = true;
        } else if (c == '\\' && i + 1 < command.size()) {
            word += command[++i];
            in_word = true;
        } else if (c == ' ' || c == '\t' || c == '\n') {
            if (in_word) {
                words.push_back(std::move(word));
                word.clear();
                in_word = false;
            }
        } else {
            word += c;
            in_word = true;
        }
    }
    if (quote) {
        return make_error(
            ErrorKind::usage,
            fmt::format("unterminated {} quote in launch command: {}", quote, command));
    }
    if (in_word) {
        words.push_back(std::move(word));
    }
    if (words.empty()) {
        return make_error(ErrorKind::usage, "empty launch command");
    }
    return words;
}

namespace {

// How long a connect to a local port may take. One still pending then
// (a firewall dropping it, a listener whose backlog is full) counts as free:
// refusing a run for a port that may well be free would be worse than the
// health check meeting a stuck process.
constexpr auto k_port_probe_timeout = std::chrono::milliseconds{500};

// Whether `a` is an address of this machine: it can be bound (loopback, the
// wildcard, one of its interfaces).
bool is_local(const addrinfo& a) {
    sockaddr_storage any{};
    std::memcpy(&any, a.ai_addr, a.ai_addrlen);
    if (any.ss_family == AF_INET) {
        reinterpret_cast<sockaddr_in*>(&any)->sin_port = 0;
    } else if (any.ss_family == AF_INET6) {
        reinterpret_cast<sockaddr_in6*>(&any)->sin6_port = 0;
    }
    const int fd = socket(a.ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    const bool local = bind(fd, reinterpret_cast<sockaddr*>(&any), a.ai_addrlen) == 0;
    ::close(fd);
    return local;
}

// Whether a process accepts connections at `a`.
bool answers(const addrinfo& a) {
    const int fd = socket(a.ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return false;
    }
    bool taken = connect(fd, a.ai_addr, a.ai_addrlen) == 0;
    if (!taken && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        const int ready = poll(&p, 1, static_cast<int>(k_port_probe_timeout.count()));
        int err = 0;
        socklen_t len = sizeof err;
        taken = ready == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    ::close(fd);
    return taken;
}

// "server 'x': cannot run 'vllm' in /srv: No such file or directory": what
// the check before the run and the exec at launch both say.
std::string cannot_run(const ServerSpec& spec, const std::string& program, int err) {
    return fmt::format("server '{}': cannot run '{}'{}: {}", spec.name,
                       util::one_line(program, 200),
                       spec.cwd.empty() ? "" : fmt::format(" in {}", spec.cwd), std::strerror(err));
}

} // namespace

util::Result<std::vector<std::string>> launch_argv(const ServerSpec& spec) {
    if (spec.launch_shell) {
        if (spec.launch.size() != 1) {
            return make_error(
                ErrorKind::usage,
                fmt::format("server '{}': shell = true needs launch as one command string",
                            spec.name));
        }
        return std::vector<std::string>{"/bin/sh", "-c", spec.launch[0]};
    }
    if (spec.launch.size() == 1) {
        auto words = split_command(spec.launch[0]);
        if (!words) {
            return make_error(ErrorKind::usage,
                              fmt::format("server '{}': {}", spec.name, words.error().message));
        }
        return std::move(*words);
    }
    return spec.launch;
}

util::Result<void> check_port_free(const ServerSpec& spec) {
    const auto hp = http::host_port(spec.url);
    if (!hp) {
        return {};
    }
    const bool named_local = strcasecmp(hp->host.c_str(), "localhost") == 0;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = (named_local ? 0 : AI_NUMERICHOST) | AI_NUMERICSERV;
    addrinfo* list = nullptr;
    if (getaddrinfo(hp->host.c_str(), hp->port.c_str(), &hints, &list) != 0) {
        return {};
    }
    bool taken = false;
    for (const addrinfo* a = list; a && !taken; a = a->ai_next) {
        taken = (named_local || is_local(*a)) && answers(*a);
    }
    freeaddrinfo(list);
    if (taken) {
        return make_error(ErrorKind::usage,
                          fmt::format("server '{}': port {} is already in use by another process; "
                                      "stop it or choose another port",
                                      spec.name, hp->port));
    }
    return {};
}

util::Result<void> check_launchable(const ServerSpec& spec) {
    auto argv = launch_argv(spec);
    if (!argv) {
        return argv.error();
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path cwd = spec.cwd;
    if (!cwd.empty() && !fs::is_directory(cwd, ec)) {
        return make_error(ErrorKind::usage,
                          fmt::format("server '{}': its cwd '{}' is not a directory; give the "
                                      "directory the server is to start in",
                                      spec.name, spec.cwd));
    }
    const std::string& program = argv->front();
    // What execvp would run (from the directory the child changes to): 0, or
    // why not as an errno.
    auto why_not = [&](const fs::path& p) {
        const fs::path at = p.is_relative() && !cwd.empty() ? cwd / p : p;
        if (::access(at.c_str(), X_OK) != 0) {
            return errno;
        }
        return fs::is_directory(at, ec) ? EISDIR : 0;
    };
    if (program.find('/') != std::string::npos) {
        if (const int err = why_not(program); err != 0) {
            return make_error(ErrorKind::usage, cannot_run(spec, program, err) +
                                                    "; give the path of the server's program in " +
                                                    spec.launch_named_by);
        }
        return {};
    }
    // The PATH the child runs with: the server's env, else diffeval's, else
    // execvp's default.
    std::string path;
    if (auto it = std::find_if(spec.env.rbegin(), spec.env.rend(),
                               [](const auto& kv) { return kv.first == "PATH"; });
        it != spec.env.rend()) {
        path = it->second;
    } else if (const char* p = std::getenv("PATH")) {
        path = p;
    } else {
        path = "/bin:/usr/bin";
    }
    for (size_t at = 0;;) {
        const size_t colon = path.find(':', at);
        const std::string dir = path.substr(at, colon == std::string::npos ? colon : colon - at);
        if (why_not(fs::path(dir.empty() ? "." : dir) / program) == 0) {
            return {};
        }
        if (colon == std::string::npos) {
            break;
        }
        at = colon + 1;
    }
    return make_error(ErrorKind::usage,
                      fmt::format("server '{}': cannot run '{}': no such program in PATH; "
                                  "install it, or give its full path in {}",
                                  spec.name, util::one_line(program, 200), spec.launch_named_by));
}

util::Result<std::unique_ptr<LaunchedServer>>
LaunchedServer::start(const ServerSpec& spec, const std::filesystem::path& log_path,
                      Outlive outlive) {
    if (auto free = check_port_free(spec); !free) {
        return free.error();
    }
    auto launched = launch_argv(spec);
    if (!launched) {
        return launched.error();
    }
    auto& argv = *launched;
    std::error_code ec;
    std::filesystem::create_directories(log_path.parent_path(), ec);
    int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        return make_error(ErrorKind::io,
                          fmt::format("server '{}': cannot write log {}: {}", spec.name,
                                      log_path.string(), std::strerror(errno)));
    }
    // What an earlier launch appended stays in the file, not in this
    // launch's facts: a setting only the earlier server logged was read as
    // this one's, and with a long log the head kept was the earlier start.
    struct stat logged {};
    const uint64_t log_from =
        ::fstat(log_fd, &logged) == 0 ? static_cast<uint64_t>(logged.st_size) : 0;
    // An exec failure is reported through this pipe, closed on success.
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
        ::close(log_fd);
        return make_error(ErrorKind::io, "cannot create a pipe to start the server");
    }
    std::vector<char*> cargv;
    for (auto& a : argv) {
        cargv.push_back(a.data());
    }
    cargv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
#ifdef __linux__
        // SIGTERM when diffeval dies, however it dies; the signal survives
        // exec (not of a set-user-ID program). A parent that died before
        // the request took effect would never send it: go at once.
        if (outlive == Outlive::no) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != parent) {
                _exit(127);
            }
        }
#else
        (void)parent;
        (void)outlive;
#endif
        // diffeval ignores SIGPIPE and SIGXFSZ (cli.cpp); an ignored signal
        // stays ignored across exec, and the server is not diffeval.
        std::signal(SIGPIPE, SIG_DFL);
        std::signal(SIGXFSZ, SIG_DFL);
        int devnull = ::open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(log_fd, 1);
        dup2(log_fd, 2);
        for (const auto& [k, v] : spec.env) {
            setenv(k.c_str(), v.c_str(), 1);
        }
        if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) {
            int err = errno;
            (void)!write(pipe_fds[1], &err, sizeof err);
            _exit(127);
        }
        execvp(cargv[0], cargv.data());
        int err = errno;
        (void)!write(pipe_fds[1], &err, sizeof err);
        _exit(127);
    }
    ::close(pipe_fds[1]);
    ::close(log_fd);
    if (pid < 0) {
        ::close(pipe_fds[0]);
        return make_error(ErrorKind::io, fmt::format("server '{}': cannot fork", spec.name));
    }
    setpgid(pid, pid); // also from the parent, so the group exists before we might signal it
    int child_errno = 0;
    auto n = read(pipe_fds[0], &child_errno, sizeof child_errno);
    ::close(pipe_fds[0]);
    if (n == sizeof child_errno) {
        waitpid(pid, nullptr, 0);
        return make_error(ErrorKind::usage, cannot_run(spec, argv[0], child_errno));
    }
    std::unique_ptr<LaunchedServer> s(new LaunchedServer());
    s->m_spec = &spec;
    s->m_pid = pid;
    s->m_log_path = log_path;
    s->m_log_from = log_from;
    return s;
}

LaunchedServer::~LaunchedServer() {
    stop(std::chrono::milliseconds{2'000});
}

bool LaunchedServer::exited() {
    if (m_reaped) {
        return true;
    }
    int status = 0;
    if (waitpid(m_pid, &status, WNOHANG) == m_pid) {
        m_reaped = true;
        m_exit = WIFEXITED(status) ? fmt::format("exited with code {}", WEXITSTATUS(status))
                                   : fmt::format("killed by signal {}", WTERMSIG(status));
    }
    return m_reaped;
}

util::Result<void> LaunchedServer::wait_healthy(const std::atomic<bool>* stop) {
    const auto deadline = Clock::now() + m_spec->ready_timeout;
    for (const auto& path : m_spec->health) {
        for (;;) {
            if (exited()) {
                return make_error(
                    ErrorKind::usage,
                    fmt::format("server '{}' {} before it was healthy; last log lines:\n{}",
                                m_spec->name, m_exit, log_tail(10)));
            }
            if (stop && stop->load()) {
                return make_error(ErrorKind::usage, "interrupted while waiting for servers");
            }
            http::Request req;
            req.url = m_spec->url + path;
            req.timeout = std::chrono::milliseconds{2'000};
            auto r = http::fetch(req);
            if (r.transport == http::Transport::ok && r.status >= 200 && r.status < 300) {
                break;
            }
            if (Clock::now() > deadline) {
                return make_error(
                    ErrorKind::usage,
                    fmt::format(
                        "server '{}' was not healthy ({} {}) within {}s; last log "
                        "lines:\n{}",
                        m_spec->name, path,
                        r.transport == http::Transport::ok ? fmt::format("HTTP {}", r.status)
                                                           : r.transport_error,
                        std::chrono::duration_cast<std::chrono::seconds>(m_spec->ready_timeout)
                            .count(),
                        log_tail(10)));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds{50});
        }
    }
    // Answered, but not by our process if it is gone: whatever holds its
    // port did (the port check runs only for URLs on this machine).
    if (exited()) {
        return make_error(ErrorKind::usage,
                          fmt::format("server '{}' {} before it was healthy (another process "
                                      "answered on {}); last log lines:\n{}",
                                      m_spec->name, m_exit, m_spec->url, log_tail(10)));
    }
    return {};
}

void LaunchedServer::stop(std::chrono::milliseconds grace, const std::function<bool()>& hurry,
                          const std::function<void()>& waiting) {
    if (m_pid <= 0 || exited()) {
        // The leader is gone; make sure nothing it left in its group survives.
        if (m_pid > 0) {
            kill(-m_pid, SIGKILL);
        }
        return;
    }
    kill(-m_pid, SIGTERM);
    const auto start = Clock::now();
    const auto deadline = start + grace;
    bool said = false;
    while (Clock::now() < deadline && !(hurry && hurry())) {
        if (exited()) {
            kill(-m_pid, SIGKILL);
            return;
        }
        if (!said && waiting && Clock::now() - start >= std::chrono::seconds{1}) {
            said = true;
            waiting();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    kill(-m_pid, SIGKILL);
    waitpid(m_pid, nullptr, 0);
    m_reaped = true;
    m_exit = "killed after the grace period";
}

// Where each launch in a log file a server was restarted into (`>>`) starts,
// from byte `from` on: the first line that starts within k_lead bytes (and
// not before `from`) before a line where a launch first states its engine's
// version (fingerprint::starts_launch; a llama-server writes its backends
// first). Read in 1 MiB blocks, so memory stays bounded whatever the file
// holds; a line past 64 KiB (a verbose server's request dumps) is no
// start-up line and is skipped unread.
std::vector<uint64_t> launch_offsets(const std::filesystem::path& path, uint64_t from) {
    constexpr uint64_t k_lead = 4096;
    constexpr size_t k_longest_line = size_t{64} << 10;
    std::vector<uint64_t> out;
    std::ifstream in(path, std::ios::binary);
    if (from > 0) {
        in.seekg(static_cast<std::streamoff>(from));
    }
    std::vector<char> block(size_t{1} << 20);
    std::string line;                 // the line read so far (when not too long)
    bool too_long = false;            // the line read so far passed k_longest_line
    uint64_t at = from, start = from; // bytes read; where the line read so far starts
    std::deque<uint64_t> recent;      // the line starts within k_lead bytes before `start`
    uint64_t last_launch_line = 0;    // where the last launch's line starts (when `out` has one)
    while (in &&
           (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0)) {
        const std::string_view got(block.data(), static_cast<size_t>(in.gcount()));
        for (size_t pos = 0; pos < got.size();) {
            const size_t nl = got.find('\n', pos);
            const auto piece = got.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
            if (!too_long) {
                too_long = line.size() + piece.size() > k_longest_line;
                line.append(too_long ? std::string_view() : piece);
            }
            if (nl == std::string_view::npos) {
                break;
            }
            while (!recent.empty() && recent.front() + k_lead < start) {
                recent.pop_front();
            }
            recent.push_back(start);
            if (!too_long && fingerprint::starts_launch(line)) {
                // Its lead lines are those after the launch before's line.
                auto lead = recent.begin();
                while (!out.empty() && *lead <= last_launch_line) {
                    ++lead;
                }
                out.push_back(*lead);
                last_launch_line = start;
            }
            line.clear();
            too_long = false;
            start = at + nl + 1;
            pos = nl + 1;
        }
        at += got.size();
    }
    return out;
}

util::Result<std::string> read_server_log(const std::filesystem::path& path, uint64_t from,
                                          std::vector<uint64_t>* launches) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        return make_error(ErrorKind::usage, fmt::format("{}: it is a directory", path.string()));
    }
    // A log too long to keep whole, that a server was restarted into, keeps
    // the running launch's start-up lines (what it ran) only from its last
    // launch: its head would be the first launch's. The file is scanned for
    // launches once, for both.
    const bool regular = std::filesystem::is_regular_file(path, ec);
    const bool too_long = from == 0 && regular &&
                          std::filesystem::file_size(path, ec) > k_log_head + k_log_tail && !ec;
    std::vector<uint64_t> found;
    if (regular && (too_long || launches)) {
        found = launch_offsets(path, from);
    }
    if (too_long && !found.empty()) {
        from = found.back();
    }
    if (launches) {
        *launches = std::move(found);
    }
    auto ends = util::read_file_ends(path, k_log_head, k_log_tail, from);
    if (!ends) {
        return ends.error();
    }
    return std::move(ends->text);
}

std::string LaunchedServer::log_text() const {
    auto text = read_server_log(m_log_path, m_log_from);
    return text ? std::move(*text) : std::string();
}

std::string LaunchedServer::log_tail(size_t lines) const {
    // The end alone: what a failure's account prints is the last few lines.
    auto ends = util::read_file_ends(m_log_path, 0, k_log_tail, m_log_from);
    auto text = ends ? std::move(ends->text) : std::string();
    size_t pos = text.size();
    if (pos > 0 && text[pos - 1] == '\n') {
        --pos;
    }
    for (size_t n = 0; n < lines && pos > 0; ++n) {
        auto nl = text.rfind('\n', pos - 1);
        pos = nl == std::string::npos ? 0 : nl;
        if (nl == std::string::npos) {
            break;
        }
    }
    auto tail = text.substr(pos == 0 ? 0 : pos + 1);
    return tail.empty() ? "(log is empty)" : tail;
}

} // namespace diffeval::engine
