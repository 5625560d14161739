// The accuracy gate (`diffeval gate`): turns stored, scored responses into a
// list of pass/fail checks a CI system can act on, each carrying the number
// it measured, the threshold it was held to and one sentence of why. The gate
// computes nothing of its own: accuracies come from `summarize`, paired
// statistics, verdicts and margin checks from `compare` and verdict.hpp, so
// the gate agrees with `summary`, `diff` and the reports.
#pragma once

#include <harness/analysis/compare.hpp>
#include <harness/analysis/summary.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace diffeval::analysis {

// How a behaviour limit is expressed: responses per run, or percent of questions.
enum class LimitUnit { count, percent };

// A limit on an increase, e.g. "3" (responses per run) or "5%" (of questions).
struct IncreaseLimit {
    double value = 0;
    LimitUnit unit = LimitUnit::count;
    std::string text() const;
};

// Parse "N" or "N%" (N >= 0) for a behaviour flag named `flag`.
util::Result<IncreaseLimit> parse_increase_limit(const std::string& flag, const std::string& text);

// Whether requests lacking a successful response fail the gate.
enum class RequireComplete { no, yes };

// What an inconclusive margin check counts as.
enum class InconclusiveAs { fail, pass };

// Whether a fingerprint conflict in a server's log fails the gate.
enum class FailOnConflict { no, yes };

// What the gate checks; every set field adds checks.
struct GateSpec {
    size_t scorer = 0; // index into Results::scorers
    // Absolute: mean accuracy over repeats >= expect - tolerance, for every
    // group matching `group` (every group when unset).
    std::optional<double> expect;
    double tolerance = 0;
    // Compare the accuracy with its floor as vLLM's CI does (float64, its
    // last bit counts): 12/20 fails `0.68 - 0.08`, 0.6000000000000001.
    bool exact_floor = false;
    std::optional<Selector> group;
    // When no group matches `group`, what the refusal says instead of
    // "--group G matches no group" (a --vllm-config names no --group).
    std::string no_group_message;
    // Paired and behaviour checks compare `candidate` against `baseline`.
    std::optional<Selector> baseline;
    std::optional<Selector> candidate;
    // Non-inferiority margin (verdict.hpp): pass when the one-sided lower
    // bound of B - A is above -max_drop_points, fail when the upper bound is
    // below it, else inconclusive, counted as `inconclusive` says.
    std::optional<double> max_drop_points;
    InconclusiveAs inconclusive = InconclusiveAs::fail;
    double alpha = 0.05;
    std::optional<IncreaseLimit> max_never_finished_increase;
    std::optional<IncreaseLimit> max_reasoning_start_increase;
    std::optional<double> max_token_increase_pct;
    RequireComplete require_complete = RequireComplete::no;
    // Conflicts are checked on the servers of `baseline` and `candidate`
    // when given, else on every server stored.
    FailOnConflict fail_on_conflict = FailOnConflict::no;
    BootstrapOptions bootstrap;
};

// A check passed, failed, or could not be judged and says why without
// counting as either (skip: a probe framing not measurable beside one that
// is, docs/ci.md).
enum class CheckStatus { pass, fail, skip };

// One check of the verdict.
struct GateCheck {
    std::string kind; // accuracy, paired, never_finished, reasoning_start, tokens, complete,
                      // conflict
    std::string name; // kind plus the group(s) it is about, e.g. "paired default/raw/256"
    // In `unit`; nullopt when nothing could be measured (no count on a
    // side is not a count of 0): JSON's null.
    std::optional<double> measured;
    double threshold = 0; // in `unit`
    std::string unit;     // "%", "points", "responses", "requests", "conflicts"
    std::string measured_text;
    std::string threshold_text;
    CheckStatus status = CheckStatus::pass;
    bool inconclusive = false; // a margin check that could not decide (status per --inconclusive)
    std::string why;           // one line
    std::string note;          // a caveat worth reading, e.g. the run is too small; may be empty
    nlohmann::json detail;     // extra numbers for the JSON verdict
};

struct GateVerdict {
    std::string scorer;
    std::vector<GateCheck> checks;
    Summary summary;
    // Without --require-complete: the requests the runs of the groups the
    // checks read asked for and the database lacks (no response stored,
    // never planned, a shard never run), which the last line says beside a
    // PASS (an audit's killed run passed with 58% unsent and only the
    // check's long `why` said so).
    int64_t lacking = 0;
    // What the step summary says under its breakdown, whose err column
    // counts planned requests without a response (unsent_errors_text).
    std::string unsent_note;
    size_t failures() const;
    size_t inconclusive() const;
    size_t skipped() const;
    bool passed() const { return failures() == 0; }
};

// Evaluate `spec` against `results` (loaded from `store`). No check
// requested, a selector matching no group, or behaviour limits without a
// baseline and candidate are usage errors.
util::Result<GateVerdict> evaluate_gate(const Results& results, store::Store& store,
                                        const GateSpec& spec);

// The documented JSON shape ("diffeval.gate/2", docs/json.md).
nlohmann::json to_json(const GateVerdict& verdict);
// The document of a gate that could not run (exit 2): not passed, no
// checks, `error` the line it printed. Written where --json names, so no
// earlier verdict is left there to be read as this one.
nlohmann::json error_json(const std::string& message);

} // namespace diffeval::analysis
