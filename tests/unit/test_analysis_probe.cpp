// The probe's two measures: direction (a shift of the logit of P(open) with
// its interval, sign-flip test and questions needed) and perturbation ("the
// numerics differ" against the A/A spread, with how many questions it took).
#include <harness/analysis/compare.hpp>
#include <harness/analysis/probe.hpp>
#include <harness/analysis/probe_gate.hpp>
#include <harness/analysis/questions.hpp>
#include <harness/analysis/rng.hpp>
#include <harness/analysis/stats.hpp>
#include <harness/probe/reading.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

using namespace diffeval::analysis;

namespace {

double sigmoid(double z) {
    return 1 / (1 + std::exp(-z));
}

// `n` questions whose logit is `base(i)`, with `repeats` readings each.
ProbeSeries series(int n, int repeats, const std::function<double(int, int)>& logit,
                   bool bounded = false) {
    ProbeSeries s;
    for (int i = 0; i < n; ++i) {
        for (int r = 0; r < repeats; ++r) {
            s[i].push_back(ProbeValue{sigmoid(logit(i, r)), bounded});
        }
    }
    return s;
}

double base(int i) {
    return 2.0 + std::sin(i * 1.7); // questions differ a lot from each other
}

} // namespace

TEST(ProbeDirection, DetectsAHalfLogitShiftOn48Questions) {
    ProbeData d;
    d.probe = "think-open";
    d.series[{"a", "raw"}] = series(48, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] =
        series(48, 2, [](int i, int) { return base(i) + 0.5 + 0.1 * std::cos(i * 2.3); });
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->direction.questions, 48);
    EXPECT_NEAR(c->direction.mean_shift, 0.5, 0.05);
    EXPECT_GT(c->direction.lo, 0.4);
    EXPECT_LT(c->direction.hi, 0.6);
    EXPECT_LT(c->direction.p_value, 0.01);
    ASSERT_TRUE(c->direction.questions_needed);
    EXPECT_LE(*c->direction.questions_needed, 10);
    EXPECT_EQ(c->points.size(), 48u);
    // Every shift is positive: no sign flip is as extreme, and the p printed
    // says it is the test's floor, not a measured tail.
    EXPECT_FALSE(c->direction.exact);
    EXPECT_TRUE(c->direction.p_at_floor);
    EXPECT_DOUBLE_EQ(c->direction.p_value, 1.0 / 10001);
    EXPECT_NE(probe_line(*c).find("sign-flip p 0.0001 (the floor: none of 10000 sign flips as "
                                  "extreme);"),
              std::string::npos)
        << probe_line(*c);
}

TEST(ProbeDirection, NoShiftIsNotSignificant) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(30, 1, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] =
        series(30, 1, [](int i, int) { return base(i) + 0.3 * std::sin(i * 12.9898); });
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_TRUE(c);
    EXPECT_GT(c->direction.p_value, 0.2);
    EXPECT_LT(c->direction.lo, 0);
    EXPECT_GT(c->direction.hi, 0);
    EXPECT_FALSE(c->perturbation); // one repeat: no A/A spread
}

TEST(ProbeDirection, SmallSetsAreTestedExactly) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(5, 1, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] = series(5, 1, [](int i, int) { return base(i) + 1; });
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->direction.exact);
    EXPECT_NEAR(c->direction.p_value, 2.0 / 32.0, 1e-12); // all + or all -
    EXPECT_FALSE(c->direction.p_at_floor);                // enumerated: a measured tail
    EXPECT_NE(probe_line(*c).find("sign-flip p 0.063;"), std::string::npos) << probe_line(*c);
    // Five questions bound nothing: the interval, tight and far from 0
    // beside p 0.063, was printed without a word (statistics audit).
    EXPECT_NE(probe_line(*c).find("over 5 questions (too few questions for the interval to bound "
                                  "the shift, or for the sign-flip test to reach p < 0.05: that "
                                  "takes 6)"),
              std::string::npos)
        << probe_line(*c);
}

