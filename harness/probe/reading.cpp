// The probe's arithmetic; see reading.hpp. Server output is untrusted: every
// field is type-checked, a token whose log-probability is missing, not a
// number or above 0 is not listed (its probability is unknown, not 0: counted as 0, a
// marker read as a logit of -20.7), and nothing here throws.
#include <harness/probe/reading.hpp>

#include <harness/util/json_text.hpp>
#include <harness/util/simdjson_member.hpp>
#include <harness/util/text.hpp>
#include <harness/util/untrusted_json.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>

namespace diffeval::probe {

using nlohmann::json;
using util::ErrorKind;
using util::make_error;

namespace {

constexpr double k_logit_clamp = 1e-9;

// What a log-probability that is missing or not a JSON number reads as.
constexpr double k_no_number = std::numeric_limits<double>::quiet_NaN();
// The largest log-probability taken as one: engines compute log(p) in float,
// and a p that rounded to just above 1 gives 1.2e-7; anything above this is
// no probability at all and, like a value that is not a number, not listed.
constexpr double k_max_logprob = 1e-4;

double number_or(const json& v, double fallback) {
    return v.is_number() ? v.get<double>() : fallback;
}

double prob(double logprob) {
    return std::isfinite(logprob) ? std::exp(std::min(logprob, 0.0)) : 0.0;
}

// Alternatives kept at the first position: the probe asks for 20, a server
// listing 100,000 would make the linear search below quadratic (minutes of
// CPU and megabytes stored a response). A position listing more is refused
// (listed()): keeping the first 1,000 in list order kept the wrong ones.
constexpr size_t k_max_alternatives = 1000;
// Tokens without a usable number kept to say why a reading is unusable
// (FirstPosition::unreadable).
constexpr size_t k_unreadable = 64;

// Where a token's listing comes from: the position's list of alternatives,
// or the chosen token's own number (the same token id as its listing).
enum class Listing { alternative, chosen };

// ln(e^a + e^b) without overflow.
double log_add(double a, double b) {
    const double hi = std::max(a, b);
    return hi + std::log1p(std::exp(std::min(a, b) - hi));
}

// Adds `token` with `logprob`. A token listed twice among the alternatives,
// each with its number, is two token ids that decode alike: their
// probabilities add up. The chosen token is the same id as its listing, so
// its own number is taken only when it is not listed. A number that is
// missing, not a number or above 0 leaves the token's probability unknown,
// not 0: it goes to `unreadable` unless another listing gives it a number.
void add(FirstPosition& p, std::string token, double logprob, Listing how) {
    const bool readable = !std::isnan(logprob) && logprob <= k_max_logprob;
    for (auto& a : p.top) {
        if (a.token == token) {
            if (how == Listing::alternative && readable) {
                a.logprob = log_add(a.logprob, std::min(logprob, 0.0));
            }
            return;
        }
    }
    if (!readable) {
        if (p.unreadable.size() < k_unreadable &&
            std::find(p.unreadable.begin(), p.unreadable.end(), token) == p.unreadable.end()) {
            p.unreadable.push_back(std::move(token));
        }
        return;
    }
    if (p.top.size() >= k_max_alternatives) {
        p.cut = true;
        return;
    }
    p.top.push_back({std::move(token), logprob});
}

// A token's number, once every listing is read: a token listed without one
// and then with one has a number.
void drop_readable(FirstPosition& p) {
    std::erase_if(p.unreadable, [&](const std::string& t) {
        return std::any_of(p.top.begin(), p.top.end(),
                           [&](const Alternative& a) { return a.token == t; });
    });
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
                    number_or(alt.value("logprob", json()), k_no_number), Listing::alternative);
            }
        }
    }
    if (!p.chosen.empty()) {
        add(p, p.chosen, number_or(first.value("logprob", json()), k_no_number), Listing::chosen);
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
            add(p, token, number_or(value, k_no_number), Listing::alternative);
        }
    }
    double chosen_lp = k_no_number;
    if (auto tlp = lp.find("token_logprobs"); tlp != lp.end() && tlp->is_array() && !tlp->empty()) {
        chosen_lp = number_or((*tlp)[0], k_no_number);
    }
    add(p, p.chosen, chosen_lp, Listing::chosen);
    return p;
}

