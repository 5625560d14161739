// The HTML report: one self-contained file that works offline from file://
// (inline CSS, SVG and JavaScript under a Content-Security-Policy that allows
// no requests), with charts and a question explorer over every response.
// Model output is untrusted: it travels as escaped JSON and the page puts it
// into the DOM with textContent only.
#pragma once

#include <reports/report.hpp>

#include <cstdio>
#include <memory>
#include <ostream>
#include <string>

namespace diffeval::reports {

// The question explorer's rows, one per response that counts, collected by
// the visitor while the results load (the one pass that reads the texts)
// into a temporary file, then copied into report.html; memory stays flat
// however many responses there are.
class ExplorerRows {
public:
    // Create the temporary file (removed when this object goes).
    util::Result<void> open();
    // The visitor to pass to analysis::load_results; it writes the rows here.
    analysis::ResponseVisitor visitor();
    // Copy the rows collected so far, comma-separated, to `out`.
    util::Result<void> copy_to(std::ostream& out);

private:
    util::Result<void> add(const analysis::ResultRow& row, const analysis::ResponseDetail& detail);
    util::Result<void> flush();

    struct Closer {
        void operator()(std::FILE* f) const;
    };
    std::unique_ptr<std::FILE, Closer> m_file;
    std::string m_buf;
    size_t m_rows = 0;
};

// Write report.html for `data` to `out`, with the explorer's `rows`.
util::Result<void> write_html(store::Store& store, const ReportData& data, ExplorerRows& rows,
                              std::ostream& out);

// `j` serialised for a <script type="application/json"> block: < > & and
// U+2028/2029 escaped as \uXXXX so no model text can end the block, and
// invalid UTF-8 replaced.
std::string script_safe_json(const nlohmann::json& j);

} // namespace diffeval::reports
