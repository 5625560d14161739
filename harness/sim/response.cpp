// JSON and SSE rendering. Streams are cut into one event per generated
// token, holding back the last (longest stop string - 1) characters until
// they can no longer start a stop string, as vLLM's detokenizer does, so
// concatenated deltas always equal the non-streaming text.
//
// The bytes are those nlohmann::ordered_json's dump() made of these objects
// when the simulator built them as DOMs (json_text.hpp); written as text
// they cost a fraction, which mattered most for streams (a DOM and a dump
// per token).
#include <harness/sim/response.hpp>

#include <harness/sim/logprobs.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/json_text.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace diffeval::sim {

namespace {

size_t code_points(std::string_view s) {
    size_t n = 0;
    for (char c : s) {
        n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }
    return n;
}

// A string value, or null.
void append_string_or_null(std::string& out, const std::optional<std::string_view>& s) {
    if (s) {
        util::append_dump_string(out, *s);
    } else {
        out += "null";
    }
}

// A stop reason: null or the stop string (anything else as nlohmann dumps it).
void append_stop_reason(std::string& out, const nlohmann::json& stop) {
    if (stop.is_null()) {
        out += "null";
    } else if (stop.is_string()) {
        util::append_dump_string(out, stop.get_ref<const std::string&>());
    } else {
        out += stop.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
}

// vLLM writes prompt_tokens_details as null in bodies and leaves it out of
// the usage chunk of a stream (which drops nulls).
enum class Details { null, omitted };

void append_usage(std::string& out, int prompt, int completion, Details details) {
    out += R"({"prompt_tokens":)";
    util::append_dump_int(out, prompt);
    out += R"(,"total_tokens":)";
    util::append_dump_int(out, prompt + completion);
    out += R"(,"completion_tokens":)";
    util::append_dump_int(out, completion);
    if (details == Details::null) {
        out += R"(,"prompt_tokens_details":null)";
    }
    out += '}';
}

void append_bytes(std::string& out, std::string_view s) {
    out += '[';
    for (size_t i = 0; i < s.size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        util::append_dump_uint(out, static_cast<unsigned char>(s[i]));
    }
    out += ']';
}

// Completions logprobs for tokens [begin, end); `offset` is the running
// text offset in characters, advanced past the tokens.
void append_completion_logprobs(std::string& out, const Generation& g, size_t begin, size_t end,
                                int top_n, size_t& offset) {
    const auto tokens = token_logprobs(g, begin, end, std::max(top_n, 1));
    out += R"({"text_offset":[)";
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        util::append_dump_uint(out, offset);
        offset += code_points(tokens[i].token);
    }
    out += R"(],"token_logprobs":[)";
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        util::append_dump_double(out, tokens[i].logprob);
    }
    out += R"(],"tokens":[)";
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        util::append_dump_string(out, tokens[i].token);
    }
    out += R"(],"top_logprobs":[)";
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        // An object keyed by token: the first of equal tokens stays.
        const auto& top = tokens[i].top;
        out += '{';
        bool first = true;
        for (size_t k = 0; k < top.size(); ++k) {
            bool seen = std::any_of(top.begin(), top.begin() + static_cast<ptrdiff_t>(k),
                                    [&](const TopLogprob& a) { return a.token == top[k].token; });
            if (seen) {
                continue;
            }
            if (!first) {
                out += ',';
            }
            first = false;
            util::append_dump_string(out, top[k].token);
            out += ':';
            util::append_dump_double(out, top[k].logprob);
        }
        out += '}';
    }
    out += "]}";
}

// {"token", "logprob", "bytes"} of one token, without the closing brace.
void append_chat_token(std::string& out, std::string_view token, double logprob) {
    out += R"({"token":)";
    util::append_dump_string(out, token);
    out += R"(,"logprob":)";
    util::append_dump_double(out, logprob);
    out += R"(,"bytes":)";
    append_bytes(out, token);
}

void append_chat_logprobs(std::string& out, const Generation& g, size_t begin, size_t end,
                          int top_n) {
    out += R"({"content":[)";
    bool first = true;
    for (const auto& t : token_logprobs(g, begin, end, top_n)) {
        if (!first) {
            out += ',';
        }
        first = false;
        append_chat_token(out, t.token, t.logprob);
        out += R"(,"top_logprobs":[)";
        for (size_t k = 0; k < t.top.size(); ++k) {
            if (k > 0) {
                out += ',';
            }
            append_chat_token(out, t.top[k].token, t.top[k].logprob);
            out += '}';
        }
        out += "]}";
    }
    out += "]}";
}

