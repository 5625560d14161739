// `diffeval gate`: decide pass or fail from the stored responses and say why,
// in the forms CI systems read: a verdict block on stdout, the exit code,
// Markdown appended to $GITHUB_STEP_SUMMARY, JUnit XML and JSON files.
#include <harness/cli/colour.hpp>
#include <harness/cli/commands.hpp>
#include <harness/cli/gate_sources.hpp>
#include <harness/cli/util.hpp>
#include <harness/util/escape.hpp>
#include <harness/util/file.hpp>
#include <harness/util/json_text.hpp>
#include <harness/util/text.hpp>

#include <harness/analysis/gate.hpp>
#include <harness/analysis/probe_gate.hpp>
#include <harness/store/readers.hpp>
#include <reports/tables.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <tuple>

namespace diffeval::cli {

namespace {

struct GateFlags {
    std::string db = "diffeval.sqlite";
    std::string scorer = "vllm";
    std::optional<double> expect;
    std::optional<double> tolerance;
    std::string group;
    std::string baseline, candidate;
    std::optional<double> max_drop;
    std::optional<double> alpha;
    std::string inconclusive; // "pass" or "fail" (default)
    std::string max_never_finished, max_reasoning_start;
    std::optional<double> max_token_increase;
    bool require_complete = false;
    bool fail_on_conflict = false;
    std::optional<double> max_probe_shift;
    bool expect_same_numerics = false;
    std::string junit, json;
    uint32_t resamples = analysis::k_default_resamples;
    uint64_t seed = analysis::k_default_bootstrap_seed;
    std::string baseline_db; // the baseline group comes from this database
    std::string vllm_config; // add vLLM CI's rule for these configs
};

std::string status_word(const analysis::GateCheck& c) {
    const char* word = c.status == analysis::CheckStatus::pass   ? "PASS"
                       : c.status == analysis::CheckStatus::fail ? "FAIL"
                                                                 : "SKIP";
    return c.inconclusive ? fmt::format("{} (inconclusive)", word) : word;
}

std::string overall_line(const analysis::GateVerdict& v) {
    // A skipped check was not judged: it is neither among those that passed
    // nor among those that failed.
    std::string undecided =
        v.inconclusive() > 0 ? fmt::format(", {} inconclusive", v.inconclusive()) : "";
    if (v.skipped() > 0) {
        undecided += fmt::format(", {} not judged (SKIP)", v.skipped());
    }
    const size_t judged = v.checks.size() - v.skipped();
    if (v.passed()) {
        const std::string lacking =
            v.lacking > 0
                ? fmt::format(", on a database that lacks {} its runs asked for (run the "
                              "command that asked for them again; --require-complete fails "
                              "on them)",
                              util::counted(v.lacking, "request"))
                : "";
        return (judged == 1 ? "PASS: the one check passed" + undecided
                            : fmt::format("PASS: all {} checks passed{}", judged, undecided)) +
               lacking;
    }
    return fmt::format("FAIL: {} of {} failed{}", v.failures(), util::counted(judged, "check"),
                       undecided);
}

std::string verdict_text(const analysis::GateVerdict& v, const std::string& db) {
    std::string out = fmt::format("diffeval gate: {} on {} (scorer {}{})\n\n",
                                  util::counted(v.checks.size(), "check"), db, v.scorer,
                                  analysis::scored_text_words(v.summary.score_text));
    for (const auto& c : v.checks) {
        out += fmt::format("{}  {}\n", status_word(c), c.name);
        out += fmt::format("      measured:  {}\n", c.measured_text);
        out += fmt::format("      threshold: {}\n", c.threshold_text);
        out += fmt::format("      why:       {}\n", c.why);
        if (!c.note.empty()) {
            out += fmt::format("      note:      {}\n", c.note);
        }
    }
    return out + "\n" + overall_line(v) + "\n";
}

// Group names and texts come from the database: render_table's escaping
// keeps each on one line of the table, as the text it is (escaping here too
// printed "b\\\|x" for a server "b|x").
std::string verdict_markdown(const analysis::GateVerdict& v) {
    std::string out = fmt::format("## diffeval gate: {}\n\n", overall_line(v));
    if (const auto text = analysis::scored_text(v.summary.score_text); !text.empty()) {
        out += fmt::format("Accuracies are scored {}.\n\n", text);
    }
    std::vector<std::vector<std::string>> rows{{"check", "result", "measured", "threshold", "why"}};
    for (const auto& c : v.checks) {
        std::string why = c.why;
        if (!c.note.empty()) {
            // One sentence: "... mid-p 1.09e-29; this run detects ...", not
            // "1.09e-29.; this run" (an audit of the step summary).
            if (!why.empty() && why.back() == '.') {
                why.pop_back();
            }
            why += "; " + c.note;
        }
        rows.push_back({c.name, status_word(c), c.measured_text, c.threshold_text, why});
    }
    // Every column is words, whatever a cell looks like: a --require-complete
    // check's measured "0" right-aligned its column (docs audit).
    out += reports::render_table(rows, reports::Style::markdown, reports::Columns::text);
    out += fmt::format("\n### Where the responses went (mean per run; accuracy by {})\n\n",
                       reports::markdown_code(v.scorer));
    out += reports::breakdown_table(v.summary, v.scorer, reports::Style::markdown);
    // As report.md says under the same table (a reader audit found the step
    // summary's err counts without it).
    if (!v.unsent_note.empty()) {
        out += "\n" + reports::markdown_escape(v.unsent_note) + "\n";
    }
    return out + "\n";
}

// When the gate started, for JUnit's `timestamp` and `time` attributes.
struct Clock {
    std::chrono::system_clock::time_point wall = std::chrono::system_clock::now();
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    std::string timestamp() const {
        const std::time_t t = std::chrono::system_clock::to_time_t(wall);
        std::tm utc{};
        gmtime_r(&t, &utc);
        char buf[32];
        std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
        return buf;
    }
    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
};

std::string junit_suite_open(const Clock& clock, size_t tests, size_t failures, size_t errors,
                             size_t skipped = 0) {
    return fmt::format("  <testsuite name=\"diffeval gate\" tests=\"{}\" failures=\"{}\" "
                       "errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\" timestamp=\"{}\">\n",
                       tests, failures, errors, skipped, clock.seconds(), clock.timestamp());
}

// The JUnit file of a gate that could not run (exit 2): one testcase whose
// <error> carries the one-line message.
std::string error_junit(const util::Error& error, const Clock& clock) {
    std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n";
    out += junit_suite_open(clock, 1, 0, 1);
    out += "    <testcase classname=\"diffeval.gate\" name=\"gate\">\n";
    out +=
        fmt::format("      <error message=\"{0}\">{0}</error>\n", util::xml_escape(error.message));
    return out + "    </testcase>\n  </testsuite>\n</testsuites>\n";
}

std::string verdict_junit(const analysis::GateVerdict& v, const Clock& clock) {
    std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n";
    out += junit_suite_open(clock, v.checks.size(), v.failures(), 0, v.skipped());
    for (const auto& c : v.checks) {
        out += fmt::format("    <testcase classname=\"diffeval.gate.{}\" name=\"{}\">\n",
                           util::xml_escape(c.kind), util::xml_escape(c.name));
        const std::string body =
            fmt::format("measured: {}\nthreshold: {}\nwhy: {}{}", c.measured_text, c.threshold_text,
                        c.why, c.note.empty() ? "" : "\nnote: " + c.note);
        if (c.status == analysis::CheckStatus::fail) {
            out += fmt::format("      <failure message=\"{}\">{}</failure>\n",
                               util::xml_escape(c.why), util::xml_escape(body));
        } else if (c.status == analysis::CheckStatus::skip) {
            out += fmt::format("      <skipped message=\"{}\">{}</skipped>\n",
                               util::xml_escape(c.why), util::xml_escape(body));
        } else {
            out += fmt::format("      <system-out>{}</system-out>\n", util::xml_escape(body));
        }
        out += "    </testcase>\n";
    }
    return out + "  </testsuite>\n</testsuites>\n";
}

util::Result<void> write_file(const std::string& path, const std::string& text,
                              std::ios::openmode mode, const char* what) {
    // The step summary is appended to (GitHub's file, shared by the job's
    // steps); every other file is replaced whole.
    bool written = false;
    if (mode & std::ios::app) {
        // On a line of its own: a file whose last line has no end glued the
        // heading to it ("| 1 | 2 |## diffeval gate", a CI audit).
        std::string lead;
        if (std::ifstream before(path, std::ios::binary | std::ios::ate); before) {
            if (before.tellg() > 0) {
                before.seekg(-1, std::ios::end);
                char last = '\n';
                before.get(last);
                lead = last == '\n' ? "" : "\n";
            }
        }
        std::ofstream f(path, std::ios::binary | mode);
        f << lead << text;
        f.close();
        written = static_cast<bool>(f);
    } else {
        auto f = util::ReplacingFile::create(path);
        written = f && f->write(text) && f->commit();
    }
    if (!written) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("cannot write {} to {}", what, path));
    }
    return {};
}

