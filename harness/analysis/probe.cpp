// The decision-point probe's analysis; see probe.hpp. Every random draw comes
// from a seeded Rng, so a printed interval or p-value can be recomputed.
#include <harness/analysis/probe.hpp>

#include <harness/analysis/questions.hpp>
#include <harness/analysis/rng.hpp>
#include <harness/analysis/stats.hpp>
#include <harness/probe/reading.hpp>
#include <harness/store/readers.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <future>
#include <numeric>

namespace diffeval::analysis {

using util::ErrorKind;
using util::make_error;

namespace {

// Logits closer than this are the same number printed twice: engines print
// log-probabilities with 6 to 9 significant digits.
constexpr double k_same_logit = 1e-6;
// Sign patterns enumerated exactly up to this many questions.
constexpr size_t k_exact_sign_flip = 20;
// Power calculations: two-sided alpha 0.05 at 80% power.
constexpr double k_power_alpha = 0.05;
constexpr double k_power = 0.8;

double mean(const std::vector<double>& v) {
    return v.empty() ? 0.0
                     : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Two-sided sign-flip p-value of mean(`d`) = 0.
double sign_flip_p(const std::vector<double>& d, const ProbeOptions& o, bool& exact) {
    const double observed = std::abs(std::accumulate(d.begin(), d.end(), 0.0));
    const double tolerance = 1e-12 * (1.0 + observed);
    const size_t n = d.size();
    if (n == 0) {
        exact = true;
        return 1.0;
    }
    if (n <= k_exact_sign_flip) {
        exact = true;
        uint64_t extreme = 0;
        const uint64_t patterns = uint64_t{1} << n;
        for (uint64_t m = 0; m < patterns; ++m) {
            double s = 0;
            for (size_t i = 0; i < n; ++i) {
                s += ((m >> i) & 1U) ? -d[i] : d[i];
            }
            extreme += std::abs(s) >= observed - tolerance;
        }
        return static_cast<double>(extreme) / static_cast<double>(patterns);
    }
    exact = false;
    Rng rng(o.seed);
    uint64_t extreme = 0;
    // Resample r takes the next ceil(n / 64) words of the generator, a bit
    // a question, and adds the signed values in question order. Four
    // resamples are summed side by side, each in that same order, so every
    // sum is the same double as one resample at a time would give; the
    // four chains of additions overlap instead of waiting on each other.
    constexpr uint32_t k_lanes = 4;
    const size_t words = (n + 63) / 64;
    std::vector<uint64_t> bits(k_lanes * words);
    for (uint32_t r = 0; r < o.resamples; r += k_lanes) {
        const uint32_t lanes = std::min(k_lanes, o.resamples - r);
        for (uint32_t k = 0; k < lanes; ++k) {
            for (size_t w = 0; w < words; ++w) {
                bits[k * words + w] = rng.next();
            }
        }
        // A set bit negates: its value's sign bit flipped, which is what
        // unary minus does to a double, without a branch on a random bit
        // (half of them mispredicted).
        std::array<double, k_lanes> s{};
        for (size_t j = 0; j < n; ++j) {
            const size_t w = j / 64;
            const unsigned shift = j % 64;
            const auto value = std::bit_cast<uint64_t>(d[j]);
            for (uint32_t k = 0; k < k_lanes; ++k) {
                const uint64_t sign = ((bits[k * words + w] >> shift) & 1U) << 63;
                s[k] += std::bit_cast<double>(value ^ sign);
            }
        }
        for (uint32_t k = 0; k < lanes; ++k) {
            extreme += std::abs(s[k]) >= observed - tolerance;
        }
    }
    return static_cast<double>(extreme + 1) / static_cast<double>(o.resamples + 1);
}

// One-sided sign test: P(X >= pos) for X ~ Binomial(pos + neg, 1/2). Not
// through std::lgamma: the report compares probes on two threads, and glibc's
// lgamma writes the global `signgam` (ThreadSanitizer reported the race).
double sign_test_p(int64_t pos, int64_t neg) {
    return binomial_half_at_least(static_cast<std::uint64_t>(pos),
                                  static_cast<std::uint64_t>(pos + neg));
}

std::optional<int64_t> at_least_min(double n) {
    if (!std::isfinite(n)) {
        return std::nullopt;
    }
    // Held where plan holds its counts, below what an int64_t holds.
    const double needed = std::min(std::ceil(n - 1e-9), static_cast<double>(k_questions_cap));
    return std::max(k_probe_min_questions, static_cast<int64_t>(needed));
}

// Mean logit and mean probability of the readings in `values`, and whether
// every one of them is only a bound; nullopt when none was read. A bound is
// no reading of P(open), only a limit on it: beside a measured repeat it is
// left out, as averaging it in would pull the mean towards the limit.
struct Side {
    double logit = 0;
    double p = 0;
    bool bounded = true;
};
std::optional<Side> side_of(const std::vector<std::optional<ProbeValue>>& values) {
    Side s;
    const bool measured =
        std::any_of(values.begin(), values.end(), [](const auto& v) { return v && !v->bounded; });
    int n = 0;
    for (const auto& v : values) {
        if (!v || (measured && v->bounded)) {
            continue;
        }
        s.logit += probe::logit(v->p_open);
        s.p += v->p_open;
        s.bounded = s.bounded && v->bounded;
        ++n;
    }
    if (n == 0) {
        return std::nullopt;
    }
    s.logit /= n;
    s.p /= n;
    return s;
}

const std::optional<ProbeValue>* repeat_of(const std::vector<std::optional<ProbeValue>>& values,
                                           size_t r) {
    return r < values.size() && values[r] && !values[r]->bounded ? &values[r] : nullptr;
}

} // namespace

util::Result<ProbeData> load_probes(store::Store& st) {
    auto readings = store::probe_readings(st);
    if (!readings) {
        return readings.error();
    }
    ProbeData data;
    for (const auto& r : *readings) {
        data.probe = r.probe;
        auto& reps = data.series[{r.server, r.framing}][r.question_idx];
        const auto k = static_cast<size_t>(r.repeat);
        if (reps.size() <= k) {
            reps.resize(k + 1);
        }
        reps[k] = ProbeValue{r.p_open, r.bounded};
        data.questions[{r.server, r.framing}][r.question_idx] = {r.dataset, r.question_sha256};
    }
    auto none = store::probes_without_logprobs(st);
    if (!none) {
        return none.error();
    }
    for (const auto& [server, n] : *none) {
        data.without_logprobs[server] = n;
    }
    auto unanswered = store::probes_unanswered(st);
    if (!unanswered) {
        return unanswered.error();
    }
    for (const auto& [server, n] : *unanswered) {
        data.unanswered[server] = n;
    }
    return data;
}

namespace {

// The direction: per question, the mean logit of B minus that of A, its
// bootstrap interval, sign-flip p-value and the questions it needs.
void measure_direction(const ProbeSeries& sa_series, const ProbeSeries& sb_series,
                       const ProbeOptions& options, ProbeComparison& c) {
    std::vector<double> shifts;
    for (const auto& [question, a_values] : sa_series) {
        auto jb = sb_series.find(question);
        if (jb == sb_series.end()) {
            continue;
        }
        auto sa = side_of(a_values);
        auto sb = side_of(jb->second);
        if (!sa || !sb) {
            continue;
        }
        if (sa->bounded && sb->bounded) {
            ++c.both_bounded;
            continue;
        }
        // A bound (an upper limit) beside a reading says which side is lower
        // only when it lies below that reading, and then the shift is at
        // least as large as at the bound: it enters there. At or above the
        // reading it says nothing (a server listing 5 alternatives where
        // another lists 20 read as opening more often, probe audit D2).
        if (sa->bounded != sb->bounded) {
            const Side& bound = sa->bounded ? *sa : *sb;
            const Side& read = sa->bounded ? *sb : *sa;
            if (bound.logit >= read.logit) {
                ++c.bound_above;
                continue;
            }
            ++c.bound_entered;
        }
        shifts.push_back(sb->logit - sa->logit);
        c.points.push_back({question, sa->p, sb->p, 0});
    }
    auto& d = c.direction;
    d.questions = static_cast<int64_t>(shifts.size());
    d.mean_shift = mean(shifts);
    if (shifts.size() > 1) {
        double ss = 0;
        for (double x : shifts) {
            ss += (x - d.mean_shift) * (x - d.mean_shift);
        }
        d.sd = std::sqrt(ss / static_cast<double>(shifts.size() - 1));
    }
    if (!shifts.empty()) {
        Rng rng(options.seed);
        std::vector<double> means(options.resamples);
        const auto n = static_cast<uint32_t>(shifts.size());
        // Resample r draws the next n indices and adds in draw order. Four
        // are summed side by side, each in its own order, so every mean is
        // the same double as one resample at a time gives.
        constexpr uint32_t k_lanes = 4;
        std::vector<uint32_t> picks(static_cast<size_t>(k_lanes) * n);
        for (uint32_t r = 0; r < options.resamples; r += k_lanes) {
            const uint32_t lanes = std::min(k_lanes, options.resamples - r);
            for (uint32_t k = 0; k < lanes; ++k) {
                for (uint32_t i = 0; i < n; ++i) {
                    picks[static_cast<size_t>(k) * n + i] = rng.below(n);
                }
            }
            std::array<double, k_lanes> s{};
            for (uint32_t i = 0; i < n; ++i) {
                for (uint32_t k = 0; k < k_lanes; ++k) {
                    s[k] += shifts[picks[static_cast<size_t>(k) * n + i]];
                }
            }
            for (uint32_t k = 0; k < lanes; ++k) {
                means[r + k] = s[k] / n;
            }
        }
        d.lo = percentile(means, 2.5);
        d.hi = percentile(std::move(means), 97.5);
    }
    d.p_value = sign_flip_p(shifts, options, d.exact);
    if (!d.exact) {
        d.resamples = options.resamples;
        d.p_at_floor = d.p_value * (static_cast<double>(options.resamples) + 1) < 1.5;
    }
    if (std::abs(d.mean_shift) > k_same_logit) {
        const double z = normal_quantile(1 - k_power_alpha / 2) + normal_quantile(k_power);
        d.questions_needed = at_least_min(std::pow(z * d.sd / std::abs(d.mean_shift), 2));
    }
}

// The perturbation: |B - A| against |A' - A| on the first two repeats,
// question by question, until a one-sided sign test shows it; unset when
// A has fewer than two repeats.
std::optional<ProbePerturbation> measure_perturbation(const ProbeSeries& sa_series,
                                                      const ProbeSeries& sb_series,
                                                      const ProbeOptions& options, bool& a_repeats,
                                                      bool& a_bounded_repeats) {
    ProbePerturbation pert;
    int64_t pos = 0, neg = 0;
    double sum_ab = 0, sum_aa = 0;
    a_repeats = false;
    a_bounded_repeats = false;
    for (const auto& [question, a_values] : sa_series) {
        auto jb = sb_series.find(question);
        if (jb == sb_series.end()) {
            continue;
        }
        const auto* a0 = repeat_of(a_values, 0);
        const auto* a1 = repeat_of(a_values, 1);
        const auto* b0 = repeat_of(jb->second, 0);
        a_repeats = a_repeats || (a0 && a1);
        a_bounded_repeats =
            a_bounded_repeats || (a_values.size() > 1 && a_values[0] && a_values[1]);
        if (!a0 || !a1 || !b0) {
            continue;
        }
        const double la = probe::logit((*a0)->p_open);
        const double ab = std::abs(probe::logit((*b0)->p_open) - la);
        const double aa = std::abs(probe::logit((*a1)->p_open) - la);
        ++pert.questions;
        sum_ab += ab;
        sum_aa += aa;
        pos += ab - aa > k_same_logit;
        neg += aa - ab > k_same_logit;
        if (!pert.questions_to_differ && sign_test_p(pos, neg) < options.alpha) {
            pert.questions_to_differ = pert.questions;
        }
    }
    if (pert.questions == 0) {
        return std::nullopt;
    }
    pert.mean_abs_ab = sum_ab / static_cast<double>(pert.questions);
    pert.mean_abs_aa = sum_aa / static_cast<double>(pert.questions);
    pert.p_value = sign_test_p(pos, neg);
    pert.differ = pert.p_value < options.alpha;
    pert.moved_more = pos;
    pert.moved_less = neg;
    pert.alpha = options.alpha;
    pert.questions_to_tell = 1;
    while (sign_test_p(pert.questions_to_tell, 0) >= options.alpha) {
        ++pert.questions_to_tell;
    }
    if (!pert.differ) {
        pert.questions_to_differ.reset();
    }
    return pert;
}

} // namespace

namespace {

// Whether `a` and `b` read the same question at every index both read on
// `framing`: by content hash where both have one, else by dataset name, as
// the accuracy comparison pairs questions (docs/statistics.md).
util::Result<void> check_same_questions(const ProbeData& data, const std::string& a,
                                        const std::string& b, const std::string& framing) {
    auto ia = data.questions.find({a, framing});
    auto ib = data.questions.find({b, framing});
    if (ia == data.questions.end() || ib == data.questions.end()) {
        return {};
    }
    int64_t paired = 0;
    int64_t differing = 0;
    const std::pair<std::string, std::string>* first_a = nullptr;
    const std::pair<std::string, std::string>* first_b = nullptr;
    int first = 0;
    for (const auto& [q, qa] : ia->second) {
        auto jb = ib->second.find(q);
        if (jb == ib->second.end()) {
            continue;
        }
        const auto& qb = jb->second;
        ++paired;
        const bool same = !qa.second.empty() && !qb.second.empty() ? qa.second == qb.second
                                                                   : qa.first == qb.first;
        if (!same && differing++ == 0) {
            first = q;
            first_a = &qa;
            first_b = &qb;
        }
    }
    if (differing == 0) {
        return {};
    }
    return make_error(ErrorKind::data,
                      fmt::format("cannot pair the probe of {} with {} on {}: {} of {} {} (first: "
                                  "question {}); {} ran dataset '{}' and {} ran '{}'. Compare "
                                  "servers that ran the same questions",
                                  b, a, framing, differing, util::counted(paired, "question"),
                                  differing == 1 ? "differs" : "differ", first, a, first_a->first,
                                  b, first_b->first));
}

} // namespace

util::Result<ProbeComparison> compare_probes(const ProbeData& data, const std::string& a,
                                             const std::string& b, const std::string& framing,
                                             const ProbeOptions& options) {
    auto ia = data.series.find({a, framing});
    auto ib = data.series.find({b, framing});
    if (ia == data.series.end() || ib == data.series.end()) {
        return make_error(ErrorKind::data, fmt::format("no probe readings for {} on framing {}",
                                                       ia == data.series.end() ? a : b, framing));
    }
    if (auto r = check_same_questions(data, a, b, framing); !r) {
        return r.error();
    }
    ProbeComparison c;
    c.probe = data.probe;
    c.a = a;
    c.b = b;
    c.framing = framing;
    measure_direction(ia->second, ib->second, options, c);
    c.perturbation =
        measure_perturbation(ia->second, ib->second, options, c.a_repeats, c.a_bounded_repeats);
    return c;
}

void attach_accuracy(ProbeComparison& probe, const Comparison& accuracy) {
    ProbeAccuracy acc;
    acc.scorer = accuracy.scorer;
    acc.max_tokens = accuracy.a.max_tokens.value_or(0);
    acc.diff = accuracy.accuracy_b - accuracy.accuracy_a;
    acc.shown_diff = shown_diff(accuracy.accuracy_a, accuracy.accuracy_b);
    // The question is the unit: the share of questions whose accuracy differs.
    acc.discordant_rate =
        accuracy.stats.questions > 0
            ? static_cast<double>(accuracy.stats.a_better + accuracy.stats.b_better) /
                  static_cast<double>(accuracy.stats.questions)
            : 0.0;
    // As `plan` and the verdict's detectable difference count them: the
    // run's own per-question variance at its repeats.
    if (const auto n = questions_needed(accuracy.stats, std::abs(acc.diff), k_power_alpha, k_power);
        n > 0) {
        acc.questions_needed = static_cast<int64_t>(n);
    }
    probe.accuracy = acc;
    std::map<int, int> flipped;
    for (const auto& f : accuracy.a_better) {
        flipped[f.question_idx] = -1;
    }
    for (const auto& f : accuracy.b_better) {
        flipped[f.question_idx] = 1;
    }
    for (auto& p : probe.points) {
        if (auto it = flipped.find(p.question_idx); it != flipped.end()) {
            p.flipped = it->second;
        }
    }
}

util::Result<std::vector<ProbeComparison>>
probe_comparisons(const ProbeData& data, const std::string& a, const std::string& b,
                  const std::optional<std::string>& framing,
                  const std::vector<Comparison>& accuracy, const ProbeOptions& options) {
    return probe_comparisons(data, {{a, b}}, framing, accuracy, options);
}

util::Result<std::vector<ProbeComparison>>
probe_comparisons(const ProbeData& data, const std::vector<ServerPair>& pairs,
                  const std::optional<std::string>& framing,
                  const std::vector<Comparison>& accuracy, const ProbeOptions& options) {
    struct Job {
        const ServerPair* pair;
        std::string framing;
    };
    std::vector<Job> jobs;
    for (const auto& pair : pairs) {
        for (const auto& [key, series] : data.series) {
            const auto& [server, f] = key;
            if (server == pair.first && (!framing || *framing == f) &&
                data.series.count({pair.second, f})) {
                jobs.push_back({&pair, f});
            }
        }
    }
    // Each comparison is independent and seeded alike, so the machine's
    // second core takes every other one (10,000 bootstrap resamples and
    // sign-flips of every question each); the results are the same as one
    // after the other.
    std::vector<util::Result<ProbeComparison>> done(jobs.size(), ProbeComparison{});
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t i = next++; i < jobs.size(); i = next++) {
            done[i] = compare_probes(data, jobs[i].pair->first, jobs[i].pair->second,
                                     jobs[i].framing, options);
        }
    };
    std::future<void> other;
    if (jobs.size() > 1) {
        other = std::async(std::launch::async, work);
    }
    work();
    if (other.valid()) {
        other.get();
    }
    std::vector<ProbeComparison> out;
    for (auto& c : done) {
        if (!c) {
            return c.error();
        }
        out.push_back(std::move(*c));
    }
    attach_accuracies(out, accuracy);
    return out;
}

