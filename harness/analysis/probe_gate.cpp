// The probe's gate checks; see probe_gate.hpp.
#include <harness/analysis/probe_gate.hpp>

#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace diffeval::analysis {

using util::ErrorKind;
using util::make_error;

namespace {

// The level of the shift's 95% interval, at which its test must show it.
constexpr double k_shift_alpha = 0.05;

// A limit in logits as given: three decimals when they hold it, else every
// digit it has ("0.04866", which "0.049" would print alike with 0.04868).
std::string limit_text(double x) {
    auto s = fmt::format("{:.3f}", x);
    return util::printed_value(s) == x ? s : fmt::format("{}", x);
}

// A bound in logits as logits_text prints it, with as many more decimals
// (up to 8) as keep it on its side of -x and +x: a bound of -0.04867 beside
// a limit of 0.04866 printed "-0.049" and "lies below -0.049".
std::string bound_text(double v, double x) {
    const auto side = [](double a, double t) { return a > t ? 1 : (a < t ? -1 : 0); };
    std::string text = logits_text(v);
    for (int digits = 4; digits <= 8; ++digits) {
        const double printed = util::printed_value(text);
        if (side(printed, x) == side(v, x) && side(printed, -x) == side(v, -x)) {
            break;
        }
        text = fmt::format("{:+.{}f}", v, digits);
    }
    return text;
}

} // namespace

