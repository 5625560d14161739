// Analysis and file writing shared by the three reports; see report.hpp.
#include <reports/report.hpp>

#include <reports/html.hpp>
#include <reports/markdown.hpp>

#include <harness/store/lock.hpp>
#include <harness/util/file.hpp>
#include <harness/util/json_text.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <future>
#include <optional>
#include <set>
#include <tuple>
#include <unistd.h>

namespace diffeval::reports {

namespace {

namespace fs = std::filesystem;

// `content` written beside `path` and closed, not yet in its place
// (ReplacingFile::commit).
util::Result<util::ReplacingFile> staged_file(const fs::path& path, const std::string& content) {
    auto f = util::ReplacingFile::create(path.string());
    if (!f) {
        // A path the user gave that cannot take files is theirs to change
        // (exit 2); one that could is the disk's (exit 1, with its reason).
        const auto dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
        std::error_code ec;
        if (::access(dir.c_str(), W_OK) != 0 || fs::is_directory(path, ec)) {
            return util::make_error(
                util::ErrorKind::usage,
                fmt::format("cannot write {}; choose a writable --out", path.string()));
        }
        return f.error();
    }
    (void)f->write(content);
    if (auto r = f->close(); !r) {
        return r.error();
    }
    return std::move(*f);
}

util::Result<void> make_directory(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        return util::make_error(
            util::ErrorKind::usage,
            fmt::format("cannot create {}: {}; choose another --out", dir.string(), ec.message()));
    }
    return {};
}

std::string noise_cell(const analysis::SideNoise& n) {
    if (n.gap == analysis::NoiseGap::too_few_answers) {
        return "n/a (too few answered)"; // failed, or never sent
    }
    if (!n.measured) {
        // Uneven repeats, fewer than half the questions with two or more.
        return n.uneven() ? "n/a (few repeated)" : "n/a (1 repeat)";
    }
    if (n.deterministic) {
        return "0 (repeats agree)";
    }
    return fmt::format("{:.1f}", 100.0 * n.rerun_sd);
}

} // namespace

std::string comparison_table(const ReportData& data, Style style) {
    std::vector<std::vector<std::string>> rows = {
        {"candidate vs baseline", "scorer", "diff", "95% CI", "mid-p", "Holm p", "A better",
         "B better", "noise SD A", "noise SD B", "MDD", "verdict", "carried by"}};
    for (const auto& c : data.comparisons) {
        const auto& s = c.stats;
        const double shown = analysis::shown_diff(s);
        // Groups that ran different questions are compared on those both
        // answered: the cell says so, with the accuracies there, which
        // "Harness verdicts" (each group over its own questions) does not show.
        // So does a comparison a side's unsent requests moved: the
        // baseline's are left out, which the tables count as wrong.
        const bool partial = c.questions_a != c.questions || c.questions_b != c.questions ||
                             c.unsent_a + c.failed_a > 0 || c.behaviour_a.unsent > 0;
        rows.push_back(
            {fmt::format("{} vs {}", c.b.text(), c.a.text()), c.scorer,
             partial ? fmt::format("{} ({} -> {} on the {})", analysis::signed_points(shown),
                                   analysis::accuracy_text(s.accuracy_a),
                                   analysis::accuracy_text(s.accuracy_b),
                                   util::counted(c.questions, "shared question"))
                     : analysis::signed_points(shown),
             analysis::interval_text(s.interval.lo, s.interval.hi, shown, {0.0}),
             util::p_text(s.test.p_mid), util::p_text(c.verdict.p_adjusted),
             std::to_string(s.a_better), std::to_string(s.b_better), noise_cell(s.noise_a),
             noise_cell(s.noise_b),
             s.mdd ? (*s.mdd > 1.0 ? std::string("> 100") : fmt::format("{:.1f}", 100.0 * *s.mdd))
                   : "n/a",
             c.verdict.words, carrying_transitions(c, 2)});
    }
    return rows.size() > 1 ? render_table(rows, style) : "";
}

std::string tail_interval_note() {
    return fmt::format("The p99 difference's interval resamples the questions (percentile "
                       "bootstrap, docs/statistics.md): it leaves out run-to-run timing noise, "
                       "and needs {} successful responses a side.",
                       util::with_commas(std::to_string(analysis::k_tail_min_responses)));
}