void attach_accuracies(std::vector<ProbeComparison>& probes,
                       const std::vector<Comparison>& accuracy) {
    for (auto& probe : probes) {
        for (const auto& acc : accuracy) {
            if (acc.a.server == probe.a && acc.b.server == probe.b &&
                acc.a.framing == probe.framing) {
                attach_accuracy(probe, acc);
                break;
            }
        }
    }
}

std::string unanswered_words(int64_t n) {
    return fmt::format("{} {} no successful response (failed, as probe_responses.error says, or "
                       "no response stored); run the same command again to send {}",
                       util::counted(n, "probe request"), n == 1 ? "has" : "have",
                       n == 1 ? "it" : "them");
}

bool has_readings(const ProbeData& data, const std::string& server) {
    return std::any_of(data.series.begin(), data.series.end(),
                       [&](const auto& kv) { return kv.first.first == server; });
}

std::vector<std::string> probe_skipped_notes(const ProbeData& data,
                                             const std::vector<std::string>& servers) {
    std::vector<std::string> out;
    for (const auto& s : servers) {
        // A server measured on its other probes is compared: saying the
        // probe was skipped for it would contradict its comparison's line.
        const bool measured = has_readings(data, s);
        if (auto it = data.without_logprobs.find(s); it != data.without_logprobs.end()) {
            out.push_back(measured ? fmt::format("probe readings of {} left out: {} carried no "
                                                 "usable log-probabilities",
                                                 s, util::counted(it->second, "probe response"))
                                   : fmt::format("probe skipped for {}: its engine returned no "
                                                 "usable log-probabilities ({} probe responses)",
                                                 s, it->second));
        }
        if (auto it = data.unanswered.find(s); it != data.unanswered.end()) {
            out.push_back(fmt::format(
                "{} {}: {}", measured ? "probe readings missing for" : "probe not measured for", s,
                unanswered_words(it->second)));
        }
    }
    return out;
}