util::Error not_an_object() {
    return util::Error{ErrorKind::data, "the probe response is not a JSON object"};
}

util::Error no_logprobs() {
    // Not only an engine that ignores the options: llama-server leaves them
    // out for a token that is part of a UTF-8 character (an engine audit).
    return util::Error{ErrorKind::data,
                       "the response carries no log-probabilities for its first token: the "
                       "engine ignored the probe's logprobs options, or withheld them for that "
                       "token (llama-server does for part of a UTF-8 character)"};
}

// Listed probabilities may sum above 1 by rounding alone (engines compute in
// float: a few parts in a million); beyond this they are no distribution over
// the next token.
constexpr double k_max_listed_mass = 1.01;

// The first position once read: the alternatives most likely first, or an
// error when none is listed, or what is listed is no distribution.
util::Result<FirstPosition> listed(std::optional<FirstPosition> p) {
    if (!p || p->top.empty()) {
        return make_error(ErrorKind::data,
                          "the response's log-probabilities list no token at the first position");
    }
    if (p->cut) {
        return make_error(ErrorKind::data,
                          fmt::format("the response lists more than {} alternatives at the first "
                                      "position (the probe asks for 20)",
                                      k_max_alternatives));
    }
    double mass = 0;
    for (const auto& a : p->top) {
        mass += prob(a.logprob);
    }
    if (mass > k_max_listed_mass) {
        return make_error(ErrorKind::data,
                          fmt::format("the response's log-probabilities at the first position "
                                      "add up to a probability of {:.4g}, above 1: they are no "
                                      "distribution over the next token",
                                      mass));
    }
    drop_readable(*p);
    std::stable_sort(p->top.begin(), p->top.end(), [](const Alternative& a, const Alternative& b) {
        return a.logprob > b.logprob;
    });
    return std::move(*p);
}