namespace {

// The comparisons the tail table lists: those with latencies, of the first
// scorer compared (latency does not depend on the scorer).
std::vector<const analysis::Comparison*> tail_rows(const ReportData& data) {
    std::vector<const analysis::Comparison*> out;
    for (const auto& c : data.comparisons) {
        if (c.latency && c.scorer == data.comparisons.front().scorer) {
            out.push_back(&c);
        }
    }
    return out;
}

} // namespace

std::string tail_flat_note(const ReportData& data) {
    const auto rows = tail_rows(data);
    const bool any = std::any_of(rows.begin(), rows.end(),
                                 [](const auto* c) { return c->latency->tokens_flat; });
    return any ? " A row whose baseline's latency does not grow with its token count puts none of "
                 "the difference down to longer outputs (0), and all of it in the rest."
               : "";
}

std::string tail_table(const ReportData& data, Style style) {
    std::vector<std::vector<std::string>> rows = {{"candidate vs baseline", "p50 ms", "p50 diff",
                                                   "p99 ms", "p99 diff", "p99 diff 95% CI",
                                                   "from longer outputs", "rest"}};
    for (const auto* c : tail_rows(data)) {
        const auto s = shown_tail(*c->latency);
        rows.push_back({fmt::format("{} vs {}", c->b.text(), c->a.text()),
                        fmt::format("{:.0f} -> {:.0f}", s.a_p50, s.b_p50), signed_ms(s.p50_diff),
                        fmt::format("{:.0f} -> {:.0f}", s.a_p99, s.b_p99), signed_ms(s.p99_diff),
                        s.p99_diff_ci ? fmt::format("[{}, {}]", signed_ms(s.p99_diff_ci->lo),
                                                    signed_ms(s.p99_diff_ci->hi))
                                      : "-",
                        s.explained ? signed_ms(*s.explained) : "-",
                        s.explained ? signed_ms(s.rest) : "-"});
    }
    return rows.size() > 1 ? render_table(rows, style) : "";
}

namespace {

// One comparison job: B against A under one scorer; its result once run.
struct CompareJob {
    analysis::Selector a, b;
    size_t scorer = 0;
    bool required = true; // an error fails the report; else the job is skipped
    util::Result<std::vector<analysis::Comparison>> out = std::vector<analysis::Comparison>{};
};

// Every other server against the baseline, as the layout lists them. A
// scorer the database lacks fails a required comparison and skips another;
// a framing it lacks skips the comparison.
util::Result<std::vector<CompareJob>> comparison_jobs(ReportData& data) {
    std::vector<CompareJob> jobs;
    const auto& framings = data.results.framings;
    for (const auto& spec : data.layout.comparisons) {
        auto scorer = analysis::scorer_index(data.results, spec.scorer);
        if (!scorer) {
            if (spec.required) {
                return scorer.error();
            }
            data.layout_skipped.push_back(
                fmt::format("no scorer '{}' is stored", util::one_line(spec.scorer, 80)));
            continue;
        }
        if (spec.framing &&
            std::find(framings.begin(), framings.end(), *spec.framing) == framings.end()) {
            data.layout_skipped.push_back(
                fmt::format("no group has framing '{}'", util::one_line(*spec.framing, 80)));
            continue;
        }
        for (const auto& server : data.results.servers) {
            if (server != data.baseline) {
                jobs.push_back({{data.baseline, spec.framing, {}},
                                {server, spec.framing, {}},
                                *scorer,
                                spec.required});
            }
        }
    }
    return jobs;
}

// The summary and the comparisons: independent, so two threads share them;
// excerpts are read afterwards (one connection, one thread). Every
// comparison of the report is one family, Holm-adjusted together.
util::Result<void> compare_all(store::Store& st, std::vector<CompareJob>& jobs, ReportData& data) {
    analysis::CompareOptions options;
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t i = next++; i < jobs.size(); i = next++) {
            jobs[i].out =
                analysis::compare(data.results, jobs[i].a, jobs[i].b, jobs[i].scorer, options);
        }
    };
    auto other = std::async(std::launch::async, work);
    data.summary = analysis::summarize(data.results);
    work();
    other.get();
    // A server some job compared is not said to be "not compared" because
    // an optional comparison (the layout's chat-only one) found no match.
    std::set<std::string> compared;
    for (const auto& job : jobs) {
        if (job.out && !job.out->empty()) {
            compared.insert(job.b.server);
        }
    }
    std::set<std::string> noted;
    for (auto& job : jobs) {
        if (!job.out) {
            // A server whose groups all differ from the baseline's in framing
            // or token limit pairs with none: the rest of the report stands
            // (it refused the whole database), and the headline says so.
            // So is one whose group ran other questions than the baseline's
            // (another dataset file at some index): one such group refused
            // the whole report, whatever the --baseline.
            const auto kind = job.out.error().kind;
            const bool unpaired =
                kind == util::ErrorKind::no_match || kind == util::ErrorKind::other_questions;
            // Groups that ran other questions are said even when another job
            // compared the server: those comparisons are missing.
            if (unpaired &&
                (kind == util::ErrorKind::other_questions || !compared.count(job.b.server))) {
                auto note =
                    kind == util::ErrorKind::no_match
                        ? fmt::format("{} has no group with the framing and token limit of one "
                                      "of the baseline {}'s, so it is not compared; compare it "
                                      "with 'diffeval diff' or another --baseline",
                                      job.b.server, data.baseline)
                        : fmt::format("{} is {} ({}): compare it with 'diffeval "
                                      "diff' against a server that ran its questions, or run it "
                                      "into another --db",
                                      job.b.server,
                                      compared.count(job.b.server)
                                          ? "compared only where the layout names its groups"
                                          : "not compared",
                                      job.out.error().message);
                // One note a server: the layout's chat-only job meets the
                // same groups and said it again in other words.
                if (noted.insert(job.b.server).second) {
                    data.comparison_notes.push_back(std::move(note));
                }
            }
            if (job.required && !unpaired) {
                return job.out.error();
            }
            continue;
        }
        analysis::fill_excerpts(*job.out, st, k_flips_shown);
        data.comparisons.insert(data.comparisons.end(), job.out->begin(), job.out->end());
        // The rest of the baseline's groups under this job: a server compared
        // on raw alone read as compared (reports audit: chat went unsaid).
        for (auto& pair : analysis::unmatched_groups(data.results, job.a, job.b)) {
            const auto same = [&](const auto& seen) {
                return seen.first.text() == pair.first.text() &&
                       seen.second.text() == pair.second.text();
            };
            if (std::none_of(data.not_compared.begin(), data.not_compared.end(), same)) {
                data.comparison_notes.push_back(
                    fmt::format("{} never ran {}/{}, so the baseline's {} is not compared with it",
                                pair.second.server, *pair.second.framing, *pair.second.max_tokens,
                                pair.first.text()));
                data.not_compared.push_back(std::move(pair));
            }
        }
    }
    analysis::assign_verdicts(data.comparisons);
    return {};
}

} // namespace

