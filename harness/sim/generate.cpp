// The behaviour model: per-question latents shared by all profiles, plus
// per-request draws seeded by the content hash (and, for a share of them,
// by the sighting), decide what the model writes; the text is then cut by
// stop strings, EOS and max_tokens exactly as vLLM cuts it.
#include <harness/sim/generate.hpp>

#include <harness/sim/arithmetic.hpp>
#include <harness/sim/tokenizer.hpp>
#include <harness/sim/writer.hpp>
#include <harness/util/hash.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace diffeval::sim {

namespace {

constexpr double k_decision_softness = 0.01; // logit scale of p_reason around the rate
constexpr int k_min_reasoning_tokens = 150;
constexpr int k_max_reasoning_tokens = 20000;
constexpr std::string_view k_reasoning_opening = "The user"; // how write_reasoning begins
// The first answer token of the raw framing leads into the think block or
// not: its logit is +-k_open_logit (from the no-think latent) plus
// k_open_gain x (reasoning_rate - u), the same u that decides reasoning, so a
// profile that reasons more also opens with more confidence, question by
// question (docs/simulator.md, "First-token log-probabilities").
constexpr double k_open_logit = 4.595; // logit(0.99): the think tag rate of every profile
constexpr double k_open_gain = 4.0;    // |gain x (rate - u)| < 4.08 < k_open_logit
// After a bare space the model opens <think> with this probability.
constexpr double k_open_after_space = 0.999;

// Uniform draws for one response. On a later sighting a `repeat_noise`
// share of the draws is re-seeded with the sighting, so repeats of one
// request differ a little, as batch-dependent numerics make them differ on
// a real server, while the first sighting is always the same.
class Draws {
public:
    Draws(uint64_t seed, int sighting, double repeat_noise)
        : m_seed(seed), m_sighting(sighting), m_repeat_noise(repeat_noise) {}

