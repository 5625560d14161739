// Paired comparisons; see compare.hpp.
//
// Pairing: a question is compared when both groups answered it. The unit of
// analysis is the question (questions.hpp): each side's repeats of it are
// averaged, and repeats are never paired by their number. The transition
// matrix, which says where answers went, counts every repeat of A against
// every repeat of B on the same question.
#include <harness/analysis/compare.hpp>
#include <harness/analysis/rng.hpp>
#include <harness/analysis/summary.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>
#include <tuple>

namespace diffeval::analysis {

using util::ErrorKind;
using util::make_error;

std::string Selector::text() const {
    std::string s = server;
    if (framing) {
        s += "/" + *framing;
        if (max_tokens) {
            s += "/" + std::to_string(*max_tokens);
        }
    }
    return s;
}

util::Result<Selector> parse_selector(const std::string& text) {
    Selector s;
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
        auto slash = text.find('/', start);
        parts.push_back(
            text.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
        if (slash == std::string::npos) {
            break;
        }
        start = slash + 1;
    }
    if (parts.size() > 3 || parts[0].empty() ||
        std::any_of(parts.begin(), parts.end(), [](const auto& p) { return p.empty(); })) {
        return make_error(ErrorKind::usage,
                          fmt::format("'{}' is not a group: write SERVER, SERVER/FRAMING or "
                                      "SERVER/FRAMING/MAX_TOKENS",
                                      text));
    }
    s.server = parts[0];
    if (parts.size() > 1) {
        s.framing = parts[1];
    }
    if (parts.size() > 2) {
        try {
            size_t used = 0;
            s.max_tokens = std::stoi(parts[2], &used);
            if (used != parts[2].size()) {
                throw std::invalid_argument(parts[2]);
            }
        } catch (const std::out_of_range&) {
            // A number, too large for any token limit a run stores.
            return make_error(ErrorKind::usage,
                              fmt::format("'{}': max_tokens {} is larger than any token limit a "
                                          "run stores",
                                          text, parts[2]));
        } catch (const std::exception&) {
            return make_error(ErrorKind::usage,
                              fmt::format("'{}': max_tokens must be a number", text));
        }
    }
    return s;
}

namespace {

using GroupKey = std::tuple<int, int, int>; // server, framing, max_tokens

// A group's rows sorted by question, then repeat; one per (question, repeat):
// the newest response when a request was sent again under another body.
struct GroupRows {
    std::vector<const ResultRow*> rows;

    void finish() {
        std::sort(rows.begin(), rows.end(), [](const ResultRow* x, const ResultRow* y) {
            return std::tie(x->question_idx, x->repeat, x->response_id) <
                   std::tie(y->question_idx, y->repeat, y->response_id);
        });
        // Keep the last of each (question, repeat).
        std::vector<const ResultRow*> kept;
        kept.reserve(rows.size());
        for (size_t i = 0; i < rows.size(); ++i) {
            if (i + 1 < rows.size() && rows[i + 1]->question_idx == rows[i]->question_idx &&
                rows[i + 1]->repeat == rows[i]->repeat) {
                continue;
            }
            kept.push_back(rows[i]);
        }
        rows = std::move(kept);
    }

    // How many questions the rows are of (after finish()).
    int64_t questions() const;

    // The rows of requests that have a response stored, failed or not.
    GroupRows sent() const {
        GroupRows g;
        g.rows.reserve(rows.size());
        std::copy_if(rows.begin(), rows.end(), std::back_inserter(g.rows),
                     [](const ResultRow* r) { return r->response_id != 0; });
        return g;
    }