util::Result<ReportData> analyse_for_report(store::Store& st, const std::string& baseline,
                                            const ReportLayout& layout,
                                            const std::array<analysis::ResponseVisitor, 2>& visit) {
    // 1. Load what is stored; the probe's readings on their own connection
    // meanwhile.
    auto probes_read =
        std::async(std::launch::async, [path = st.path()]() -> util::Result<analysis::ProbeData> {
            auto own = store::Store::open(path, store::Store::Mode::read_only);
            if (!own) {
                return own.error();
            }
            return analysis::load_probes(**own);
        });
    // Who writes the file, asked before it is read: a run that ends
    // meanwhile still left the report a partial result.
    auto writing = store::RunLock::holder(st.path());
    auto results = analysis::load_results(st, visit);
    if (!results) {
        return results.error();
    }
    auto completeness = store::completeness(st);
    if (!completeness) {
        return completeness.error();
    }
    ReportData data;
    data.writing = std::move(writing);
    data.completeness = std::move(*completeness);
    data.layout = layout;
    data.results = std::move(*results);
    const auto& servers = data.results.servers;

    // 2. Resolve the baseline and the lead scorer.
    data.baseline = baseline.empty() ? servers.front() : baseline;
    if (std::find(servers.begin(), servers.end(), data.baseline) == servers.end()) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("--baseline '{}' is not in the database; servers: {}",
                                            data.baseline, fmt::join(servers, ", ")));
    }
    if (auto lead = analysis::scorer_index(data.results, layout.lead_scorer); !lead) {
        return lead.error();
    }

    // 3. The summary, and every other server against the baseline as the
    // layout lists (built in: vllm on every framing and max_tokens, then
    // lm-eval-strict on chat, the article's second verdict).
    auto jobs = comparison_jobs(data);
    if (!jobs) {
        return jobs.error();
    }
    // 4. The decision-point probe's comparisons against the baseline
    // (none when no probe was sent), beside step 3; the accuracy of the same
    // servers and framing is attached once both are done.
    std::vector<analysis::ServerPair> pairs;
    for (const auto& server : servers) {
        if (server != data.baseline) {
            pairs.emplace_back(data.baseline, server);
        }
    }
    struct Probes {
        std::vector<analysis::ProbeComparison> comparisons;
        std::vector<std::string> notes;
    };
    auto probes_compared = std::async(std::launch::async, [&]() -> util::Result<Probes> {
        auto probes = probes_read.get();
        if (!probes) {
            return probes.error();
        }
        auto comparisons = analysis::probe_comparisons(*probes, pairs, std::nullopt, {});
        if (!comparisons) {
            return comparisons.error();
        }
        return Probes{std::move(*comparisons), analysis::probe_skipped_notes(*probes, servers)};
    });
    if (auto r = compare_all(st, *jobs, data); !r) {
        return r.error();
    }
    auto probes = probes_compared.get();
    if (!probes) {
        return probes.error();
    }
    data.probes = std::move(probes->comparisons);
    data.probe_notes = std::move(probes->notes);
    analysis::attach_accuracies(data.probes, data.comparisons);

    // 5. What the servers said about themselves.
    auto facts = analysis::load_server_facts(st, servers);
    if (!facts) {
        return facts.error();
    }
    data.servers = std::move(*facts);
    return data;
}