std::string logits_text(double v) {
    for (int digits = 3; digits <= 6; ++digits) {
        auto text = fmt::format("{:+.{}f}", v, digits);
        if (text.find_first_of("123456789") != std::string::npos) {
            return text;
        }
    }
    return "0.000";
}

std::string left_out_text(const ProbeComparison& c) {
    std::vector<std::string> parts;
    if (c.both_bounded > 0 || c.bound_above == 0) {
        parts.push_back(fmt::format("{} {} no marker on either side",
                                    util::counted(c.both_bounded, "question"),
                                    c.both_bounded == 1 ? "lists" : "list"));
    }
    if (c.bound_above > 0) {
        parts.push_back(fmt::format("{} {} only a bound on one side at or above the other's "
                                    "reading, which tells no direction",
                                    util::counted(c.bound_above, "question"),
                                    c.bound_above == 1 ? "has" : "have"));
    }
    return fmt::format("{}", fmt::join(parts, "; "));
}

std::string at_bound_text(const ProbeComparison& c) {
    if (c.bound_entered == 0) {
        return {};
    }
    // A shift printed as measured beside a 95% CI, where one side was only
    // bounded on every question (an outside audit): a lower limit, said so.
    return fmt::format(" ({} of {} {} at one side's bound, not a reading, where the shift is at "
                       "least as large: the shift may be farther from 0 than this)",
                       c.bound_entered, util::counted(c.direction.questions, "question"),
                       c.bound_entered == 1 ? "enters" : "enter");
}