util::Result<analysis::GateSpec> build_spec(const GateFlags& f, const analysis::Results& results) {
    analysis::GateSpec spec;
    auto k = analysis::scorer_index(results, f.scorer);
    if (!k) {
        return k.error();
    }
    spec.scorer = *k;
    // Flags given without the check they belong to are mistakes, not no-ops.
    if (f.tolerance && !f.expect) {
        return util::make_error(
            util::ErrorKind::usage,
            "--tolerance is the allowed shortfall below --expect; add --expect");
    }
    for (auto [given, flag] : {std::pair{f.alpha.has_value(), "--alpha"},
                               std::pair{!f.inconclusive.empty(), "--inconclusive"}}) {
        if (given && !f.max_drop) {
            return util::make_error(
                util::ErrorKind::usage,
                fmt::format("{} belongs to the --max-drop check; add --max-drop", flag));
        }
    }
    if (!f.inconclusive.empty() && f.inconclusive != "pass" && f.inconclusive != "fail") {
        return util::make_error(
            util::ErrorKind::usage,
            fmt::format("--inconclusive '{}': use pass or fail", f.inconclusive));
    }
    spec.expect = f.expect;
    spec.tolerance = f.tolerance.value_or(0);
    auto selector = [](const std::string& text) -> util::Result<std::optional<analysis::Selector>> {
        if (text.empty()) {
            return std::optional<analysis::Selector>{};
        }
        auto s = analysis::parse_selector(text);
        if (!s) {
            return s.error();
        }
        return std::optional<analysis::Selector>{*s};
    };
    for (auto [text, field] :
         {std::pair{&f.group, &spec.group}, std::pair{&f.baseline, &spec.baseline},
          std::pair{&f.candidate, &spec.candidate}}) {
        auto s = selector(*text);
        if (!s) {
            return s.error();
        }
        *field = *s;
    }
    spec.max_drop_points = f.max_drop;
    spec.alpha = f.alpha.value_or(0.05);
    spec.inconclusive =
        f.inconclusive == "pass" ? analysis::InconclusiveAs::pass : analysis::InconclusiveAs::fail;
    for (auto [flag, text, field] :
         {std::tuple{"--max-never-finished-increase", &f.max_never_finished,
                     &spec.max_never_finished_increase},
          std::tuple{"--max-reasoning-start-increase", &f.max_reasoning_start,
                     &spec.max_reasoning_start_increase}}) {
        if (!text->empty()) {
            auto limit = analysis::parse_increase_limit(flag, *text);
            if (!limit) {
                return limit.error();
            }
            *field = *limit;
        }
    }
    spec.max_token_increase_pct = f.max_token_increase;
    spec.require_complete =
        f.require_complete ? analysis::RequireComplete::yes : analysis::RequireComplete::no;
    spec.fail_on_conflict =
        f.fail_on_conflict ? analysis::FailOnConflict::yes : analysis::FailOnConflict::no;
    spec.bootstrap.resamples = f.resamples;
    spec.bootstrap.seed = f.seed;
    return spec;
}