    // The rows of requests that have a successful response: without the
    // failed ones and the planned ones never sent (response_id 0), which
    // say nothing of what the server's model answers.
    GroupRows answered() const {
        GroupRows g;
        g.rows.reserve(rows.size());
        std::copy_if(rows.begin(), rows.end(), std::back_inserter(g.rows),
                     [](const ResultRow* r) { return r->ok; });
        return g;
    }
};

// The rows of one question in a group: [begin, end) of GroupRows::rows.
using Run = std::span<const ResultRow* const>;

// The end of the run of rows sharing rows[from]'s question.
size_t run_end(const std::vector<const ResultRow*>& rows, size_t from) {
    size_t to = from;
    while (to < rows.size() && rows[to]->question_idx == rows[from]->question_idx) {
        ++to;
    }
    return to;
}

int64_t GroupRows::questions() const {
    int64_t n = 0;
    for (size_t i = 0; i < rows.size(); i = run_end(rows, i)) {
        ++n;
    }
    return n;
}

// Whether two responses answered the same question: by content hash when
// both have one (schema v3), else by dataset name.
bool same_question(const ResultRow& a, const ResultRow& b) {
    if (a.question_key != 0 && b.question_key != 0) {
        return a.question_key == b.question_key;
    }
    return a.dataset == b.dataset;
}

// The p99 difference's bootstrap: resamples and seed (the paired
// bootstrap's seed, so a reviewer reruns both the same way).
constexpr std::uint32_t k_tail_resamples = 1000;
constexpr std::uint64_t k_tail_seed = 20250101;

// A side's successful responses, slowest first, each with its question's
// place among the paired questions: `rows` hold the paired questions' runs
// in the same order on both sides (pair_question appends them together).
struct TailSide {
    std::vector<std::pair<double, std::uint32_t>> slowest_first;
    std::vector<std::uint32_t> per_question; // successful responses of each question
};

TailSide tail_side(const std::vector<const ResultRow*>& rows) {
    TailSide side;
    for (size_t i = 0, end = 0; i < rows.size(); i = end) {
        end = run_end(rows, i);
        const auto q = static_cast<std::uint32_t>(side.per_question.size());
        side.per_question.push_back(0);
        for (size_t k = i; k < end; ++k) {
            if (rows[k]->ok && rows[k]->latency_ms) {
                side.slowest_first.emplace_back(*rows[k]->latency_ms, q);
                ++side.per_question[q];
            }
        }
    }
    std::sort(side.slowest_first.begin(), side.slowest_first.end(),
              [](const auto& x, const auto& y) { return x.first > y.first; });
    return side;
}

// The 99th percentile (interpolated as percentile() does) of the resample
// that takes each question `weight[question]` times: counted down from the
// slowest response, so only the top 1% or so is visited.
std::optional<double> resampled_p99(const TailSide& side,
                                    const std::vector<std::uint32_t>& weight) {
    std::uint64_t n = 0;
    for (size_t q = 0; q < weight.size(); ++q) {
        n += std::uint64_t{weight[q]} * side.per_question[q];
    }
    if (n == 0) {
        return std::nullopt;
    }
    const double h = 0.99 * static_cast<double>(n - 1);
    const auto j = static_cast<std::uint64_t>(std::floor(h));
    // Ranks from the top: the value at ascending rank j is at n - 1 - j.
    const std::uint64_t want_low = n - 1 - j;
    const bool has_next = j + 1 < n;
    std::optional<double> low, next;
    std::uint64_t seen = 0; // ranks from the top covered so far
    for (const auto& [latency, q] : side.slowest_first) {
        const std::uint64_t w = weight[q];
        if (w == 0) {
            continue;
        }
        if (has_next && !next && want_low - 1 < seen + w) {
            next = latency;
        }
        if (want_low < seen + w) {
            low = latency;
            break;
        }
        seen += w;
    }
    if (!low) {
        return std::nullopt;
    }
    return has_next ? *low + (h - std::floor(h)) * (*next - *low) : *low;
}

// The 95% interval of p99(B) - p99(A) over the paired questions: each
// resample draws the questions with replacement and keeps all their
// responses on both sides (repeats of a question are not independent).
std::optional<Interval> p99_difference_interval(const std::vector<const ResultRow*>& a,
                                                const std::vector<const ResultRow*>& b) {
    const auto sa = tail_side(a);
    const auto sb = tail_side(b);
    if (sa.per_question.size() != sb.per_question.size()) {
        return std::nullopt; // not paired question by question
    }
    if (sa.slowest_first.size() < k_tail_min_responses ||
        sb.slowest_first.size() < k_tail_min_responses) {
        return std::nullopt;
    }
    std::uint32_t both = 0;
    for (size_t q = 0; q < sa.per_question.size(); ++q) {
        both += sa.per_question[q] > 0 && sb.per_question[q] > 0;
    }
    if (both < 2) {
        return std::nullopt;
    }
    const auto n = static_cast<std::uint32_t>(sa.per_question.size());
    Rng rng(k_tail_seed);
    std::vector<std::uint32_t> weight(n);
    std::vector<double> diffs;
    diffs.reserve(k_tail_resamples);
    for (std::uint32_t r = 0; r < k_tail_resamples; ++r) {
        std::fill(weight.begin(), weight.end(), 0);
        for (std::uint32_t i = 0; i < n; ++i) {
            ++weight[rng.below(n)];
        }
        const auto pa = resampled_p99(sa, weight);
        const auto pb = resampled_p99(sb, weight);
        if (pa && pb) { // a resample of questions one side never answered has no p99
            diffs.push_back(*pb - *pa);
        }
    }
    if (diffs.size() < k_tail_resamples / 2) {
        return std::nullopt;
    }
    return Interval{percentile(diffs, 2.5), percentile(diffs, 97.5)};
}

} // namespace

std::optional<TailDifference> tail_difference(const std::vector<const ResultRow*>& a,
                                              const std::vector<const ResultRow*>& b) {
    auto ok_latencies = [](const std::vector<const ResultRow*>& rows) {
        std::vector<double> v;
        for (const auto* r : rows) {
            if (r->ok && r->latency_ms) {
                v.push_back(*r->latency_ms);
            }
        }
        return v;
    };
    const auto la = ok_latencies(a);
    const auto lb = ok_latencies(b);
    if (la.empty() || lb.empty()) {
        return std::nullopt;
    }
    TailDifference t;
    t.a_responses = static_cast<int64_t>(la.size());
    t.b_responses = static_cast<int64_t>(lb.size());
    t.a_p50_ms = percentile(la, 50);
    t.a_p99_ms = percentile(la, 99);
    t.b_p50_ms = percentile(lb, 50);
    t.b_p99_ms = percentile(lb, 99);
    t.p99_diff_ci = p99_difference_interval(a, b);
    t.p99_resamples = k_tail_resamples;
    t.p99_seed = k_tail_seed;
    // Least squares over A's responses that report their token count.
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto* r : a) {
        if (r->ok && r->completion_tokens && r->latency_ms) {
            const auto x = static_cast<double>(*r->completion_tokens);
            t.a_fit_tokens_min = n == 0 ? *r->completion_tokens
                                        : std::min(t.a_fit_tokens_min, *r->completion_tokens);
            t.a_fit_tokens_max = n == 0 ? *r->completion_tokens
                                        : std::max(t.a_fit_tokens_max, *r->completion_tokens);
            n += 1;
            sx += x;
            sy += *r->latency_ms;
            sxx += x * x;
            sxy += x * *r->latency_ms;
        }
    }
    const double var = n * sxx - sx * sx;
    // Relative guard: identical token counts leave the slope undefined.
    if (n < 2 || var <= 1e-9 * n * sxx) {
        return t;
    }
    TokenAttribution f;
    f.ms_per_token = (n * sxy - sx * sy) / var;
    if (!(f.ms_per_token > 0)) {
        t.tokens_flat = true;
        return t;
    }
    f.intercept_ms = (sy - f.ms_per_token * sx) / n;
    // The predicted p99 is that of B's p99 token count (the fit rises with
    // tokens): far outside A's counts, the fit says nothing of it.
    std::vector<double> b_tokens;
    for (const auto* r : b) {
        if (r->ok && r->completion_tokens) {
            b_tokens.push_back(static_cast<double>(*r->completion_tokens));
        }
    }
    if (!b_tokens.empty()) {
        t.b_p99_tokens = percentile(b_tokens, 99);
        const auto lo = static_cast<double>(t.a_fit_tokens_min) / TailDifference::k_fit_reach;
        const auto hi = static_cast<double>(t.a_fit_tokens_max) * TailDifference::k_fit_reach;
        if (t.b_p99_tokens > hi || t.b_p99_tokens < lo) {
            t.tokens_beyond_fit = true;
            return t;
        }
    }
    auto predicted_p99 = [&](const std::vector<const ResultRow*>& rows) {
        std::vector<double> v;
        for (const auto* r : rows) {
            if (r->ok && r->completion_tokens) {
                v.push_back(f.intercept_ms +
                            f.ms_per_token * static_cast<double>(*r->completion_tokens));
            }
        }
        return v.empty() ? std::optional<double>{} : std::optional<double>{percentile(v, 99)};
    };
    auto pa = predicted_p99(a);
    auto pb = predicted_p99(b);
    if (!pa || !pb) {
        return t;
    }
    f.a_p99_predicted_ms = *pa;
    f.b_p99_predicted_ms = *pb;
    f.explained_ms = *pb - *pa;
    t.from_tokens = f;
    return t;
}