nlohmann::json probes_json(const ReportData& data) {
    nlohmann::json comparisons = nlohmann::json::array();
    for (const auto& p : data.probes) {
        comparisons.push_back(analysis::to_json(p));
    }
    return {{"comparisons", comparisons}, {"skipped", data.probe_notes}};
}

// [{KEY: ..., "responses": n}, ...], most first; past the listed ones, one
// entry {KEY: null, COUNT_KEY: k, "responses": n} for the rest.
nlohmann::json name_counts_json(const store::NameCounts& names, const char* key,
                                const char* count_key) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [name, n] : names.listed) {
        out.push_back({{key, name}, {"responses", n}});
    }
    if (names.more_names > 0) {
        out.push_back(
            {{key, nullptr}, {count_key, names.more_names}, {"responses", names.more_responses}});
    }
    return out;
}

nlohmann::json report_json(const ReportData& data) {
    nlohmann::json servers = nlohmann::json::array();
    for (const auto& s : data.servers) {
        auto fingerprint = fingerprint::to_json(s.fingerprint);
        servers.push_back(
            {{"name", s.name},
             {"model", s.model},
             {"version", s.version},
             {"max_model_len",
              s.max_model_len ? nlohmann::json(*s.max_model_len) : nlohmann::json(nullptr)},
             {"fingerprinted", s.fingerprinted},
             {"engine", s.fingerprint.engine.empty() ? nlohmann::json(nullptr)
                                                     : nlohmann::json(s.fingerprint.engine)},
             {"facts", std::move(fingerprint["facts"])},
             {"conflicts", std::move(fingerprint["conflicts"])},
             {"simulator", s.simulator ? nlohmann::json(*s.simulator) : nlohmann::json(nullptr)},
             {"answered_as", name_counts_json(s.answered_as.models, "model", "models")},
             {"system_fingerprints",
              name_counts_json(s.answered_as.system_fingerprints, "system_fingerprint",
                               "system_fingerprints")}});
    }
    // `diff` is the document `diff --format json` writes, with its probe keys
    // (a parser of that document failed on this one without them).
    auto diff = analysis::to_json(data.comparisons);
    auto probes = probes_json(data);
    diff["probes"] = probes["comparisons"];
    diff["probes_skipped"] = probes["skipped"];
    diff["not_compared"] = analysis::not_compared_json(data.not_compared);
    diff["score_text"] = data.results.score_text;
    return {{"schema", "diffeval.report/3"},
            {"baseline", data.baseline},
            {"headline", headline(data)},
            {"headline_sentences", headline_sentences(data)},
            {"servers", servers},
            {"summary", analysis::to_json(data.summary, &data.completeness)},
            {"diff", std::move(diff)},
            {"probes", std::move(probes)}};
}