// Whether any check other than the probe's was asked for.
bool accuracy_checks(const GateFlags& f) {
    return f.expect || f.max_drop || !f.max_never_finished.empty() ||
           !f.max_reasoning_start.empty() || f.max_token_increase || f.require_complete ||
           f.fail_on_conflict;
}

// The probe's checks (--max-probe-shift, --expect-same-numerics), appended.
util::Result<void> add_probe_checks(const GateFlags& f, store::Store& st,
                                    analysis::GateVerdict& verdict) {
    if (!f.max_probe_shift && !f.expect_same_numerics) {
        return {};
    }
    if (f.baseline.empty() || f.candidate.empty()) {
        return util::make_error(util::ErrorKind::usage,
                                "--max-probe-shift and --expect-same-numerics compare "
                                "--candidate with --baseline: give both");
    }
    auto a = analysis::parse_selector(f.baseline);
    auto b = analysis::parse_selector(f.candidate);
    if (!a || !b) {
        return a ? b.error() : a.error();
    }
    // A server the database does not hold is named, not told to run the
    // probe (probe audit D9: a misspelled --candidate was).
    auto records = store::server_records(st, {a->server, b->server});
    if (!records) {
        return records.error();
    }
    for (const auto& [flag, sel, record] : {std::tuple{"--baseline", &*a, &(*records)[0]},
                                            std::tuple{"--candidate", &*b, &(*records)[1]}}) {
        if (!record->found) {
            return util::make_error(util::ErrorKind::usage,
                                    fmt::format("{} {}: no server of that name in the database",
                                                flag, util::one_line(sel->server, 80)));
        }
    }
    auto data = analysis::load_probes(st);
    if (!data) {
        return data.error();
    }
    analysis::ProbeGateSpec spec{*a, *b, f.max_probe_shift,
                                 f.expect_same_numerics ? analysis::ExpectSameNumerics::yes
                                                        : analysis::ExpectSameNumerics::no};
    auto checks = analysis::probe_gate_checks(*data, spec);
    if (!checks) {
        return checks.error();
    }
    verdict.checks.insert(verdict.checks.end(), checks->begin(), checks->end());
    return {};
}