namespace {

int index_in(const std::vector<std::string>& names, const std::string& name) {
    auto it = std::find(names.begin(), names.end(), name);
    return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

// Both selectors name a stored server and, when given, a stored framing.
util::Result<void> check_selectors(const Results& results, const Selector& a, const Selector& b) {
    for (const auto* sel : {&a, &b}) {
        if (index_in(results.servers, sel->server) < 0) {
            return make_error(ErrorKind::usage,
                              fmt::format("no server '{}' in the database; servers: {}",
                                          sel->server, fmt::join(results.servers, ", ")));
        }
        if (sel->framing && index_in(results.framings, *sel->framing) < 0) {
            return make_error(ErrorKind::usage,
                              fmt::format("no framing '{}' in the database; framings: {}",
                                          *sel->framing, fmt::join(results.framings, ", ")));
        }
    }
    // B's framing and token limit default to each A group's own: with the
    // same server and nothing else set apart, every group would be compared
    // with itself (it said "no pair of groups matches").
    const auto same = [](const auto& in_a, const auto& in_b) { return !in_b || in_a == in_b; };
    if (a.server == b.server && same(a.framing, b.framing) && same(a.max_tokens, b.max_tokens)) {
        return make_error(ErrorKind::usage,
                          fmt::format("{} and {} select the same groups, so each would be "
                                      "compared with itself: name another server, framing or "
                                      "token limit for one of them",
                                      a.text(), b.text()));
    }
    return {};
}

// Group `key` as a fully resolved selector.
Selector selector_of(const Results& results, const GroupKey& key) {
    return {results.servers[static_cast<size_t>(std::get<0>(key))],
            results.framings[static_cast<size_t>(std::get<1>(key))], std::get<2>(key)};
}

// The group of server `sb` that group `key` pairs with when `key` is one of
// A's (selector `a`, server `sa`): B's framing and token limit, or A's on
// the dimensions `b` leaves open; nullopt for a group not of A, or one that
// would pair with itself.
std::optional<GroupKey> counterpart(const Results& results, const GroupKey& key, const Selector& a,
                                    const Selector& b, int sa, int sb) {
    const auto [srv, fr, mt] = key;
    if (srv != sa || (a.framing && fr != index_in(results.framings, *a.framing)) ||
        (a.max_tokens && mt != *a.max_tokens)) {
        return std::nullopt;
    }
    GroupKey kb{sb, b.framing ? index_in(results.framings, *b.framing) : fr,
                b.max_tokens ? *b.max_tokens : mt};
    return kb == key ? std::nullopt : std::optional<GroupKey>{kb};
}

// The two sides' questions in common, as correctness matrices, with their
// responses and how many questions' texts differ between the sides.
struct Paired {
    CorrectnessMatrix ma, mb;
    AnsweredCounts answered_a, answered_b; // each question's successful repeats
    std::vector<const ResultRow*> rows_a, rows_b;
    // B's repeats that have a response stored, for its noise: shorter than
    // mb's row where some are unsent.
    CorrectnessMatrix mb_sent;
    int64_t differing = 0;
    int first_differing = -1;
};

// One question's repeats on both sides: its matrix rows, every A repeat
// against every B repeat in the transitions, and its flip if any.
void pair_question(const Run& reps_a, const Run& reps_b, size_t scorer, Comparison& c, Paired& p) {
    const int q = reps_a.front()->question_idx;
    if (!same_question(*reps_a.front(), *reps_b.front())) {
        ++p.differing;
        p.first_differing = p.first_differing < 0 ? q : p.first_differing;
    }
    std::vector<uint8_t> row_a, row_b, row_b_sent;
    for (const auto* row : reps_a) {
        row_a.push_back(row->correct[scorer] ? 1 : 0);
    }
    for (const auto* row : reps_b) {
        row_b.push_back(row->correct[scorer] ? 1 : 0);
        if (row->response_id != 0) {
            row_b_sent.push_back(row_b.back());
        }
    }
    p.rows_a.insert(p.rows_a.end(), reps_a.begin(), reps_a.end());
    p.rows_b.insert(p.rows_b.end(), reps_b.begin(), reps_b.end());
    // Each side's behaviour counts on this question: its shares of answers
    // that started reasoning and (among those whose finish was recorded)
    // never finished, and the mean completion tokens of its answers; each
    // unset when the side has no such answer here.
    struct Question {
        int64_t answered = 0, recorded = 0;
        std::optional<double> reasoning_share, never_share, tokens;
    };
    const auto tally = [](const Run& reps, Comparison::Behaviour& b) {
        Question t;
        double tokens = 0;
        int64_t counted = 0, never_finished = 0, started_reasoning = 0;
        for (const auto* row : reps) {
            ++b.responses;
            b.unsent += row->response_id == 0 ? 1 : 0;
            if (row->ok) {
                ++t.answered;
                never_finished += scorers::never_finished(row->outcome) ? 1 : 0;
                t.recorded += row->outcome != scorers::Outcome::unrecorded ? 1 : 0;
                started_reasoning += row->reasoning_started ? 1 : 0;
                if (row->completion_tokens) {
                    tokens += static_cast<double>(*row->completion_tokens);
                    ++counted;
                }
            }
        }
        b.answered += t.answered;
        b.finish_recorded += t.recorded;
        b.token_counted += counted;
        if (t.answered > 0) {
            t.reasoning_share =
                static_cast<double>(started_reasoning) / static_cast<double>(t.answered);
        }
        if (t.recorded > 0) {
            t.never_share = static_cast<double>(never_finished) / static_cast<double>(t.recorded);
        }
        if (counted > 0) {
            t.tokens = tokens / static_cast<double>(counted);
        }
        return t;
    };
    const auto qa = tally(reps_a, c.behaviour_a);
    const auto qb = tally(reps_b, c.behaviour_b);
    // The rates count only questions where both sides have such an answer:
    // a side that failed on its longest questions, or ran others, would
    // otherwise move its rate without any change in what the model did.
    if (qa.reasoning_share && qb.reasoning_share) {
        c.behaviour_a.started_reasoning.add(qa.answered, *qa.reasoning_share);
        c.behaviour_b.started_reasoning.add(qb.answered, *qb.reasoning_share);
    }
    if (qa.never_share && qb.never_share) {
        c.behaviour_a.never_finished.add(qa.recorded, *qa.never_share);
        c.behaviour_b.never_finished.add(qb.recorded, *qb.never_share);
    }
    if (qa.tokens && qb.tokens) {
        ++c.token_questions;
        c.tokens_a += *qa.tokens;
        c.tokens_b += *qb.tokens;
    }
    for (const auto* ra : reps_a) {
        for (const auto* rb : reps_b) {
            const auto oa = static_cast<size_t>(transition_state(*ra));
            const auto ob = static_cast<size_t>(transition_state(*rb));
            ++c.transitions[oa][ob];
            ++c.paired_responses;
            if (ra->correct[scorer] && !rb->correct[scorer]) {
                ++c.lost[oa][ob];
            } else if (!ra->correct[scorer] && rb->correct[scorer]) {
                ++c.gained[oa][ob];
            }
        }
    }
    const double ca = static_cast<double>(std::count(row_a.begin(), row_a.end(), 1)) /
                      static_cast<double>(row_a.size());
    const double cb = static_cast<double>(std::count(row_b.begin(), row_b.end(), 1)) /
                      static_cast<double>(row_b.size());
    if (ca != cb) {
        Flip f{q, ca, cb, reps_a.front()->response_id, reps_b.front()->response_id, "", ""};
        (ca > cb ? c.a_better : c.b_better).push_back(f);
    }
    p.ma.push_back(std::move(row_a));
    p.mb.push_back(std::move(row_b));
    const auto answered = [](const Run& reps) {
        return static_cast<std::uint32_t>(
            std::count_if(reps.begin(), reps.end(), [](const ResultRow* r) { return r->ok; }));
    };
    p.answered_a.push_back(answered(reps_a));
    p.answered_b.push_back(answered(reps_b));
    p.mb_sent.push_back(std::move(row_b_sent));
}

// The difference over the paired questions without an unsent B request.
Comparison::WithoutUnsent without_unsent(const Paired& p) {
    Comparison::WithoutUnsent w;
    const auto mean = [](const std::vector<uint8_t>& row) {
        return static_cast<double>(std::count(row.begin(), row.end(), 1)) /
               static_cast<double>(row.size());
    };
    double sum = 0;
    for (size_t i = 0; i < p.ma.size(); ++i) {
        if (p.mb_sent[i].size() < p.mb[i].size()) {
            continue; // a B request of it is unsent
        }
        const double d = mean(p.mb[i]) - mean(p.ma[i]);
        sum += d;
        ++w.questions;
        w.a_better += d < 0 ? 1 : 0;
        w.b_better += d > 0 ? 1 : 0;
    }
    w.diff = w.questions > 0 ? sum / static_cast<double>(w.questions) : 0.0;
    return w;
}

// Walk both groups (each sorted by question) together, pairing the
// questions both answered.
Paired pair_groups(const GroupRows& ga, const GroupRows& gb, size_t scorer, Comparison& c) {
    Paired p;
    size_t jb = 0;
    for (size_t ia = 0; ia < ga.rows.size(); ia = run_end(ga.rows, ia)) {
        const int q = ga.rows[ia]->question_idx;
        while (jb < gb.rows.size() && gb.rows[jb]->question_idx < q) {
            jb = run_end(gb.rows, jb);
        }
        if (jb >= gb.rows.size() || gb.rows[jb]->question_idx != q) {
            continue;
        }
        pair_question(Run(ga.rows.data() + ia, run_end(ga.rows, ia) - ia),
                      Run(gb.rows.data() + jb, run_end(gb.rows, jb) - jb), scorer, c, p);
    }
    return p;
}

// The statistics, the latency tail and the flips ordered by their gap.
util::Result<void> finish_comparison(Comparison& c, const Paired& p,
                                     const CompareOptions& options) {
    // B's noise from its repeats that have a response: a repeat a stopped
    // run never sent is no re-run's (audits read "±0.8 points" of noise
    // from one question unsent in a repeat and right in the other).
    auto stats = analyse_questions(p.ma, p.mb, options.paired, p.answered_a, p.answered_b,
                                   c.behaviour_b.unsent > 0 ? &p.mb_sent : nullptr);
    if (!stats) {
        return stats.error();
    }
    c.stats = *stats;
    c.accuracy_a = c.stats.accuracy_a;
    c.accuracy_b = c.stats.accuracy_b;
    c.latency = tail_difference(p.rows_a, p.rows_b);
    auto by_gap = [](const Flip& x, const Flip& y) {
        double gx = std::abs(x.a - x.b), gy = std::abs(y.a - y.b);
        return gx != gy ? gx > gy : x.question_idx < y.question_idx;
    };
    for (auto* list : {&c.a_better, &c.b_better}) {
        std::sort(list->begin(), list->end(), by_gap);
    }
    return {};
}

// Group A's key against group B's: its name, datasets and paired questions.
// Groups that ran different questions are refused; no common question gives
// an unset comparison.
util::Result<std::optional<Comparison>> compare_groups(const Results& results, const GroupKey& ka,
                                                       const GroupRows& ga, const GroupKey& kb,
                                                       const GroupRows& gb, size_t scorer,
                                                       const CompareOptions& options) {
    auto dataset_of = [&](const GroupRows& g) {
        return g.rows.empty() ? std::string()
                              : results.datasets.at(static_cast<size_t>(g.rows.front()->dataset));
    };
    Comparison c;
    c.scorer = results.scorers[scorer];
    c.a = selector_of(results, ka);
    c.b = selector_of(results, kb);
    c.dataset_a = dataset_of(ga);
    c.dataset_b = dataset_of(gb);
    // The baseline's (A's) requests without a successful response (failed,
    // or never sent) are left out of the pairing: counted as its wrong
    // answers, a baseline whose run was killed passed a candidate 13 points
    // worse on the questions both answered as "better" (gate audit), and
    // one whose server died mid-run a candidate 11 points worse as 52
    // points better (the next). The candidate's (B's) still count as wrong:
    // left out, a candidate that ran 3 of 100 questions passed a gate as
    // inconclusive, and the requests a killed run had in flight are its
    // slowest, often its wrong ones. A run that did not answer so makes the
    // candidate look worse, never better. A baseline that answered nothing
    // is paired as it is, where its no-evidence verdict says so.
    GroupRows held_a = ga.answered();
    if (held_a.rows.empty()) {
        held_a = ga;
    } else {
        for (const auto* r : ga.rows) {
            if (!r->ok) {
                ++(r->response_id == 0 ? c.unsent_a : c.failed_a);
            }
        }
    }
    // (A B that sent nothing is paired as it is, whose no-evidence says so.)
    GroupRows sent_b;
    if (options.leave_out_unsent_b) {
        sent_b = gb.sent();
    }
    const GroupRows& held_b = sent_b.rows.empty() ? gb : sent_b;
    if (&held_b == &sent_b) {
        // Those on questions the pairing holds (A's): the others were in it
        // no more than before.
        std::set<int> paired;
        for (const auto* r : held_a.rows) {
            paired.insert(r->question_idx);
        }
        c.unsent_b_left_out = std::count_if(gb.rows.begin(), gb.rows.end(), [&](const auto* r) {
            return r->response_id == 0 && paired.contains(r->question_idx);
        });
    }
    const Paired p = pair_groups(held_a, held_b, scorer, c);
    c.questions = static_cast<int64_t>(p.ma.size());
    if (c.token_questions > 0) {
        c.tokens_a /= static_cast<double>(c.token_questions);
        c.tokens_b /= static_cast<double>(c.token_questions);
    }
    c.questions_a = held_a.questions();
    c.questions_b = held_b.questions();
    if (p.differing > 0) {
        return make_error(
            ErrorKind::other_questions,
            fmt::format("cannot pair {} with {}: {} of {} {} (first: question {}); {} ran "
                        "dataset '{}' and {} ran '{}'",
                        c.b.text(), c.a.text(), p.differing, util::counted(p.ma.size(), "question"),
                        p.differing == 1 ? "differs" : "differ", p.first_differing, c.a.text(),
                        c.dataset_a, c.b.text(), c.dataset_b));
    }
    if (p.ma.empty()) {
        return std::optional<Comparison>{};
    }
    if (auto r = finish_comparison(c, p, options); !r) {
        return r.error();
    }
    if (c.behaviour_b.unsent > 0) {
        c.without_unsent = without_unsent(p);
    }
    return std::optional<Comparison>{std::move(c)};
}

} // namespace

std::string_view transition_state_name(int state) {
    return state == k_unsent_state ? "unsent" : scorers::outcome_name(state);
}

int transition_state(const ResultRow& row) {
    // A request with no response row is unsent, not a server's error.
    return row.response_id == 0 ? k_unsent_state : static_cast<int>(row.outcome);
}

std::string unsent_text(const Comparison& c) {
    // In flight when a run was killed, or never sent: no stored row tells
    // them apart (an audit: "38 never sent" where 3 were sent).
    constexpr std::string_view why = "a run stopped before sending them, or while they were in "
                                     "flight; the command that asked for them sends them";
    std::string out;
    // A's own unsent are paired only when A answered nothing, which is no
    // evidence and says so itself. B's come first: they move the verdict,
    // and an audit's killed A/A pair read "worse, -41.7 points" with the
    // 0.0 points of the questions both answered nowhere.
    if (c.behaviour_b.unsent > 0) {
        out += fmt::format(" {} of {}'s {} here have no response stored ({}), each counted as a "
                           "wrong answer",
                           c.behaviour_b.unsent, c.b.text(),
                           util::counted(c.behaviour_b.responses, "request"), why);
        if (c.without_unsent && c.without_unsent->questions > 0) {
            const auto& w = *c.without_unsent;
            out += fmt::format("; on the {} where it has every response the difference is {} "
                               "points ({} right more often in {}, {} in {})",
                               util::counted(w.questions, "question"), signed_points(w.diff),
                               w.a_better, c.a.text(), w.b_better, c.b.text());
        } else {
            out += "; it has every response on none of the paired questions";
        }
        out += '.';
    }
    if (c.unsent_a + c.failed_a > 0) {
        std::vector<std::string> parts;
        if (c.failed_a > 0) {
            parts.push_back(fmt::format("{} failed", c.failed_a));
        }
        if (c.unsent_a > 0) {
            parts.push_back(fmt::format("{} with no response stored{}", c.unsent_a,
                                        c.behaviour_b.unsent > 0 ? std::string(" (as above)")
                                                                 : fmt::format(" ({})", why)));
        }
        out += fmt::format(" Left out of the pairing, the baseline {}'s requests without a "
                           "successful response: {}.",
                           c.a.text(), fmt::join(parts, ", "));
    }
    return out;
}

std::string unanswered_text(const Comparison& c) {
    std::vector<std::string> sides;
    for (const auto& [name, side] :
         {std::pair{c.a.text(), &c.behaviour_a}, std::pair{c.b.text(), &c.behaviour_b}}) {
        if (const auto failed = side->responses - side->answered - side->unsent; failed > 0) {
            sides.push_back(fmt::format("{} of {}'s {} here", failed, name,
                                        util::counted(side->responses, "request")));
        }
    }
    return fmt::format("{}", fmt::join(sides, "; "));
}

util::Result<std::vector<Comparison>> compare(const Results& results, const Selector& a,
                                              const Selector& b, size_t scorer,
                                              const CompareOptions& options) {
    if (auto r = check_selectors(results, a, b); !r) {
        return r.error();
    }
    const int sa = index_in(results.servers, a.server);
    const int sb = index_in(results.servers, b.server);
    // Only the two servers compared are grouped.
    std::map<GroupKey, GroupRows> groups;
    for (const auto& r : results.rows) {
        if (r.server == sa || r.server == sb) {
            groups[{r.server, r.framing, r.max_tokens}].rows.push_back(&r);
        }
    }
    for (auto& [key, g] : groups) {
        g.finish();
    }
    std::vector<Comparison> out;
    // Pairs of groups that match but share no question (other shards,
    // --limit on other files): said so, not "no pair matches".
    std::vector<std::string> disjoint;
    const auto label = [&](const GroupKey& k) { return selector_of(results, k).text(); };
    for (const auto& [key, ga] : groups) {
        const auto found = counterpart(results, key, a, b, sa, sb);
        const auto itb = found ? groups.find(*found) : groups.end();
        if (itb == groups.end()) {
            continue;
        }
        const GroupKey& kb = itb->first;
        auto c = compare_groups(results, key, ga, kb, itb->second, scorer, options);
        if (!c) {
            return c.error();
        }
        if (*c) {
            out.push_back(std::move(**c));
        } else {
            disjoint.push_back(fmt::format("{} ({}) and {} ({})", label(key),
                                           util::counted(ga.questions(), "question"), label(kb),
                                           util::counted(itb->second.questions(), "question")));
        }
    }
    // Refused even when other pairs compare: a gate of the two servers
    // passed on their raw groups and never said their chat groups were
    // not compared.
    if (!disjoint.empty()) {
        return make_error(
            ErrorKind::other_questions,
            fmt::format("{} share no question: each ran others (another shard, --limit or "
                        "dataset file); merge the other shards into one database{} run both on "
                        "the same questions{}",
                        fmt::join(disjoint, ", "), out.empty() ? ", or" : ",",
                        out.empty()
                            ? ""
                            : ", or name groups that share questions (such as " +
                                  out.front().a.text() + " and " + out.front().b.text() + ")"));
    }
    if (out.empty()) {
        std::set<std::string> present;
        for (const auto& [key, g] : groups) {
            present.insert(label(key));
        }
        return make_error(ErrorKind::no_match,
                          fmt::format("no pair of groups matches {} and {}; groups: {}", a.text(),
                                      b.text(), fmt::join(present, ", ")));
    }
    return out;
}

std::vector<std::pair<Selector, Selector>> unmatched_groups(const Results& results,
                                                            const Selector& a, const Selector& b) {
    std::vector<std::pair<Selector, Selector>> out;
    const int sa = index_in(results.servers, a.server);
    const int sb = index_in(results.servers, b.server);
    if (sa < 0 || sb < 0) {
        return out;
    }
    std::set<GroupKey> present;
    for (const auto& r : results.rows) {
        present.insert({r.server, r.framing, r.max_tokens});
    }
    for (const auto& key : present) {
        // A framing B names that no row holds is check_selectors' error.
        if (const auto kb = counterpart(results, key, a, b, sa, sb);
            kb && std::get<1>(*kb) >= 0 && !present.contains(*kb)) {
            out.emplace_back(selector_of(results, key), selector_of(results, *kb));
        }
    }
    return out;
}

void assign_verdicts(std::vector<Comparison>& comparisons, std::optional<double> margin) {
    std::vector<double> p;
    for (const auto& c : comparisons) {
        p.push_back(c.stats.test.p_mid);
    }
    const auto adjusted = holm_adjust(p);
    for (size_t i = 0; i < comparisons.size(); ++i) {
        auto& c = comparisons[i];
        c.verdict = decide_verdict(c.stats, c.a.text(), c.b.text(), adjusted[i], comparisons.size(),
                                   margin);
        // A difference that failures make is not the model's: say how many
        // of each side's requests here have no answer (no evidence says it
        // of a side with none).
        if (c.verdict.kind != VerdictKind::no_evidence) {
            if (const auto unanswered = unanswered_text(c); !unanswered.empty()) {
                c.verdict.caveats += fmt::format(" Failed (no successful response), each counted "
                                                 "as a wrong answer: {}.",
                                                 unanswered);
            }
            c.verdict.caveats += unsent_text(c);
        }
        if (c.questions_a != c.questions || c.questions_b != c.questions) {
            // questions_a counts A's answered questions when some are left
            // out, and questions_b every question B asked: "holds" for both
            // read as if the baseline alone had stopped early (an audit).
            c.verdict.caveats += fmt::format(
                " Paired on the {} both groups hold: {} {} {} and {} asked {}; each "
                "group's own accuracy elsewhere is over its own questions{}.",
                util::counted(c.questions, "question"), c.a.text(),
                c.unsent_a + c.failed_a > 0 ? "has a successful response on" : "asked",
                c.questions_a, c.b.text(), c.questions_b,
                c.unsent_a + c.failed_a > 0
                    ? ", with its requests without a successful response counted as wrong"
                    : "");
        }
        c.verdict.sentence += c.verdict.caveats;
    }
}

void fill_excerpts(std::vector<Comparison>& comparisons, store::Store& store, size_t max_flips,
                   size_t chars) {
    for (auto& c : comparisons) {
        for (auto* list : {&c.a_better, &c.b_better}) {
            for (size_t i = 0; i < list->size() && i < max_flips; ++i) {
                (*list)[i].a_excerpt =
                    answer_excerpt(store, (*list)[i].a_response_id, c.scorer, chars);
                (*list)[i].b_excerpt =
                    answer_excerpt(store, (*list)[i].b_response_id, c.scorer, chars);
            }
        }
    }
}

nlohmann::json ci95_json(const QuestionStats& s, double scale) {
    return std::abs(s.alpha - 0.05) < 1e-9
               ? nlohmann::json{s.interval.lo * scale, s.interval.hi * scale}
               : nlohmann::json(nullptr);
}

namespace {

nlohmann::json noise_json(const SideNoise& n) {
    return {{"repeats", n.repeats},
            {"measured", n.measured},
            {"not_measured", n.gap == NoiseGap::one_repeat ? nlohmann::json("one_repeat")
                             : n.gap == NoiseGap::too_few_answers
                                 ? nlohmann::json("too_few_answers")
                                 : nlohmann::json(nullptr)},
            {"deterministic", n.deterministic},
            {"within_question_variance",
             n.measured ? nlohmann::json(n.within_variance) : nlohmann::json(nullptr)},
            {"rerun_sd", n.measured ? nlohmann::json(n.rerun_sd) : nlohmann::json(nullptr)}};
}

} // namespace

namespace {

nlohmann::json flips_json(const std::vector<Flip>& v) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& f : v) {
        arr.push_back({{"question_idx", f.question_idx},
                       {"a", f.a},
                       {"b", f.b},
                       // 0: a planned request never sent, with no response row
                       {"a_response_id", f.a_response_id > 0 ? nlohmann::json(f.a_response_id)
                                                             : nlohmann::json(nullptr)},
                       {"b_response_id", f.b_response_id > 0 ? nlohmann::json(f.b_response_id)
                                                             : nlohmann::json(nullptr)},
                       {"a_excerpt", f.a_excerpt},
                       {"b_excerpt", f.b_excerpt}});
    }
    return arr;
}