const analysis::Comparison* lead_comparison(const ReportData& data) {
    // Worse, then better, then no detectable difference; a side with nothing
    // answered last: its flips are failed requests, which say nothing of the
    // model (reports audit #8: its rows of HTTP 400 were shown, a worse
    // comparison's flips not). The headline says such a side first.
    auto rank = [](const analysis::Comparison& c) {
        return c.verdict.kind == analysis::VerdictKind::worse         ? 0
               : c.verdict.kind == analysis::VerdictKind::better      ? 1
               : c.verdict.kind == analysis::VerdictKind::no_evidence ? 3
                                                                      : 2;
    };
    const analysis::Comparison* top = nullptr;
    for (const auto& c : data.comparisons) {
        if (!top || rank(c) < rank(*top) ||
            (rank(c) == rank(*top) && std::abs(c.stats.diff) > std::abs(top->stats.diff))) {
            top = &c;
        }
    }
    return top;
}

namespace {

// The first sentence: the verdicts counted.
std::string verdict_count_sentence(const ReportData& data) {
    size_t worse = 0, better = 0, equivalent = 0, none = 0, unanswered = 0;
    for (const auto& c : data.comparisons) {
        switch (c.verdict.kind) {
        case analysis::VerdictKind::worse:
            ++worse;
            break;
        case analysis::VerdictKind::better:
            ++better;
            break;
        case analysis::VerdictKind::equivalent:
            ++equivalent;
            break;
        case analysis::VerdictKind::no_detectable_difference:
            ++none;
            break;
        case analysis::VerdictKind::no_evidence:
            ++unanswered;
            break;
        }
    }
    std::string overview =
        fmt::format("Of {} against {}: {} worse, {} better, {} with no detectable difference",
                    util::counted(data.comparisons.size(), "accuracy comparison"), data.baseline,
                    worse, better, none);
    if (equivalent > 0) {
        overview += fmt::format(", {} equivalent within the margin", equivalent);
    }
    if (unanswered > 0) {
        overview += fmt::format(", {} with no evidence (a side without one successful response)",
                                unanswered);
    }
    return overview + ".";
}

// One comparison in its verdict's words, with its interval.
std::string comparison_sentence(const analysis::Comparison& c) {
    const auto& s = c.stats;
    const auto ci = analysis::difference_text(s, c.verdict.kind);
    std::string line;
    switch (c.verdict.kind) {
    case analysis::VerdictKind::worse:
        line = fmt::format("{} regressed against {} ({} scorer): {}", c.b.text(), c.a.text(),
                           c.scorer, ci);
        if (auto t = carrying_transitions(c, 1, -1); t != "none") {
            line += fmt::format(", mostly {}", t);
        }
        break;
    case analysis::VerdictKind::better:
        line =
            fmt::format("{} improved on {} ({} scorer): {}", c.b.text(), c.a.text(), c.scorer, ci);
        break;
    case analysis::VerdictKind::equivalent:
        line = fmt::format("{} is unaffected: {} within ±{:.1f} points of {} ({} scorer): {}",
                           c.b.text(), c.verdict.words, 100.0 * c.verdict.margin.value_or(0),
                           c.a.text(), c.scorer, ci);
        break;
    case analysis::VerdictKind::no_evidence:
        return fmt::format("{} against {} ({} scorer): {}", c.b.text(), c.a.text(), c.scorer,
                           c.verdict.sentence);
    case analysis::VerdictKind::no_detectable_difference: {
        // A mid-p below alpha that only Holm's adjustment keeps from
        // rejecting is said to be so: "does not reject (mid-p 0.0215"
        // read as a contradiction.
        const bool raw_rejects = s.test.p_mid < s.alpha;
        const std::string ps =
            c.verdict.comparisons > 1
                ? fmt::format("mid-p {}, Holm-adjusted {} over {} comparisons",
                              util::p_text(s.test.p_mid), util::p_text(c.verdict.p_adjusted),
                              c.verdict.comparisons)
                : fmt::format("mid-p {}", util::p_text(s.test.p_mid));
        line = fmt::format(
            "{} shows no detectable difference from {} ({} scorer): {}{}{}", c.b.text(), c.a.text(),
            c.scorer, ci,
            s.interval.lo > 0 || s.interval.hi < 0
                ? fmt::format(" excludes 0, but the sign-flip test does not reject{} ({}{})",
                              raw_rejects ? " once adjusted for the report's comparisons" : "", ps,
                              // `diff` or `gate` of fewer pairs adjusts over fewer: the same
                              // pair was "worse" there and not here (an audit).
                              raw_rejects
                                  ? "; diff or gate of fewer comparisons adjusts over those "
                                    "alone and can call it " +
                                        std::string(s.diff < 0 ? "worse" : "better")
                                  : "")
            : c.verdict.borderline
                ? fmt::format(" includes 0, though the sign-flip test alone would reject ({}): "
                              "a borderline case",
                              ps)
                : std::string(),
            // Past 100 points the run detects none (an audit's report said
            // "detects 102.7 points or more"), as the verdict says.
            s.mdd ? (*s.mdd > 1.0
                         ? "; " + analysis::detects_text(s, "the run")
                         : fmt::format("; the run detects {:.1f} points or more", 100.0 * *s.mdd))
                  : "; " + analysis::no_spread_text(s));
        break;
    }
    }
    // As the verdict's own sentence: the failed requests behind the
    // difference, and the questions it was paired on.
    return line + "." + c.verdict.caveats;
}

// The probe's significant shifts, one sentence each.
std::vector<std::string> probe_sentences(const ReportData& data) {
    std::vector<std::string> out;
    // The decision-point probe can show a change the accuracy verdicts
    // cannot see yet: a shift at the first token is said here, with its
    // numbers, so the headline never reads as "nothing changed" beside it.
    const double probe_alpha = analysis::ProbeOptions{}.alpha;
    for (const auto& p : data.probes) {
        const auto& d = p.direction;
        // Numerics that differ with no shift the probe can see: what a
        // KV-cache or kernel change does first, and what an engine audit
        // found said only in the probe's section.
        if ((d.questions == 0 || d.p_value >= probe_alpha) && p.perturbation &&
            p.perturbation->differ) {
            const auto& n = *p.perturbation;
            out.push_back(fmt::format(
                "The decision-point probe finds {}'s numerics differ from {}'s on {}: mean "
                "|delta| {:.3f} in P(open)'s logit against {:.3f} between {}'s own repeats, "
                "sign test p {} over {}, though no shift in P(open) is detectable.",
                p.b, p.a, p.framing, n.mean_abs_ab, n.mean_abs_aa, p.a, util::p_text(n.p_value),
                util::counted(n.questions, "question")));
            continue;
        }
        if (d.questions == 0 || d.p_value >= probe_alpha) {
            continue;
        }
        std::string numerics;
        if (p.perturbation && p.perturbation->differ) {
            numerics =
                fmt::format(", and its numerics differ beyond {}'s own run-to-run spread", p.a);
        }
        out.push_back(fmt::format(
            "The decision-point probe separates {} from {} on {} before any answer is written: "
            "P(open) logit shift {}, 95% CI [{}, {}], sign-flip p {} over {}{}{}.",
            p.b, p.a, p.framing, analysis::logits_text(d.mean_shift), analysis::logits_text(d.lo),
            analysis::logits_text(d.hi), analysis::probe_p_text(d),
            util::counted(d.questions, "question"), analysis::at_bound_text(p), numerics));
    }
    return out;
}

} // namespace