// The simdjson reading: the same checks in the same order as the nlohmann
// one above, on simdjson's DOM. A duplicate key reads as its last value and
// a legacy top_logprobs dict in key order, as nlohmann's std::map keeps them.
namespace fast {

using simdjson::dom::element;
using simdjson::dom::object;
using util::last_member;

double number_or(const std::optional<element>& v, double fallback) {
    double d = 0;
    return v && v->is_number() && v->get_double().get(d) == simdjson::SUCCESS ? d : fallback;
}

std::optional<std::string_view> string_of(const std::optional<element>& v) {
    std::string_view s;
    if (v && v->get_string().get(s) == simdjson::SUCCESS) {
        return s;
    }
    return std::nullopt;
}

std::optional<element> first_item(const std::optional<element>& v) {
    simdjson::dom::array a;
    if (!v || v->get_array().get(a) != simdjson::SUCCESS || a.size() == 0) {
        return std::nullopt;
    }
    return a.at(0).value_unsafe();
}

// The content shape from its `content` list.
std::optional<FirstPosition> read_content_items(const std::optional<element>& content) {
    object first;
    const auto item = first_item(content);
    if (!item || item->get_object().get(first) != simdjson::SUCCESS) {
        return std::nullopt;
    }
    FirstPosition p;
    if (auto t = string_of(last_member(first, "token"))) {
        p.chosen = std::string(*t);
    }
    simdjson::dom::array alts;
    if (auto tl = last_member(first, "top_logprobs");
        tl && tl->get_array().get(alts) == simdjson::SUCCESS) {
        for (element alt : alts) {
            object o;
            if (alt.get_object().get(o) != simdjson::SUCCESS) {
                continue;
            }
            if (auto token = string_of(last_member(o, "token"))) {
                add(p, std::string(*token), number_or(last_member(o, "logprob"), k_no_number),
                    Listing::alternative);
            }
        }
    }
    if (!p.chosen.empty()) {
        add(p, p.chosen, number_or(last_member(first, "logprob"), k_no_number), Listing::chosen);
    }
    return p;
}

std::optional<FirstPosition> read_legacy_shape(object lp) {
    const auto token = string_of(first_item(last_member(lp, "tokens")));
    if (!token) {
        return std::nullopt;
    }
    FirstPosition p;
    p.chosen = std::string(*token);
    object dict;
    if (auto d = first_item(last_member(lp, "top_logprobs"));
        d && d->get_object().get(dict) == simdjson::SUCCESS) {
        std::map<std::string_view, element> sorted;
        for (auto field : dict) {
            sorted.insert_or_assign(field.key, field.value);
        }
        for (const auto& [key, value] : sorted) {
            add(p, std::string(key), number_or(value, k_no_number), Listing::alternative);
        }
    }
    add(p, p.chosen, number_or(first_item(last_member(lp, "token_logprobs")), k_no_number),
        Listing::chosen);
    return p;
}

// The position's alternatives, or what is missing; nothing when simdjson
// cannot parse `body` (first_position_nlohmann reads it then).
std::optional<util::Result<std::optional<FirstPosition>>> read(std::string_view body) {
    struct Parser {
        simdjson::dom::parser dom;
        bool ready = dom.allocate(4096, util::k_max_json_depth) == simdjson::SUCCESS;
    };
    thread_local Parser parser;
    element root;
    if (!parser.ready ||
        parser.dom.parse(body.data(), body.size()).get(root) != simdjson::SUCCESS) {
        return std::nullopt;
    }
    object top;
    if (root.get_object().get(top) != simdjson::SUCCESS) {
        return util::Result<std::optional<FirstPosition>>(not_an_object());
    }
    object choice;
    object lp;
    if (auto c = first_item(last_member(top, "choices"));
        c && c->get_object().get(choice) == simdjson::SUCCESS && last_member(choice, "logprobs")) {
        if (last_member(choice, "logprobs")->get_object().get(lp) != simdjson::SUCCESS) {
            return util::Result<std::optional<FirstPosition>>(no_logprobs());
        }
        auto p = read_content_items(last_member(lp, "content"));
        return util::Result<std::optional<FirstPosition>>(p ? std::move(p) : read_legacy_shape(lp));
    }
    if (auto cp = last_member(top, "completion_probabilities"); cp && cp->is_array()) {
        // llama-server's native /completion: the same items as `content`.
        return util::Result<std::optional<FirstPosition>>(read_content_items(cp));
    }
    return util::Result<std::optional<FirstPosition>>(no_logprobs());
}

} // namespace fast

} // namespace

util::Result<FirstPosition> first_position_nlohmann(std::string_view body) {
    // Depth-bounded: copying a deep `completion_probabilities` below would
    // recurse once per level.
    if (!util::json_depth_within(body)) {
        return make_error(
            ErrorKind::data,
            fmt::format("the probe response nests deeper than {} levels", util::k_max_json_depth));
    }
    auto j = json::parse(body, nullptr, false);
    if (j.is_discarded()) {
        // Python's json.dumps writes NaN and Infinity by default; neither is
        // JSON, nor is a number past a double's range.
        return util::Error{ErrorKind::data,
                           "the probe response is not valid JSON (a NaN, an Infinity or a number "
                           "past a double's range in it, perhaps: none is a JSON number)"};
    }
    if (!j.is_object()) {
        return not_an_object();
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
        return no_logprobs();
    }
    auto p = read_content_shape(*lp);
    if (!p) {
        p = read_legacy_shape(*lp);
    }
    return listed(std::move(p));
}

util::Result<FirstPosition> first_position(std::string_view body) {
    if (auto fast = fast::read(body)) {
        if (!*fast) {
            return fast->error();
        }
        return listed(std::move(**fast));
    }
    return first_position_nlohmann(body);
}

