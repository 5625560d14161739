// report.html's static charts as inline SVG: accuracy, where the responses
// went, completion tokens and latency, one row per group (server x framing x
// max_tokens) so a label can never run into another, drawn at the size they
// are shown so their text stays 12 px. The outcome-transition chart needs
// the reader's choice of two groups and is drawn by the page's script.
#pragma once

#include <reports/report.hpp>

#include <string>

namespace diffeval::reports {

// The "Charts" section of report.html for `data`.
std::string charts_section(const ReportData& data);

// `name` cut to at most `max_chars` characters (UTF-8 aware) with an
// ellipsis; the full name goes into the chart's tooltip.
std::string abbreviate(const std::string& name, size_t max_chars);

} // namespace diffeval::reports
