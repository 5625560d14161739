// `diffeval report`: write report.md, report.html and summary.json from what
// the store holds, comparing every server against a baseline.
#include <harness/cli/commands.hpp>
#include <harness/cli/util.hpp>
#include <harness/util/text.hpp>

#include <reports/layout.hpp>
#include <reports/report.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <iostream>

namespace diffeval::cli {

namespace {

struct ReportFlags {
    std::string db = "diffeval.sqlite";
    std::string out = "diffeval-report";
    std::string baseline;
    std::vector<std::string> formats = {"md,html,json"};
    std::string layout; // empty: the built-in reports/layout.toml
};

util::Result<reports::ReportFormats> parse_formats(const std::vector<std::string>& values) {
    reports::ReportFormats f{false, false, false};
    for (const auto& v : split_list(values)) {
        if (v == "md") {
            f.markdown = true;
        } else if (v == "html") {
            f.html = true;
        } else if (v == "json") {
            f.json = true;
        } else {
            return util::make_error(util::ErrorKind::usage,
                                    fmt::format("--format '{}': use md, html and/or json", v));
        }
    }
    return f;
}

int report_command(const ReportFlags& f) {
    // 1. Check the flags and open the database.
    auto formats = parse_formats(f.formats);
    if (!formats) {
        return report(formats.error());
    }
    // The files are written after the whole analysis: a path that cannot
    // take them is refused first.
    if (auto r = check_output_dir("--out", f.out, reports::report_files(*formats),
                                  "report writes its files into it", {f.db});
        !r) {
        return report(r.error());
    }
    auto layout = reports::load_layout(f.layout);
    if (!layout) {
        return report(layout.error());
    }
    // What a report publishes is read from whole pages (open_existing_store
    // checks them).
    auto st = open_existing_store(f.db);
    if (!st) {
        return report(st.error());
    }
    // 2. Analyse against the baseline and write the files.
    auto paths = reports::generate_reports(**st, f.baseline, *layout, f.out, *formats);
    if (!paths) {
        return report(paths.error());
    }
    for (const auto& p : paths->written) {
        std::cout << "wrote " << util::controls_as_spaces(p.string()) << "\n";
    }
    return k_exit_ok;
}

} // namespace

void add_report_command(CLI::App& root, Dispatch& dispatch) {
    auto flags = std::make_shared<ReportFlags>();
    auto* cmd = root.add_subcommand(
        "report", "Write report.md, report.html and summary.json from the database");
    cmd->add_option("--db", flags->db, "Results database");
    cmd->add_option("--out", flags->out, "Output directory (default ./diffeval-report)");
    cmd->add_option("--baseline", flags->baseline,
                    "Server the others are compared with (default: the first stored)");
    add_list_option(*cmd, "--format", flags->formats, "md, html, json, comma-separated",
                    "md,html,json");
    cmd->add_option("--layout", flags->layout,
                    "TOML file: the lead scorer and the comparisons (default: the built-in "
                    "reports/layout.toml, docs/reports.md)");
    dispatch[cmd] = [flags] { return report_command(*flags); };
}

} // namespace diffeval::cli
