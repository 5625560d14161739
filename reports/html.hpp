// The HTML report: one self-contained file that works offline from file://
// (inline CSS, SVG and JavaScript under a Content-Security-Policy that allows
// no requests), with charts and a question explorer over every response.
// Model output is untrusted: it travels as escaped JSON and the page puts it
// into the DOM with textContent only.
#pragma once

#include <reports/report.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace diffeval::reports {

// The question explorer's data: every question asked and every response
// that counts, with its texts and each scorer's extraction. `collect` reads
// them on a database connection of its own, so it can run on another core
// while the analysis runs, and streams them as escaped JSON into a
// temporary file; `write` copies that into report.html. Memory stays flat
// however many responses there are.
class ExplorerRows {
public:
    // Read the database at `db_path` (already scored) into a temporary file
    // in `temp_dir`.
    util::Result<void> collect(const std::string& db_path, const std::filesystem::path& temp_dir);
    // The opening of the <script type="application/json" id="data"> block
    // up to the collected part; copy_to appends that part, the caller closes
    // the object and the block with "}</script>".
    std::string data_head(const std::string& baseline) const;
    util::Result<void> copy_to(int out_fd);

private:
    util::Result<void> add(const analysis::ResultRow& row, const analysis::ResponseDetail& detail);
    util::Result<void> flush();

    struct Closer {
        void operator()(std::FILE* f) const;
    };
    std::unique_ptr<std::FILE, Closer> m_file;
    std::string m_buf;
    size_t m_rows = 0;
    // What the rows' indices name, in the order the rows use.
    std::vector<std::string> m_servers;
    std::vector<std::string> m_framings;
    std::vector<std::string> m_scorers;
};

// Write report.html for `data` to `path`, with the explorer's collected `rows`.
util::Result<void> write_html(const ReportData& data, ExplorerRows& rows,
                              const std::filesystem::path& path);

// `j` serialised for a <script type="application/json"> block: < > & and
// U+2028/2029 escaped as \uXXXX so no model text can end the block, and
// invalid UTF-8 replaced.
std::string script_safe_json(const nlohmann::json& j);

} // namespace diffeval::reports