std::string no_spread_reason(const ProbeComparison& c) {
    // Two repeats, each a bound: "one probe reading per question" read as
    // a count of repeats (an outside audit).
    if (!c.a_repeats && c.a_bounded_repeats) {
        return fmt::format("{}'s repeats are bounds, not readings (it lists no marker), so it "
                           "has no two readings of a question to compare",
                           c.a);
    }
    return c.a_repeats ? fmt::format("{}'s readings of the questions {} read twice are bounds "
                                     "or missing",
                                     c.b, c.a)
                       : fmt::format("{} has one probe reading per question", c.a);
}

std::string probe_line(const ProbeComparison& c) {
    const auto& d = c.direction;
    if (d.questions == 0) {
        return fmt::format("probe {} on {}: {} vs {}: not measurable ({})", c.probe, c.framing, c.b,
                           c.a, left_out_text(c));
    }
    std::string needed = d.questions_needed ? fmt::format("{}", *d.questions_needed) : "-";
    std::string acc;
    if (c.accuracy) {
        acc = fmt::format(" (accuracy {} points at {} tokens: {})",
                          signed_points(c.accuracy->shown_diff), c.accuracy->max_tokens,
                          c.accuracy->questions_needed
                              ? fmt::format("{}", *c.accuracy->questions_needed)
                              : std::string("not reachable"));
    }
    const std::string numerics =
        c.perturbation ? numerics_text(*c.perturbation)
                       : fmt::format("numerics: no A/A spread ({})", no_spread_reason(c));
    const std::string left_out =
        c.both_bounded + c.bound_above > 0
            ? fmt::format(" ({} left out: {})",
                          util::counted(c.both_bounded + c.bound_above, "question"),
                          left_out_text(c))
            : std::string();
    // Below k_probe_min_questions no two-sided sign-flip test reaches 0.05,
    // and a bootstrap over so few covers far less than 95% (about 84% on 5,
    // a statistics audit): the interval, tight and far from 0 beside p
    // 0.062, is said to bound nothing, as the probe gate says "cannot tell".
    const std::string too_few =
        d.questions < k_probe_min_questions
            ? fmt::format(" (too few questions for the interval to bound the shift, or for the "
                          "sign-flip test to reach p < 0.05: that takes {})",
                          k_probe_min_questions)
            : std::string();
    return fmt::format("probe {} on {}: {} vs {}: P(open) logit shift {} [{}, {}] "
                       "over {}{}{}{}, sign-flip p {}; questions needed at 80% power {}{}; {}",
                       c.probe, c.framing, c.b, c.a, logits_text(d.mean_shift), logits_text(d.lo),
                       logits_text(d.hi), util::counted(d.questions, "question"), too_few, left_out,
                       at_bound_text(c), probe_p_text(d), needed, acc, numerics);
}

