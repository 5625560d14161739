// report.html's part for the decision-point probe (docs/probe.md): one line
// per comparison and a scatter of A's against B's P(open) per question,
// coloured by whether the answer flipped. Inline SVG, no script, so it reads
// the same with JavaScript off.
#pragma once

#include <reports/report.hpp>

#include <string>

namespace diffeval::reports {

// The probe's section of report.html; "" when the run sent no probe.
std::string probe_html(const ReportData& data);

// One comparison's scatter as an SVG element: x is A's P(open), y is B's, on
// logit axes over the range the points span; the diagonal is "no change".
std::string probe_scatter_svg(const analysis::ProbeComparison& c);

} // namespace diffeval::reports