namespace {

// The bytes of leading whitespace of `token`: ASCII, the Unicode spaces
// (no-break, ogham, en to hair, line and paragraph separators, narrow
// no-break, medium mathematical, ideographic), and the space signs token
// strings carry (SentencePiece's U+2581, byte-level BPE's U+0120 and U+010A).
size_t leading_space(std::string_view t) {
    static constexpr std::string_view k_spaces[] = {
        "\xc2\xa0",     "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x81", "\xe2\x80\x82",
        "\xe2\x80\x83", "\xe2\x80\x84", "\xe2\x80\x85", "\xe2\x80\x86", "\xe2\x80\x87",
        "\xe2\x80\x88", "\xe2\x80\x89", "\xe2\x80\x8a", "\xe2\x80\xa8", "\xe2\x80\xa9",
        "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80", "\xe2\x96\x81", "\xc4\xa0",
        "\xc4\x8a"};
    size_t at = 0;
    for (;;) {
        const auto rest = t.substr(at);
        if (!rest.empty() &&
            std::string_view(" \t\n\r\v\f").find(rest[0]) != std::string_view::npos) {
            ++at;
            continue;
        }
        const auto* sp = std::find_if(std::begin(k_spaces), std::end(k_spaces),
                                      [&](std::string_view s) { return rest.starts_with(s); });
        if (sp == std::end(k_spaces)) {
            return at;
        }
        at += sp->size();
    }
}

// `token` quoted for a message: one line, bounded.
std::string token_text(std::string_view token) {
    return fmt::format("'{}'", util::one_line(std::string(token), 40));
}

} // namespace

Reading read(const FirstPosition& position, std::string_view marker, std::string_view whitespace) {
    Reading r;
    r.chosen = position.chosen;
    r.top = position.top;
    r.floor = 1.0;
    std::optional<std::string_view> marker_start; // a listed token the marker may follow
    for (const auto& a : position.top) {
        const double p = prob(a.logprob);
        r.floor = std::min(r.floor, p);
        const auto text = std::string_view(a.token).substr(leading_space(a.token));
        if (!marker.empty() && text.starts_with(marker)) {
            r.p_marker += p;
            r.marker_listed = true;
        } else if (!marker.empty() && !text.empty() && marker.starts_with(text) && !marker_start) {
            marker_start = a.token;
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
    for (const auto& t : position.unreadable) {
        const auto text = std::string_view(t).substr(leading_space(t));
        if ((!marker.empty() && text.starts_with(marker)) ||
            (!whitespace.empty() && t == whitespace)) {
            r.unusable = fmt::format("the response lists {} without a usable log-probability, so "
                                     "P(open) is unknown",
                                     token_text(t));
            return r;
        }
    }
    if (!r.marker_listed && marker_start) {
        r.unusable = fmt::format("the response lists {}, the start of the marker {}, which the "
                                 "marker may follow: P(open) is neither read nor bounded",
                                 token_text(*marker_start), token_text(marker));
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
        // every unlisted token, and so the marker; through a listed
        // whitespace, the marker after it is bounded by the second floor.
        e.bounded = true;
        e.p_open = first.floor;
        if (after_whitespace && first.whitespace_listed) {
            e.p_open = std::min(1.0, e.p_open + first.p_whitespace * after_whitespace->floor);
        }
        return e;
    }
    if (after_whitespace && first.whitespace_listed && !after_whitespace->marker_listed) {
        // The direct path listed, the chain's not: the marker after the
        // whitespace is at most the second floor, so P(open) is bounded.
        e.bounded = true;
        e.p_open = std::min(1.0, e.p_direct + first.p_whitespace * after_whitespace->floor);
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
    // nlohmann's compact dump of [[token, logprob or null], ...], written
    // directly: building and dumping the array was 9% of the run's
    // event loop in the official demo (35,613 probe readings).
    std::string out = "[";
    for (size_t i = 0; i < top.size(); ++i) {
        out += i ? ",[" : "[";
        util::append_dump_string(out, top[i].token);
        out += ',';
        util::append_dump_double(out, top[i].logprob); // "null" when not finite
        out += ']';
    }
    out += ']';
    return out;
}

} // namespace diffeval::probe
