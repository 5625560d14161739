// The HTML report: one self-contained file that works offline from file://
// (inline CSS, SVG and JavaScript under a Content-Security-Policy that allows
// no requests), with charts and a question explorer over every response.
// Model output is untrusted: it travels as escaped JSON and the page puts it
// into the DOM with textContent only.
#pragma once

#include <harness/util/file.hpp>
#include <reports/report.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace diffeval::reports {

// The question explorer's data: every question asked and every response
// that counts, with its texts and each scorer's extraction. The visitors
// receive the responses while analysis::load_results reads them (the one
// pass over the texts, in two parts on two cores) and stream them as escaped
// JSON into two temporary files; copy_to puts them into report.html. Memory
// stays flat however many responses there are.
class ExplorerRows {
public:
    // Create the temporary files in `temp_dir`.
    util::Result<void> open(const std::filesystem::path& temp_dir);
    // Read the questions asked from the database at `db_path`, on a
    // connection of its own (so another thread can do it meanwhile).
    util::Result<void> read_questions(const std::string& db_path);
    // The visitors for the two parts of analysis::load_results.
    std::array<analysis::ResponseVisitor, 2> visitors();
    // The <script type="application/json" id="data"> block up to the rows;
    // copy_to appends them and the caller closes it with "]}</script>".
    std::string data_head(const ReportData& data) const;
    util::Result<void> copy_to(int out_fd);

private:
    struct Closer {
        void operator()(std::FILE* f) const;
    };
    struct Part {
        std::unique_ptr<std::FILE, Closer> file;
        std::string buf;
        size_t rows = 0;
        std::vector<std::string> scorers; // the order this part's score arrays use
    };
    util::Result<void> add(Part& part, const analysis::ResultRow& row,
                           const analysis::ResponseDetail& detail);
    util::Result<void> flush(Part& part);

    std::array<Part, 2> m_parts;
    std::string m_questions; // "questions":{...}
};

// report.html for `data`, with the explorer's collected `rows`, written
// beside `path` and closed: commit() puts it in place.
util::Result<util::ReplacingFile> staged_html(const ReportData& data, ExplorerRows& rows,
                                              const std::filesystem::path& path);

// `j` serialised for a <script type="application/json"> block: < > & and
// U+2028/2029 escaped as \uXXXX so no model text can end the block, and
// invalid UTF-8 replaced.
std::string script_safe_json(const nlohmann::json& j);

} // namespace diffeval::reports