// Print the verdict, then write the files CI systems pick up: the GitHub
// step summary, JUnit XML and the JSON verdict.
util::Result<void> publish_verdict(const analysis::GateVerdict& verdict, const GateFlags& f,
                                   const std::string& db, const Clock& clock) {
    std::cout << for_terminal(verdict_text(verdict, db), stdout) << std::flush;
    if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY"); summary && *summary) {
        if (auto w =
                write_file(summary, verdict_markdown(verdict), std::ios::app, "the step summary");
            !w) {
            return w;
        }
    }
    if (!f.junit.empty()) {
        if (auto w =
                write_file(f.junit, verdict_junit(verdict, clock), std::ios::trunc, "JUnit XML");
            !w) {
            return w;
        }
    }
    if (!f.json.empty()) {
        return write_file(f.json, util::document_text(analysis::to_json(verdict)), std::ios::trunc,
                          "the JSON verdict");
    }
    return {};
}

// A gate that cannot run (exit 2) still leaves its JUnit files and JSON
// documents saying why: an earlier verdict left in either would read as
// this gate's. Only where the gate would have written its verdict
// (check_output_file: never over a database, not even to say why the gate
// cannot run, nor over a file or into a directory the user may not write,
// which a file written anew and renamed into place would replace), and a
// file named by both takes the JUnit error alone.
void write_error_outputs(const std::vector<std::string>& junits,
                         const std::vector<std::string>& jsons, const std::string& db,
                         const std::string& baseline_db, const util::Error& error,
                         const Clock& clock) {
    const auto writable = [&](std::string_view flag, const std::string& path) {
        return !path.empty() && check_output_file(std::string(flag), path, {db, baseline_db}).ok();
    };
    // The job summary says it too: it said nothing of a gate that could
    // not run (a CI audit).
    if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY");
        summary && *summary && writable("$GITHUB_STEP_SUMMARY", summary)) {
        (void)write_file(summary,
                         fmt::format("## diffeval gate: could not run (exit 2)\n\n{}\n\n",
                                     reports::markdown_code(error.message)),
                         std::ios::app, "the step summary");
    }
    for (const auto& junit : junits) {
        if (writable("--junit", junit)) {
            (void)write_file(junit, error_junit(error, clock), std::ios::trunc, "JUnit XML");
        }
    }
    for (const auto& json : jsons) {
        const bool also_junit = std::any_of(junits.begin(), junits.end(), [&](const auto& j) {
            return !j.empty() && util::resolved_path(j) == util::resolved_path(json);
        });
        if (!also_junit && writable("--json", json)) {
            (void)write_file(json, util::document_text(analysis::error_json(error.message)),
                             std::ios::trunc, "the JSON verdict");
        }
    }
}

