// report.html's static charts as inline SVG: accuracy, where the responses
// went, completion tokens and latency, one row per group (server x framing x
// max_tokens) so a label can never run into another, drawn at the size they
// are shown so their text stays 12 px. The outcome-transition chart needs
// the reader's choice of two groups and is drawn by the page's script.
#pragma once

#include <reports/report.hpp>

#include <string>
#include <vector>

namespace diffeval::reports {

// The "Charts" section of report.html for `data`.
std::string charts_section(const ReportData& data);

// `name` cut to at most `max_chars` characters (UTF-8 aware) with an
// ellipsis; the full name goes into the chart's tooltip.
std::string abbreviate(const std::string& name, size_t max_chars);

// Tick values for [lo, hi]: about six at 1, 2 or 5 times a power of ten,
// 0 among them when it is in range; and one as a label ("5", "0.5").
std::vector<double> ticks(double lo, double hi);
std::string tick_text(double v);

} // namespace diffeval::reports
