// The accuracy gate; see gate.hpp. Each check is built by one small function
// from numbers the rest of the analysis layer already computed, so that what
// the gate says can be checked against `diffeval summary` and `diffeval diff`.
#include <harness/analysis/gate.hpp>

#include <harness/analysis/facts.hpp>
#include <harness/store/readers.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <string_view>

namespace diffeval::analysis {

using util::ErrorKind;
using util::make_error;

namespace {

// Guards threshold comparisons against rounding in means over repeats.
constexpr double k_epsilon = 1e-9;

// Whether group `g` (a GroupSummary or a store::GroupCompleteness: its
// server, framing and max_tokens) is one `s` names.
template <class Group> bool matches(const Group& g, const Selector& s) {
    return g.server == s.server && (!s.framing || *s.framing == g.framing) &&
           (!s.max_tokens || *s.max_tokens == g.max_tokens);
}

const GroupSummary* find_group(const Summary& summary, const Selector& s) {
    for (const auto& g : summary.groups) {
        if (matches(g, s)) {
            return &g;
        }
    }
    return nullptr;
}

std::string group_list(const Summary& summary) {
    std::vector<std::string> names;
    for (const auto& g : summary.groups) {
        names.push_back(g.label());
    }
    return fmt::format("{}", fmt::join(names, ", "));
}

CheckStatus status_of(bool ok) {
    return ok ? CheckStatus::pass : CheckStatus::fail;
}

// What the runs of group `label` asked and the database holds; null when
// the group is none a run asked for.
const store::GroupCompleteness* completeness_of(const std::vector<store::GroupCompleteness>& groups,
                                                const std::string& label) {
    for (const auto& gc : groups) {
        if (group_label(gc.server, gc.framing, gc.max_tokens) == label) {
            return &gc;
        }
    }
    return nullptr;
}

// "4 requests {whose} run asked for were never planned (the run stopped
// first) and are {where}: run the command ..., or gate with
// --require-complete": the places of `gc` no request row holds.
std::string unplanned_text(const store::GroupCompleteness& gc, std::string_view whose,
                           std::string_view where) {
    return fmt::format("{} {} run asked for {} never planned (the run stopped first) and {} {}: "
                       "{}, or gate with --require-complete",
                       util::counted(gc.unplanned, "request"), whose,
                       gc.unplanned == 1 ? "was" : "were", gc.unplanned == 1 ? "is" : "are", where,
                       unplanned_advice(gc.unplanned_by_failed_runs));
}

// An accuracy counts every planned request, failed or unsent ones as wrong;
// places a killed run never planned are in no group, so its why says so.
util::Result<void> add_accuracy_checks(const Summary& summary,
                                       const std::vector<store::GroupCompleteness>& groups,
                                       const GateSpec& spec, std::vector<GateCheck>& out) {
    const double floor = *spec.expect - spec.tolerance;
    size_t matched = 0;
    for (const auto& g : summary.groups) {
        if (spec.group && !matches(g, *spec.group)) {
            continue;
        }
        ++matched;
        const auto& acc = g.scorers[spec.scorer].spread;
        GateCheck c;
        c.kind = "accuracy";
        c.name = "accuracy " + g.label();
        c.unit = "%";
        c.threshold = floor * 100;
        // The check takes an accuracy within k_epsilon of the floor as at
        // it (a mean over repeats loses the last bit: 3 x 19/20 averages to
        // 94.99999999999999%), and so do its words and JSON: never
        // "-0.000000 points above the floor" beside PASS.
        const bool at_floor =
            spec.exact_floor ? acc.mean == floor : std::abs(acc.mean - floor) <= k_epsilon;
        const double measured = at_floor ? c.threshold : acc.mean * 100;
        c.measured = measured;
        // Two decimals, or as many more (up to six) as it takes for the
        // accuracy and its floor to print apart when they differ: never
        // "83.33% ... >= 83.33%" beside FAIL.
        int d = 2;
        while (d < 6 && measured != c.threshold &&
               (fmt::format("{:.{}f}", measured, d) == fmt::format("{:.{}f}", c.threshold, d) ||
                fmt::format("{:.{}f}", std::abs(measured - c.threshold), d) ==
                    fmt::format("{:.{}f}", 0.0, d))) {
            ++d;
        }
        // With uneven repeats the accuracy is over questions, and each
        // repeat's is over its own questions: said so, never a mean beside
        // a min and max it lies outside without a word.
        const auto [fewest, most] =
            std::minmax_element(g.repeats.begin(), g.repeats.end(),
                                [](const RepeatBreakdown& x, const RepeatBreakdown& y) {
                                    return x.responses < y.responses;
                                });
        c.measured_text =
            g.uneven && !g.repeats.empty()
                ? fmt::format("{:.{}f}% (over questions, each one's repeats averaged; its {} ran "
                              "{} to {} questions each and scored {:.2f} to {:.2f})",
                              measured, d, util::counted(g.repeats.size(), "repeat"),
                              fewest->responses, most->responses, acc.min * 100, acc.max * 100)
                : fmt::format("{:.{}f}% (min {:.2f}, max {:.2f}, {})", measured, d, acc.min * 100,
                              acc.max * 100, util::counted(g.repeats.size(), "repeat"));
        c.threshold_text =
            fmt::format(">= {:.{}f}% ({} - {})", c.threshold, d, *spec.expect, spec.tolerance);
        const bool ok = at_floor || acc.mean >= floor;
        c.status = status_of(ok);
        // Repeats that ran different questions are averaged per question.
        const char* mean = g.uneven ? "accuracy over questions (each question's repeats averaged)"
                                    : "mean accuracy over repeats";
        // Below by a float64's last bit (exact_floor), the numbers print
        // equal: the words give the comparison itself.
        const bool below_unseen = !ok && fmt::format("{:.{}f}", c.threshold - measured, d) ==
                                             fmt::format("{:.{}f}", 0.0, d);
        c.why = at_floor ? fmt::format("{} is at the floor", mean)
                : ok     ? fmt::format("{} is {:.{}f} points above the floor", mean,
                                       measured - c.threshold, d)
                : below_unseen
                    ? fmt::format("{} is below the floor by a float64's last bit: {} < {} - {} = "
                                  "{:.17g}",
                                  mean, acc.mean, *spec.expect, spec.tolerance, floor)
                    : fmt::format("{} is {:.{}f} points below the floor", mean,
                                  c.threshold - measured, d);
        if (const auto* gc = completeness_of(groups, g.label())) {
            // An accuracy made by failed requests reads as the model's
            // without this ("0.00%, 50.00 points below the floor" for a
            // server that answered HTTP 500 to everything).
            if (gc->missing > 0) {
                c.why += gc->missing == gc->requests
                             ? fmt::format("; none of its {} has a successful response (failed, "
                                           "or no response stored), each counted as a wrong answer",
                                           util::counted(gc->requests, "request"))
                             : fmt::format("; {} of its {} {} no successful response (failed, "
                                           "or no response stored), each counted as a wrong answer",
                                           gc->missing, util::counted(gc->requests, "request"),
                                           gc->missing == 1 ? "has" : "have");
            }
            if (gc->unplanned > 0) {
                c.why += "; " + unplanned_text(*gc, "its", "not in it");
            }
            if (!gc->missing_shards.empty()) {
                c.why += fmt::format("; the database holds no run of its {}, whose questions "
                                     "are not in it: merge their databases, or gate with "
                                     "--require-complete",
                                     shards_text(gc->missing_shards));
            }
        }
        c.detail = {{"group", g.label()},
                    {"per_repeat", g.scorers[spec.scorer].accuracy},
                    {"expect", *spec.expect},
                    {"tolerance", spec.tolerance}};
        out.push_back(std::move(c));
    }
    if (matched == 0) {
        return make_error(
            ErrorKind::usage,
            fmt::format("{}; present: {}",
                        spec.no_group_message.empty()
                            ? fmt::format("--group {} matches no group", spec.group->text())
                            : spec.no_group_message,
                        group_list(summary)));
    }
    return {};
}

// The non-inferiority check of one comparison; its why is the margin
// sentence followed by the comparison's verdict sentence.
GateCheck paired_check(const Comparison& cmp, const GateSpec& spec,
                       const std::vector<store::GroupCompleteness>& groups) {
    const double max_drop = *spec.max_drop_points;
    const auto& st = cmp.stats;
    const double drop = st.diff == 0.0 ? 0.0 : -st.diff * 100; // never -0 in JSON
    const MarginCheck margin = non_inferiority(st, max_drop / 100);
    GateCheck c;
    c.kind = "paired";
    c.name = fmt::format("paired {} -> {}", cmp.a.text(), cmp.b.text());
    c.unit = "points";
    c.measured = drop;
    c.threshold = max_drop;
    const std::string one_sided = fmt::format("{:g}%", 100 * (1 - st.alpha));
    // The drop as the two printed accuracies give it, as every sentence
    // prints it; `measured` keeps the exact one.
    const double shown = shown_diff(st);
    // A rise is called one, never "drop -0.7 points", and no change is no
    // drop ("change 0.0 points").
    const double shown_drop = std::abs(100.0 * shown) < 0.05 ? 0.0 : -100.0 * shown;
    c.measured_text = fmt::format(
        "{} {:.1f} points ({}% -> {}%; B-A one-sided {} bounds {}, sign-flip mid-p {})",
        shown_drop < 0 ? "rise" : (shown_drop > 0 ? "drop" : "change"), std::abs(shown_drop),
        accuracy_text(st.accuracy_a), accuracy_text(st.accuracy_b), one_sided,
        interval_text(st.interval.lo_one_sided, st.interval.hi_one_sided, shown, {-max_drop / 100}),
        util::p_text(st.test.p_mid));
    // The margin as given, as the sentences print it ("0.125", not "0.12").
    const std::string margin_given = margin_text(max_drop / 100);
    c.threshold_text = fmt::format("non-inferiority: B-A lower bound above {}{} points",
                                   max_drop > 0.0 ? "-" : "", margin_given);
    c.inconclusive = margin.outcome == MarginOutcome::inconclusive;
    // No evidence is never taken as a pass, whatever --inconclusive says.
    const bool ok = margin.outcome == MarginOutcome::pass ||
                    (c.inconclusive && spec.inconclusive == InconclusiveAs::pass);
    c.status = status_of(ok);
    c.why = margin.sentence;
    // Green only by the policy, beside a drop the test finds: said first,
    // where the sentence after it reads "is worse" (a reports audit: a
    // 12-point significant drop passed as "PASS (inconclusive)").
    if (c.inconclusive && ok && cmp.verdict.kind == VerdictKind::worse) {
        c.why += "; it passes only because --inconclusive pass asks so, though the comparison "
                 "finds B worse";
    }
    // The margin is a one-sided check at alpha, the verdict two-sided: a
    // drop past a 0-point margin can fail the one and not the other, which
    // read as "worse than the margin" beside "No detectable difference".
    // With several pairs the verdict's p is Holm-adjusted and the margin's
    // is not: said, as the FAIL read against "Holm-adjusted 0.115" beside it
    // (a statistics audit).
    if (margin.outcome == MarginOutcome::fail && cmp.verdict.kind != VerdictKind::worse) {
        c.why += cmp.verdict.comparisons > 1
                     ? fmt::format(" (a one-sided check at {:g}% of this pair alone, stricter on "
                                   "this side than the two-sided verdict that follows, whose "
                                   "p-value is Holm-adjusted over the gate's {} pairs)",
                                   100.0 * st.alpha, cmp.verdict.comparisons)
                     : fmt::format(" (a one-sided check at {:g}%, stricter on this side than the "
                                   "two-sided verdict that follows)",
                                   100.0 * st.alpha);
    }
    // The verdict would say again why there is no evidence.
    if (margin.outcome != MarginOutcome::no_evidence) {
        c.why += ". " + cmp.verdict.sentence;
    }
    // Places the candidate's run asked for and never planned (it stopped
    // while planning, so they have no request row) are in no pairing, where
    // its planned but unsent ones count as wrong: the check then judges
    // fewer questions than were asked, which its words said nowhere (a
    // statistics audit passed a candidate on 45 of 1,319 questions).
    const auto* gc_b = completeness_of(groups, cmp.b.text());
    const int64_t unplanned_b = gc_b ? gc_b->unplanned : 0;
    if (unplanned_b > 0) {
        c.why += " " + unplanned_text(*gc_b, cmp.b.text() + "'s", "in no pairing") + ".";
    }
    // Too small only where the check could not decide: a FAIL past the
    // margin detected the drop (an 8.7-point drop's FAIL was noted "too
    // small to detect a 1.0-point drop", its sd inflated by the drop
    // itself), a PASS bounded it, and no run detects a 0-point drop (every
    // --max-drop 0 was noted so): statistics audit.
    const bool undecided = margin.outcome == MarginOutcome::inconclusive;
    const bool too_small =
        undecided && ((st.mdd && max_drop > 0.0 && *st.mdd * 100 > max_drop + k_epsilon) ||
                      st.smallest_p.has_value());
    // What the MDD was computed from, so a reader can redo it
    // (docs/statistics.md): the sd, or the printed interval where an exact
    // count bound made it wider than the sd alone gives.
    const std::string basis =
        st.mdd_from_interval
            ? fmt::format("{}; from the printed interval's width, wider than the sd of "
                          "per-question differences {:.3f} alone gives",
                          util::counted(st.questions, "question"), st.sd_diff)
            : fmt::format("{}, sd of per-question differences {:.3f}",
                          util::counted(st.questions, "question"), st.sd_diff);
    if (margin.outcome == MarginOutcome::no_evidence) {
        // A side never answered: more questions would not help, and an MDD
        // of its all-wrong answers says nothing of the run's size.
        c.note = "no run size detects a drop while a side has no successful response: see its "
                 "errors (diffeval summary) and run it again";
    } else if (!st.mdd) {
        // Said once: the verdict's sentence in `why` may end with it already
        // (a docs audit saw it twice in a row in CI's summary).
        const auto none = no_spread_text(st);
        c.note = c.why.find(none) == std::string::npos
                     ? none
                     : "no smallest detectable drop to give (the sentence above says why); "
                       "more questions narrow the bounds";
    } else if (too_small) {
        // Beside a drop the sign-flip test finds, "too small to detect"
        // alone read as a contradiction (an audit passed a 9.5-point drop at
        // mid-p 0.000244 with --inconclusive pass): the test and the bounds
        // answer different questions, and the bounds assume less.
        const std::string test_finds =
            margin.outcome == MarginOutcome::inconclusive && st.test.p_mid < st.alpha && st.diff < 0
                ? fmt::format("the sign-flip test finds the candidate worse (mid-p {:.3g}), but "
                              "the bounds, which assume less (docs/statistics.md), cannot tell "
                              "a drop beyond {} points from one within it; ",
                              st.test.p_mid, margin_given)
                : "";
        c.note = fmt::format("{}this run is too small to detect a {}-point drop: it detects "
                             "{:.2f} points or more at {:.0f}% power ({})",
                             test_finds, margin_given, *st.mdd * 100, st.power * 100, basis);
    } else {
        c.note = fmt::format("{} ({})", detects_text(st, "this run", 2), basis);
    }
    const char* outcome = margin.outcome == MarginOutcome::pass          ? "pass"
                          : margin.outcome == MarginOutcome::fail        ? "fail"
                          : margin.outcome == MarginOutcome::no_evidence ? "no evidence"
                                                                         : "inconclusive";
    c.detail = {
        {"baseline", cmp.a.text()},
        {"candidate", cmp.b.text()},
        {"questions", cmp.questions},
        {"accuracy_baseline", cmp.accuracy_a},
        {"accuracy_candidate", cmp.accuracy_b},
        {"outcome", outcome},
        {"ci_points", {st.interval.lo * 100, st.interval.hi * 100}},
        {"ci_confidence", 1.0 - st.alpha},
        {"ci95_points", ci95_json(st, 100)},
        {"one_sided_points", {st.interval.lo_one_sided * 100, st.interval.hi_one_sided * 100}},
        {"p_mid", st.test.p_mid},
        {"p_mid_holm", cmp.verdict.p_adjusted},
        {"a_better_questions", st.a_better},
        {"b_better_questions", st.b_better},
        {"alpha", st.alpha},
        {"verdict", verdict_name(cmp.verdict.kind)},
        {"verdict_sentence", cmp.verdict.sentence},
        {"minimum_detectable_difference_points",
         st.mdd ? nlohmann::json(*st.mdd * 100) : nlohmann::json(nullptr)},
        {"too_small", too_small && margin.outcome != MarginOutcome::no_evidence},
        {"candidate_never_planned", unplanned_b}};
    return c;
}

// `value` printed with `decimals` decimals.
std::string fixed(double value, int decimals) {
    return fmt::format("{:.{}f}", value, decimals);
}

// The decimals, from `least` up to 9, at which a change printed as the
// difference of the printed `from` and `to` says what the exact change
// decides: a change beyond k_epsilon never prints as 0 ("rose by 0.00"), and
// one the check compares with `limit` never prints as equal to it, or on its
// other side ("rose by 1.00, more than the limit of 1"). At 9 decimals the
// printed change is within k_epsilon of the exact one.
int change_decimals(double from, double to, std::optional<double> limit, int least) {
    const double exact = to - from;
    for (int d = least; d < 9; ++d) {
        const double shown =
            util::printed_value(fixed(to, d)) - util::printed_value(fixed(from, d));
        const bool zero_ok =
            std::abs(exact) <= k_epsilon || fixed(std::abs(shown), d) != fixed(0.0, d);
        const bool limit_ok =
            !limit || std::abs(exact - *limit) <= k_epsilon ||
            (fixed(shown, d) != fixed(*limit, d) && (shown > *limit) == (exact > *limit));
        if (zero_ok && limit_ok) {
            return d;
        }
    }
    return 9;
}

// "rose by 1.67", "fell by 0.33", or "did not change" for a change that
// prints as 0 (`shown_text` is its absolute value as printed).
std::string change_words(double shown, const std::string& shown_text, const std::string& unit) {
    if (util::printed_value(shown_text) == 0.0) {
        return "did not change";
    }
    return fmt::format("{} by {}{}", shown > 0 ? "rose" : "fell", shown_text, unit);
}

// A behaviour check of a pair that cannot be measured on one side:
// `measured_text` and `why` say what is missing (no successful response, or
// answers imported with no finish state), and a gate that cannot measure
// must not pass (an absent count is not a count of 0).
// The limit it would have been held to, as a measured check gives it.
struct CheckLimit {
    std::string unit; // "%" or "responses"
    double value = 0;
    std::string text; // "<= 5% of questions"
};

CheckLimit limit_of(const IncreaseLimit& limit) {
    return {limit.unit == LimitUnit::percent ? "%" : "responses", limit.value,
            "<= " + limit.text()};
}

CheckLimit token_limit(double pct) {
    return {"%", pct, fmt::format("<= {:+.2f}%", pct)};
}

GateCheck unmeasured_check(const std::string& kind, const Comparison& cmp, const CheckLimit& limit,
                           std::string measured_text, std::string why) {
    GateCheck c;
    c.kind = kind;
    c.name = fmt::format("{} {} -> {}", kind, cmp.a.text(), cmp.b.text());
    // The limit as a measured check gives it: it was 0 in `responses`
    // beside a threshold_text of "<= 5% of questions" (docs audit).
    c.unit = limit.unit;
    c.threshold = limit.value;
    c.threshold_text = limit.text;
    c.measured_text = std::move(measured_text);
    c.status = CheckStatus::fail;
    c.why = std::move(why);
    c.detail = {{"baseline", cmp.a.text()}, {"candidate", cmp.b.text()}, {"measured", false}};
    return c;
}

// The rise in responses that never finished, or started reasoning, from A
// to B, over the paired questions where both sides answered (for never
// finished: with a recorded finish) and among the responses each answered
// there (Comparison::Behaviour): a side's own extra questions, or its
// failed requests, would change the count without any change in what the
// model did, and a candidate that failed on its long answers read as one
// that reasoned less. Per run it is that rate times those questions.
// The rate is per question, as summary counts (Comparison::Behaviour): among
// the responses answered, or for never finished those whose finish state was
// recorded (an import's is not). It pooled the responses, so with uneven
// repeats the gate's "per run" was not summary's for the same group.
GateCheck increase_check(const std::string& kind, const std::string& what, const Comparison& cmp,
                         const IncreaseLimit& limit) {
    const bool never = kind == "never_finished";
    const bool partly_recorded =
        never && (cmp.behaviour_a.finish_recorded != cmp.behaviour_a.answered ||
                  cmp.behaviour_b.finish_recorded != cmp.behaviour_b.answered);
    const std::string recorded = partly_recorded ? " whose finish was recorded" : "";
    const auto rate_of = [&](const Comparison::Behaviour& b) -> const Comparison::Rate& {
        return never ? b.never_finished : b.started_reasoning;
    };
    const auto& ra = rate_of(cmp.behaviour_a);
    const auto& rb = rate_of(cmp.behaviour_b);
    const int64_t measured_questions = ra.questions;
    if (measured_questions == 0) {
        return unmeasured_check(
            kind, cmp, limit_of(limit), "no question answered by both sides",
            fmt::format("no question of the {} both were asked has an answer{} on both sides, "
                        "so no rate can be compared; see each side's errors (diffeval summary)",
                        util::counted(cmp.questions, "question"), recorded));
    }
    const double rate_a = ra.value();
    const double rate_b = rb.value();
    const auto questions = static_cast<double>(measured_questions);
    const double a = rate_a * questions;
    const double b = rate_b * questions;
    const bool pct = limit.unit == LimitUnit::percent;
    const double measured = pct ? (rate_b - rate_a) * 100 : b - a;
    GateCheck c;
    c.kind = kind;
    c.name = fmt::format("{} {} -> {}", kind, cmp.a.text(), cmp.b.text());
    c.unit = pct ? "%" : "responses";
    c.measured = measured;
    c.threshold = limit.value;
    // The means and rates as printed, and the change a reader gets from
    // them: "(6.33 -> 8.00)" with "+1.67", never "(6.3 -> 8.0)" with "+1.67";
    // with as many decimals as it takes for a change the check counts not to
    // print as 0, nor as the limit it is compared with. Means start at two
    // decimals, rates at one, or two when the limit is a percentage: the
    // change printed is then theirs ("6.25% -> 14.58%" and "+8.33%", not
    // "6.2% -> 14.6%" and "+8.4%" for 8.33).
    const int run_decimals =
        change_decimals(a, b, pct ? std::nullopt : std::optional(limit.value), 2);
    const std::string a_text = fixed(a, run_decimals);
    const std::string b_text = fixed(b, run_decimals);
    const double shown = util::printed_value(b_text) - util::printed_value(a_text);
    const std::string shown_text = fixed(std::abs(shown), run_decimals);
    const int rate_decimals = change_decimals(
        rate_a * 100, rate_b * 100, pct ? std::optional(limit.value) : std::nullopt, pct ? 2 : 1);
    const std::string rate_a_text = fixed(rate_a * 100, rate_decimals);
    const std::string rate_b_text = fixed(rate_b * 100, rate_decimals);
    const double shown_pct = util::printed_value(rate_b_text) - util::printed_value(rate_a_text);
    c.measured_text =
        pct ? fmt::format("{}{}% of questions ({}% -> {}%)", shown_pct < 0 ? "-" : "+",
                          fixed(std::abs(shown_pct), rate_decimals), rate_a_text, rate_b_text)
            : fmt::format("{}{} per run ({} -> {})", shown < 0 ? "-" : "+", shown_text, a_text,
                          b_text);
    c.threshold_text = fmt::format("<= {}", limit.text());
    const bool ok = measured <= limit.value + k_epsilon;
    c.status = status_of(ok);
    const std::string change = change_words(shown, shown_text, "");
    // Where questions have different numbers of answers (uneven repeats,
    // failures), the rate is not that of the responses pooled: say so.
    const bool uneven = ra.uneven() || rb.uneven();
    const std::string of_what =
        uneven ? fmt::format("of each question's responses answered there{}, averaged over the "
                             "questions",
                             recorded)
               : fmt::format("of the responses each answered there{}", recorded);
    const bool all_paired = measured_questions == cmp.questions;
    c.why = fmt::format(
        "{} {} {} the {} {} ({}% -> {}% {}){}{}", what, change,
        change == "did not change" ? "over" : "per run of", measured_questions,
        all_paired ? util::noun(measured_questions, "paired question")
                   : fmt::format("{} both answered{}", util::noun(measured_questions, "question"),
                                 recorded),
        rate_a_text, rate_b_text, of_what,
        all_paired ? ""
                   : fmt::format(" (of the {} both were asked, those where a side has none "
                                 "are left out)",
                                 cmp.questions),
        ok ? "" : fmt::format(", more than the limit of {}", limit.text()));
    c.detail = {{"baseline", cmp.a.text()},
                {"candidate", cmp.b.text()},
                {"baseline_mean", a},
                {"candidate_mean", b},
                {"questions", measured_questions},
                {"paired_questions", cmp.questions},
                {"baseline_answered", ra.responses},
                {"candidate_answered", rb.responses}};
    return c;
}

// The change in mean completion tokens from A to B over the paired
// questions where both answered with a token count (Comparison::tokens_a):
// each side's own mean over its own questions made a candidate that failed
// on its longest questions look cheaper.
GateCheck token_check(const Comparison& cmp, double limit_pct) {
    GateCheck c;
    c.kind = "tokens";
    c.name = fmt::format("tokens {} -> {}", cmp.a.text(), cmp.b.text());
    const auto limit = token_limit(limit_pct);
    c.unit = limit.unit;
    c.threshold = limit.value;
    c.threshold_text = limit.text;
    const bool compared = cmp.token_questions > 0;
    c.detail = {{"baseline", cmp.a.text()},
                {"candidate", cmp.b.text()},
                {"questions", cmp.token_questions},
                {"baseline_counted", cmp.behaviour_a.token_counted},
                {"candidate_counted", cmp.behaviour_b.token_counted},
                {"baseline_mean_completion_tokens",
                 compared ? nlohmann::json(cmp.tokens_a) : nlohmann::json(nullptr)},
                {"candidate_mean_completion_tokens",
                 compared ? nlohmann::json(cmp.tokens_b) : nlohmann::json(nullptr)}};
    if (!compared || cmp.tokens_a <= 0) {
        // Without a count on either side there is nothing to compare (a
        // candidate whose server reports no usage did not use 100% fewer
        // tokens); a gate that cannot measure must not pass.
        c.status = CheckStatus::fail;
        const char* side = cmp.behaviour_a.token_counted == 0   ? "baseline"
                           : cmp.behaviour_b.token_counted == 0 ? "candidate"
                                                                : nullptr;
        if (side) {
            c.measured_text = fmt::format("no completion token counts in the {}", side);
            c.why = fmt::format("the {}'s responses carry no usage.completion_tokens", side);
        } else if (!compared) {
            c.measured_text = "no question with a token count on both sides";
            c.why = fmt::format("no question of the {} both were asked has an answer reporting "
                                "usage.completion_tokens on both sides, so no mean can be "
                                "compared",
                                util::counted(cmp.questions, "question"));
        } else {
            c.measured_text = "the baseline's answers report 0 completion tokens";
            c.why = "the baseline's mean is 0 completion tokens, of which no increase is a "
                    "percentage";
        }
        return c;
    }
    const double measured = (cmp.tokens_b - cmp.tokens_a) / cmp.tokens_a * 100;
    c.measured = measured;
    // The means and the percentage a reader gets from them, with two
    // decimals or as many more as it takes for the percentage not to print
    // as 0, nor as the limit or on its other side, when the exact one does
    // not: "(92.83 -> 104.71)" with "+12.80%", never "+12.79%".
    std::string a_text, b_text, pct_text;
    double shown = measured;
    for (int d = 2; d <= 9; ++d) {
        a_text = fixed(cmp.tokens_a, d);
        b_text = fixed(cmp.tokens_b, d);
        const double pa = util::printed_value(a_text);
        shown = pa > 0 ? (util::printed_value(b_text) - pa) / pa * 100 : measured;
        pct_text = fixed(std::abs(shown), d);
        const bool zero_ok = std::abs(measured) <= k_epsilon || pct_text != fixed(0.0, d);
        const bool limit_ok = std::abs(measured - limit_pct) <= k_epsilon ||
                              (fixed(shown, d) != fixed(limit_pct, d) &&
                               (shown > limit_pct) == (measured > limit_pct));
        if (zero_ok && limit_ok) {
            break;
        }
    }
    const std::string questions = util::counted(cmp.token_questions, "question");
    c.measured_text = fmt::format("{}{}% ({} -> {} tokens per answer, over {})",
                                  shown < 0 ? "-" : "+", pct_text, a_text, b_text, questions);
    const bool ok = measured <= limit_pct + k_epsilon;
    c.status = status_of(ok);
    const bool all_paired = cmp.token_questions == cmp.questions;
    c.why = fmt::format(
        "mean completion tokens {} over the {} both answered with a token count{}{}",
        change_words(shown, pct_text, "%"), questions,
        all_paired ? ""
                   : fmt::format(" (of the {} both were asked: a question a side failed, or "
                                 "answered without a count, is left out)",
                                 cmp.questions),
        ok ? "" : fmt::format(", more than {:.2f}%", limit_pct));
    return c;
}

// A side with no successful response on the paired questions.
GateCheck unanswered_check(const std::string& kind, const Comparison& cmp, const Selector& empty,
                           const CheckLimit& limit) {
    return unmeasured_check(
        kind, cmp, limit, fmt::format("{} has no successful response", empty.text()),
        fmt::format("{} answered none of the {} both sides were asked, so its behaviour "
                    "cannot be measured; see its errors (diffeval summary)",
                    empty.text(), util::counted(cmp.questions, "question")));
}

// A behaviour check where the candidate has requests never sent on the
// paired questions: the requests a killed run had in flight are its
// slowest, so its rates among what it answered read low (an audit's killed
// candidate passed --max-token-increase 5 at +2.8%, +8.5% once resumed).
GateCheck unsent_check(const std::string& kind, const Comparison& cmp, const CheckLimit& limit) {
    auto c = unmeasured_check(
        kind, cmp, limit,
        fmt::format("{} of {}'s requests never sent", cmp.behaviour_b.unsent, cmp.b.text()),
        fmt::format("{} has {} never sent on the paired questions (a run stopped first): a "
                    "stopped run's unanswered requests are its slowest, so its behaviour "
                    "among what it answered is not measured; run the command that asked for "
                    "them again",
                    cmp.b.text(), util::counted(cmp.behaviour_b.unsent, "request")));
    c.detail["never_sent"] = cmp.behaviour_b.unsent;
    return c;
}

// The never-finished check where a side answered but recorded no finish
// state (imported from lm-eval samples, which keep no finish_reason).
GateCheck unrecorded_check(const Comparison& cmp, const Selector& side,
                           const IncreaseLimit& limit) {
    auto c = unmeasured_check(
        "never_finished", cmp, limit_of(limit),
        fmt::format("{} recorded no finish state", side.text()),
        fmt::format("{}'s answers were imported without how they ended (lm-eval samples keep "
                    "no finish_reason), so whether they finished cannot be measured; leave "
                    "--max-never-finished-increase out for an imported group",
                    side.text()));
    c.detail["finish_recorded"] = false;
    return c;
}

util::Result<void> add_pair_checks(const Results& results, const Summary& summary,
                                   const std::vector<store::GroupCompleteness>& groups,
                                   const GateSpec& spec, std::vector<GateCheck>& out) {
    CompareOptions options;
    options.paired.bootstrap = spec.bootstrap;
    options.paired.alpha = spec.alpha;
    auto comparisons = compare(results, *spec.baseline, *spec.candidate, spec.scorer, options);
    if (!comparisons) {
        return comparisons.error();
    }
    assign_verdicts(*comparisons);
    for (const auto& cmp : *comparisons) {
        const auto* a = find_group(summary, cmp.a);
        const auto* b = find_group(summary, cmp.b);
        if (!a || !b) {
            return make_error(ErrorKind::internal,
                              fmt::format("no summary for {} or {}", cmp.a.text(), cmp.b.text()));
        }
        if (spec.max_drop_points) {
            out.push_back(paired_check(cmp, spec, groups));
        }
        // Every response of a side on the paired questions failed: no
        // behaviour to compare.
        const Selector* empty = cmp.behaviour_b.answered == 0   ? &cmp.b
                                : cmp.behaviour_a.answered == 0 ? &cmp.a
                                                                : nullptr;
        // A side that answered nothing, or a candidate with requests never
        // sent: each behaviour check asked fails as not measured.
        if (empty || cmp.behaviour_b.unsent > 0) {
            // A candidate that sent none of them is a stopped run, not one
            // with errors to see (an audit read "see its errors" of 40
            // requests never sent).
            const bool none_sent =
                empty == &cmp.b && cmp.behaviour_b.unsent == cmp.behaviour_b.responses;
            const auto unmeasured = [&](const char* kind, const CheckLimit& limit) {
                return empty && !none_sent ? unanswered_check(kind, cmp, *empty, limit)
                                           : unsent_check(kind, cmp, limit);
            };
            if (spec.max_never_finished_increase) {
                out.push_back(
                    unmeasured("never_finished", limit_of(*spec.max_never_finished_increase)));
            }
            if (spec.max_reasoning_start_increase) {
                out.push_back(
                    unmeasured("reasoning_start", limit_of(*spec.max_reasoning_start_increase)));
            }
            if (spec.max_token_increase_pct) {
                out.push_back(unmeasured("tokens", token_limit(*spec.max_token_increase_pct)));
            }
            continue;
        }
        if (spec.max_never_finished_increase) {
            // Imported answers say nothing about how they ended: they are
            // left out of the rate, and a side with no other cannot be
            // measured.
            const Selector* unrecorded = cmp.behaviour_b.finish_recorded == 0   ? &cmp.b
                                         : cmp.behaviour_a.finish_recorded == 0 ? &cmp.a
                                                                                : nullptr;
            out.push_back(
                unrecorded ? unrecorded_check(cmp, *unrecorded, *spec.max_never_finished_increase)
                           : increase_check("never_finished", "responses that never finished", cmp,
                                            *spec.max_never_finished_increase));
        }
        if (spec.max_reasoning_start_increase) {
            out.push_back(increase_check("reasoning_start", "responses that started reasoning", cmp,
                                         *spec.max_reasoning_start_increase));
        }
        if (spec.max_token_increase_pct) {
            out.push_back(token_check(cmp, *spec.max_token_increase_pct));
        }
    }
    // A baseline group the candidate has no counterpart of (a framing the
    // pull request stopped running) is named, neither passing nor failing:
    // the gate checked raw and said nothing of chat (gate audit).
    // Named by the first check the gate asks of a pair, with its limit.
    const auto [kind, limit] =
        spec.max_drop_points
            ? std::pair{std::string("paired"), CheckLimit{"points", *spec.max_drop_points, ""}}
        : spec.max_never_finished_increase
            ? std::pair{std::string("never_finished"), limit_of(*spec.max_never_finished_increase)}
        : spec.max_reasoning_start_increase
            ? std::pair{std::string("reasoning_start"),
                        limit_of(*spec.max_reasoning_start_increase)}
            : std::pair{std::string("tokens"),
                        token_limit(spec.max_token_increase_pct.value_or(0))};
    for (const auto& [a, b] : unmatched_groups(results, *spec.baseline, *spec.candidate)) {
        GateCheck k;
        k.kind = kind;
        k.name = fmt::format("{} {} -> {}", k.kind, a.text(), b.text());
        k.unit = limit.unit;
        k.threshold = limit.value;
        k.measured_text = fmt::format("not measured: no group {}", b.text());
        k.threshold_text = "not judged";
        k.status = CheckStatus::skip;
        k.why = fmt::format("not judged: {} has no group to pair with {} (it never ran {}/{}); "
                            "run it, or give --baseline and --candidate as SERVER/FRAMING of a "
                            "framing both ran",
                            b.server, a.text(), *b.framing, *b.max_tokens);
        k.detail = {{"baseline", a.text()}, {"candidate", b.text()}, {"outcome", "not run"}};
        out.push_back(std::move(k));
    }
    return {};
}

util::Result<GateCheck> completeness_check(store::Store& store,
                                           const std::vector<store::GroupCompleteness>& groups) {
    int64_t total = 0, missing = 0;
    std::vector<std::string> where;
    int64_t unplanned = 0, unrun = 0;
    bool unplanned_by_failed_runs = true; // of every group with unplanned places
    // Shards no run of a group is of, and groups whose shards' runs asked
    // less than their whole (another --limit or --repeats).
    std::vector<std::string> lacking, uneven;
    for (const auto& g : groups) {
        const auto label = group_label(g.server, g.framing, g.max_tokens);
        total += g.requests + g.unplanned + g.unrun;
        missing += g.missing + g.unplanned + g.unrun;
        unplanned += g.unplanned;
        if (g.unplanned > 0) {
            unplanned_by_failed_runs = unplanned_by_failed_runs && g.unplanned_by_failed_runs;
        }
        unrun += g.unrun;
        if (g.missing + g.unplanned + g.unrun > 0) {
            where.push_back(fmt::format("{}: {}", label, g.missing + g.unplanned + g.unrun));
        }
        if (!g.missing_shards.empty()) {
            lacking.push_back(fmt::format("{} of {}", shards_text(g.missing_shards), label));
        } else if (g.unrun > 0) {
            uneven.push_back(label);
        }
    }
    auto failures = store::failure_kinds(store);
    if (!failures) {
        return failures.error();
    }
    nlohmann::json kinds = nlohmann::json::object();
    for (const auto& [kind, n] : *failures) {
        kinds[kind] = n;
    }
    if (unplanned > 0) {
        kinds["never planned"] = unplanned;
    }
    if (unrun > 0) {
        kinds["never run"] = unrun;
    }
    auto unreadable = store::unreadable_run_configs(store);
    if (!unreadable) {
        return unreadable.error();
    }
    GateCheck c;
    c.kind = "complete";
    c.name = "complete";
    c.unit = "requests";
    c.measured = static_cast<double>(missing);
    c.threshold = 0;
    c.measured_text = fmt::format("{} of {} without a successful response", missing,
                                  util::counted(total, "request"));
    c.threshold_text = "0";
    c.status = status_of(missing == 0 && unreadable->empty());
    if (!unreadable->empty()) {
        // What those runs asked is not among the planned requests counted.
        c.why = fmt::format("cannot tell: what {} {} asked is not known, {} stored configuration "
                            "(runs.config_json) being none a run writes, so requests it planned "
                            "and never stored would not be counted; the file was edited or is "
                            "damaged: use a copy from before",
                            unreadable->size() == 1 ? "run" : "runs", fmt::join(*unreadable, ", "),
                            unreadable->size() == 1 ? "its" : "their");
        return c;
    }
    if (missing == 0) {
        c.why = total == 1 ? std::string("the one planned request has a successful response")
                           : fmt::format("every one of the {} planned requests has a successful "
                                         "response",
                                         total);
    } else {
        std::vector<std::string> kind_text;
        for (const auto& [k, v] : kinds.items()) {
            kind_text.push_back(fmt::format("{} {}", k, v.get<int64_t>()));
        }
        c.why = fmt::format("failed or unsent requests ({}) in {}", fmt::join(kind_text, ", "),
                            fmt::join(where, ", "));
        if (unplanned > 0) {
            c.why += fmt::format("; a run stopped before it planned them: {}",
                                 unplanned_advice(unplanned_by_failed_runs));
        }
        if (!lacking.empty()) {
            c.why += fmt::format("; the database holds no run of {}: merge the missing "
                                 "shards' databases into it (diffeval merge), or run them",
                                 fmt::join(lacking, ", "));
        }
        auto running = store::runs_marked_running(store);
        if (!running) {
            return running.error();
        }
        if (*running > 0) {
            c.why += fmt::format("; {} still marked running: merged in while {} still wrote "
                                 "{} database (merge it again once {} ended) or stopped by a "
                                 "process that died (run the same command again)",
                                 util::counted(*running, "run"), *running == 1 ? "it" : "they",
                                 *running == 1 ? "its" : "their",
                                 *running == 1 ? "it has" : "they have");
        }
        if (!uneven.empty()) {
            c.why += fmt::format("; the shards of {} ran different --limit or --repeats, so "
                                 "no run asked the rest of their whole: run the short shards "
                                 "again with the others' settings",
                                 fmt::join(uneven, ", "));
        }
    }
    nlohmann::json shards = nlohmann::json::object();
    for (const auto& g : groups) {
        if (!g.missing_shards.empty()) {
            shards[group_label(g.server, g.framing, g.max_tokens)] = g.missing_shards;
        }
    }
    c.detail = {{"requests", total},
                {"without_success", missing},
                {"by_error_kind", kinds},
                {"missing_shards", shards}};
    return c;
}

// Fails when any checked server's fingerprint found a contradiction in its
// log; passes with a note when no server was fingerprinted at all.
util::Result<GateCheck> conflict_check(const Results& results, store::Store& store,
                                       const GateSpec& spec) {
    std::vector<std::string> names;
    for (const auto* sel : {&spec.baseline, &spec.candidate}) {
        if (*sel && std::find(names.begin(), names.end(), (*sel)->server) == names.end()) {
            names.push_back((*sel)->server);
        }
    }
    for (const auto& n : names) {
        if (std::find(results.servers.begin(), results.servers.end(), n) == results.servers.end()) {
            return make_error(ErrorKind::usage,
                              fmt::format("no server '{}' in the database; servers: {}", n,
                                          fmt::join(results.servers, ", ")));
        }
    }
    if (names.empty()) {
        names = results.servers;
    }
    auto servers = load_server_facts(store, names);
    if (!servers) {
        return servers.error();
    }
    GateCheck c;
    c.kind = "conflict";
    c.name = "conflict";
    c.unit = "conflicts";
    c.threshold = 0;
    c.threshold_text = "0";
    // What server logs contradict; per kind of name ("model", "system
    // fingerprint", in that order), the servers whose responses name more
    // than one.
    std::vector<std::string> found, fingerprinted;
    std::map<std::string_view, std::vector<std::string>> mixed;
    nlohmann::json detail = nlohmann::json::array();
    for (const auto& s : *servers) {
        if (s.fingerprinted) {
            fingerprinted.push_back(s.name);
        }
        const auto add = [&](const fingerprint::Conflict& k, std::string line,
                             std::vector<std::string>& into) {
            into.push_back(std::move(line));
            detail.push_back({{"server", s.name},
                              {"name", k.name},
                              {"message", k.message},
                              {"evidence", k.evidence}});
        };
        for (const auto& k : s.fingerprint.conflicts) {
            add(k, fmt::format("{}: {} ({})", s.name, k.message, k.name), found);
        }
        // A server whose responses name two models, or two backend
        // configurations, contradicts itself too: a proxy mixed backends, or
        // the backend changed mid-run, and its answers are not one backend's.
        for (const auto& m : mixed_answers(s)) {
            add(m.conflict, fmt::format("{}: {}", s.name, m.conflict.message), mixed[m.kind]);
        }
    }
    size_t conflicts = found.size();
    std::string mixed_text;
    for (const auto& [kind, lines] : mixed) {
        conflicts += lines.size();
        mixed_text += fmt::format(", {} answering under more than one {}",
                                  util::counted(lines.size(), "server"), kind);
    }
    c.measured = static_cast<double>(conflicts);
    c.measured_text =
        mixed.empty()
            ? fmt::format("{} on {} fingerprinted of {}", util::counted(found.size(), "conflict"),
                          fingerprinted.size(), util::counted(servers->size(), "server"))
            : fmt::format("{}: {} in server logs ({} fingerprinted of {}){}",
                          util::counted(conflicts, "conflict"), found.size(), fingerprinted.size(),
                          util::counted(servers->size(), "server"), mixed_text);
    c.status = status_of(conflicts == 0);
    if (conflicts > 0) {
        std::vector<std::string> parts;
        if (!found.empty()) {
            parts.push_back(
                fmt::format("a server log contradicts itself: {}", fmt::join(found, "; ")));
        }
        for (const auto& [kind, lines] : mixed) {
            parts.push_back(fmt::format("a server's responses name more than one {}: {}", kind,
                                        fmt::join(lines, "; ")));
        }
        c.why = fmt::format("{}", fmt::join(parts, "; "));
    } else if (fingerprinted.empty()) {
        c.why = fmt::format("no conflict: no fingerprint recorded for {}", fmt::join(names, ", "));
        c.note = "no fingerprint recorded; attach server logs with --server-log so the gate can "
                 "check what ran";
    } else {
        c.why =
            fmt::format("the logs of {} show no conflicting facts", fmt::join(fingerprinted, ", "));
    }
    c.detail = {{"servers", names}, {"fingerprinted", fingerprinted}, {"conflicts", detail}};
    return c;
}

util::Result<void> validate(const GateSpec& spec) {
    const bool pair_checks = spec.max_drop_points || spec.max_never_finished_increase ||
                             spec.max_reasoning_start_increase || spec.max_token_increase_pct;
    const bool conflicts = spec.fail_on_conflict == FailOnConflict::yes;
    if ((spec.baseline || spec.candidate) && !pair_checks && !conflicts) {
        return make_error(ErrorKind::usage,
                          "--baseline/--candidate need a check: --max-drop, "
                          "--max-never-finished-increase, --max-reasoning-start-increase, "
                          "--max-token-increase or --fail-on-conflict");
    }
    if (!spec.expect && !pair_checks && spec.require_complete == RequireComplete::no &&
        !conflicts) {
        return make_error(ErrorKind::usage,
                          "no checks requested; give --expect, --max-drop, --max-*-increase, "
                          "--require-complete, --fail-on-conflict, --vllm-config, "
                          "--max-probe-shift or --expect-same-numerics (see docs/ci.md)");
    }
    // Each named with its value and both bounds, as every number flag is.
    if (spec.expect && !(*spec.expect >= 0 && *spec.expect <= 1)) {
        return make_error(ErrorKind::usage,
                          fmt::format("--expect {}: a proportion from 0 to 1 (0.82 for 82%); "
                                      "give one",
                                      *spec.expect));
    }
    if (spec.expect && !(spec.tolerance >= 0 && spec.tolerance <= 1)) {
        return make_error(ErrorKind::usage,
                          fmt::format("--tolerance {}: a proportion from 0 to 1 (0.02 for 2 "
                                      "points below --expect); give one",
                                      spec.tolerance));
    }
    if (spec.group && !spec.expect) {
        return make_error(ErrorKind::usage, "--group selects what --expect checks; add --expect");
    }
    if (pair_checks && (!spec.baseline || !spec.candidate)) {
        return make_error(ErrorKind::usage,
                          "--max-drop and the --max-*-increase checks compare two groups; give "
                          "--baseline and --candidate");
    }
    if (spec.max_drop_points && !(std::isfinite(*spec.max_drop_points) &&
                                  *spec.max_drop_points >= 0 && *spec.max_drop_points <= 100)) {
        return make_error(ErrorKind::usage,
                          fmt::format("--max-drop {} is not a drop in points; give a number "
                                      "from 0 to 100 (e.g. 1.5)",
                                      *spec.max_drop_points));
    }
    if (spec.max_token_increase_pct &&
        !(std::isfinite(*spec.max_token_increase_pct) && *spec.max_token_increase_pct >= 0)) {
        return make_error(ErrorKind::usage,
                          fmt::format("--max-token-increase {} is not a percentage; give a finite "
                                      "number of 0 or more (e.g. 10)",
                                      *spec.max_token_increase_pct));
    }
    return check_alpha(spec.alpha);
}

} // namespace

std::string IncreaseLimit::text() const {
    return unit == LimitUnit::percent ? fmt::format("{:g}% of questions", value)
                                      : fmt::format("{:g} per run", value);
}

util::Result<IncreaseLimit> parse_increase_limit(const std::string& flag, const std::string& text) {
    IncreaseLimit limit;
    std::string number = text;
    if (!number.empty() && number.back() == '%') {
        limit.unit = LimitUnit::percent;
        number.pop_back();
    }
    const char* end = number.data() + number.size();
    auto [ptr, ec] = std::from_chars(number.data(), end, limit.value);
    if (number.empty() || ec != std::errc{} || ptr != end || !(limit.value >= 0) ||
        !std::isfinite(limit.value)) {
        return make_error(ErrorKind::usage,
                          fmt::format("{} '{}': write a count per run (3) or a percentage of "
                                      "questions (5%)",
                                      flag, text));
    }
    // A share of questions rises by 100 points at most: a larger limit
    // means nothing, as --max-drop above 100 does.
    if (limit.unit == LimitUnit::percent && limit.value > 100) {
        return make_error(
            ErrorKind::usage,
            fmt::format("{} '{}': a percentage of questions is at most 100%", flag, text));
    }
    return limit;
}

size_t GateVerdict::inconclusive() const {
    return static_cast<size_t>(
        std::count_if(checks.begin(), checks.end(), [](const auto& c) { return c.inconclusive; }));
}

size_t GateVerdict::skipped() const {
    return static_cast<size_t>(std::count_if(
        checks.begin(), checks.end(), [](const auto& c) { return c.status == CheckStatus::skip; }));
}

size_t GateVerdict::failures() const {
    return static_cast<size_t>(std::count_if(
        checks.begin(), checks.end(), [](const auto& c) { return c.status == CheckStatus::fail; }));
}

util::Result<GateVerdict> evaluate_gate(const Results& results, store::Store& store,
                                        const GateSpec& spec) {
    if (auto v = validate(spec); !v) {
        return v.error();
    }
    GateVerdict verdict;
    verdict.scorer = results.scorers.at(spec.scorer);
    verdict.summary = summarize(results);
    // What each group planned and answered, read once for the checks that
    // need it (completeness, and the accuracy and paired checks'
    // never-planned notes).
    std::vector<store::GroupCompleteness> groups;
    if (spec.require_complete == RequireComplete::yes || spec.expect ||
        (spec.baseline && spec.candidate)) {
        auto read = store::completeness(store);
        if (!read) {
            return read.error();
        }
        groups = std::move(*read);
    }
    // Completeness first: errors are a failure of the run, not noise to drop.
    if (spec.require_complete == RequireComplete::yes) {
        auto c = completeness_check(store, groups);
        if (!c) {
            return c.error();
        }
        verdict.checks.push_back(std::move(*c));
    }
    // What ran next: a contradicting server log makes every number suspect.
    if (spec.fail_on_conflict == FailOnConflict::yes) {
        auto c = conflict_check(results, store, spec);
        if (!c) {
            return c.error();
        }
        verdict.checks.push_back(std::move(*c));
    }
    if (spec.expect) {
        if (auto r = add_accuracy_checks(verdict.summary, groups, spec, verdict.checks); !r) {
            return r.error();
        }
    }
    if (spec.baseline && spec.candidate) {
        if (auto r = add_pair_checks(results, verdict.summary, groups, spec, verdict.checks); !r) {
            return r.error();
        }
    }
    verdict.unsent_note = unsent_errors_text(groups);
    if (spec.require_complete == RequireComplete::no) {
        const auto read_by_checks = [&](const store::GroupCompleteness& g) {
            const auto named = [&](const std::optional<Selector>& s) {
                return s && matches(g, *s);
            };
            return (spec.expect && (!spec.group || named(spec.group))) || named(spec.baseline) ||
                   named(spec.candidate);
        };
        for (const auto& g : groups) {
            if (read_by_checks(g)) {
                verdict.lacking += g.unsent + g.unplanned + g.unrun;
            }
        }
    }
    return verdict;
}

nlohmann::json to_json(const GateVerdict& verdict) {
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& c : verdict.checks) {
        checks.push_back(
            {{"kind", c.kind},
             {"name", c.name},
             {"status", c.status == CheckStatus::pass   ? "pass"
                        : c.status == CheckStatus::fail ? "fail"
                                                        : "skipped"},
             {"inconclusive", c.inconclusive},
             {"measured", c.measured ? nlohmann::json(*c.measured) : nlohmann::json(nullptr)},
             {"threshold", c.threshold},
             {"unit", c.unit},
             {"measured_text", c.measured_text},
             {"threshold_text", c.threshold_text},
             {"why", c.why},
             {"note", c.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.note)},
             {"detail", c.detail.is_null() ? nlohmann::json::object() : c.detail}});
    }
    return {{"schema", "diffeval.gate/2"},
            {"passed", verdict.passed()},
            {"lacking_requests", verdict.lacking},
            {"scorer", verdict.scorer},
            {"score_text", verdict.summary.score_text},
            {"checks_total", verdict.checks.size()},
            {"checks_failed", verdict.failures()},
            {"checks_inconclusive", verdict.inconclusive()},
            {"checks_skipped", verdict.skipped()},
            {"checks", checks},
            {"error", nullptr}};
}

nlohmann::json error_json(const std::string& message) {
    return {{"schema", "diffeval.gate/2"},
            {"passed", false},
            {"lacking_requests", 0},
            {"scorer", nullptr},
            {"score_text", nullptr},
            {"checks_total", 0},
            {"checks_failed", 0},
            {"checks_inconclusive", 0},
            {"checks_skipped", 0},
            {"checks", nlohmann::json::array()},
            {"error", message}};
}

} // namespace diffeval::analysis