// `toward` < 0 ranks the transitions by points lost net of those gained (what
// carried a regression), > 0 by points gained net, 0 by pairs that changed.
// A transition to or from an unrecorded outcome (an import's) is left out:
// it says nothing about how the answer ended.
std::string carrying_transitions(const analysis::Comparison& c, size_t max_cells, int toward) {
    // Sides that agree on every question carry no difference, though their
    // repeats, paired across, move both ways (an audit's A/A pair named
    // "finished -> length_truncated" beside "agree on every question").
    if (c.stats.test.differing == 0) {
        return "none";
    }
    constexpr int unrecorded = static_cast<int>(scorers::Outcome::unrecorded);
    std::vector<std::tuple<int64_t, int, int>> cells;
    for (int i = 0; i < analysis::k_transition_states; ++i) {
        for (int j = 0; j < analysis::k_transition_states; ++j) {
            if (i == unrecorded || j == unrecorded) {
                continue;
            }
            const int64_t weight = toward == 0  ? c.lost[i][j] + c.gained[i][j]
                                   : toward < 0 ? c.lost[i][j] - c.gained[i][j]
                                                : c.gained[i][j] - c.lost[i][j];
            if (weight > 0) {
                cells.emplace_back(weight, i, j);
            }
        }
    }
    std::stable_sort(cells.begin(), cells.end(),
                     [](const auto& x, const auto& y) { return std::get<0>(x) > std::get<0>(y); });
    std::string out;
    for (size_t k = 0; k < cells.size() && k < max_cells; ++k) {
        auto [w, i, j] = cells[k];
        // Counted in response pairs (each of A's repeats of a question beside
        // each of B's), as diff's transition table says: "(-158/+0)" beside
        // "A better 23" read as 158 questions (statistics audit).
        out += fmt::format("{}{} -> {} (-{}/+{} response pairs)", k ? "; " : "",
                           analysis::transition_state_name(i), analysis::transition_state_name(j),
                           c.lost[i][j], c.gained[i][j]);
    }
    return out.empty() ? "none" : out;
}