nlohmann::json transitions_json(const Comparison& c) {
    nlohmann::json trans = nlohmann::json::array();
    for (int i = 0; i < k_transition_states; ++i) {
        for (int j = 0; j < k_transition_states; ++j) {
            if (c.transitions[i][j]) {
                trans.push_back({{"a", transition_state_name(i)},
                                 {"b", transition_state_name(j)},
                                 {"count", c.transitions[i][j]},
                                 {"lost", c.lost[i][j]},
                                 {"gained", c.gained[i][j]}});
            }
        }
    }
    return trans;
}

nlohmann::json latency_json(const Comparison& c) {
    if (!c.latency) {
        return nullptr;
    }
    const auto& t = *c.latency;
    nlohmann::json from_tokens = nullptr;
    if (t.from_tokens) {
        const auto& f = *t.from_tokens;
        from_tokens = {{"method", "least squares latency ~ tokens over A"},
                       {"intercept_ms", f.intercept_ms},
                       {"ms_per_token", f.ms_per_token},
                       {"a_p99_predicted_ms", f.a_p99_predicted_ms},
                       {"b_p99_predicted_ms", f.b_p99_predicted_ms},
                       {"explained_ms", f.explained_ms},
                       {"unexplained_ms", t.p99_diff_ms() - f.explained_ms}};
    }
    nlohmann::json p99_ci = nullptr;
    if (t.p99_diff_ci) {
        p99_ci = {{"lo_ms", t.p99_diff_ci->lo},   {"hi_ms", t.p99_diff_ci->hi},
                  {"confidence", 0.95},           {"method", "percentile bootstrap over questions"},
                  {"resamples", t.p99_resamples}, {"seed", t.p99_seed}};
    }
    nlohmann::json beyond = nullptr;
    if (t.tokens_beyond_fit) {
        beyond = {{"a_tokens_min", t.a_fit_tokens_min},
                  {"a_tokens_max", t.a_fit_tokens_max},
                  {"b_p99_tokens", t.b_p99_tokens}};
    }
    return {
        {"a_responses", t.a_responses}, {"b_responses", t.b_responses},   {"a_p50_ms", t.a_p50_ms},
        {"b_p50_ms", t.b_p50_ms},       {"p50_diff_ms", t.p50_diff_ms()}, {"a_p99_ms", t.a_p99_ms},
        {"b_p99_ms", t.b_p99_ms},       {"p99_diff_ms", t.p99_diff_ms()}, {"p99_diff_ci", p99_ci},
        {"from_tokens", from_tokens},   {"tokens_beyond_fit", beyond}};
}