TEST(ProbeDirection, QuestionsWhereNeitherSideListsTheMarkerAreLeftOut) {
    ProbeData d;
    d.series[{"a", "chat"}] = series(
        10, 1, [](int, int) { return -9.0; }, true);
    d.series[{"b", "chat"}] = series(
        10, 1, [](int i, int) { return -9.0 + i; }, true);
    auto c = compare_probes(d, "a", "b", "chat");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->direction.questions, 0);
    EXPECT_EQ(c->both_bounded, 10);
    EXPECT_NE(probe_line(*c).find("not measurable"), std::string::npos);
    // Nothing measured: null, not a shift of 0 in [0, 0] at p 1.
    const auto j = to_json(*c);
    EXPECT_EQ(j["direction"]["questions"], 0);
    for (const char* key : {"mean_logit_shift", "ci", "p_value", "p_exact", "sd"}) {
        EXPECT_TRUE(j["direction"][key].is_null()) << key;
    }
}

// Probe audit D2: one server lists 20 alternatives, another 5, over the
// same distribution (P(open) 0.01): the second's bound, 0.05, entered as its
// value and read as "opens the think block more often" (+1.65 logits, p
// 0.0078). A bound at or above the other side's reading tells no direction
// and is left out; one below it enters at the bound (the shift is at least
// that), and A's second repeats beside B's bounds are no A/A comparison.
TEST(ProbeDirection, ABoundAboveTheOtherSidesReadingTellsNoDirection) {
    ProbeData d;
    d.series[{"top20", "raw"}] = series(8, 2, [](int, int) { return std::log(0.01 / 0.99); });
    d.series[{"top5", "raw"}] = series(
        8, 1, [](int, int) { return std::log(0.05 / 0.95); }, true);
    auto c = compare_probes(d, "top20", "top5", "raw");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->direction.questions, 0);
    EXPECT_EQ(c->bound_above, 8);
    EXPECT_EQ(c->both_bounded, 0);
    EXPECT_EQ(probe_line(*c), "probe  on raw: top5 vs top20: not measurable (8 questions have "
                              "only a bound on one side at or above the other's reading, which "
                              "tells no direction)");
    // A bound below the other side's reading: that side is lower, by at
    // least the bound's distance.
    d.series[{"low", "raw"}] = series(
        8, 1, [](int, int) { return std::log(0.001 / 0.999); }, true);
    c = compare_probes(d, "top20", "low", "raw");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->direction.questions, 8);
    EXPECT_EQ(c->bound_above, 0);
    EXPECT_NEAR(c->direction.mean_shift, std::log(0.001 / 0.999) - std::log(0.01 / 0.99), 1e-9);
    EXPECT_FALSE(c->perturbation);
    EXPECT_EQ(no_spread_reason(*c), "low's readings of the questions top20 read twice are bounds "
                                    "or missing");
    EXPECT_NE(probe_line(*c).find("; numerics: no A/A spread (low's readings of the questions "
                                  "top20 read twice are bounds or missing)"),
              std::string::npos)
        << probe_line(*c);
    // The shift entered there is a limit, and the line says so: it read as
    // a measured shift beside a 95% CI (an outside audit).
    EXPECT_EQ(c->bound_entered, 8);
    EXPECT_NE(probe_line(*c).find("over 8 questions (8 of 8 questions enter at one side's bound, "
                                  "not a reading, where the shift is at least as large: the "
                                  "shift may be farther from 0 than this), sign-flip p"),
              std::string::npos)
        << probe_line(*c);
    EXPECT_EQ(to_json(*c)["bound_entered"], 8);
    // A baseline whose two repeats are both bounds has no A/A spread, and
    // says why: "one probe reading per question" read as a count of repeats.
    d.series[{"low2", "raw"}] = series(
        8, 2, [](int, int) { return std::log(0.001 / 0.999); }, true);
    c = compare_probes(d, "low2", "top20", "raw");
    ASSERT_TRUE(c);
    EXPECT_EQ(no_spread_reason(*c), "low2's repeats are bounds, not readings (it lists no marker), "
                                    "so it has no two readings of a question to compare");
}

TEST(ProbeDirection, MissingSeriesIsAnError) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(3, 1, [](int i, int) { return base(i); });
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().message.find("no probe readings for b"), std::string::npos);
}

