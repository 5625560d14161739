// Verdicts and margin checks; see verdict.hpp. Every sentence is built from
// the numbers that decided it, in the order a reader checks them.
#include <harness/analysis/verdict.hpp>

#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>

#include <cmath>

namespace diffeval::analysis {

namespace {

// Guards comparisons of bounds with a margin against rounding.
constexpr double k_epsilon = 1e-12;

std::string pvalue(double p) {
    return util::p_text(p);
}

// "95%" for alpha 0.05.
std::string level(double confidence) {
    return fmt::format("{:g}%", 100.0 * confidence);
}

std::string holm_clause(const Verdict& v) {
    return v.comparisons > 1 ? fmt::format(" (Holm-adjusted {} over {} comparisons)",
                                           pvalue(v.p_adjusted), v.comparisons)
                             : std::string();
}

// -1, 0 or 1: where `points` lies against `threshold_points`.
int side_of(double points, double threshold_points) {
    const double d = points - threshold_points;
    return d > 100.0 * k_epsilon ? 1 : d < -100.0 * k_epsilon ? -1 : 0;
}

} // namespace

std::string detects_text(const QuestionStats& s, std::string_view run, int decimals) {
    const auto at = fmt::format("{:.{}f}", 100.0 * *s.mdd, decimals);
    if (*s.mdd > 1.0) {
        return fmt::format("{} detects no difference at {:g}% power: it would take {} points, "
                           "more than there are",
                           run, 100.0 * s.power, at);
    }
    return fmt::format("{} detects differences of {} points or more at {:g}% power", run, at,
                       100.0 * s.power);
}

namespace {

std::string mdd_clause(const QuestionStats& s) {
    if (!s.mdd) {
        return "; " + no_spread_text(s);
    }
    return fmt::format("; {} of {} {}, and {}", s.test.differing,
                       util::counted(s.questions, "question"),
                       s.test.differing == 1 ? "differs" : "differ", detects_text(s, "the run"));
}

// Whether the bounds on each side of the interval can be trusted to decide:
// with so few questions that no test reaches alpha (`smallest_p`), a
// bootstrap bound on a side some question moved towards is no bound. The
// exact count bound is one, and where it stands in (always, with so few)
// that end decides: the farther of the two is printed, so a pass on it is
// a pass on the count bound. (The gate called a count bound of -90.2 at
// four questions "a bootstrap bound over so few" and would not pass on it:
// an outside audit.)
bool lower_bound_decides(const QuestionStats& s) {
    return !s.smallest_p || s.a_better == 0 || s.count_bound_lower;
}

bool upper_bound_decides(const QuestionStats& s) {
    return !s.smallest_p || s.b_better == 0 || s.count_bound_upper;
}

// "a has no successful response on these 100 questions", or both sides.
std::string unanswered_text(const QuestionStats& s, const std::string& a, const std::string& b) {
    const std::string questions = util::counted(s.questions, "question");
    if (s.answered_a == 0 && s.answered_b == 0) {
        return fmt::format("neither {} nor {} has a successful response on these {}", a, b,
                           questions);
    }
    return fmt::format("{} has no successful response on these {}", s.answered_a == 0 ? a : b,
                       questions);
}

std::string thin_bound_text(const QuestionStats& s) {
    return fmt::format(
        "with {} no test can reach p < {:g} (the sign-flip test's mid-p is at least "
        "{:.3g}), and a bootstrap bound over so few is little more than the most extreme "
        "of them",
        util::counted(s.questions, "question"), s.alpha, s.smallest_p.value_or(1.0));
}

} // namespace

bool has_no_evidence(const QuestionStats& s) {
    return s.answered_a == 0 || s.answered_b == 0;
}

std::string no_spread_text(const QuestionStats& s) {
    if (has_no_evidence(s)) {
        return "no successful response on a side to size a difference from";
    }
    // With so few questions that no test reaches alpha, agreement is no
    // evidence either: said so, not "agree" alone (an audit's --limit 1).
    if (s.test.differing == 0 && s.smallest_p) {
        return fmt::format("the two sides agree on every question, but with {} no difference "
                           "could reach p < {:g} (the sign-flip test's mid-p is at least {:.3g})",
                           util::counted(s.questions, "question"), s.alpha, *s.smallest_p);
    }
    if (s.test.differing == 0) {
        return "the two sides agree on every question";
    }
    if (s.smallest_p) {
        return fmt::format("with {} no difference can reach p < {:g}: the sign-flip test's "
                           "mid-p is at least {:.3g}",
                           util::counted(s.questions, "question"), s.alpha, *s.smallest_p);
    }
    return fmt::format("every one of the {} questions differs by the same amount, so their "
                       "spread sizes no test",
                       s.questions);
}

std::string difference_text(const QuestionStats& s, VerdictKind kind) {
    const double shown = shown_diff(s);
    const std::string diff = signed_points(shown);
    const auto& iv = s.interval;
    // Accuracies that print alike leave a printed difference of 0.0, which
    // would read as no change beside "worse": the exact difference then
    // prints with as many decimals as it takes to show its sign, and so
    // does the interval, unclamped.
    if (diff == "0.0" && (kind == VerdictKind::worse || kind == VerdictKind::better)) {
        return fmt::format("{} points, {} CI [{}, {}]", bound_text(s.diff, {0.0}),
                           level(1.0 - s.alpha), bound_text(iv.lo, {0.0}),
                           bound_text(iv.hi, {0.0}));
    }
    return fmt::format("{} points, {} CI {}", diff, level(1.0 - s.alpha),
                       interval_text(iv.lo, iv.hi, shown, {0.0}));
}

std::string signed_points(double proportion) {
    auto s = fmt::format("{:+.1f}", 100.0 * proportion);
    return s == "+0.0" || s == "-0.0" ? std::string("0.0") : s;
}

std::string accuracy_text(double proportion) {
    return fmt::format("{:.1f}", 100.0 * proportion);
}

double shown_diff(double accuracy_a, double accuracy_b) {
    return (util::printed_value(accuracy_text(accuracy_b)) -
            util::printed_value(accuracy_text(accuracy_a))) /
           100.0;
}

double shown_diff(const QuestionStats& stats) {
    return shown_diff(stats.accuracy_a, stats.accuracy_b);
}

std::string bound_text(double proportion, std::initializer_list<double> thresholds) {
    const double exact = 100.0 * proportion;
    std::string s;
    // Up to eight decimals: enough for any margin a user types (the check
    // itself tells sides apart to 1e-10 points).
    for (int decimals = 1; decimals <= 8; ++decimals) {
        s = fmt::format("{:+.{}f}", exact, decimals);
        const double printed = util::printed_value(s);
        bool same_sides = true;
        for (double t : thresholds) {
            same_sides = same_sides && side_of(printed, 100.0 * t) == side_of(exact, 100.0 * t);
        }
        if (same_sides) {
            break;
        }
    }
    return util::printed_value(s) == 0.0 ? std::string("0.0") : s;
}

std::string interval_text(double lo, double hi, double shown,
                          std::initializer_list<double> thresholds) {
    std::string lo_text = bound_text(lo, thresholds);
    std::string hi_text = bound_text(hi, thresholds);
    const std::string shown_text = signed_points(shown);
    const double at = util::printed_value(shown_text);
    // A bound that would print inside the shown difference prints as it,
    // unless that puts it on the other side of a threshold it is judged
    // against: "-0.1" for a lower bound of -0.07 beside a PASS on "-0.07 is
    // above -0.08", or "0.0" for an upper bound of -0.02 beside "worse"
    // (statistics audit). The bound's side is what the check decided.
    const auto keeps_sides = [&](double exact) {
        return std::all_of(thresholds.begin(), thresholds.end(), [&](double t) {
            return side_of(at, 100.0 * t) == side_of(100.0 * exact, 100.0 * t);
        });
    };
    if (util::printed_value(lo_text) > at && keeps_sides(lo)) {
        lo_text = shown_text;
    }
    if (util::printed_value(hi_text) < at && keeps_sides(hi)) {
        hi_text = shown_text;
    }
    return fmt::format("[{}, {}]", lo_text, hi_text);
}

std::string margin_text(double proportion) {
    const double exact = 100.0 * proportion;
    auto s = fmt::format("{:.1f}", exact);
    // Else as given, to twelve digits: {:g}'s six printed a --max-drop of
    // 7.166666666666667 as "7.16667" (an outside audit); twelve leave out
    // only what dividing by 100 and multiplying back may have added.
    return std::abs(util::printed_value(s) - exact) > 1e-9 ? fmt::format("{:.12g}", exact) : s;
}

const char* verdict_name(VerdictKind kind) {
    switch (kind) {
    case VerdictKind::worse:
        return "worse";
    case VerdictKind::better:
        return "better";
    case VerdictKind::equivalent:
        return "equivalent";
    case VerdictKind::no_evidence:
        return "no evidence";
    case VerdictKind::no_detectable_difference:
        break;
    }
    return "no detectable difference";
}

Verdict decide_verdict(const QuestionStats& s, const std::string& a, const std::string& b,
                       double p_adjusted, std::size_t comparisons, std::optional<double> margin) {
    Verdict v;
    v.p_adjusted = p_adjusted;
    v.comparisons = comparisons;
    v.margin = margin;
    const auto& iv = s.interval;
    const bool rejects = p_adjusted < s.alpha;
    const bool below = iv.hi < 0.0;
    const bool above = iv.lo > 0.0;
    const double shown = shown_diff(s);
    const std::string diff = signed_points(shown);

    // A side without one successful response: its accuracy is its failures.
    if (has_no_evidence(s)) {
        v.kind = VerdictKind::no_evidence;
        v.words = verdict_name(v.kind);
        v.sentence =
            fmt::format("No evidence either way: {} (each request failed or has no "
                        "response stored), and such a request counts as a wrong answer, so the {} "
                        "points between them say nothing of the model.",
                        unanswered_text(s, a, b), diff);
        return v;
    }
    // Equivalence first: a user who gives a margin says smaller differences
    // do not matter.
    const bool inside =
        margin && iv.lo_one_sided > -*margin + k_epsilon && iv.hi_one_sided < *margin - k_epsilon;
    if (inside && lower_bound_decides(s) && upper_bound_decides(s)) {
        v.kind = VerdictKind::equivalent;
        const std::string m = margin_text(*margin);
        v.words = fmt::format("equivalent within ±{} points", m);
        v.sentence = fmt::format(
            "{} is equivalent to {} within ±{} points: {} points, {} interval {} inside ±{} "
            "(two one-sided tests at {:g}).",
            b, a, m, diff, level(1.0 - 2.0 * s.alpha),
            interval_text(iv.lo_one_sided, iv.hi_one_sided, shown, {-*margin, *margin}), m,
            s.alpha);
        return v;
    }
    if (rejects && (below || above)) {
        v.kind = below ? VerdictKind::worse : VerdictKind::better;
        v.words = verdict_name(v.kind);
        v.sentence = fmt::format("{} is {} than {}: {}, sign-flip mid-p {}{}.", b, v.words, a,
                                 difference_text(s, v.kind), pvalue(s.test.p_mid), holm_clause(v));
        return v;
    }
    v.kind = VerdictKind::no_detectable_difference;
    v.words = verdict_name(v.kind);
    std::string ci_clause;
    // A borderline case says so in its words too, so a table's verdict
    // column never reads as plainly "no difference" beside an interval that
    // excludes 0.
    v.borderline = below || above || rejects;
    if (below || above) {
        v.words += " (CI excludes 0; test does not reject)";
        // The unadjusted mid-p may be below alpha: then what does not reject
        // is the Holm-adjusted one, and the sentence says so beside it.
        ci_clause =
            s.test.p_mid < s.alpha && comparisons > 1
                ? fmt::format("excludes 0 but the sign-flip test does not reject at {:g} "
                              "once adjusted for the {} comparisons",
                              s.alpha, comparisons)
                : fmt::format("excludes 0 but the sign-flip test does not reject at {:g}", s.alpha);
    } else if (rejects) {
        v.words += " (test rejects; CI includes 0)";
        ci_clause = "includes 0 (the test alone would reject: a borderline case)";
    } else {
        ci_clause = "includes 0";
    }
    v.sentence = fmt::format("No detectable difference between {} and {}: {} {}, sign-flip "
                             "mid-p {}{}{}.",
                             b, a, difference_text(s, v.kind), ci_clause, pvalue(s.test.p_mid),
                             holm_clause(v), mdd_clause(s));
    if (margin) {
        v.sentence += fmt::format(
            " Not shown equivalent within ±{} points: the {} interval {} {}.", margin_text(*margin),
            level(1.0 - 2.0 * s.alpha),
            interval_text(iv.lo_one_sided, iv.hi_one_sided, shown, {-*margin, *margin}),
            inside ? "lies inside it, but " + thin_bound_text(s) : "reaches past the margin");
    }
    return v;
}

std::string repeats_text(const SideNoise& a, const SideNoise& b) {
    if (!a.uneven() && !b.uneven()) {
        return util::repeats_of_two(a.repeats, b.repeats);
    }
    const auto range = [](const SideNoise& n) {
        return n.uneven() ? fmt::format("{} to {}", n.fewest_repeats, n.most_repeats)
                          : std::to_string(n.repeats);
    };
    return range(a) == range(b) ? fmt::format("{} repeats each", range(a))
                                : fmt::format("{} and {} repeats", range(a), range(b));
}

std::string noise_sentence(const QuestionStats& s, const std::string& a, const std::string& b) {
    // What the noise was measured from: "3 repeats", or with uneven
    // repeats "2 to 5 repeats on 12 of 20 questions" (the questions with
    // one count for nothing in it).
    const auto from = [&](const SideNoise& n) {
        return !n.uneven()
                   ? util::counted(n.repeats, "repeat")
                   : fmt::format("{} repeats on {} of {}",
                                 n.fewest_of_several == n.most_repeats
                                     ? std::to_string(n.most_repeats)
                                     : fmt::format("{} to {}", n.fewest_of_several, n.most_repeats),
                                 n.several, util::counted(s.questions, "question"));
    };
    auto side = [&](const SideNoise& n, const std::string& name) {
        if (n.gap == NoiseGap::too_few_answers) {
            return fmt::format("{} not measured: fewer than half its questions have two "
                               "successful repeats to compare (see its errors)",
                               name);
        }
        if (!n.measured) {
            // Uneven repeats: some questions have several, fewer than half
            // ("(1 repeat)" right after "1 to 3 repeats each" read as a
            // contradiction: an outside audit).
            return n.uneven() ? fmt::format("{} not measured: {} of {} have two repeats or more, "
                                            "fewer than half",
                                            name, n.several, util::counted(s.questions, "question"))
                              : fmt::format("{} not measured (1 repeat)", name);
        }
        if (n.deterministic) {
            // Agreement in correctness, not in text: a model wrong on
            // nearly every question agrees with itself however its texts
            // vary (a real llama-server was called deterministic so).
            return fmt::format("{} none seen: its {} were right or wrong alike on {} (their "
                               "texts may still differ)",
                               name, from(n), n.uneven() ? "each" : "every question");
        }
        return fmt::format("{} ±{:.1f} points (1 SD of accuracy on a re-run, from {})", name,
                           100.0 * n.rerun_sd, from(n));
    };
    std::string out =
        fmt::format("Run-to-run noise: {}; {}", side(s.noise_a, a), side(s.noise_b, b));
    if (s.noise_share) {
        out += fmt::format("; repeat noise accounts for {:.0f}% of the interval's variance",
                           100.0 * *s.noise_share);
    }
    return out + ".";
}

MarginCheck non_inferiority(const QuestionStats& s, double max_drop) {
    MarginCheck m;
    m.max_drop = max_drop;
    const auto& iv = s.interval;
    const std::string one_sided = level(1.0 - s.alpha);
    const std::string x = margin_text(max_drop);
    // The margin's side of 0 as printed: "0.0" for a margin of 0, never "-0.0".
    const std::string below = max_drop > 0.0 ? "-" + x : x;
    const double shown = shown_diff(s);
    const std::string diff = signed_points(shown);
    if (has_no_evidence(s)) {
        m.outcome = MarginOutcome::no_evidence;
        m.sentence = fmt::format("no evidence against the {}-point margin: {} (each request "
                                 "failed or has no response stored)",
                                 x, unanswered_text(s, "A", "B"));
    } else if (iv.lo_one_sided > -max_drop + k_epsilon && !lower_bound_decides(s)) {
        m.outcome = MarginOutcome::inconclusive;
        m.sentence = fmt::format("inconclusive against the {}-point margin: the one-sided {} lower "
                                 "bound {} is above {} ({} points), but {}",
                                 x, one_sided, bound_text(iv.lo_one_sided, {-max_drop}), below,
                                 diff, thin_bound_text(s));
    } else if (iv.lo_one_sided > -max_drop + k_epsilon) {
        m.outcome = MarginOutcome::pass;
        m.sentence =
            fmt::format("within the {}-point margin: the one-sided {} lower bound {} is "
                        "above {} ({} points)",
                        x, one_sided, bound_text(iv.lo_one_sided, {-max_drop}), below, diff);
    } else if (iv.hi_one_sided < -max_drop - k_epsilon &&
               !(s.diff < 0.0 && s.test.p_mid / 2.0 < s.alpha)) {
        // The bound says worse, the sign-flip test cannot tell a drop from
        // none (the percentile bootstrap is too narrow on few questions):
        // no claim either way.
        m.outcome = MarginOutcome::inconclusive;
        m.sentence = fmt::format(
            "inconclusive against the {}-point margin: the one-sided {} upper bound {} is below "
            "{} ({} points), but the one-sided sign-flip test does not show a drop (mid-p "
            "{}, {} of {} {})",
            x, one_sided, bound_text(iv.hi_one_sided, {-max_drop}), below, diff,
            util::p_text(s.test.p_mid / 2.0), s.test.differing,
            util::counted(s.questions, "question"), s.test.differing == 1 ? "differs" : "differ");
    } else if (iv.hi_one_sided < -max_drop - k_epsilon) {
        m.outcome = MarginOutcome::fail;
        m.sentence =
            fmt::format("worse than the {}-point margin: the one-sided {} upper bound {} "
                        "is below {} ({} points)",
                        x, one_sided, bound_text(iv.hi_one_sided, {-max_drop}), below, diff);
    } else {
        m.outcome = MarginOutcome::inconclusive;
        m.sentence = fmt::format(
            "inconclusive against the {}-point margin: the one-sided {} bounds {} straddle {} "
            "({} points){}",
            x, one_sided, interval_text(iv.lo_one_sided, iv.hi_one_sided, shown, {-max_drop}),
            below, diff, s.mdd ? "; " + detects_text(s, "this run") : std::string());
    }
    return m;
}

} // namespace diffeval::analysis