std::string numerics_text(const ProbePerturbation& p) {
    const auto means =
        fmt::format("mean |delta| {:.3f} against A/A {:.3f}", p.mean_abs_ab, p.mean_abs_aa);
    if (p.differ) {
        return fmt::format("numerics differ after {} ({})",
                           util::counted(p.questions_to_differ.value_or(p.questions), "question"),
                           means);
    }
    if (p.moved_more == 0) {
        return fmt::format("numerics within the A/A spread over {} ({})",
                           util::counted(p.questions, "question"), means);
    }
    const auto moved = fmt::format("{} of {} moved beyond the A/A spread, {} less", p.moved_more,
                                   util::counted(p.questions, "question"), p.moved_less);
    if (p.too_few()) {
        return fmt::format("numerics cannot be told from the A/A spread: {} ({}), and a sign test "
                           "needs {} to reach p < {:g}",
                           moved, means, util::counted(p.questions_to_tell, "question"), p.alpha);
    }
    return fmt::format("numerics not shown to differ: {} ({}, one-sided sign test p {})", moved,
                       means, util::p_text(p.p_value, 2));
}

std::string probe_p_text(const ProbeDirection& d) {
    if (d.p_at_floor) {
        return fmt::format("{} (the floor: none of {} as extreme)", util::p_text(d.p_value, 2),
                           util::counted(d.resamples, "sign flip"));
    }
    return util::p_text(d.p_value, 2);
}