util::Result<std::vector<GateCheck>> probe_gate_checks(const ProbeData& data,
                                                       const ProbeGateSpec& spec) {
    if (spec.max_probe_shift && !(*spec.max_probe_shift >= 0)) {
        return make_error(ErrorKind::usage, "--max-probe-shift is in logits and must be >= 0");
    }
    auto framing = spec.baseline.framing ? spec.baseline.framing : spec.candidate.framing;
    auto comparisons =
        probe_comparisons(data, spec.baseline.server, spec.candidate.server, framing, {});
    if (!comparisons) {
        return comparisons.error();
    }
    std::vector<GateCheck> checks;
    for (const auto& c : *comparisons) {
        const std::string pair = fmt::format("{}/{} -> {}/{}", c.a, c.framing, c.b, c.framing);
        const auto& d = c.direction;
        // A framing the probe cannot measure beside one it can (chat beside
        // raw) is named with why, neither passing nor failing: the gate says
        // for each framing what it could and could not judge.
        const auto not_judged = [&](const char* kind, double threshold, std::string threshold_text,
                                    std::string why) {
            GateCheck k;
            k.kind = kind;
            k.name = fmt::format("{} {}", kind, pair);
            k.unit = "logits";
            k.threshold = threshold;
            k.measured_text = d.questions == 0
                                  ? fmt::format("not measurable ({})", left_out_text(c))
                                  : fmt::format("no A/A spread ({})", no_spread_reason(c));
            k.threshold_text = std::move(threshold_text);
            k.status = CheckStatus::skip;
            k.why = std::move(why);
            k.detail = to_json(c);
            checks.push_back(std::move(k));
        };
        const std::string unlisted =
            c.bound_above > 0
                ? fmt::format("not judged: on {} {}", c.framing, left_out_text(c))
                : fmt::format("not judged: no question of {} lists the marker on either side, "
                              "so P(open) is only bounded there (a chat prompt that closed the "
                              "think block lists none)",
                              c.framing);
        if (spec.max_probe_shift && d.questions == 0) {
            not_judged("probe_shift", *spec.max_probe_shift,
                       fmt::format("interval not wholly beyond +-{} logits",
                                   limit_text(*spec.max_probe_shift)),
                       unlisted);
        }
        if (spec.same_numerics == ExpectSameNumerics::yes && !c.perturbation) {
            not_judged("probe_numerics", 0, "within the A/A spread",
                       d.questions == 0
                           ? unlisted
                           : fmt::format("not judged: on {} {}, so there is no A/A spread to "
                                         "compare with",
                                         c.framing, no_spread_reason(c)));
        }
        if (spec.max_probe_shift && d.questions > 0) {
            const double x = *spec.max_probe_shift;
            GateCheck k;
            k.kind = "probe_shift";
            k.name = "probe_shift " + pair;
            k.unit = "logits";
            k.measured = d.mean_shift;
            k.threshold = x;
            k.measured_text =
                fmt::format("P(open) logit shift {} (95% CI [{}, {}], "
                            "{}, sign-flip p {}){}",
                            logits_text(d.mean_shift), bound_text(d.lo, x), bound_text(d.hi, x),
                            util::counted(d.questions, "question"), util::p_text(d.p_value, 2),
                            at_bound_text(c));
            const std::string limit = limit_text(x);
            k.threshold_text = fmt::format("interval not wholly beyond +-{} logits", limit);
            const bool up = d.lo > x;
            const bool down = d.hi < -x;
            // On few questions the percentile bootstrap's interval is
            // narrower than the exact test allows: a shift beyond the limit
            // needs the sign-flip test to show a shift too, as "worse than
            // the margin" does (docs/statistics.md), and too few questions
            // for that test to reach 0.05 decide nothing either way.
            const bool too_few = d.questions < k_probe_min_questions;
            const bool shown = d.p_value < k_shift_alpha;
            // Entered at a bound, the shift is at least as large as its
            // interval says: beyond the limit it fails as measured, and
            // within it nothing passes (the shift may lie beyond).
            const bool at_bound = c.bound_entered > 0 && !up && !down;
            k.status = too_few || up || down || at_bound ? CheckStatus::fail : CheckStatus::pass;
            if (too_few) {
                k.why = fmt::format("cannot tell: {} cannot show a shift (a two-sided sign-flip "
                                    "test needs {} to reach p < {:g}); run more questions",
                                    util::counted(d.questions, "question"), k_probe_min_questions,
                                    k_shift_alpha);
            } else if (at_bound) {
                k.why = fmt::format("cannot tell: {} of {} {} at one side's bound (it lists no "
                                    "marker there), where the shift is at least as large as "
                                    "entered, so the interval within the limit may lie nearer "
                                    "0 than the shift",
                                    c.bound_entered, util::counted(d.questions, "question"),
                                    c.bound_entered == 1 ? "enters" : "enter");
            } else if ((up || down) && !shown) {
                k.why = fmt::format("cannot tell: the interval lies {} {}{} logits, but the "
                                    "sign-flip test does not show a shift (p {}, not below "
                                    "{:g})",
                                    up ? "above" : "below", up ? "+" : "-", limit,
                                    util::p_text(d.p_value, 2), k_shift_alpha);
            } else {
                k.why = up     ? fmt::format("{} opens the think block more often than {}: the "
                                                 "whole interval lies above +{} logits",
                                             c.b, c.a, limit)
                        : down ? fmt::format("{} opens the think block less often than {}: the "
                                             "whole interval lies below -{} logits",
                                             c.b, c.a, limit)
                               : "the shift's interval reaches within the limit";
            }
            k.detail = to_json(c);
            checks.push_back(std::move(k));
        }
        if (spec.same_numerics == ExpectSameNumerics::yes && c.perturbation) {
            const auto& p = *c.perturbation;
            GateCheck k;
            k.kind = "probe_numerics";
            k.name = "probe_numerics " + pair;
            k.unit = "logits";
            k.measured = p.mean_abs_ab;
            k.threshold = p.mean_abs_aa;
            k.measured_text = fmt::format("mean |delta logit P(open)| {:.4f} over {} (one-sided "
                                          "sign test p {})",
                                          p.mean_abs_ab, util::counted(p.questions, "question"),
                                          util::p_text(p.p_value, 2));
            k.threshold_text = fmt::format("within the A/A spread ({:.4f})", p.mean_abs_aa);
            // Fewer questions than the sign test needs to reach its level
            // cannot show a change, so passing on them would pass anything.
            k.status = p.differ || p.too_few() ? CheckStatus::fail : CheckStatus::pass;
            if (p.differ) {
                k.why = fmt::format(
                    "the numerics differ: {} moved the probe beyond {}'s own repeats after {}", c.b,
                    c.a, util::counted(p.questions_to_differ.value_or(p.questions), "question"));
            } else if (p.too_few()) {
                k.why = fmt::format("cannot tell: {} cannot show the numerics differ (a "
                                    "one-sided sign test needs {} to reach p < {:g}); run more "
                                    "questions",
                                    util::counted(p.questions, "question"), p.questions_to_tell,
                                    p.alpha);
            } else if (p.moved_more == 0) {
                k.why = "the probe moved no more than between the baseline's own repeats";
            } else {
                k.why = fmt::format("not shown: the probe moved more than between {}'s own "
                                    "repeats on {} of {} and less on {}, which a one-sided sign "
                                    "test does not show at {:g} (p {})",
                                    c.a, p.moved_more, util::counted(p.questions, "question"),
                                    p.moved_less, p.alpha, util::p_text(p.p_value, 2));
            }
            k.detail = to_json(c);
            checks.push_back(std::move(k));
        }
    }
    if (std::all_of(checks.begin(), checks.end(),
                    [](const auto& k) { return k.status == CheckStatus::skip; })) {
        // A server whose engine answered every probe without
        // log-probabilities was probed: running with --probe again would
        // not help.
        for (const auto* server : {&spec.baseline.server, &spec.candidate.server}) {
            if (has_readings(data, *server)) {
                continue;
            }
            if (auto none = data.without_logprobs.find(*server);
                none != data.without_logprobs.end()) {
                return make_error(ErrorKind::data,
                                  fmt::format("cannot measure the probe for {}: its engine "
                                              "returned no usable log-probabilities ({} probe "
                                              "responses); the probe checks need an engine "
                                              "that honours the logprobs options",
                                              *server, none->second));
            }
            // Probes sent and failed (a server that rejects the logprobs
            // options answers 400): sending them again is what may help.
            if (auto failed = data.unanswered.find(*server); failed != data.unanswered.end()) {
                return make_error(ErrorKind::data,
                                  fmt::format("cannot measure the probe for {}: {}", *server,
                                              unanswered_words(failed->second)));
            }
        }
        // Readings were stored, but none the checks can use: say why, per
        // framing, rather than that there are none.
        std::vector<std::string> why;
        bool unlisted = false; // a framing whose questions list no marker on either side
        for (const auto& c : *comparisons) {
            if (c.direction.questions == 0) {
                why.push_back(c.bound_above == 0
                                  ? fmt::format("on {} no question lists the marker on either "
                                                "side ({})",
                                                c.framing,
                                                util::counted(c.both_bounded, "question"))
                                  : fmt::format("on {} no question could be compared ({})",
                                                c.framing, left_out_text(c)));
                unlisted = unlisted || c.bound_above == 0;
            } else if (!c.perturbation) {
                why.push_back(fmt::format("on {} {}, so no A/A spread to compare with", c.framing,
                                          no_spread_reason(c)));
            }
        }
        if (!why.empty()) {
            return make_error(ErrorKind::data,
                              fmt::format("cannot measure the probe for {} against {}: {}{}",
                                          spec.candidate.server, spec.baseline.server,
                                          fmt::join(why, "; "),
                                          unlisted ? "; a chat prompt that closed the think block "
                                                     "lists no marker, so probe a completion "
                                                     "framing such as raw"
                                                   : ""));
        }
        return make_error(
            ErrorKind::data,
            fmt::format("no probe readings to check for {} against {}{}; run 'diffeval run "
                        "--probe think-open' with both servers (raw framing)",
                        spec.candidate.server, spec.baseline.server,
                        framing ? " on framing " + *framing : ""));
    }
    return checks;
}

} // namespace diffeval::analysis
