// The probe's gate checks (`diffeval gate --max-probe-shift X`,
// `--expect-same-numerics`; docs/ci.md): behaviour checks on the decision-
// point probe, made from the same comparisons `diff` and the reports show.
#pragma once

#include <harness/analysis/gate.hpp>
#include <harness/analysis/probe.hpp>

#include <optional>
#include <vector>

namespace diffeval::analysis {

// Whether a change of numerics beyond the A/A spread fails the gate.
enum class ExpectSameNumerics { no, yes };

struct ProbeGateSpec {
    Selector baseline; // server, and optionally the framing
    Selector candidate;
    // Fails when the shift's interval lies wholly beyond +-X logits.
    std::optional<double> max_probe_shift;
    ExpectSameNumerics same_numerics = ExpectSameNumerics::no;
};

// The checks `spec` asks for on every framing both servers have probe
// readings for (or the selectors' framing); one a framing cannot be judged
// on (no marker listed, no A/A spread) is CheckStatus::skip, saying why. A
// database without probe readings for them, or with none a check can judge,
// is a data error saying why.
util::Result<std::vector<GateCheck>> probe_gate_checks(const ProbeData& data,
                                                       const ProbeGateSpec& spec);

} // namespace diffeval::analysis