nlohmann::json to_json(const ProbeComparison& c) {
    auto opt = [](const std::optional<int64_t>& v) {
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    };
    const auto& d = c.direction;
    nlohmann::json j = {{"probe", c.probe},
                        {"a", c.a},
                        {"b", c.b},
                        {"framing", c.framing},
                        {"both_bounded", c.both_bounded},
                        {"bound_above", c.bound_above},
                        {"bound_entered", c.bound_entered},
                        {"direction",
                         {{"questions", d.questions},
                          {"mean_logit_shift", d.mean_shift},
                          {"ci", {d.lo, d.hi}},
                          {"p_value", d.p_value},
                          {"p_exact", d.exact},
                          {"sd", d.sd},
                          {"questions_needed", opt(d.questions_needed)}}},
                        {"perturbation", nullptr},
                        {"accuracy", nullptr},
                        {"line", probe_line(c)}};
    if (d.questions == 0) {
        // Nothing measured: no shift, interval or p-value, as a value
        // nothing measured is null everywhere else (probe audit D10).
        for (const char* key : {"mean_logit_shift", "ci", "p_value", "p_exact", "sd"}) {
            j["direction"][key] = nullptr;
        }
    }
    if (c.perturbation) {
        const auto& p = *c.perturbation;
        j["perturbation"] = {{"questions", p.questions},
                             {"mean_abs_delta", p.mean_abs_ab},
                             {"mean_abs_delta_aa", p.mean_abs_aa},
                             {"p_value", p.p_value},
                             {"numerics_differ", p.differ},
                             {"questions_to_differ", opt(p.questions_to_differ)}};
    }
    if (c.accuracy) {
        const auto& a = *c.accuracy;
        j["accuracy"] = {{"scorer", a.scorer},
                         {"max_tokens", a.max_tokens},
                         {"diff", a.diff},
                         {"discordant_rate", a.discordant_rate},
                         {"questions_needed", opt(a.questions_needed)}};
    }
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : c.points) {
        points.push_back({p.question_idx, p.p_a, p.p_b, p.flipped});
    }
    j["points"] = points;
    return j;
}

} // namespace diffeval::analysis