TEST(ProbePerturbation, BitExactSelfAndChangedNumericsDifferWithinTenQuestions) {
    // A's repeats are bit-identical (prefill at temperature 0); B moved
    // every question a little, in both directions.
    ProbeData d;
    d.series[{"a", "raw"}] = series(30, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] =
        series(30, 2, [](int i, int) { return base(i) + (i % 2 ? 0.3 : -0.3); });
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_TRUE(c);
    EXPECT_GT(c->direction.p_value, 0.2); // no direction
    ASSERT_TRUE(c->perturbation);
    EXPECT_TRUE(c->perturbation->differ);
    ASSERT_TRUE(c->perturbation->questions_to_differ);
    EXPECT_EQ(*c->perturbation->questions_to_differ, 7); // 2^-7 < 0.01
    EXPECT_NEAR(c->perturbation->mean_abs_ab, 0.3, 1e-9);
    EXPECT_EQ(c->perturbation->mean_abs_aa, 0.0);
    EXPECT_NE(probe_line(*c).find("numerics differ after 7 questions"), std::string::npos);
}

TEST(ProbePerturbation, AnAAPairDoesNotDiffer) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(30, 2, [](int i, int) { return base(i); });
    d.series[{"a2", "raw"}] = series(30, 2, [](int i, int) { return base(i); });
    auto c = compare_probes(d, "a", "a2", "raw");
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->perturbation);
    EXPECT_FALSE(c->perturbation->differ);
    EXPECT_FALSE(c->perturbation->questions_to_differ);
    EXPECT_EQ(c->perturbation->mean_abs_ab, 0.0);
}

TEST(ProbePerturbation, NoisyRepeatsRaiseTheBar) {
    // A disagrees with itself by as much as B disagrees with A: no finding.
    ProbeData d;
    d.series[{"a", "raw"}] =
        series(40, 2, [](int i, int r) { return base(i) + (r ? 0.2 * std::sin(i * 7.1) : 0); });
    d.series[{"b", "raw"}] =
        series(40, 2, [](int i, int) { return base(i) + 0.2 * std::cos(i * 3.3); });
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->perturbation);
    EXPECT_FALSE(c->perturbation->differ);
}

// Five questions that all moved, against bit-identical repeats: a sign test
// cannot reach 0.01 with fewer than 7, so nothing is shown either way, and
// the line says so rather than "within the A/A spread" beside a mean |delta|
// of 0.5 against 0.
TEST(ProbePerturbation, TooFewQuestionsCannotBeToldApart) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(5, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] = series(5, 2, [](int i, int) { return base(i) + 0.5; });
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->perturbation);
    EXPECT_FALSE(c->perturbation->differ);
    EXPECT_TRUE(c->perturbation->too_few());
    EXPECT_EQ(c->perturbation->questions_to_tell, 7);
    EXPECT_EQ(c->perturbation->moved_more, 5);
    const auto line = probe_line(*c);
    EXPECT_EQ(line.find("within the A/A spread"), std::string::npos) << line;
    EXPECT_NE(line.find("numerics cannot be told from the A/A spread: 5 of 5 questions moved "
                        "beyond the A/A spread, 0 less (mean |delta| 0.500 against A/A 0.000), "
                        "and a sign test needs 7 questions to reach p < 0.01"),
              std::string::npos)
        << line;
}

// Enough questions, some moved more, not significant: "not shown", with the
// counts, never "within the spread".
TEST(ProbePerturbation, AMoveTheTestDoesNotShowIsNotCalledWithinTheSpread) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(30, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] =
        series(30, 2, [](int i, int) { return base(i) + (i < 4 ? 0.5 : 0.0); });
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->perturbation);
    EXPECT_FALSE(c->perturbation->differ);
    EXPECT_FALSE(c->perturbation->too_few());
    const auto line = probe_line(*c);
    EXPECT_NE(line.find("numerics not shown to differ: 4 of 30 questions moved beyond the A/A "
                        "spread, 0 less"),
              std::string::npos)
        << line;
}

