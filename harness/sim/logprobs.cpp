// Each token's probability is drawn from its position and the response
// seed; alternatives come from a small pool of common tokens and share the
// remaining mass, halving from one to the next, so the numbers are a
// distribution's (they never sum past 1: a decay of 0.6 summed to 1.5 times
// the remaining mass, 1.09 in all, which the probe now refuses).
#include <harness/sim/logprobs.hpp>

#include <harness/sim/tokenizer.hpp>
#include <harness/util/hash.hpp>

#include <array>
#include <cmath>

namespace diffeval::sim {

namespace {

constexpr double k_floor = -9999.0; // vLLM clamps -inf to this
constexpr std::array<std::string_view, 24> k_pool = {
    " the", "\n", " ", ".", ",",   " a", " and", " to", " of", " is", " =", "0",
    "1",    "2",  "3", "5", " we", " I", " so",  " in", " it", ":",   "*",  " +"};

double safe_log(double p) {
    return p <= 0 ? k_floor : std::max(k_floor, std::log(p));
}

std::string token_text(const Generation& gen, size_t i) {
    if (i < gen.token_spans.size()) {
        auto [off, len] = gen.token_spans[i];
        return gen.output.substr(off, len);
    }
    return std::string(k_eos_token);
}

} // namespace

std::vector<TokenLogprob> token_logprobs(const Generation& gen, size_t begin, size_t end,
                                         int top_n) {
    std::vector<TokenLogprob> out;
    size_t count = static_cast<size_t>(gen.completion_tokens);
    end = std::min(end, count);
    for (size_t i = begin; i < end; ++i) {
        TokenLogprob t;
        t.token = token_text(gen, i);
        uint64_t h = util::hash64(t.token, gen.seed + i * 0x9E3779B97F4A7C15ULL);
        double p;
        std::vector<TopLogprob> alts;
        // Nearly all of the remaining mass is on the other choice, when
        // there is one; the pool shares the rest.
        constexpr double k_other_choice = 0.98;
        if (static_cast<int>(i) == gen.open_token && !gen.open_alternative.empty()) {
            p = gen.open_chosen ? gen.open_p : 1 - gen.open_p;
            alts.push_back({gen.open_alternative, safe_log((1 - p) * k_other_choice)});
        } else if (static_cast<int>(i) == gen.decision_token) {
            double pr = gen.decisions.p_reason;
            p = std::max(pr, 1 - pr);
            alts.push_back({gen.decision_alternative, safe_log((1 - p) * k_other_choice)});
        } else {
            double u = util::unit_interval(h);
            p = 1.0 - 0.45 * u * u * u;
        }
        t.logprob = safe_log(p);
        double rest = 1 - p;
        if (!alts.empty()) {
            rest *= 1 - k_other_choice;
        }
        for (size_t k = 0; static_cast<int>(alts.size()) + 1 < top_n && k < k_pool.size(); ++k) {
            std::string cand(k_pool[(h + k * 7) % k_pool.size()]);
            bool dup = cand == t.token;
            for (const auto& a : alts) {
                dup = dup || a.token == cand;
            }
            if (dup) {
                continue;
            }
            rest *= 0.5;
            alts.push_back({cand, safe_log(rest)});
        }
        if (top_n > 0) {
            t.top.push_back({t.token, t.logprob});
            for (const auto& a : alts) {
                if (static_cast<int>(t.top.size()) >= top_n) {
                    break;
                }
                t.top.push_back(a);
            }
        }
        out.push_back(std::move(t));
    }
    return out;
}

} // namespace diffeval::sim
