// The Markdown report: GitHub-flavoured and short enough for a pull request
// comment or $GITHUB_STEP_SUMMARY. Holds no timestamps or paths, so the same
// database always gives the same bytes (the golden test relies on it).
#pragma once

#include <reports/report.hpp>

#include <string>

namespace diffeval::reports {

// The whole report.md for `data`.
std::string render_markdown(const ReportData& data);

} // namespace diffeval::reports