// The accuracy figure beside the probe's is the one `plan` gives at the
// run's own repeats, and the verdict's detectable difference implies: the
// demo printed 316 questions (Connor's formula for one response per side)
// beside a verdict whose 48 questions detect 11.6 points, so 213 for 5.5.
TEST(ProbeAccuracy, QuestionsNeededAreThePlansAtTheRunsRepeats) {
    CorrectnessMatrix a(48, std::vector<std::uint8_t>{1, 1, 1});
    CorrectnessMatrix b = a;
    b[0] = {0, 0, 0};
    b[1] = {0, 1, 0};
    b[2] = {1, 1, 0};
    a[3] = {0, 0, 1};
    auto s = analyse_questions(a, b);
    ASSERT_TRUE(s.ok());
    const double drop = std::abs(s->diff);
    const auto plan = plan_run(*s, drop, 0.05, 0.8);
    ASSERT_EQ(plan.rows[2].repeats, 3u);
    const auto n = questions_needed(*s, drop, 0.05, 0.8);
    EXPECT_EQ(n, plan.rows[2].questions);
    const double z = normal_quantile(0.975) + normal_quantile(0.8);
    EXPECT_EQ(
        n, static_cast<std::uint64_t>(std::ceil(z * z * s->sd_diff * s->sd_diff / (drop * drop))));
    // Attached to a probe comparison, as the line prints it.
    Comparison c;
    c.stats = *s;
    c.accuracy_a = s->accuracy_a;
    c.accuracy_b = s->accuracy_b;
    ProbeComparison probe;
    attach_accuracy(probe, c);
    ASSERT_TRUE(probe.accuracy && probe.accuracy->questions_needed);
    EXPECT_EQ(*probe.accuracy->questions_needed, static_cast<int64_t>(n));
    // No difference, or no question that differs: none.
    EXPECT_EQ(questions_needed(*s, 0.0, 0.05, 0.8), 0u);
    auto same = analyse_questions(a, a);
    ASSERT_TRUE(same.ok());
    EXPECT_EQ(questions_needed(*same, 0.1, 0.05, 0.8), 0u);
    // Every question moved alike (no variance): the exact test still needs
    // ten of them differing, not "not reachable".
    const CorrectnessMatrix right(4, std::vector<std::uint8_t>{1});
    const CorrectnessMatrix wrong(4, std::vector<std::uint8_t>{0});
    auto alike = analyse_questions(right, wrong);
    ASSERT_TRUE(alike.ok());
    ASSERT_EQ(alike->sd_diff, 0.0);
    EXPECT_EQ(questions_needed(*alike, 1.0, 0.05, 0.8), 10u);
}

TEST(ProbeJson, CarriesBothMeasuresAndThePoints) {
    ProbeData d;
    d.probe = "think-open";
    d.series[{"a", "raw"}] = series(8, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] = series(8, 2, [](int i, int) { return base(i) + 1; });
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_TRUE(c);
    auto j = to_json(*c);
    EXPECT_EQ(j["probe"], "think-open");
    EXPECT_EQ(j["direction"]["questions"], 8);
    EXPECT_EQ(j["perturbation"]["numerics_differ"], true);
    EXPECT_EQ(j["points"].size(), 8u);
    EXPECT_TRUE(j["accuracy"].is_null());
}