    uint64_t bits(std::string_view name) const {
        uint64_t h = util::hash64(name, m_seed);
        if (m_sighting > 0) {
            uint64_t k = static_cast<uint64_t>(m_sighting);
            if (util::unit_interval(util::hash64(name, m_seed ^ (0xA5A5A5A5ULL * k))) <
                m_repeat_noise) {
                h = util::hash64(name, m_seed + 0x9E3779B97F4A7C15ULL * k);
            }
        }
        return h;
    }
    double operator()(std::string_view name) const { return util::unit_interval(bits(name)); }

private:
    uint64_t m_seed;
    int m_sighting;
    double m_repeat_noise;
};

// The full text the model would write if nothing cut it.
struct Script {
    std::string text;
    bool eos = true;                         // ends with EOS (else it runs on forever)
    size_t decision_pos = std::string::npos; // where the reason-or-answer choice is made
    std::string decision_alternative;
    size_t markup_pos = 0; // where a markup fault is inserted: early, so it is seen
    // Raw framing: the first token leads into the think block (" " then
    // <think>, or <think> after a prompt ending in a space) or not.
    bool has_open = false;
    bool open_chosen = false;
    double open_p = 0;            // probability of the opening token at the first position
    std::string open_alternative; // the first token the model did not choose
};

int reasoning_length(const Behaviour& b, const Draws& d) {
    double u1 = std::max(d("reasoning-len-1"), 1e-12);
    double u2 = d("reasoning-len-2");
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    double len = b.reasoning_median_tokens * std::exp(b.reasoning_sigma * z);
    return static_cast<int>(
        std::clamp(len, double{k_min_reasoning_tokens}, double{k_max_reasoning_tokens}));
}

std::string first_token(std::string_view text) {
    return text.empty() ? std::string() : std::string(text.substr(0, token_length(text, 0)));
}

// What the simulated model decides for this request: right or wrong
// answer, whether it opens a think block and reasons, loops, rambles or
// drops the "####". Returns the answer it will give.
std::string decide(const Profile& profile, const ParsedRequest& req, const QuestionFacts& facts,
                   const Draws& d, bool after_space, Decisions& dec) {
    const Behaviour& b = profile.behaviour;
    Latents lat = facts.latents;
    if (d("answer-noise") < b.answer_noise) {
        lat.wrong = d("wrong");
        lat.verbose = d("verbose");
        lat.loop = d("loop");
        lat.no_think = d("no-think");
        lat.no_hash = d("no-hash");
    }
    dec.known_question = !facts.answer.empty();
    std::string answer =
        dec.known_question ? std::string(facts.answer) : synthetic_answer(facts.question);
    dec.wrong = lat.wrong < b.error_rate;
    if (dec.wrong) {
        answer = slip_answer(answer, facts.key);
    }

    const bool raw = req.endpoint == Endpoint::completions;
    const bool chat_thinking = !raw && req.thinking;
    double u = lat.reason + b.reasoning_jitter * (2.0 * d("reasoning-jitter") - 1.0);
    dec.p_reason = 1.0 / (1.0 + std::exp(-(b.reasoning_rate - u) / k_decision_softness));
    if (raw) {
        dec.opened_think = lat.no_think < b.think_tag_rate;
        const double z = (dec.opened_think ? k_open_logit : -k_open_logit) +
                         k_open_gain * (b.reasoning_rate - u);
        dec.p_open = 1.0 / (1.0 + std::exp(-z));
        // A prompt that already ends in the space (the probe's second
        // request) leaves only the marker: the model opens the block.
        if (after_space) {
            dec.opened_think = true;
            dec.p_open = k_open_after_space;
        }
        dec.reasoning = dec.opened_think && u < b.reasoning_rate;
    } else {
        dec.reasoning = chat_thinking;
        dec.p_reason = chat_thinking ? 1.0 : 0.0;
    }
    dec.loop = !dec.reasoning && lat.loop < b.loop_rate;
    dec.verbose = raw && !dec.reasoning && !dec.loop && lat.verbose < b.verbose_rate;
    dec.missing_hash = !raw && !dec.loop && lat.no_hash < b.chat_missing_hash_rate;

    return answer;
}

// The reasoning and the answer's text, as decided.
std::pair<std::string, std::string> write_texts(const Behaviour& b, const ParsedRequest& req,
                                                const QuestionFacts& facts, const Draws& d,
                                                const std::string& answer, Decisions& dec) {
    std::string reasoning;
    if (dec.reasoning) {
        ReasoningPlan plan;
        plan.target_tokens = reasoning_length(b, d);
        plan.question_at =
            d("question-word") < b.reasoning_question_rate ? d("question-position") : 1.0;
        plan.seed = d.bits("reasoning-text");
        dec.reasoning_tokens = plan.target_tokens;
        reasoning = write_reasoning(facts.question, answer, plan);
    }

    std::string answer_text;
    if (dec.loop) {
        answer_text = write_loop(answer, req.max_tokens + 8);
    } else if (dec.verbose) {
        int span = b.verbose_max_tokens - b.verbose_min_tokens;
        int target = b.verbose_min_tokens + static_cast<int>(d("verbose-length") * span);
        answer_text = write_verbose(facts.question, answer, target);
    } else if (dec.missing_hash) {
        answer_text = without_hash(answer);
    } else {
        answer_text = answer;
    }

    return {reasoning, answer_text};
}

// A completion: the think block's opening decision, the reasoning, the
// answer and (unless it loops) the next few-shot item, as a base model goes on.
Script raw_script(const QuestionBank& bank, const Draws& d, bool after_space, const Decisions& dec,
                  const std::string& reasoning, const std::string& answer_text) {
    Script s;
    s.eos = !dec.loop;
    const std::string lead = after_space ? "" : " ";
    s.text = dec.opened_think ? lead + "<think>\n" : lead;
    s.has_open = true;
    s.open_chosen = dec.opened_think;
    if (after_space) {
        s.open_p = k_open_after_space;
        s.open_alternative = first_token(answer_text);
    } else {
        s.open_p = std::min(1.0, dec.p_open / k_open_after_space);
        s.open_alternative = dec.opened_think ? first_token(" " + answer_text) : " ";
    }
    if (dec.opened_think) {
        s.decision_pos = s.text.size();
        s.decision_alternative = dec.reasoning ? "</think>" : first_token(k_reasoning_opening);
    }
    if (dec.reasoning) {
        s.markup_pos = s.text.size() + reasoning.find('\n') + 1;
        s.text += reasoning;
    }
    if (dec.opened_think) {
        s.text += "</think>\n\n";
    }
    if (!dec.reasoning) {
        s.markup_pos = s.text.size();
    }
    s.text += answer_text;
    if (!dec.loop) {
        // A base-style completion goes on with the next few-shot item.
        const auto& next = bank.pick(d.bits("next-question"));
        s.text += "\n\nQuestion: " + next.question + "\nAnswer: " + next.answer;
    }
    return s;
}

// A chat answer: the reasoning closed, then the answer.
Script chat_script(const Decisions& dec, const std::string& reasoning,
                   const std::string& answer_text) {
    Script s;
    s.eos = !dec.loop;
    if (dec.reasoning) {
        s.text = reasoning + "</think>\n\n";
    }
    s.markup_pos = dec.reasoning ? reasoning.find('\n') + 1 : 0;
    s.text += answer_text;
    return s;
}

Script build_script(const Profile& profile, const QuestionBank& bank, const ParsedRequest& req,
                    const QuestionFacts& facts, const Draws& d, bool after_space, Decisions& dec) {
    const std::string answer = decide(profile, req, facts, d, after_space, dec);
    const auto [reasoning, answer_text] =
        write_texts(profile.behaviour, req, facts, d, answer, dec);
    if (req.endpoint == Endpoint::completions) {
        return raw_script(bank, d, after_space, dec, reasoning, answer_text);
    }
    return chat_script(dec, reasoning, answer_text);
}

// The earliest stop string (in list order, as vLLM checks them) that ends
// within the characters [new_begin, end) of `text`, as text.substr(0, end)
// searched for each from where it could start would find it. `next[i]` is
// where stop string i first occurs at or after an earlier call's start, or
// npos: the calls' `new_begin` only grow, so one search serves every token up
// to the occurrence instead of one search per token and stop string.
std::optional<std::pair<size_t, size_t>> find_stop(std::string_view text, size_t new_begin,
                                                   size_t end, const std::vector<std::string>& stop,
                                                   std::vector<size_t>& next) {
    for (size_t i = 0; i < stop.size(); ++i) {
        const auto& s = stop[i];
        const size_t from = new_begin + 1 > s.size() ? new_begin + 1 - s.size() : 0;
        if (next[i] != std::string_view::npos && next[i] < from) {
            next[i] = text.find(s, from);
        }
        // The first occurrence from `from` on is the one the search within
        // [0, end) finds, when it ends by `end`; a later one ends later.
        if (next[i] != std::string_view::npos && next[i] + s.size() <= end) {
            return std::make_pair(i, next[i]);
        }
    }
    return std::nullopt;
}

void cut(const Script& s, const ParsedRequest& req, Generation& g) {
    size_t pos = 0;
    int count = 0;
    size_t visible = 0;
    g.finish_reason = "length";
    g.stop_reason = nullptr;
    if (req.max_tokens <= 0) {
        return;
    }
    std::vector<size_t> next_stop;
    next_stop.reserve(req.stop.size());
    for (const auto& str : req.stop) {
        next_stop.push_back(std::string_view(s.text).find(str));
    }
    while (true) {
        if (pos >= s.text.size()) {
            if (s.eos) {
                ++count;
                g.eos = true;
                g.finish_reason = "stop";
            }
            visible = pos;
            break;
        }
        size_t len = token_length(s.text, pos);
        g.token_spans.emplace_back(static_cast<uint32_t>(pos), static_cast<uint32_t>(len));
        if (s.decision_pos == pos) {
            g.decision_token = count;
        }
        size_t begin = pos;
        pos += len;
        ++count;
        if (auto hit = find_stop(s.text, begin, pos, req.stop, next_stop)) {
            const auto& str = req.stop[hit->first];
            g.finish_reason = "stop";
            g.stop_reason = str;
            visible = hit->second + (req.include_stop_str_in_output ? str.size() : 0);
            break;
        }
        if (count >= req.max_tokens) {
            visible = pos;
            break;
        }
    }
    g.completion_tokens = count;
    g.output = s.text.substr(0, pos);
    g.text = s.text.substr(0, visible);
}

void split_chat(const Profile& profile, const ParsedRequest& req, Generation& g) {
    if (req.endpoint != Endpoint::chat) {
        return;
    }
    if (!req.thinking || profile.server.reasoning_parser.empty()) {
        g.content = g.text;
        return;
    }
    size_t end = g.text.find("</think>");
    if (end == std::string::npos) {
        g.reasoning = g.text;
        g.content = std::nullopt;
        return;
    }
    g.reasoning = g.text.substr(0, end);
    std::string content = g.text.substr(end + std::string_view("</think>").size());
    g.content = content.empty() ? std::nullopt : std::optional<std::string>(content);
}

} // namespace

