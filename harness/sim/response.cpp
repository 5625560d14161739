// JSON and SSE rendering. Streams are cut into one event per generated
// token, holding back the last (longest stop string - 1) characters until
// they can no longer start a stop string, as vLLM's detokenizer does, so
// concatenated deltas always equal the non-streaming text.
#include <harness/sim/response.hpp>

#include <harness/sim/logprobs.hpp>
#include <harness/util/hash.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace diffeval::sim {

namespace {

using ojson = nlohmann::ordered_json;

std::string dump(const ojson& j) {
    return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

size_t code_points(std::string_view s) {
    size_t n = 0;
    for (char c : s) {
        n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }
    return n;
}

// vLLM writes prompt_tokens_details as null in bodies and leaves it out of
// the usage chunk of a stream (which drops nulls).
enum class Details { null, omitted };

ojson usage_json(int prompt, int completion, Details details) {
    ojson u;
    u["prompt_tokens"] = prompt;
    u["total_tokens"] = prompt + completion;
    u["completion_tokens"] = completion;
    if (details == Details::null) {
        u["prompt_tokens_details"] = nullptr;
    }
    return u;
}

ojson bytes_of(std::string_view s) {
    ojson b = ojson::array();
    for (char c : s) {
        b.push_back(static_cast<unsigned char>(c));
    }
    return b;
}

// Completions logprobs for tokens [begin, end); `offset` is the running
// text offset in characters, advanced past the tokens.
ojson completion_logprobs(const Generation& g, size_t begin, size_t end, int top_n,
                          size_t& offset) {
    ojson lp;
    lp["text_offset"] = ojson::array();
    lp["token_logprobs"] = ojson::array();
    lp["tokens"] = ojson::array();
    lp["top_logprobs"] = ojson::array();
    for (const auto& t : token_logprobs(g, begin, end, std::max(top_n, 1))) {
        lp["text_offset"].push_back(offset);
        offset += code_points(t.token);
        lp["token_logprobs"].push_back(t.logprob);
        lp["tokens"].push_back(t.token);
        ojson top = ojson::object();
        for (const auto& a : t.top) {
            if (!top.contains(a.token)) {
                top[a.token] = a.logprob;
            }
        }
        lp["top_logprobs"].push_back(top);
    }
    return lp;
}

ojson chat_logprobs(const Generation& g, size_t begin, size_t end, int top_n) {
    ojson content = ojson::array();
    for (const auto& t : token_logprobs(g, begin, end, top_n)) {
        ojson item;
        item["token"] = t.token;
        item["logprob"] = t.logprob;
        item["bytes"] = bytes_of(t.token);
        ojson top = ojson::array();
        for (const auto& a : t.top) {
            ojson alt;
            alt["token"] = a.token;
            alt["logprob"] = a.logprob;
            alt["bytes"] = bytes_of(a.token);
            top.push_back(alt);
        }
        item["top_logprobs"] = top;
        content.push_back(item);
    }
    ojson lp;
    lp["content"] = content;
    return lp;
}

bool separates_reasoning(const Profile& profile, const ParsedRequest& r) {
    return r.endpoint == Endpoint::chat && r.thinking && !profile.server.reasoning_parser.empty();
}

void put_reasoning(const Profile& profile, ojson& obj, const ojson& value) {
    auto field = profile.server.reasoning_field;
    if (field == ReasoningField::reasoning || field == ReasoningField::both) {
        obj["reasoning"] = value;
    }
    if (field == ReasoningField::reasoning_content || field == ReasoningField::both) {
        obj["reasoning_content"] = value;
    }
}

ojson message_json(const Profile& profile, const ParsedRequest& r, const Generation& g) {
    ojson m;
    m["role"] = "assistant";
    m["content"] = g.content ? ojson(*g.content) : ojson(nullptr);
    m["refusal"] = nullptr;
    m["annotations"] = nullptr;
    m["audio"] = nullptr;
    m["function_call"] = nullptr;
    m["tool_calls"] = ojson::array();
    bool has = separates_reasoning(profile, r) && !g.reasoning.empty();
    put_reasoning(profile, m, has ? ojson(g.reasoning) : ojson(nullptr));
    return m;
}

ojson envelope(const ResponseMeta& meta, const char* object) {
    ojson j;
    j["id"] = meta.id;
    j["object"] = object;
    j["created"] = meta.created;
    j["model"] = meta.model;
    return j;
}

int prompt_tokens_of(const ParsedRequest& r) {
    int n = 0;
    for (const auto& p : r.prompts) {
        n += p.tokens;
    }
    return n;
}

int completion_tokens_of(const std::vector<Generation>& choices) {
    int n = 0;
    for (const auto& g : choices) {
        n += g.completion_tokens;
    }
    return n;
}

// One streamed step: characters [from, to) of the text and tokens
// [tok_begin, tok_end).
struct Delta {
    size_t from = 0;
    size_t to = 0;
    size_t tok_begin = 0;
    size_t tok_end = 0;
    bool final = false;
};

std::vector<Delta> deltas_of(const Generation& g, const ParsedRequest& r) {
    size_t hold = 0;
    if (!r.include_stop_str_in_output) {
        for (const auto& s : r.stop) {
            hold = std::max(hold, s.size() - 1);
        }
    }
    std::vector<Delta> out;
    const size_t visible = g.text.size();
    const auto n = static_cast<size_t>(g.completion_tokens);
    size_t emitted = 0;
    for (size_t i = 0; i < n; ++i) {
        Delta d{emitted, visible, i, i + 1, i + 1 == n};
        if (!d.final && i < g.token_spans.size()) {
            size_t end = g.token_spans[i].first + g.token_spans[i].second;
            size_t to = end > hold ? end - hold : 0;
            to = std::min(std::max(to, emitted), visible);
            while (to > emitted && to < g.text.size() &&
                   (static_cast<unsigned char>(g.text[to]) & 0xC0) == 0x80) {
                --to;
            }
            d.to = to;
        }
        emitted = d.to;
        out.push_back(d);
    }
    if (out.empty()) {
        out.push_back(Delta{0, visible, 0, 0, true});
    }
    return out;
}

std::string event(const ojson& j) {
    return "data: " + dump(j) + "\n\n";
}

void completion_stream(const ParsedRequest& r, const Generation& g, size_t index,
                       const ResponseMeta& meta, std::vector<StreamEvent>& out) {
    size_t offset = 0;
    bool echoed = !r.echo;
    for (const auto& d : deltas_of(g, r)) {
        ojson c = envelope(meta, "text_completion");
        ojson choice;
        choice["index"] = index;
        std::string text = g.text.substr(d.from, d.to - d.from);
        if (!echoed) {
            text = r.prompts[index / static_cast<size_t>(r.n)].text + text;
            echoed = true;
        }
        choice["text"] = text;
        choice["logprobs"] =
            r.logprobs ? completion_logprobs(g, d.tok_begin, d.tok_end, *r.logprobs, offset)
                       : ojson(nullptr);
        choice["finish_reason"] = d.final ? ojson(g.finish_reason) : ojson(nullptr);
        choice["stop_reason"] = d.final ? ojson(g.stop_reason) : ojson(nullptr);
        c["choices"] = ojson::array({choice});
        out.push_back({event(c), static_cast<int>(d.tok_end - d.tok_begin)});
    }
}

void chat_stream(const Profile& profile, const ParsedRequest& r, const Generation& g, size_t index,
                 const ResponseMeta& meta, std::vector<StreamEvent>& out) {
    {
        ojson c = envelope(meta, "chat.completion.chunk");
        ojson choice;
        choice["index"] = index;
        choice["delta"] = {{"role", "assistant"}, {"content", ""}};
        choice["logprobs"] = nullptr;
        choice["finish_reason"] = nullptr;
        c["choices"] = ojson::array({choice});
        out.push_back({event(c), 0});
    }
    // Reasoning is text [0, r_end), content is [c_begin, end); "</think>"
    // itself belongs to neither, as with vLLM's qwen3 reasoning parser.
    const bool split = separates_reasoning(profile, r);
    size_t r_end = 0;
    size_t c_begin = 0;
    if (split) {
        constexpr std::string_view k_end = "</think>";
        size_t at = g.text.find(k_end);
        r_end = at == std::string::npos ? g.text.size() : at;
        c_begin = at == std::string::npos ? std::string::npos : at + k_end.size();
    }
    // Tokens of skipped (empty) deltas ride on the next chunk sent.
    size_t pending_tok_begin = 0;
    for (const auto& d : deltas_of(g, r)) {
        ojson delta = ojson::object();
        size_t reasoning_to = std::min(d.to, r_end);
        if (split && d.from < reasoning_to) {
            put_reasoning(profile, delta, g.text.substr(d.from, reasoning_to - d.from));
        }
        if (c_begin != std::string::npos) {
            size_t from = std::max(d.from, c_begin);
            if (from < d.to || !split) {
                delta["content"] = from < d.to ? g.text.substr(from, d.to - from) : "";
            }
        }
        if (delta.empty() && !d.final) {
            continue;
        }
        ojson c = envelope(meta, "chat.completion.chunk");
        ojson choice;
        choice["index"] = index;
        choice["delta"] = delta;
        choice["logprobs"] = r.logprobs
                                 ? chat_logprobs(g, pending_tok_begin, d.tok_end, *r.logprobs)
                                 : ojson(nullptr);
        choice["finish_reason"] = d.final ? ojson(g.finish_reason) : ojson(nullptr);
        if (d.final) {
            choice["stop_reason"] = g.stop_reason;
        }
        c["choices"] = ojson::array({choice});
        out.push_back({event(c), static_cast<int>(d.tok_end - pending_tok_begin)});
        pending_tok_begin = d.tok_end;
    }
}

} // namespace

std::string response_id(const ParsedRequest& request, int sighting) {
    uint64_t seed = request.content_hash + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(sighting);
    return fmt::format("{}{:016x}{:016x}",
                       request.endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-",
                       util::hash64("id-high", seed), util::hash64("id-low", seed));
}

std::string response_body(const Profile& profile, const ParsedRequest& r,
                          const std::vector<Generation>& choices, const ResponseMeta& meta) {
    const bool chat = r.endpoint == Endpoint::chat;
    ojson j = envelope(meta, chat ? "chat.completion" : "text_completion");
    ojson list = ojson::array();
    for (size_t i = 0; i < choices.size(); ++i) {
        const Generation& g = choices[i];
        ojson c;
        c["index"] = i;
        if (chat) {
            c["message"] = message_json(profile, r, g);
            c["logprobs"] =
                r.logprobs ? chat_logprobs(g, 0, g.completion_tokens, *r.logprobs) : ojson(nullptr);
        } else {
            std::string text = g.text;
            if (r.echo) {
                text = r.prompts[i / static_cast<size_t>(r.n)].text + text;
            }
            c["text"] = text;
            size_t offset = 0;
            c["logprobs"] =
                r.logprobs ? completion_logprobs(g, 0, g.completion_tokens, *r.logprobs, offset)
                           : ojson(nullptr);
        }
        c["finish_reason"] = g.finish_reason;
        c["stop_reason"] = g.stop_reason;
        if (!chat) {
            c["prompt_logprobs"] = nullptr;
        }
        list.push_back(c);
    }
    j["choices"] = list;
    j["service_tier"] = nullptr;
    j["system_fingerprint"] = nullptr;
    j["usage"] = usage_json(prompt_tokens_of(r), completion_tokens_of(choices), Details::null);
    if (chat) {
        j["prompt_logprobs"] = nullptr;
    }
    j["kv_transfer_params"] = nullptr;
    return dump(j);
}

std::vector<StreamEvent> response_events(const Profile& profile, const ParsedRequest& r,
                                         const std::vector<Generation>& choices,
                                         const ResponseMeta& meta) {
    std::vector<StreamEvent> out;
    const bool chat = r.endpoint == Endpoint::chat;
    for (size_t i = 0; i < choices.size(); ++i) {
        if (chat) {
            chat_stream(profile, r, choices[i], i, meta, out);
        } else {
            completion_stream(r, choices[i], i, meta, out);
        }
    }
    if (r.include_usage) {
        ojson c = envelope(meta, chat ? "chat.completion.chunk" : "text_completion");
        c["choices"] = ojson::array();
        c["usage"] =
            usage_json(prompt_tokens_of(r), completion_tokens_of(choices), Details::omitted);
        out.push_back({event(c), 0});
    }
    out.push_back({"data: [DONE]\n\n", 0});
    return out;
}

} // namespace diffeval::sim