// The interval and p-value are the seeded draws taken one resample at a
// time, exactly: the implementation sums several resamples side by side and
// negates by flipping sign bits, which must not change a single printed
// digit. 150 questions (not a whole number of 64-bit words) and 1,001
// resamples (not a whole number of lanes).
TEST(ProbeDirection, IntervalAndPValueAreTheSeededDrawsTakenOneAtATime) {
    ProbeData d;
    const auto a = [](int i, int) { return base(i); };
    const auto b = [](int i, int) { return base(i) + 0.4 * std::sin(i * 3.1); };
    d.series[{"a", "raw"}] = series(150, 1, a);
    d.series[{"b", "raw"}] = series(150, 1, b);
    ProbeOptions options;
    options.resamples = 1001;
    auto c = compare_probes(d, "a", "b", "raw", options);
    ASSERT_TRUE(c);
    ASSERT_FALSE(c->direction.exact);

    std::vector<double> shifts;
    for (int i = 0; i < 150; ++i) {
        shifts.push_back(diffeval::probe::logit(sigmoid(b(i, 0))) -
                         diffeval::probe::logit(sigmoid(a(i, 0))));
    }
    const auto n = static_cast<uint32_t>(shifts.size());
    Rng boot(options.seed);
    std::vector<double> means;
    for (uint32_t r = 0; r < options.resamples; ++r) {
        double s = 0;
        for (uint32_t i = 0; i < n; ++i) {
            s += shifts[boot.below(n)];
        }
        means.push_back(s / n);
    }
    EXPECT_EQ(c->direction.lo, percentile(means, 2.5));
    EXPECT_EQ(c->direction.hi, percentile(means, 97.5));

    double observed = 0;
    for (double x : shifts) {
        observed += x;
    }
    observed = std::abs(observed);
    Rng flips(options.seed);
    uint64_t extreme = 0;
    for (uint32_t r = 0; r < options.resamples; ++r) {
        double s = 0;
        for (uint32_t i = 0; i < n; i += 64) {
            const uint64_t bits = flips.next();
            for (uint32_t j = i; j < std::min(n, i + 64); ++j) {
                s += ((bits >> (j - i)) & 1U) ? -shifts[j] : shifts[j];
            }
        }
        extreme += std::abs(s) >= observed - 1e-12 * (1.0 + observed);
    }
    EXPECT_EQ(c->direction.p_value,
              static_cast<double>(extreme + 1) / static_cast<double>(options.resamples + 1));
    // Most resamples are extreme: a lane counted twice, or one left out,
    // changes the count.
    EXPECT_GT(c->direction.p_value, 0.5);
}

// The report compares every server with the baseline in one call, shared
// between two threads: the same comparisons, in the same order (server,
// then framing), as one call a server, each with the accuracy comparison
// of its own servers and framing attached, and none for a pair without
// readings on both sides.
TEST(ProbeComparisons, EveryPairAtOnceIsEachPairInTurn) {
    ProbeData d;
    d.probe = "think-open";
    const std::vector<std::string> framings = {"chat", "raw"};
    for (const auto& f : framings) {
        const double fs = f == "raw" ? 0.3 : 0.0;
        d.series[{"a", f}] = series(20, 2, [](int i, int) { return base(i); });
        d.series[{"b", f}] = series(20, 2, [&](int i, int) { return base(i) + fs + 0.1; });
        d.series[{"c", f}] =
            series(20, 2, [&](int i, int) { return base(i) - fs + 0.2 * std::sin(i); });
    }
    d.series[{"d", "raw"}] = series(20, 2, [](int i, int) { return base(i) + 1; });
    ProbeOptions options;
    options.resamples = 501;

    auto accuracy_of = [](const std::string& b, const std::string& framing, double acc_b) {
        Comparison c;
        c.a = {"a", framing, 256};
        c.b = {b, framing, 256};
        c.accuracy_a = 0.9;
        c.accuracy_b = acc_b;
        return c;
    };
    const std::vector<Comparison> accuracy = {
        accuracy_of("b", "raw", 0.8), accuracy_of("c", "chat", 0.7), accuracy_of("b", "raw", 0.1)};

    const std::vector<ServerPair> pairs = {{"a", "b"}, {"a", "c"}, {"a", "d"}, {"a", "e"}};
    auto all_read = probe_comparisons(d, pairs, std::nullopt, accuracy, options);
    ASSERT_TRUE(all_read);
    const auto& all = *all_read;
    std::vector<ProbeComparison> each;
    for (const auto& [a, b] : pairs) {
        auto more = probe_comparisons(d, a, b, std::nullopt, accuracy, options);
        ASSERT_TRUE(more);
        each.insert(each.end(), more->begin(), more->end());
    }
    ASSERT_EQ(all.size(), 5u); // b and c on both framings, d on raw, e on none
    ASSERT_EQ(each.size(), all.size());
    for (size_t i = 0; i < all.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(all[i].b, each[i].b);
        EXPECT_EQ(all[i].framing, each[i].framing);
        EXPECT_EQ(to_json(all[i]).dump(), to_json(each[i]).dump());
    }
    EXPECT_EQ(all[0].b + "/" + all[0].framing, "b/chat");
    EXPECT_EQ(all[1].b + "/" + all[1].framing, "b/raw");
    EXPECT_EQ(all[4].b + "/" + all[4].framing, "d/raw");
    // The first accuracy comparison of the same servers and framing.
    EXPECT_FALSE(all[0].accuracy);
    ASSERT_TRUE(all[1].accuracy);
    EXPECT_NEAR(all[1].accuracy->diff, -0.1, 1e-12);
    ASSERT_TRUE(all[2].accuracy);
    EXPECT_NEAR(all[2].accuracy->diff, -0.2, 1e-12);
    EXPECT_FALSE(all[3].accuracy);
}