bool separates_reasoning(const Profile& profile, const ParsedRequest& r) {
    return r.endpoint == Endpoint::chat && r.thinking && !profile.server.reasoning_parser.empty();
}

// The reasoning member(s) the profile's reasoning_field names, each with a
// leading comma unless `first`.
void append_reasoning(std::string& out, const Profile& profile,
                      const std::optional<std::string_view>& value, bool first) {
    auto field = profile.server.reasoning_field;
    if (field == ReasoningField::reasoning || field == ReasoningField::both) {
        out += first ? R"("reasoning":)" : R"(,"reasoning":)";
        append_string_or_null(out, value);
        first = false;
    }
    if (field == ReasoningField::reasoning_content || field == ReasoningField::both) {
        out += first ? R"("reasoning_content":)" : R"(,"reasoning_content":)";
        append_string_or_null(out, value);
    }
}

void append_message(std::string& out, const Profile& profile, const ParsedRequest& r,
                    const Generation& g) {
    out += R"({"role":"assistant","content":)";
    append_string_or_null(out,
                          g.content ? std::optional<std::string_view>(*g.content) : std::nullopt);
    out += R"(,"refusal":null,"annotations":null,"audio":null,"function_call":null,)"
           R"("tool_calls":[])";
    bool has = separates_reasoning(profile, r) && !g.reasoning.empty();
    append_reasoning(out, profile,
                     has ? std::optional<std::string_view>(g.reasoning) : std::nullopt, false);
    out += '}';
}

