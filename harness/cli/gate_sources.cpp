// --baseline-db and --vllm-config for `diffeval gate`; see gate_sources.hpp.
#include <harness/cli/gate_sources.hpp>
#include <harness/cli/util.hpp>

#include <harness/engine/vllm_config.hpp>
#include <harness/store/merge.hpp>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <unistd.h>

namespace diffeval::cli {

namespace {

// The files a combined copy may leave in its directory, for a signal
// handler to remove: it may call unlink and rmdir, not allocate. Set while
// one CombinedDb lives (a gate makes at most one).
constexpr std::array k_combined_suffixes = {
    "",           "-wal",           "-shm",           "-journal",          ".lock",
    ".merge-tmp", ".merge-tmp-wal", ".merge-tmp-shm", ".merge-tmp-journal"};
struct CleanupPaths {
    std::array<std::array<char, PATH_MAX>, k_combined_suffixes.size()> files{};
    std::array<char, PATH_MAX> dir{};
};
CleanupPaths g_cleanup;
std::array<struct sigaction, 3> g_previous{};
constexpr std::array k_cleanup_signals = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_combined_and_die(int sig) {
    for (const auto& f : g_cleanup.files) {
        if (f[0] != '\0') {
            ::unlink(f.data());
        }
    }
    if (g_cleanup.dir[0] != '\0') {
        ::rmdir(g_cleanup.dir.data());
    }
    // Then end as the signal would have: 130 for Ctrl-C, 143 for SIGTERM.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

// Whether `path` fits a cleanup buffer with its terminating NUL.
bool fits(const std::string& path) {
    return path.size() + 1 <= PATH_MAX;
}

} // namespace

util::Result<std::unique_ptr<CombinedDb>> CombinedDb::create(const std::string& db,
                                                             const std::string& baseline_db) {
    for (const auto& p : {db, baseline_db}) {
        if (auto r = check_existing_db(p); !r) {
            return r.error();
        }
    }
    // A directory of its own (mkdtemp): a name made of the PID alone is
    // the same for two gates in two containers sharing a /tmp, each
    // combining into the other's file.
    std::error_code ec;
    const auto tmp = std::filesystem::temp_directory_path(ec);
    if (ec) {
        const char* named = std::getenv("TMPDIR");
        return util::make_error(
            util::ErrorKind::usage,
            fmt::format("--baseline-db needs a temporary directory, and {} is none ({}); set "
                        "TMPDIR to a writable directory",
                        named && *named ? fmt::format("TMPDIR {}", named) : std::string("/tmp"),
                        ec.message()));
    }
    const auto pattern = (tmp / "diffeval-gate-XXXXXX").string();
    auto dir = pattern;
    // The signals wait while the directory is made and its cleanup set up
    // (below): one that came between the two left the directory behind.
    sigset_t cleanup_signals, before;
    sigemptyset(&cleanup_signals);
    for (int sig : k_cleanup_signals) {
        sigaddset(&cleanup_signals, sig);
    }
    ::pthread_sigmask(SIG_BLOCK, &cleanup_signals, &before);
    struct Unblock {
        sigset_t& mask;
        ~Unblock() { ::pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
    } unblock{before};
    if (!::mkdtemp(dir.data())) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("cannot create a directory like {} for --baseline-db: "
                                            "{}; set TMPDIR to a writable directory",
                                            pattern, std::strerror(errno)));
    }
    std::unique_ptr<CombinedDb> out(new CombinedDb());
    out->m_dir = dir;
    out->m_path = (std::filesystem::path(dir) / "combined.sqlite").string();
    // A gate a CI job cancels (SIGTERM), or whose terminal closed, left a
    // copy of both databases under the temporary directory (a user-side
    // audit): the signal removes it, then ends the gate as before.
    if (fits(out->m_path + k_combined_suffixes.back())) {
        for (size_t i = 0; i < k_combined_suffixes.size(); ++i) {
            const auto f = out->m_path + k_combined_suffixes[i];
            std::memcpy(g_cleanup.files[i].data(), f.c_str(), f.size() + 1);
        }
        std::memcpy(g_cleanup.dir.data(), dir.c_str(), dir.size() + 1);
        struct sigaction act {};
        act.sa_handler = remove_combined_and_die;
        sigemptyset(&act.sa_mask);
        for (size_t i = 0; i < k_cleanup_signals.size(); ++i) {
            ::sigaction(k_cleanup_signals[i], &act, &g_previous[i]);
        }
        out->m_handles_signals = true;
    }
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    auto r = store::combine_with_baseline(out->m_path, db, baseline_db, k_baseline_prefix);
    if (r) {
        out->m_score_text = *r;
    } else {
        // What is wrong with an input (no diffeval database, one from a
        // newer diffeval) is said as it is said everywhere: the advice to
        // free space was wrong for it (an audit).
        if (r.error().kind == util::ErrorKind::usage || r.error().kind == util::ErrorKind::data) {
            return r.error();
        }
        // Where it writes is not where the user pointed it.
        return util::make_error(
            r.error().kind,
            fmt::format("--baseline-db combines both databases in a copy in {} (TMPDIR): {}{}", dir,
                        r.error().message,
                        store::is_disk_full(r.error())
                            ? "; free space there, or set TMPDIR to a directory with room"
                            : ""));
    }
    return out;
}

CombinedDb::~CombinedDb() {
    if (m_handles_signals) {
        for (size_t i = 0; i < k_cleanup_signals.size(); ++i) {
            ::sigaction(k_cleanup_signals[i], &g_previous[i], nullptr);
        }
        g_cleanup = CleanupPaths{};
    }
    std::error_code ec;
    if (!m_dir.empty()) {
        std::filesystem::remove_all(m_dir, ec);
    }
}

util::Result<void> add_vllm_ci_checks(const std::string& path, const analysis::Results& results,
                                      store::Store& store, const analysis::GateSpec& base,
                                      std::optional<analysis::GateVerdict>& verdict) {
    auto configs = engine::load_vllm_configs(path);
    if (!configs) {
        return configs.error();
    }
    for (const auto& c : *configs) {
        // Only the CI's rule: one absolute check on the config's raw group.
        analysis::GateSpec spec;
        // The CI's own answer extraction, whatever --scorer the other checks use.
        auto scorer = analysis::scorer_index(results, "vllm");
        if (!scorer) {
            return scorer.error();
        }
        spec.scorer = *scorer;
        spec.exact_floor = true;
        spec.bootstrap = base.bootstrap;
        spec.expect = c.accuracy_threshold;
        spec.tolerance = c.tolerance;
        auto group = analysis::parse_selector(c.name + "/raw");
        if (!group) {
            return group.error();
        }
        spec.group = *group;
        spec.no_group_message = fmt::format(
            "the database holds no raw group of the server '{}' (a config's server is named "
            "after its file; 'diffeval run --vllm-config {}' stores it)",
            c.name, c.path);
        auto v = analysis::evaluate_gate(results, store, spec);
        if (!v) {
            return util::make_error(v.error().kind,
                                    fmt::format("--vllm-config {}: {}", c.path, v.error().message));
        }
        for (auto& check : v->checks) {
            check.kind = "vllm_ci";
            check.name = "vllm-ci " + check.name.substr(check.name.find(' ') + 1);
            check.why += fmt::format(" (vLLM CI rule from {}: accuracy >= accuracy_threshold "
                                     "- tolerance)",
                                     std::filesystem::path(c.path).filename().string());
        }
        if (!verdict) {
            verdict = std::move(*v);
        } else {
            for (auto& check : v->checks) {
                verdict->checks.push_back(std::move(check));
            }
        }
    }
    return {};
}

} // namespace diffeval::cli