namespace {

std::vector<GateCheck> shift_checks(const ProbeData& d, double limit) {
    ProbeGateSpec spec{{"a", std::nullopt, std::nullopt},
                       {"b", std::nullopt, std::nullopt},
                       limit,
                       ExpectSameNumerics::no};
    auto checks = probe_gate_checks(d, spec);
    EXPECT_TRUE(checks);
    return checks ? *checks : std::vector<GateCheck>{};
}

} // namespace

// Six questions, five shifted by a logit and one by -0.01: the bootstrap's
// interval lies above +0.2, but the sign-flip test gives p 0.0625, so the
// shift is not shown, and the check says it cannot tell (as "worse than the
// margin" needs both).
TEST(ProbeGate, AnIntervalBeyondTheLimitTheTestDoesNotShowCannotTell) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(6, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] =
        series(6, 2, [](int i, int) { return base(i) + (i < 5 ? 1.0 : -0.01); });
    auto checks = shift_checks(d, 0.2);
    ASSERT_EQ(checks.size(), 1U);
    EXPECT_GT(checks[0].detail["direction"]["ci"][0].get<double>(), 0.2);
    EXPECT_NEAR(checks[0].detail["direction"]["p_value"].get<double>(), 0.0625, 1e-12);
    EXPECT_EQ(checks[0].status, CheckStatus::fail);
    EXPECT_NE(checks[0].why.find("cannot tell: the interval lies above +0.200 logits, but the "
                                 "sign-flip test does not show a shift (p 0.063, not below 0.05)"),
              std::string::npos)
        << checks[0].why;
}

// Five questions: no sign-flip test can reach 0.05, so neither a pass nor a
// shift beyond the limit is shown.
TEST(ProbeGate, TooFewQuestionsForTheShiftCannotTell) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(5, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] = series(5, 2, [](int i, int) { return base(i); });
    auto checks = shift_checks(d, 0.2);
    ASSERT_EQ(checks.size(), 1U);
    EXPECT_EQ(checks[0].status, CheckStatus::fail);
    EXPECT_NE(checks[0].why.find("cannot tell: 5 questions cannot show a shift (a two-sided "
                                 "sign-flip test needs 6 to reach p < 0.05)"),
              std::string::npos)
        << checks[0].why;
    d.series[{"a", "raw"}] = series(6, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] = series(6, 2, [](int i, int) { return base(i); });
    EXPECT_EQ(shift_checks(d, 0.2).at(0).status, CheckStatus::pass);
}

// A side only bounded on every question, its bound below the other side's
// reading: the shift is at least what entered. Beyond the limit it fails
// as before; within it nothing passes, since the shift may lie beyond.
TEST(ProbeGate, AShiftEnteredAtABoundPassesNothing) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(12, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] = series(
        12, 1, [](int i, int) { return base(i) - 0.3 - 0.01 * i; }, true);
    auto within = shift_checks(d, 5.0);
    ASSERT_EQ(within.size(), 1U);
    EXPECT_EQ(within[0].status, CheckStatus::fail) << within[0].why;
    EXPECT_NE(within[0].why.find("cannot tell: 12 of 12 questions enter at one side's bound"),
              std::string::npos)
        << within[0].why;
    EXPECT_NE(within[0].measured_text.find("12 of 12 questions enter at one side's bound"),
              std::string::npos)
        << within[0].measured_text;
    auto beyond = shift_checks(d, 0.1);
    ASSERT_EQ(beyond.size(), 1U);
    EXPECT_EQ(beyond[0].status, CheckStatus::fail);
    EXPECT_NE(beyond[0].why.find("opens the think block less often"), std::string::npos)
        << beyond[0].why;
}