// The opening members of every response object, up to the comma before
// "choices": `{"id":...,"object":...,"created":...,"model":...`.
std::string envelope(const ResponseMeta& meta, std::string_view object) {
    std::string out = R"({"id":)";
    util::append_dump_string(out, meta.id);
    out += R"(,"object":)";
    util::append_dump_string(out, object);
    out += R"(,"created":)";
    util::append_dump_int(out, meta.created);
    out += R"(,"model":)";
    util::append_dump_string(out, meta.model);
    return out;
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

// An event carrying one chunk that starts with `head` (an envelope) and
// ends with `choice`, the one choice's object.
StreamEvent chunk_event(const std::string& head, const std::string& choice, int tokens) {
    std::string data = "data: ";
    data.reserve(head.size() + choice.size() + 24);
    data += head;
    data += R"(,"choices":[)";
    data += choice;
    data += "]}\n\n";
    return {std::move(data), tokens};
}

void completion_stream(const ParsedRequest& r, const Generation& g, size_t index,
                       const ResponseMeta& meta, std::vector<StreamEvent>& out) {
    const std::string head = envelope(meta, "text_completion");
    size_t offset = 0;
    bool echoed = !r.echo;
    std::string choice;
    for (const auto& d : deltas_of(g, r)) {
        choice = R"({"index":)";
        util::append_dump_uint(choice, index);
        choice += R"(,"text":)";
        std::string_view text = std::string_view(g.text).substr(d.from, d.to - d.from);
        if (!echoed) {
            util::append_dump_string(choice, r.prompts[index / static_cast<size_t>(r.n)].text +
                                                 std::string(text));
            echoed = true;
        } else {
            util::append_dump_string(choice, text);
        }
        choice += R"(,"logprobs":)";
        if (r.logprobs) {
            append_completion_logprobs(choice, g, d.tok_begin, d.tok_end, *r.logprobs, offset);
        } else {
            choice += "null";
        }
        choice += R"(,"finish_reason":)";
        append_string_or_null(choice, d.final ? std::optional<std::string_view>(g.finish_reason)
                                              : std::nullopt);
        choice += R"(,"stop_reason":)";
        append_stop_reason(choice, d.final ? g.stop_reason : nlohmann::json());
        choice += '}';
        out.push_back(chunk_event(head, choice, static_cast<int>(d.tok_end - d.tok_begin)));
    }
}

void chat_stream(const Profile& profile, const ParsedRequest& r, const Generation& g, size_t index,
                 const ResponseMeta& meta, std::vector<StreamEvent>& out) {
    const std::string head = envelope(meta, "chat.completion.chunk");
    std::string choice = R"({"index":)";
    util::append_dump_uint(choice, index);
    choice += R"(,"delta":{"role":"assistant","content":""},"logprobs":null,)"
              R"("finish_reason":null})";
    out.push_back(chunk_event(head, choice, 0));
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
    const std::string_view text = g.text;
    // Tokens of skipped (empty) deltas ride on the next chunk sent.
    size_t pending_tok_begin = 0;
    std::string delta;
    for (const auto& d : deltas_of(g, r)) {
        delta = "{";
        size_t reasoning_to = std::min(d.to, r_end);
        if (split && d.from < reasoning_to) {
            append_reasoning(delta, profile, text.substr(d.from, reasoning_to - d.from), true);
        }
        if (c_begin != std::string::npos) {
            size_t from = std::max(d.from, c_begin);
            if (from < d.to || !split) {
                delta += delta.size() > 1 ? R"(,"content":)" : R"("content":)";
                util::append_dump_string(delta, from < d.to ? text.substr(from, d.to - from)
                                                            : std::string_view());
            }
        }
        delta += '}';
        if (delta.size() == 2 && !d.final) {
            continue;
        }
        choice = R"({"index":)";
        util::append_dump_uint(choice, index);
        choice += R"(,"delta":)";
        choice += delta;
        choice += R"(,"logprobs":)";
        if (r.logprobs) {
            append_chat_logprobs(choice, g, pending_tok_begin, d.tok_end, *r.logprobs);
        } else {
            choice += "null";
        }
        choice += R"(,"finish_reason":)";
        append_string_or_null(choice, d.final ? std::optional<std::string_view>(g.finish_reason)
                                              : std::nullopt);
        if (d.final) {
            choice += R"(,"stop_reason":)";
            append_stop_reason(choice, g.stop_reason);
        }
        choice += '}';
        out.push_back(chunk_event(head, choice, static_cast<int>(d.tok_end - pending_tok_begin)));
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
    std::string out = envelope(meta, chat ? "chat.completion" : "text_completion");
    out += R"(,"choices":[)";
    for (size_t i = 0; i < choices.size(); ++i) {
        const Generation& g = choices[i];
        if (i > 0) {
            out += ',';
        }
        out += R"({"index":)";
        util::append_dump_uint(out, i);
        if (chat) {
            out += R"(,"message":)";
            append_message(out, profile, r, g);
            out += R"(,"logprobs":)";
            if (r.logprobs) {
                append_chat_logprobs(out, g, 0, g.completion_tokens, *r.logprobs);
            } else {
                out += "null";
            }
        } else {
            out += R"(,"text":)";
            if (r.echo) {
                util::append_dump_string(out,
                                         r.prompts[i / static_cast<size_t>(r.n)].text + g.text);
            } else {
                util::append_dump_string(out, g.text);
            }
            out += R"(,"logprobs":)";
            size_t offset = 0;
            if (r.logprobs) {
                append_completion_logprobs(out, g, 0, g.completion_tokens, *r.logprobs, offset);
            } else {
                out += "null";
            }
        }
        out += R"(,"finish_reason":)";
        util::append_dump_string(out, g.finish_reason);
        out += R"(,"stop_reason":)";
        append_stop_reason(out, g.stop_reason);
        if (!chat) {
            out += R"(,"prompt_logprobs":null)";
        }
        out += '}';
    }
    out += R"(],"service_tier":null,"system_fingerprint":null,"usage":)";
    append_usage(out, prompt_tokens_of(r), completion_tokens_of(choices), Details::null);
    if (chat) {
        out += R"(,"prompt_logprobs":null)";
    }
    out += R"(,"kv_transfer_params":null})";
    return out;
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
        std::string data = "data: ";
        data += envelope(meta, chat ? "chat.completion.chunk" : "text_completion");
        data += R"(,"choices":[],"usage":)";
        append_usage(data, prompt_tokens_of(r), completion_tokens_of(choices), Details::omitted);
        data += "}\n\n";
        out.push_back({std::move(data), 0});
    }
    out.push_back({"data: [DONE]\n\n", 0});
    return out;
}

} // namespace diffeval::sim
