// The probe's arithmetic; see reading.hpp. Server output is untrusted: every
// field is type-checked, a missing or null log-probability counts as a
// probability of 0, and nothing here throws.
#include <harness/probe/reading.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace diffeval::probe {

using nlohmann::json;
using util::ErrorKind;
using util::make_error;

namespace {

constexpr double k_logit_clamp = 1e-9;

double number_or(const json& v, double fallback) {
    return v.is_number() ? v.get<double>() : fallback;
}

double prob(double logprob) {
    return std::isfinite(logprob) ? std::exp(std::min(logprob, 0.0)) : 0.0;
}

// Adds `token` unless listed already (the chosen token appears in both the
// position and its alternatives); a listed null takes the other's number.
void add(FirstPosition& p, std::string token, double logprob) {
    for (auto& a : p.top) {
        if (a.token == token) {
            if (!std::isfinite(a.logprob)) {
                a.logprob = logprob;
            }
            return;
        }
    }
    p.top.push_back({std::move(token), logprob});
}

// The chat shape, also llama-server's /v1/completions: content[0] with a
// `top_logprobs` list of {token, logprob}.
std::optional<FirstPosition> read_content_shape(const json& lp) {
    const auto it = lp.find("content");
    if (it == lp.end() || !it->is_array() || it->empty() || !(*it)[0].is_object()) {
        return std::nullopt;
    }
    const json& first = (*it)[0];
    FirstPosition p;
    if (auto t = first.find("token"); t != first.end() && t->is_string()) {
        p.chosen = t->get<std::string>();
    }
    if (auto tl = first.find("top_logprobs"); tl != first.end() && tl->is_array()) {
        for (const auto& alt : *tl) {
            if (alt.is_object() && alt.contains("token") && alt["token"].is_string()) {
                add(p, alt["token"].get<std::string>(),
                    number_or(alt.value("logprob", json()), -INFINITY));
            }
        }
    }
    if (!p.chosen.empty()) {
        add(p, p.chosen, number_or(first.value("logprob", json()), -INFINITY));
    }
    return p;
}

// vLLM's legacy completions shape: parallel arrays, `top_logprobs` one
// {token: logprob} dict (or null) per position.
std::optional<FirstPosition> read_legacy_shape(const json& lp) {
    const auto tokens = lp.find("tokens");
    if (tokens == lp.end() || !tokens->is_array() || tokens->empty() || !(*tokens)[0].is_string()) {
        return std::nullopt;
    }
    FirstPosition p;
    p.chosen = (*tokens)[0].get<std::string>();
    if (auto tl = lp.find("top_logprobs");
        tl != lp.end() && tl->is_array() && !tl->empty() && (*tl)[0].is_object()) {
        for (const auto& [token, value] : (*tl)[0].items()) {
            add(p, token, number_or(value, -INFINITY));
        }
    }
    double chosen_lp = -INFINITY;
    if (auto tlp = lp.find("token_logprobs"); tlp != lp.end() && tlp->is_array() && !tlp->empty()) {
        chosen_lp = number_or((*tlp)[0], -INFINITY);
    }
    add(p, p.chosen, chosen_lp);
    return p;
}

} // namespace

util::Result<FirstPosition> first_position(std::string_view body) {
    auto j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return make_error(ErrorKind::data, "the probe response is not a JSON object");
    }
    const json* lp = nullptr;
    json wrapped;
    if (auto ch = j.find("choices"); ch != j.end() && ch->is_array() && !ch->empty() &&
                                     (*ch)[0].is_object() && (*ch)[0].contains("logprobs")) {
        lp = &(*ch)[0]["logprobs"];
    } else if (auto cp = j.find("completion_probabilities"); cp != j.end() && cp->is_array()) {
        // llama-server's native /completion: the same items as `content`.
        wrapped = json{{"content", *cp}};
        lp = &wrapped;
    }
    if (!lp || !lp->is_object()) {
        return make_error(ErrorKind::data,
                          "the response carries no log-probabilities: the engine ignored the "
                          "probe's logprobs options");
    }
    auto p = read_content_shape(*lp);
    if (!p) {
        p = read_legacy_shape(*lp);
    }
    if (!p || p->top.empty()) {
        return make_error(ErrorKind::data,
                          "the response's log-probabilities list no token at the first position");
    }
    std::stable_sort(p->top.begin(), p->top.end(), [](const Alternative& a, const Alternative& b) {
        return a.logprob > b.logprob;
    });
    return std::move(*p);
}

Reading read(const FirstPosition& position, std::string_view marker, std::string_view whitespace) {
    Reading r;
    r.chosen = position.chosen;
    r.top = position.top;
    r.floor = 1.0;
    for (const auto& a : position.top) {
        const double p = prob(a.logprob);
        r.floor = std::min(r.floor, p);
        const auto start = a.token.find_first_not_of(" \t\n\r");
        if (!marker.empty() && start != std::string::npos &&
            std::string_view(a.token).substr(start).starts_with(marker)) {
            r.p_marker += p;
            r.marker_listed = true;
        }
        if (!whitespace.empty() && a.token == whitespace) {
            r.p_whitespace += p;
            r.whitespace_listed = true;
        }
    }
    r.p_marker = std::min(r.p_marker, 1.0);
    if (position.top.empty()) {
        r.floor = 0;
    }
    return r;
}

Estimate combine(const Reading& first, const std::optional<Reading>& after_whitespace) {
    Estimate e;
    e.p_direct = first.p_marker;
    e.p_whitespace = first.p_whitespace;
    const bool chain_listed =
        after_whitespace && first.whitespace_listed && after_whitespace->marker_listed;
    if (after_whitespace) {
        e.p_after_whitespace = after_whitespace->p_marker;
    }
    if (!first.marker_listed && !chain_listed) {
        // Neither path was listed: the smallest listed probability bounds
        // every unlisted token, and so the marker.
        e.bounded = true;
        e.p_open = first.floor;
        return e;
    }
    e.p_open =
        std::min(1.0, e.p_direct + (chain_listed ? e.p_whitespace * e.p_after_whitespace : 0.0));
    return e;
}

double logit(double p) {
    p = std::clamp(p, k_logit_clamp, 1 - k_logit_clamp);
    return std::log(p / (1 - p));
}

std::string top_json(const std::vector<Alternative>& top) {
    json out = json::array();
    for (const auto& a : top) {
        out.push_back(json::array({a.token, std::isfinite(a.logprob) ? json(a.logprob) : json()}));
    }
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace diffeval::probe