// Two servers that read different questions under the same indexes (one ran
// the sample set, the other GSM8K) are refused, as their answers are.
TEST(ProbeComparisons, DifferentQuestionsUnderOneIndexAreRefused) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(6, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] = series(6, 2, [](int i, int) { return base(i) + 1; });
    for (int q = 0; q < 6; ++q) {
        d.questions[{"a", "raw"}][q] = {"sample", "hash-a-" + std::to_string(q)};
        d.questions[{"b", "raw"}][q] = {"gsm8k", q < 2 ? "hash-a-" + std::to_string(q)
                                                       : "hash-b-" + std::to_string(q)};
    }
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().message,
              "cannot pair the probe of b with a on raw: 4 of 6 questions differ (first: question "
              "2); a ran dataset 'sample' and b ran 'gsm8k'. Compare servers that ran the same "
              "questions");
    EXPECT_FALSE(probe_comparisons(d, "a", "b", std::nullopt, {}));
    // Without hashes (rows missing), the dataset names decide.
    for (int q = 0; q < 6; ++q) {
        d.questions[{"a", "raw"}][q] = {"sample", ""};
        d.questions[{"b", "raw"}][q] = {"sample", ""};
    }
    EXPECT_TRUE(compare_probes(d, "a", "b", "raw"));
}

// A repeat whose reading is only a bound (the marker not among the listed
// alternatives: P(open) at most the smallest listed probability) says
// nothing more about P(open) beside a repeat that measured it: averaged in,
// a bound of 1e-4 beside a measured 0.5 moved the side's mean logit by 4.6.
TEST(ProbeDirection, ABoundBesideAMeasuredRepeatIsLeftOut) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(10, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] = series(10, 2, [](int i, int) { return base(i) + 0.25; });
    // B's second repeat of question 3 listed no marker: only a bound.
    d.series[{"b", "raw"}][3][1] = ProbeValue{1e-4, true};
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->direction.questions, 10);
    EXPECT_NEAR(c->direction.mean_shift, 0.25, 1e-9);
    EXPECT_NEAR(c->direction.lo, 0.25, 1e-9);
    const auto point = std::find_if(c->points.begin(), c->points.end(),
                                    [](const auto& p) { return p.question_idx == 3; });
    ASSERT_NE(point, c->points.end());
    EXPECT_NEAR(point->p_b, sigmoid(base(3) + 0.25), 1e-12);
}

// A shift that rounds to 0 at three decimals: "-0.000" carried a sign the
// value printed beside it denies. It is printed with the decimals its sign
// needs, or as 0.000 when it is 0, in the line diff and the reports print
// and in the gate's.
TEST(ProbeDirection, AShiftThatRoundsToZeroIsNotPrintedAsMinusZero) {
    ProbeData d;
    d.series[{"a", "raw"}] = series(8, 2, [](int i, int) { return base(i); });
    d.series[{"b", "raw"}] = series(8, 2, [](int i, int) { return base(i) - 0.0002; });
    auto c = compare_probes(d, "a", "b", "raw");
    ASSERT_TRUE(c) << c.error().message;
    auto line = probe_line(*c);
    EXPECT_NE(line.find("logit shift -0.0002 [-0.0002, -0.0002]"), std::string::npos) << line;
    auto checks = shift_checks(d, 0.2);
    ASSERT_EQ(checks.size(), 1U);
    EXPECT_NE(checks[0].measured_text.find("logit shift -0.0002 (95% CI [-0.0002, -0.0002]"),
              std::string::npos)
        << checks[0].measured_text;
    d.series[{"b", "raw"}] = d.series[{"a", "raw"}];
    c = compare_probes(d, "a", "b", "raw");
    ASSERT_TRUE(c) << c.error().message;
    line = probe_line(*c);
    EXPECT_NE(line.find("logit shift 0.000 [0.000, 0.000]"), std::string::npos) << line;
    EXPECT_EQ(line.find("-0.000"), std::string::npos) << line;
    EXPECT_EQ(logits_text(-1e-12), "0.000");
    EXPECT_EQ(logits_text(0.0004), "+0.0004");
    EXPECT_EQ(logits_text(-0.489), "-0.489");
}