// With --baseline-db, --baseline names a server of that file and
// --candidate one of --db's: an unknown one is said with its own file's
// servers as the user knows them ("no server 'baseline:a' in the
// database; servers: baseline:c, a, b" named the combined copy's).
util::Result<void> check_combined_servers(const GateFlags& flags,
                                          const analysis::Results& results) {
    const std::string_view prefix = k_baseline_prefix;
    std::vector<std::string> in_db;
    std::vector<std::string> in_baseline;
    for (const auto& s : results.servers) {
        if (s.starts_with(prefix)) {
            in_baseline.push_back(s.substr(prefix.size()));
        } else {
            in_db.push_back(s);
        }
    }
    for (const auto& [text, names, flag, file] :
         {std::tuple{&flags.baseline, &in_baseline, "--baseline-db", &flags.baseline_db},
          std::tuple{&flags.candidate, &in_db, "--db", &flags.db}}) {
        if (text->empty()) {
            continue;
        }
        auto sel = analysis::parse_selector(*text);
        if (sel && std::find(names->begin(), names->end(), sel->server) == names->end()) {
            return util::make_error(
                util::ErrorKind::usage,
                fmt::format("no server '{}' in {} {}; its servers: {}", sel->server, flag, *file,
                            names->empty() ? std::string("none")
                                           : fmt::format("{}", fmt::join(*names, ", "))));
        }
    }
    return {};
}