std::vector<std::string> headline_sentences(const ReportData& data) {
    std::vector<std::string> out;
    if (data.writing) {
        out.push_back(fmt::format(
            "This report was made while {} was still writing the database: it shows what was "
            "stored by then, and requests with no response yet count as wrong answers ({}).",
            *data.writing, analysis::k_unanswered_counting));
    }
    // What the runs asked and the database lacks: a verdict below rests on
    // fewer questions than asked, or counts unsent requests as wrong. A run
    // still writing (said above) has yet to plan and send its part.
    std::vector<std::string> gaps;
    bool unsent = false, unplanned = false, shards = false;
    static const std::vector<store::GroupCompleteness> k_none;
    for (const auto& g : data.writing ? k_none : data.completeness) {
        const auto text = analysis::gaps_text(g);
        if (!text.empty()) {
            gaps.push_back(fmt::format(
                "{} has {}", analysis::group_label(g.server, g.framing, g.max_tokens), text));
            unsent = unsent || g.unsent > 0;
            unplanned = unplanned || g.unplanned > 0;
            shards = shards || g.unrun > 0;
        }
    }
    if (!gaps.empty()) {
        std::vector<std::string> count;
        if (unsent) {
            count.emplace_back(
                fmt::format("requests without a response count as wrong answers ({})",
                            analysis::k_unanswered_counting));
        }
        if (unplanned || shards) {
            count.emplace_back(unsent ? "the others count nowhere" : "they count nowhere");
        }
        std::vector<std::string> fix;
        if (unsent || unplanned) {
            fix.emplace_back("run the command that asked for them again");
        }
        if (shards) {
            fix.emplace_back("merge the missing shards' databases into it");
        }
        out.push_back(fmt::format("The database lacks part of what its runs asked: {}; {}: {}.",
                                  fmt::join(gaps, "; "), fmt::join(count, ", "),
                                  fmt::join(fix, ", and ")));
    }
    if (data.comparisons.empty()) {
        for (const auto& n : data.comparison_notes) {
            out.push_back(n + ".");
        }
        if (data.comparison_notes.empty() && data.results.servers.size() < 2) {
            out.push_back(fmt::format(
                "Only one server ({}) is stored, so there is nothing to compare.", data.baseline));
        } else if (data.comparison_notes.empty()) {
            // Several servers, but the layout's comparisons asked for what
            // is not stored (a framing, an optional scorer).
            out.push_back(
                data.layout_skipped.empty()
                    ? fmt::format("The layout's comparisons made none against {}.", data.baseline)
                    : fmt::format("The layout's comparisons match nothing stored ({}), "
                                  "so nothing is compared against {}.",
                                  fmt::join(data.layout_skipped, "; "), data.baseline));
        }
        return out;
    }
    out.push_back(verdict_count_sentence(data));
    for (const auto& n : data.comparison_notes) {
        out.push_back(n + ".");
    }
    // What would block a merge first: the worse, then the better, then the
    // rest, each in the layout's order (an audit: a 29-point regression was
    // the sixth line, after four with no detectable difference).
    std::vector<const analysis::Comparison*> ordered;
    for (const auto& c : data.comparisons) {
        ordered.push_back(&c);
    }
    const auto rank = [](const analysis::Comparison* c) {
        return c->verdict.kind == analysis::VerdictKind::worse    ? 0
               : c->verdict.kind == analysis::VerdictKind::better ? 1
                                                                  : 2;
    };
    std::stable_sort(ordered.begin(), ordered.end(),
                     [&](const auto* x, const auto* y) { return rank(x) < rank(y); });
    for (const auto* c : ordered) {
        out.push_back(comparison_sentence(*c));
    }
    const auto probes = probe_sentences(data);
    out.insert(out.end(), probes.begin(), probes.end());
    return out;
}

std::string headline(const ReportData& data) {
    const auto sentences = headline_sentences(data);
    return fmt::format("{}", fmt::join(sentences, " "));
}