Generation generate(const Profile& profile, const QuestionBank& bank, const ParsedRequest& req,
                    const GenerateOptions& options) {
    Generation g;
    const PromptItem& prompt = req.prompts.at(options.prompt_index);
    g.prompt_tokens = prompt.tokens;
    // The profile is part of the seed: two server configurations differ in
    // their numerics, so their per-request noise is independent.
    g.seed =
        util::hash64(profile.name + "#" + std::to_string(options.prompt_index), req.content_hash);
    Draws draws(g.seed, options.sighting, profile.behaviour.repeat_noise);
    QuestionFacts facts = bank.find(prompt.question);
    const bool after_space =
        req.endpoint == Endpoint::completions && !prompt.text.empty() && prompt.text.back() == ' ';
    Script script = build_script(profile, bank, req, facts, draws, after_space, g.decisions);
    if (!options.inject_markup.empty()) {
        std::string mark = std::string(options.inject_markup) + " ";
        script.text.insert(script.markup_pos, mark);
    }
    g.decision_alternative = script.decision_alternative;
    if (script.has_open) {
        g.open_token = 0;
        g.open_chosen = script.open_chosen;
        g.open_p = script.open_p;
        g.open_alternative = script.open_alternative;
    }
    cut(script, req, g);
    split_chat(profile, req, g);
    return g;
}

Generation generate(const Profile& profile, const QuestionBank& bank, const nlohmann::json& body,
                    Endpoint endpoint, int sighting) {
    std::string model = body.is_object() && body.contains("model") && body["model"].is_string()
                            ? body["model"].get<std::string>()
                            : std::string(k_default_model_id);
    auto parsed = parse_request(body.dump(), endpoint, profile, model);
    if (auto* err = std::get_if<ApiError>(&parsed)) {
        Generation g;
        g.finish_reason = "error";
        g.text = err->message;
        return g;
    }
    GenerateOptions options;
    options.sighting = sighting;
    return generate(profile, bank, std::get<ParsedRequest>(parsed), options);
}

} // namespace diffeval::sim