int gate_command(const GateFlags& flags, const CLI::App& app) {
    const Clock clock;
    auto cannot_run = [&](const util::Error& error) {
        write_error_outputs({flags.junit}, {flags.json}, flags.db, flags.baseline_db, error, clock);
        return report(error);
    };
    if (auto problem = value_problem(app); !problem.empty()) {
        return cannot_run(util::make_error(util::ErrorKind::usage, problem));
    }
    if (auto r = check_paired_flags(flags.alpha.value_or(0.05), flags.resamples); !r) {
        return cannot_run(r.error());
    }
    // The files are written after the verdict is printed: a path that
    // cannot take them is refused before (a gate printed PASS, then exited 2
    // on its --junit).
    for (auto [flag, path] :
         {std::pair{"--junit", &flags.junit}, std::pair{"--json", &flags.json}}) {
        if (path->empty()) {
            continue;
        }
        if (auto r = check_output_file(flag, *path, {flags.db, flags.baseline_db}); !r) {
            return cannot_run(r.error());
        }
    }
    // Both written, one after the other: the second would replace the first.
    if (!flags.junit.empty() && !flags.json.empty() &&
        util::resolved_path(flags.junit) == util::resolved_path(flags.json)) {
        return cannot_run(util::make_error(
            util::ErrorKind::usage,
            fmt::format("--junit and --json both name {}; give each its own file", flags.json)));
    }
    // So is the step summary, named by the environment (a stale export in a
    // shell, a step whose runner removed the file's directory).
    if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY"); summary && *summary) {
        if (auto r =
                check_output_file("$GITHUB_STEP_SUMMARY", summary, {flags.db, flags.baseline_db});
            !r) {
            return cannot_run(r.error());
        }
    }
    // Not on a database a run is still writing: its unanswered requests
    // would fail the gate, or a partial result pass it.
    for (const auto* db : {&flags.db, &flags.baseline_db}) {
        if (db->empty()) {
            continue;
        }
        if (auto r = refuse_if_written(*db); !r) {
            return cannot_run(r.error());
        }
    }
    // A damaged file passes or fails nothing (a missing one is said below,
    // as before: check_pages passes it). Without a baseline database,
    // open_results checks the one file's pages; with one, both are checked
    // before they are combined, and the combined copy is not checked again.
    if (!flags.baseline_db.empty()) {
        for (const auto* db : {&flags.db, &flags.baseline_db}) {
            if (auto r = store::check_pages(*db); !r) {
                return cannot_run(r.error());
            }
        }
    }
    // A baseline from another database: gate one database combining both,
    // the baseline's servers renamed "baseline:NAME".
    GateFlags f = flags;
    std::unique_ptr<CombinedDb> combined;
    if (!flags.baseline_db.empty()) {
        auto c = CombinedDb::create(flags.db, flags.baseline_db);
        if (!c) {
            return cannot_run(c.error());
        }
        combined = std::move(*c);
        f.db = combined->path();
        // On the text both were scored on: a fresh copy holds no score to
        // say which, and open_results would score it on the full text.
        if (auto scored = score_stored(f.db, {}, score_text_named(combined->score_text()));
            !scored) {
            return cannot_run(scored.error());
        }
        if (!f.baseline.empty()) {
            f.baseline = k_baseline_prefix + f.baseline;
        }
    }
    // Open the database (a missing file is a usage error, not an empty gate)
    // and load the scored responses, scoring what is missing.
    auto opened = open_results(f.db, combined ? Pages::checked : Pages::check);
    if (!opened) {
        return cannot_run(opened.error());
    }
    if (combined) {
        if (auto r = check_combined_servers(flags, opened->results); !r) {
            return cannot_run(r.error());
        }
    }
    auto& st = opened->store;
    const analysis::Results* results = &opened->results;
    // Turn the flags into checks and evaluate them.
    auto spec = build_spec(f, *results);
    if (!spec) {
        return cannot_run(spec.error());
    }
    // diffeval's own checks, unless only the CI rule or the probe was asked for.
    std::optional<analysis::GateVerdict> verdict;
    const bool probe_checks = f.max_probe_shift || f.expect_same_numerics;
    if (accuracy_checks(f) || (f.vllm_config.empty() && !probe_checks)) {
        auto v = analysis::evaluate_gate(*results, *st, *spec);
        if (!v) {
            return cannot_run(v.error());
        }
        verdict = std::move(*v);
    } else {
        verdict = analysis::GateVerdict{f.scorer, {}, analysis::summarize(*results)};
    }
    if (!f.vllm_config.empty()) {
        if (auto r = add_vllm_ci_checks(f.vllm_config, *results, *st, *spec, verdict); !r) {
            return cannot_run(r.error());
        }
    }
    if (auto r = add_probe_checks(f, *st, *verdict); !r) {
        return cannot_run(r.error());
    }
    // Print the verdict, then write the files CI systems pick up.
    if (auto r = publish_verdict(*verdict, f, flags.db, clock); !r) {
        return report(r.error());
    }
    return verdict->passed() ? k_exit_ok : k_exit_failed;
}

} // namespace

void write_parse_error_outputs(const std::vector<std::string>& args, const std::string& message) {
    if (args.empty() || args.front() != "gate") {
        return;
    }
    // The flags as typed: CLI11 gave none of them when it refused the line.
    std::vector<std::string> junits;
    std::vector<std::string> jsons;
    std::string db = GateFlags{}.db;
    std::string baseline_db;
    for (size_t i = 1; i < args.size(); ++i) {
        for (auto [name, into] : {std::pair<std::string_view, std::string*>{"--junit", nullptr},
                                  {"--json", nullptr},
                                  {"--db", &db},
                                  {"--baseline-db", &baseline_db}}) {
            std::optional<std::string> value;
            if (args[i] == name && i + 1 < args.size()) {
                value = args[i + 1];
            } else if (args[i].size() > name.size() && args[i].starts_with(name) &&
                       args[i][name.size()] == '=') {
                value = args[i].substr(name.size() + 1);
            }
            if (value && into) {
                *into = *value;
            } else if (value && !value->empty()) {
                (name == "--json" ? jsons : junits).push_back(*value);
            }
        }
    }
    write_error_outputs(junits, jsons, db, baseline_db,
                        util::make_error(util::ErrorKind::usage, message), Clock{});
}