nlohmann::json comparison_json(const Comparison& c) {
    const nlohmann::json trans = transitions_json(c);
    const auto flips = [](const std::vector<Flip>& v) { return flips_json(v); };
    nlohmann::json j = {
        {"scorer", c.scorer},
        {"a", {{"server", c.a.server}, {"framing", *c.a.framing}, {"max_tokens", *c.a.max_tokens}}},
        {"b", {{"server", c.b.server}, {"framing", *c.b.framing}, {"max_tokens", *c.b.max_tokens}}},
        {"questions", c.questions},
        {"questions_a", c.questions_a},
        {"questions_b", c.questions_b},
        {"never_sent", {{"a", c.unsent_a}, {"b", c.behaviour_b.unsent}}},
        {"without_b_unsent",
         c.without_unsent ? nlohmann::json{{"questions", c.without_unsent->questions},
                                           {"difference", c.without_unsent->diff},
                                           {"a_better_questions", c.without_unsent->a_better},
                                           {"b_better_questions", c.without_unsent->b_better}}
                          : nlohmann::json(nullptr)},
        {"baseline_failed_left_out", c.failed_a},
        {"datasets", {{"a", c.dataset_a}, {"b", c.dataset_b}}},
        {"paired_responses", c.paired_responses},
        {"accuracy_a", c.accuracy_a},
        {"accuracy_b", c.accuracy_b},
        {"difference",
         {{"value", c.stats.diff},
          {"ci", {c.stats.interval.lo, c.stats.interval.hi}},
          {"confidence", 1.0 - c.stats.alpha},
          {"ci95", ci95_json(c.stats, 1.0)},
          {"one_sided", {c.stats.interval.lo_one_sided, c.stats.interval.hi_one_sided}},
          {"clustered_se", c.stats.se},
          {"sd_per_question", c.stats.sd_diff},
          {"resamples", c.stats.interval.resamples},
          {"seed", c.stats.interval.seed}}},
        {"test",
         {{"method", "sign-flip permutation over questions"},
          {"computed", c.stats.test.method == SignFlipMethod::exact ? "exact" : "monte carlo"},
          {"questions_differing", c.stats.test.differing},
          {"a_better_questions", c.stats.a_better},
          {"b_better_questions", c.stats.b_better},
          {"p", c.stats.test.p},
          {"p_mid", c.stats.test.p_mid},
          {"p_mid_holm", c.verdict.p_adjusted},
          {"comparisons_adjusted", c.verdict.comparisons}}},
        {"noise",
         {{"a", noise_json(c.stats.noise_a)},
          {"b", noise_json(c.stats.noise_b)},
          {"share_of_variance",
           c.stats.noise_share ? nlohmann::json(*c.stats.noise_share) : nlohmann::json(nullptr)}}},
        {"power",
         {{"alpha", c.stats.alpha},
          {"power", c.stats.power},
          {"minimum_detectable_difference",
           c.stats.mdd ? nlohmann::json(*c.stats.mdd) : nlohmann::json(nullptr)},
          {"smallest_p",
           c.stats.smallest_p ? nlohmann::json(*c.stats.smallest_p) : nlohmann::json(nullptr)}}},
        {"verdict",
         {{"kind", verdict_name(c.verdict.kind)},
          {"words", c.verdict.words},
          {"sentence", c.verdict.sentence},
          {"margin",
           c.verdict.margin ? nlohmann::json(*c.verdict.margin) : nlohmann::json(nullptr)}}},
        {"flips", {{"a_better", flips(c.a_better)}, {"b_better", flips(c.b_better)}}},
        {"transitions", trans},
    };
    j["latency"] = latency_json(c);
    return j;
}

} // namespace

nlohmann::json not_compared_json(const std::vector<std::pair<Selector, Selector>>& unmatched) {
    auto out = nlohmann::json::array();
    for (const auto& [a, b] : unmatched) {
        out.push_back({{"a", a.text()}, {"b", b.text()}});
    }
    return out;
}

nlohmann::json to_json(const std::vector<Comparison>& comparisons) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : comparisons) {
        out.push_back(comparison_json(c));
    }
    return {{"schema", "diffeval.diff/2"}, {"comparisons", out}};
}

} // namespace diffeval::analysis
