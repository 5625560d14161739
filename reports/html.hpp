// The HTML report: one self-contained file that works offline from file://
// (inline CSS, SVG and JavaScript under a Content-Security-Policy that allows
// no requests), with charts and a question explorer over every response.
// Model output is untrusted: it travels as escaped JSON and the page puts it
// into the DOM with textContent only.
#pragma once

#include <reports/report.hpp>

#include <ostream>

namespace diffeval::reports {

// Write report.html for `data` to `out`, streaming every response's texts
// from `store` in one pass so memory stays flat however many there are.
util::Result<void> write_html(store::Store& store, const ReportData& data, std::ostream& out);

// `j` serialised for a <script type="application/json"> block: < > & and
// U+2028/2029 escaped as \uXXXX so no model text can end the block, and
// invalid UTF-8 replaced.
std::string script_safe_json(const nlohmann::json& j);

} // namespace diffeval::reports
