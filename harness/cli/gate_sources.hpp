// What `diffeval gate` adds around the gate itself: a baseline read from
// another database (--baseline-db) and vLLM CI configs' own rule
// (--vllm-config), kept apart from the checks in harness/analysis/gate.cpp.
#pragma once

#include <harness/analysis/gate.hpp>
#include <harness/util/result.hpp>

#include <optional>
#include <string>

namespace diffeval::cli {

// Server names of the baseline database get this prefix in the combined one.
inline constexpr const char* k_baseline_prefix = "baseline:";

// A temporary database combining `db` and `baseline_db` (see
// store::combine_with_baseline); removed when the object goes.
class CombinedDb {
public:
    static util::Result<std::unique_ptr<CombinedDb>> create(const std::string& db,
                                                            const std::string& baseline_db);
    ~CombinedDb();
    CombinedDb(const CombinedDb&) = delete;
    CombinedDb& operator=(const CombinedDb&) = delete;
    const std::string& path() const { return m_path; }
    // The text both databases are scored on ("full", "after-think"), when
    // either says: the copy is scored on it.
    const std::optional<std::string>& score_text() const { return m_score_text; }

private:
    CombinedDb() = default;
    std::string m_dir; // a directory of its own under the temporary directory
    std::string m_path;
    std::optional<std::string> m_score_text;
    bool m_handles_signals = false; // SIGINT, SIGTERM, SIGHUP remove m_dir first
};

// For every config named by `path` (a .yaml or a list file), the CI's rule
// accuracy >= accuracy_threshold - tolerance on group NAME/raw (NAME: the
// config's stem), appended to `verdict` (created when no other check ran).
util::Result<void> add_vllm_ci_checks(const std::string& path, const analysis::Results& results,
                                      store::Store& store, const analysis::GateSpec& base,
                                      std::optional<analysis::GateVerdict>& verdict);

} // namespace diffeval::cli
