// --baseline-db and --vllm-config for `diffeval gate`; see gate_sources.hpp.
#include <harness/cli/gate_sources.hpp>
#include <harness/cli/util.hpp>

#include <harness/engine/vllm_config.hpp>
#include <harness/store/merge.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace diffeval::cli {

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
    if (!::mkdtemp(dir.data())) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("cannot create a directory like {} for --baseline-db: "
                                            "{}; set TMPDIR to a writable directory",
                                            pattern, std::strerror(errno)));
    }
    std::unique_ptr<CombinedDb> out(new CombinedDb());
    out->m_dir = dir;
    out->m_path = (std::filesystem::path(dir) / "combined.sqlite").string();
    if (auto r = store::combine_with_baseline(out->m_path, db, baseline_db, k_baseline_prefix);
        !r) {
        return r.error();
    }
    return out;
}

CombinedDb::~CombinedDb() {
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
