// The Markdown report: GitHub-flavoured and short enough for a pull request
// comment or $GITHUB_STEP_SUMMARY. Holds no timestamps or paths, so the same
// database always gives the same bytes (the golden test relies on it).
#pragma once

#include <reports/report.hpp>

#include <string>

namespace diffeval::reports {

// The whole report.md for `data`.
std::string render_markdown(const ReportData& data);

// `text` prepared for a cell of `render_table` (which backslash-escapes
// < > | ` * _ [ ] and backslash): one line, control characters as spaces and
// & as &amp; so no entity in model output turns into markup.
std::string markdown_cell(const std::string& text);

} // namespace diffeval::reports
