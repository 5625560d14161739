// `diffeval summary`, `diffeval diff` and `diffeval rescore`: read the store,
// classify and score what is missing, and print tables or JSON.
#include <harness/analysis/probe.hpp>
#include <harness/cli/colour.hpp>
#include <harness/cli/commands.hpp>
#include <harness/cli/util.hpp>

#include <harness/analysis/compare.hpp>
#include <harness/analysis/rescore.hpp>
#include <harness/analysis/summary.hpp>
#include <harness/store/lock.hpp>
#include <harness/store/readers.hpp>
#include <harness/util/json_text.hpp>
#include <harness/util/text.hpp>
#include <reports/tables.hpp>
#include <scorers/score_text.hpp>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>

namespace diffeval::cli {

namespace {

util::Result<reports::Style> parse_format(const std::string& f, bool& json) {
    json = f == "json";
    if (f == "text" || f == "json") {
        return reports::Style::text;
    }
    if (f == "md") {
        return reports::Style::markdown;
    }
    return util::make_error(util::ErrorKind::usage,
                            fmt::format("--format '{}': use text, md or json", f));
}

struct AnalyseFlags {
    std::string db = "diffeval.sqlite";
    std::string format = "text";
    std::string scorer = "vllm";
    std::string a, b;
    std::string score_text;                // rescore's --score-text; empty: as stored, else full
    std::vector<std::string> scorer_files; // `rescore`: users' own scorers to store
    uint32_t resamples = analysis::k_default_resamples;
    uint64_t seed = analysis::k_default_bootstrap_seed;
    size_t flips = 10;
    std::optional<double> margin; // points
    double alpha = 0.05;
    double drop = 1.0; // points, for `plan`
};

int summary_command(const AnalyseFlags& f) {
    bool json = false;
    auto style = parse_format(f.format, json);
    if (!style) {
        return report(style.error());
    }
    auto opened = open_results(f.db);
    if (!opened) {
        return report(opened.error());
    }
    // Check the scorer before printing anything, so an error is the only output.
    if (auto k = analysis::scorer_index(opened->results, f.scorer); !k) {
        return report(k.error());
    }
    auto summary = analysis::summarize(opened->results);
    auto groups = store::completeness(*opened->store);
    if (!groups) {
        return report(groups.error());
    }
    if (json) {
        std::cout << util::document_text(analysis::to_json(summary, &*groups));
        return k_exit_ok;
    }
    const bool md = *style == reports::Style::markdown;
    const auto text = analysis::scored_text_words(opened->results.score_text);
    std::cout << fmt::format("{}Harness verdicts (accuracy %, mean (min-max) over repeats{})\n\n",
                             md ? "## " : "", text);
    std::cout << reports::verdict_table(summary, *style) << "\n";
    std::cout << (md ? fmt::format("## Where the responses went (mean per run; accuracy by {})\n\n",
                                   reports::markdown_code(f.scorer))
                     : fmt::format("Where the responses went (mean per run; accuracy by {})\n\n",
                                   f.scorer));
    std::cout << reports::breakdown_table(summary, f.scorer, *style) << "\n";
    // Stopped responses whose server never said what stopped them.
    auto unknown = store::unknown_stop_causes(*opened->store);
    if (!unknown) {
        return report(unknown.error());
    }
    for (const auto& u : *unknown) {
        std::cout << fmt::format("{}{}: stop cause unknown for {} of {} stopped responses (the "
                                 "server names no stop; an empty answer among them is counted "
                                 "stop_truncated, see docs/classification.md)\n",
                                 md ? "- " : "",
                                 analysis::group_label(u.server, u.framing, u.max_tokens),
                                 u.unknown, u.stopped);
    }
    if (!unknown->empty()) {
        std::cout << "\n";
    }
    // A group without one successful response: its accuracy of 0 is of its
    // failures, which only the err column said (an engine audit's server
    // that refused every prompt as too long showed "0.0" like a model that
    // answered everything wrong).
    bool noted = false; // a note printed, which a blank line then ends
    for (const auto& g : summary.groups) {
        // A group that sent nothing is the unsent line's (below).
        const auto gc = std::find_if(groups->begin(), groups->end(), [&](const auto& c) {
            return analysis::group_label(c.server, c.framing, c.max_tokens) == g.label();
        });
        const bool none_sent = gc != groups->end() && gc->unsent >= gc->requests;
        if (g.questions > 0 && g.errors > 0 && !none_sent &&
            std::abs(g.errors - static_cast<double>(g.questions)) < 1e-9) {
            std::cout << fmt::format("{}{}: no request has a successful response, so its "
                                     "accuracy of 0 is of failed requests, not of answers: see "
                                     "the errors the run printed (or responses.error)\n",
                                     md ? "- " : "", g.label());
            noted = true;
        }
    }
    // Places a run asked but stopped before planning: in no group's counts;
    // planned requests never sent: in its err column.
    for (const auto& g : *groups) {
        if (g.unsent > 0) {
            std::cout << fmt::format(
                "{}{}: {} without a response (never sent, or in flight, when a run stopped, or "
                "a run still runs) {} as err above: "
                "run the command that asked for them again\n",
                md ? "- " : "", analysis::group_label(g.server, g.framing, g.max_tokens),
                util::counted(g.unsent, "planned request"), g.unsent == 1 ? "counts" : "count");
            noted = true;
        }
        if (g.unplanned > 0) {
            std::cout << fmt::format(
                "{}{}: {} a run asked for {} never planned (the run stopped first) and {} "
                "nowhere above: {}\n",
                md ? "- " : "", analysis::group_label(g.server, g.framing, g.max_tokens),
                util::counted(g.unplanned, "request"), g.unplanned == 1 ? "was" : "were",
                g.unplanned == 1 ? "counts" : "count",
                analysis::unplanned_advice(g.unplanned_by_failed_runs));
            noted = true;
        }
        if (!g.missing_shards.empty()) {
            std::cout << fmt::format(
                "{}{}: the database holds no run of {}; {} of its sharded run {} "
                "nowhere above: merge the missing shards' databases into it\n",
                md ? "- " : "", analysis::group_label(g.server, g.framing, g.max_tokens),
                analysis::shards_text(g.missing_shards), util::counted(g.unrun, "request"),
                g.unrun == 1 ? "counts" : "count");
            noted = true;
        }
    }
    if (noted) {
        std::cout << "\n";
    }
    std::cout
        << (md ? "## Latency and tokens (successful responses with a latency, all repeats; req/s "
                 "counts errors too)\n\n"
               : "Latency and tokens (successful responses with a latency, all repeats; req/s "
                 "counts errors too)\n\n");
    std::cout << reports::latency_table(summary, *style);
    return k_exit_ok;
}

// The probe's comparisons of B against A (none when the run sent no probe),
// and one line per server the probe was skipped for.
util::Result<std::pair<std::vector<analysis::ProbeComparison>, std::vector<std::string>>>
diff_probes(store::Store& st, const analysis::Selector& a, const analysis::Selector& b,
            const std::vector<analysis::Comparison>& accuracy) {
    auto data = analysis::load_probes(st);
    if (!data) {
        return data.error();
    }
    auto framing = a.framing ? a.framing : b.framing;
    auto comparisons = analysis::probe_comparisons(*data, a.server, b.server, framing, accuracy);
    if (!comparisons) {
        return comparisons.error();
    }
    return std::make_pair(std::move(*comparisons),
                          analysis::probe_skipped_notes(*data, {a.server, b.server}));
}

int diff_command(const AnalyseFlags& f) {
    bool json = false;
    auto style = parse_format(f.format, json);
    if (!style) {
        return report(style.error());
    }
    if (auto r = check_paired_flags(f.alpha, f.resamples); !r) {
        return report(r.error());
    }
    auto a = analysis::parse_selector(f.a);
    auto b = analysis::parse_selector(f.b);
    if (!a) {
        return report(a.error());
    }
    if (!b) {
        return report(b.error());
    }
    auto opened = open_results(f.db);
    if (!opened) {
        return report(opened.error());
    }
    auto& st = opened->store;
    const analysis::Results* results = &opened->results;
    auto k = analysis::scorer_index(*results, f.scorer);
    if (!k) {
        return report(k.error());
    }
    if (f.margin && !(std::isfinite(*f.margin) && *f.margin > 0 && *f.margin <= 100)) {
        return report(util::make_error(
            util::ErrorKind::usage,
            fmt::format("--margin {} is not a margin in points; give a number above 0 and at "
                        "most 100 (e.g. 1)",
                        *f.margin)));
    }
    analysis::CompareOptions options;
    options.paired.bootstrap.resamples = f.resamples;
    options.paired.bootstrap.seed = f.seed;
    options.paired.alpha = f.alpha;
    auto cmp = analysis::compare(*results, *a, *b, *k, options);
    if (!cmp) {
        return report(cmp.error());
    }
    // The comparisons printed together are one family for Holm's adjustment.
    analysis::assign_verdicts(*cmp, f.margin ? std::optional<double>(*f.margin / 100)
                                             : std::optional<double>());
    analysis::fill_excerpts(*cmp, *st, f.flips);
    auto probes = diff_probes(*st, *a, *b, *cmp);
    if (!probes) {
        return report(probes.error());
    }
    // Groups of A with no counterpart in B are named, not passed over: a
    // framing one side never ran read as if both had been compared.
    const auto unmatched = analysis::unmatched_groups(*results, *a, *b);
    if (json) {
        auto out = analysis::to_json(*cmp);
        out["not_compared"] = analysis::not_compared_json(unmatched);
        out["probes"] = nlohmann::json::array();
        for (const auto& p : probes->first) {
            out["probes"].push_back(analysis::to_json(p));
        }
        out["probes_skipped"] = probes->second;
        out["score_text"] = results->score_text;
        std::cout << util::document_text(out);
        return k_exit_ok;
    }
    // Accuracies of the text after the think block differ from the full
    // text's: said first, as summary's heading says it.
    if (const auto text = analysis::scored_text(results->score_text); !text.empty()) {
        std::cout << fmt::format("Scored {} (rescore --score-text).\n\n", text);
    }
    for (const auto& c : *cmp) {
        std::cout << for_terminal(reports::comparison_text(c, *style, f.flips), stdout) << "\n";
    }
    // Markdown reads the probe's brackets and a name's underscores as its
    // own; a terminal gets the lines as they are.
    const auto line = [&](const std::string& text) {
        return *style == reports::Style::markdown ? reports::markdown_escape(text)
                                                  : for_terminal(text, stdout);
    };
    for (const auto& [ua, ub] : unmatched) {
        std::cout << line(fmt::format("Not compared: {} has no group to pair with {} (it never "
                                      "ran {}/{}).",
                                      ub.server, ua.text(), *ub.framing, *ub.max_tokens))
                  << "\n";
    }
    for (const auto& p : probes->first) {
        std::cout << line(analysis::probe_line(p)) << "\n";
    }
    for (const auto& n : probes->second) {
        std::cout << line(n) << "\n";
    }
    return k_exit_ok;
}

// `diffeval plan`: from a pilot run, how many questions and repeats would
// detect a drop of `--drop` points at `--alpha` with 80% power.
int plan_command(const AnalyseFlags& f) {
    // Only the level: the plan draws no interval (its few resamples give
    // variances), so the resamples each end of one needs are not asked of
    // it, nor --resamples, a flag plan does not take.
    if (auto r = analysis::check_alpha(f.alpha); !r) {
        return report(r.error());
    }
    if (!(std::isfinite(f.drop) && f.drop > 0 && f.drop <= 100)) {
        return report(util::make_error(
            util::ErrorKind::usage,
            fmt::format("--drop {} is not a drop in points; give a number above 0 and at most "
                        "100 (e.g. 1)",
                        f.drop)));
    }
    auto a = analysis::parse_selector(f.a);
    if (!a) {
        return report(a.error());
    }
    auto b = analysis::parse_selector(f.b);
    if (!b) {
        return report(b.error());
    }
    auto opened = open_results(f.db);
    if (!opened) {
        return report(opened.error());
    }
    auto k = analysis::scorer_index(opened->results, f.scorer);
    if (!k) {
        return report(k.error());
    }
    analysis::CompareOptions options;
    options.paired.bootstrap.resamples = 200; // the plan needs variances, not an interval
    options.paired.alpha = f.alpha;
    options.leave_out_unsent_b = true;
    auto cmp = analysis::compare(opened->results, *a, *b, *k, options);
    if (!cmp) {
        return report(cmp.error());
    }
    for (const auto& c : *cmp) {
        const auto& s = c.stats;
        const auto plan = analysis::plan_run(s, f.drop / 100, f.alpha, s.power);
        std::cout << fmt::format(
            "{} vs {} ({} scorer): pilot of {} x {}, sd of per-question differences "
            "{:.3f}.\n",
            c.b.text(), c.a.text(), c.scorer, util::counted(s.questions, "question"),
            analysis::repeats_text(s.noise_a, s.noise_b), s.sd_diff);
        // A side that never answered: its differences are failures counted
        // wrong, which size nothing of the model (an audit's plan sized a
        // 7,849-question run from a candidate whose every request failed).
        if (c.behaviour_a.answered == 0 || c.behaviour_b.answered == 0) {
            std::cout << fmt::format(
                "{} has no successful response in the pilot, so its differences are failed "
                "requests, not the model's, and size no run: see its errors (diffeval summary) "
                "and run the pilot again.\n\n",
                c.behaviour_b.answered == 0 ? c.b.text() : c.a.text());
            continue;
        }
        // Failed requests count as wrong answers in the pilot's variances:
        // say how many, as the verdict does (an audit's plan sized a run from
        // a pilot whose B failed 34% of its requests without a word).
        if (const auto unanswered = analysis::unanswered_text(c); !unanswered.empty()) {
            std::cout << fmt::format(
                "Failed (no successful response), each counted as a wrong answer in the "
                "variances below: {}; what they add is the server's, not the "
                "model's, so a pilot they are gone from sizes the run better.\n",
                unanswered);
        }
        // Never sent: the baseline's left out, and here the candidate's too.
        if (const auto unsent = analysis::unsent_text(c); !unsent.empty()) {
            std::cout << unsent.substr(1) << "\n";
        }
        if (c.unsent_b_left_out > 0) {
            std::cout << fmt::format(
                "Left out of the pilot, {}'s {} with no response stored (a run stopped before "
                "sending them, or while they were in flight): counted as wrong answers, they "
                "are a stop's, not the model's variance.\n",
                c.b.text(), util::counted(c.unsent_b_left_out, "request"));
        }
        // Every question differing by the same amount has a variance of 0
        // too, which the rows' raise to about 10 differing questions hid
        // (reports audit #4: "10 questions" to detect a 1-point drop).
        if (plan.rows.front().questions == 0 || s.sd_diff == 0) {
            std::cout << fmt::format("There is no variance to size a run from: {}.\n\n",
                                     analysis::no_spread_text(s));
            continue;
        }
        // With one repeat on a side the within-question variance is not
        // measured: how much more repeats would average away is unknown, so
        // only the pilot's own design is sized.
        const bool measured = s.noise_a.measured && s.noise_b.measured;
        std::cout << fmt::format(
            "To detect a {}-point drop at alpha {:g} with {:.0f}% power ({}):\n",
            analysis::margin_text(f.drop / 100), f.alpha, 100 * s.power,
            measured
                ? fmt::format("between-question variance {:.4f}, within {:.4f} and {:.4f}",
                              plan.between_variance, plan.within_a, plan.within_b)
                : fmt::format("variance of per-question differences {:.4f}; run-to-run "
                              "noise not measured with {}{}, so what more "
                              "repeats would gain is unknown: a pilot with 2 or more "
                              "successful a side sizes them",
                              s.sd_diff * s.sd_diff, analysis::repeats_text(s.noise_a, s.noise_b),
                              s.noise_a.gap == analysis::NoiseGap::too_few_answers ||
                                      s.noise_b.gap == analysis::NoiseGap::too_few_answers
                                  ? " (too few of them successful)"
                                  : ""));
        // Unmeasured, the one row sizes the pilot's own design, at its
        // repeats: "1" beside a pilot of 3 and 1 was not it.
        const std::string pilot_repeats =
            s.noise_a.repeats == s.noise_b.repeats
                ? fmt::format("{} (the pilot's)", s.noise_a.repeats)
                : fmt::format("{} and {} (the pilot's)", s.noise_a.repeats, s.noise_b.repeats);
        // A count held at the cap is more than it (a tiny --drop).
        const auto questions = [](const analysis::PlanRow& r) {
            return r.questions >= analysis::k_questions_cap
                       ? "more than " + util::with_commas(std::to_string(analysis::k_questions_cap))
                       : std::to_string(r.questions);
        };
        std::vector<std::vector<std::string>> rows = {{"repeats per side", "questions needed"}};
        bool raised = false;
        for (const auto& r : plan.rows) {
            if (measured || r.repeats == 1) {
                rows.push_back({measured ? std::to_string(r.repeats) : pilot_repeats,
                                questions(r) + (r.raised ? " *" : "")});
                raised = raised || r.raised;
            }
        }
        std::cout << reports::render_table(rows, reports::Style::text);
        // A count past what the dataset holds cannot be run as asked: a run
        // with --limit 8373 ran the 1,319 there are (a reports audit).
        const auto& dataset = c.dataset_b;
        const auto available = store::dataset_questions(*opened->store, dataset);
        if (available && *available > 0 &&
            std::any_of(plan.rows.begin(), plan.rows.end(), [&](const analysis::PlanRow& r) {
                return (measured || r.repeats == 1) &&
                       static_cast<int64_t>(r.questions) > *available;
            })) {
            std::cout << fmt::format(
                "Dataset {} holds {} questions, fewer than a row above needs: {}.\n", dataset,
                util::with_commas(std::to_string(*available)),
                measured ? "take a row within them, with more repeats, or accept a larger --drop"
                         : "accept a larger --drop, or run a pilot of 2 or more repeats a side, "
                           "which sizes runs with more repeats");
        }
        if (raised) {
            std::cout << fmt::format(
                "* raised so that about {:.0f} questions differ: {} of the pilot's {} did, and the "
                "exact test has far less power than the normal approximation says with fewer\n",
                analysis::k_min_differing, s.test.differing, s.questions);
        }
        std::cout << "\n";
    }
    return k_exit_ok;
}

int rescore_command(const AnalyseFlags& f) {
    std::optional<scorers::ScoreText> asked;
    if (!f.score_text.empty()) {
        auto parsed = scorers::parse_score_text(f.score_text);
        if (!parsed) {
            return report(util::make_error(
                util::ErrorKind::usage,
                fmt::format("--score-text '{}': use full or after-think", f.score_text)));
        }
        asked = *parsed;
    }
    // Check the user's scorer files before the database is touched (not even
    // migrated), so a bad file changes nothing.
    auto added = analysis::read_scorer_files(f.scorer_files);
    if (!added) {
        return report(added.error());
    }
    // One writer at a time, as for run, merge and import: a run would score
    // its later responses without a scorer stored meanwhile, and a merge
    // into the file would replace it, losing the stored scorers. Taken
    // before the store opens (which may migrate it), and let go after it
    // closes (lock.hpp).
    auto lock = store::RunLock::acquire(f.db, "rescore", store::RunLock::Wait::no, nullptr,
                                        "wait for it to finish, then rescore again");
    if (!lock) {
        return report(lock.error());
    }
    auto st = open_existing_store(f.db, true);
    if (!st) {
        return report(st.error());
    }
    // Without --score-text the text the database was scored on stays: a
    // scorer added to an after-think database switched it back to the full
    // text without a word.
    auto mode = asked ? util::Result<scorers::ScoreText>(*asked) : analysis::stored_mode(**st);
    if (!mode) {
        return report(mode.error());
    }
    auto r = analysis::rescore(**st, *mode, analysis::Scope::all, *added);
    if (!r) {
        return report(r.error());
    }
    std::cout << fmt::format("rescored {} ({}, text: {})\n",
                             util::counted(r->responses, "response"),
                             util::counted(r->scores, "score"), scorers::score_text_name(*mode));
    std::cout << stored_scorer_lines(*r, f.db);
    return k_exit_ok;
}

} // namespace

void add_analyse_commands(CLI::App& root, Dispatch& dispatch) {
    auto flags = std::make_shared<AnalyseFlags>();
    auto* summary = root.add_subcommand("summary", "Accuracy and outcome breakdown per group");
    summary->add_option("--db", flags->db, "Results database");
    summary->add_option("--format", flags->format, "text, md or json");
    summary->add_option("--scorer", flags->scorer,
                        "Scorer for the breakdown's accuracy (default vllm)");
    dispatch[summary] = [flags] { return summary_command(*flags); };

    auto* diff =
        root.add_subcommand("diff", "Compare group B against group A question by question");
    diff->add_option("A", flags->a, "Baseline: SERVER[/FRAMING[/MAX_TOKENS]]")->required();
    diff->add_option("B", flags->b, "Candidate: SERVER[/FRAMING[/MAX_TOKENS]]")->required();
    diff->add_option("--db", flags->db, "Results database");
    diff->add_option("--format", flags->format, "text, md or json");
    diff->add_option("--scorer", flags->scorer, "vllm, lm-eval-strict or lm-eval-flexible");
    diff->add_option("--resamples", flags->resamples, "Bootstrap resamples (default 10000)");
    diff->add_option("--seed", flags->seed, "Bootstrap seed");
    diff->add_option("--margin", flags->margin,
                     "Equivalence margin in points: say 'equivalent within ±M' when shown");
    diff->add_option("--alpha", flags->alpha, "Significance level (default 0.05)");
    diff->add_option("--flips", flags->flips,
                     "Flipped questions listed per direction (default 10)");
    dispatch[diff] = [flags] { return diff_command(*flags); };

    auto* plan = root.add_subcommand(
        "plan", "From a pilot run, the questions and repeats that would detect a drop");
    plan->add_option("A", flags->a, "Baseline: SERVER[/FRAMING[/MAX_TOKENS]]")->required();
    plan->add_option("B", flags->b, "Candidate: SERVER[/FRAMING[/MAX_TOKENS]]")->required();
    plan->add_option("--db", flags->db, "Results database of the pilot run");
    plan->add_option("--scorer", flags->scorer, "vllm, lm-eval-strict or lm-eval-flexible");
    plan->add_option("--drop", flags->drop, "Drop to detect, in points (default 1.0)");
    plan->add_option("--alpha", flags->alpha, "Significance level (default 0.05)");
    dispatch[plan] = [flags] { return plan_command(*flags); };

    auto* rescore =
        root.add_subcommand("rescore", "Recompute classifications and scores from stored text");
    rescore->add_option("--db", flags->db, "Results database");
    rescore->add_option("--score-text", flags->score_text,
                        "full or after-think (default: the text the database was scored on, "
                        "else full)");
    rescore
        ->add_option("--scorer-file", flags->scorer_files,
                     "A scorer file of your own (repeatable): stored in the database and "
                     "used by every later scoring pass")
        ->default_str(""); // a list's captured default would show as "=[]"
    dispatch[rescore] = [flags] { return rescore_command(*flags); };
}

} // namespace diffeval::cli