void add_gate_command(CLI::App& root, Dispatch& dispatch) {
    auto flags = std::make_shared<GateFlags>();
    auto* gate = root.add_subcommand(
        "gate", "Pass or fail a CI job on stored results (exit 0 pass, 1 fail, 2 usage/data)");
    gate->add_option("--db", flags->db, "Results database");
    gate->add_option("--scorer", flags->scorer, "Scorer the accuracies use (default vllm)");
    gate->add_option("--expect", flags->expect, "Expected mean accuracy, a proportion (e.g. 0.82)");
    gate->add_option("--tolerance", flags->tolerance,
                     "Allowed shortfall below --expect (default 0; vLLM's configs default to "
                     "0.08)");
    gate->add_option("--group", flags->group,
                     "Groups --expect checks: SERVER[/FRAMING[/MAX_TOKENS]] (default: all)");
    gate->add_option("--baseline", flags->baseline,
                     "Baseline group: SERVER[/FRAMING[/MAX_TOKENS]]");
    gate->add_option("--candidate", flags->candidate,
                     "Candidate group: SERVER[/FRAMING[/MAX_TOKENS]]");
    gate->add_option("--max-drop", flags->max_drop,
                     "Non-inferiority margin in points: pass when the candidate is shown no "
                     "more than this much worse");
    gate->add_option("--inconclusive", flags->inconclusive,
                     "What a --max-drop check that cannot decide counts as: fail (default) or "
                     "pass");
    gate->add_option("--alpha", flags->alpha, "One-sided level of the --max-drop check (0.05)");
    gate->add_option("--max-never-finished-increase", flags->max_never_finished,
                     "Largest increase per run (e.g. 3) or in percent of questions (e.g. 5%)");
    gate->add_option("--max-reasoning-start-increase", flags->max_reasoning_start,
                     "Largest increase per run (e.g. 3) or in percent of questions (e.g. 5%)");
    gate->add_option("--max-token-increase", flags->max_token_increase,
                     "Largest increase of mean completion tokens, in percent (e.g. 10 or 10%)")
        // In percent either way: "10%" as the other --max-*-increase flags
        // write a percentage.
        ->transform(
            [](std::string v) {
                // One '%' only: "5%%" stays as typed, so the refusal
                // echoes what was given, not "5%".
                if (v.size() > 1 && v.back() == '%' && v[v.size() - 2] != '%') {
                    v.pop_back();
                }
                return v;
            },
            "", "");
    gate->add_flag("--require-complete", flags->require_complete,
                   "Fail when any request lacks a successful response");
    gate->add_flag("--fail-on-conflict", flags->fail_on_conflict,
                   "Fail when a server log's fingerprint has a conflict, or a server's responses "
                   "name more than one model (the compared servers, else all)");
    gate->add_option("--max-probe-shift", flags->max_probe_shift,
                     "Largest tolerated shift of the think-open probe, in logits (docs/probe.md)");
    gate->add_flag("--expect-same-numerics", flags->expect_same_numerics,
                   "Fail when the probe moved beyond the baseline's own repeats");
    gate->add_option("--baseline-db", flags->baseline_db,
                     "Read --baseline's group from this database (e.g. the last green run's "
                     "artifact); --candidate stays in --db");
    gate->add_option("--vllm-config", flags->vllm_config,
                     "vLLM GSM8K CI config (.yaml) or list file: also apply its rule, accuracy >= "
                     "accuracy_threshold - tolerance");
    gate->add_option("--junit", flags->junit, "Write JUnit XML here");
    gate->add_option("--json", flags->json, "Write the verdict as JSON here");
    gate->add_option("--resamples", flags->resamples, "Bootstrap resamples (default 10000)");
    gate->add_option("--seed", flags->seed, "Bootstrap seed");
    dispatch[gate] = [flags, gate] { return gate_command(*flags, *gate); };
}

} // namespace diffeval::cli
