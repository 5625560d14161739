// Which scorers and framings a report leads with: data (reports/layout.toml,
// compiled in), not code, so a team that reads lm-eval's verdict first
// changes a file, not diffeval.
#pragma once

#include <harness/util/result.hpp>

#include <optional>
#include <string>
#include <vector>

namespace diffeval::reports {

struct ReportLayout {
    // The scorer of the breakdown's accuracy column and the accuracy chart.
    std::string lead_scorer;
    struct ComparisonSpec {
        std::string scorer;
        std::optional<std::string> framing; // unset: every framing
        bool required = true;               // false: left out when it cannot be made
    };
    std::vector<ComparisonSpec> comparisons;
};

// The layout in the TOML file at `path`, or the built-in reports/layout.toml
// when `path` is empty. Unknown keys, a missing lead_scorer or no
// comparisons are usage errors naming the file and line.
util::Result<ReportLayout> load_layout(const std::string& path = "");

} // namespace diffeval::reports