namespace {

constexpr const char* k_markdown_file = "report.md";
constexpr const char* k_json_file = "summary.json";
constexpr const char* k_html_file = "report.html";

} // namespace

std::vector<std::string> report_files(const ReportFormats& formats) {
    std::vector<std::string> names;
    for (auto [chosen, name] :
         {std::pair{formats.markdown, k_markdown_file}, std::pair{formats.json, k_json_file},
          std::pair{formats.html, k_html_file}}) {
        if (chosen) {
            names.emplace_back(name);
        }
    }
    return names;
}

util::Result<ReportPaths> write_reports(const ReportData& data, const fs::path& out_dir,
                                        const ReportFormats& formats, ExplorerRows* rows) {
    if (auto r = make_directory(out_dir); !r) {
        return r.error();
    }
    // Every file is written and closed before any replaces its old one: a
    // disk that filled at report.html left report.md and summary.json of
    // this database beside report.html of the last one, each looking whole
    // (a user-side audit). Now such a report leaves the old files alone.
    std::vector<std::pair<fs::path, util::ReplacingFile>> staged;
    if (formats.markdown) {
        auto p = out_dir / k_markdown_file;
        auto f = staged_file(p, render_markdown(data));
        if (!f) {
            return f.error();
        }
        staged.emplace_back(p, std::move(*f));
    }
    if (formats.json) {
        auto p = out_dir / k_json_file;
        auto f = staged_file(p, util::document_text(report_json(data)));
        if (!f) {
            return f.error();
        }
        staged.emplace_back(p, std::move(*f));
    }
    if (formats.html) {
        if (!rows) {
            return util::make_error(util::ErrorKind::internal,
                                    "report.html needs the rows collected while loading");
        }
        auto p = out_dir / k_html_file;
        auto f = staged_html(data, *rows, p);
        if (!f) {
            return f.error();
        }
        staged.emplace_back(p, std::move(*f));
    }
    ReportPaths paths;
    for (auto& [p, f] : staged) {
        if (auto r = f.commit(); !r) {
            return r.error();
        }
        paths.written.push_back(p);
    }
    return paths;
}

static util::Result<ReportPaths>
write_all_reports(store::Store& st, const std::string& baseline, const ReportLayout& layout,
                  const fs::path& out_dir, const ReportFormats& formats, ReportData* analysed);

util::Result<ReportPaths> generate_reports(store::Store& st, const std::string& baseline,
                                           const ReportLayout& layout, const fs::path& out_dir,
                                           const ReportFormats& formats, ReportData* analysed) {
    // A report that fails (an unknown --baseline, an empty database) leaves
    // no directory behind that it created itself: the outermost it creates
    // (`--out new/report` makes `new` too) goes again.
    std::error_code ec;
    std::optional<fs::path> created;
    for (auto dir = fs::absolute(out_dir, ec); !dir.empty() && !fs::exists(dir, ec);
         dir = dir.parent_path()) {
        created = dir;
        if (dir == dir.parent_path()) {
            break;
        }
    }
    if (auto r = make_directory(out_dir); !r) {
        return r.error();
    }
    auto paths = write_all_reports(st, baseline, layout, out_dir, formats, analysed);
    if (!paths && created) {
        fs::remove_all(*created, ec);
    }
    return paths;
}

static util::Result<ReportPaths>
write_all_reports(store::Store& st, const std::string& baseline, const ReportLayout& layout,
                  const fs::path& out_dir, const ReportFormats& formats, ReportData* analysed) {
    // The questions are read on the second core while this one prepares the
    // load; then both cores read the responses and stream their texts.
    ExplorerRows rows;
    std::future<util::Result<void>> questions;
    if (formats.html) {
        if (auto r = rows.open(out_dir); !r) {
            return r.error();
        }
        questions = std::async(std::launch::async, [&] { return rows.read_questions(st.path()); });
    }
    auto data = analyse_for_report(st, baseline, layout,
                                   formats.html ? rows.visitors()
                                                : std::array<analysis::ResponseVisitor, 2>{});
    auto asked = questions.valid() ? questions.get() : util::Result<void>{};
    if (!data) {
        return data.error();
    }
    if (!asked) {
        return asked.error();
    }
    auto paths = write_reports(*data, out_dir, formats, formats.html ? &rows : nullptr);
    if (paths && analysed) {
        *analysed = std::move(*data);
    }
    return paths;
}

} // namespace diffeval::reports
