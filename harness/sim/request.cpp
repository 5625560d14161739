// Request validation in the order vLLM applies it: JSON decoding, field
// checks of the request model, the served-model check, then the token
// budget. Messages follow vLLM's wording so clients that match on them
// (and users reading a log) see what a real server would say.
//
// The simulator was first written on nlohmann's DOM, and its answers are
// defined by what that parser made of a body: the last of duplicate keys,
// integers as signed or unsigned 64 bits (an unsigned one read as int64
// wrapping), and the content hash over nlohmann's dump. The simdjson DOM
// read here keeps every duplicate and refuses a leading byte-order mark,
// integers past 64 bits and nesting past 1,024 levels, all of which
// nlohmann takes; so members are looked up last-wins, and a body simdjson
// refuses is handed to nlohmann, whose own dump (the same values) is read
// instead.
#include <harness/sim/request.hpp>

#include <harness/sim/recent_prefixes.hpp>
#include <harness/sim/tokenizer.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/json_text.hpp>
#include <harness/util/simdjson_member.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <algorithm>
#include <array>

namespace diffeval::sim {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;
using util::last_member;

// Fields that only say how the answer is delivered, left out of the
// content hash.
constexpr std::array<std::string_view, 7> k_transport_keys = {
    "echo", "logprobs", "request_id", "stream", "stream_options", "top_logprobs", "user"};

// Bodies up to this size are parsed by one parser per thread that keeps its
// buffers; a larger one gets a parser of its own, so no thread holds on to
// the room a 64 MiB body needed.
constexpr size_t k_max_pooled_bytes = size_t{1} << 20;

// The deepest nesting a request body may have: 10,000 levels of recursion
// fit in a thread's stack many times over.
constexpr size_t k_max_nesting = 10'000;

// The content hash's state is recorded after every this many bytes.
constexpr size_t k_hash_block = 256;

std::string_view endpoint_prefix(Endpoint endpoint) {
    return endpoint == Endpoint::chat ? "chat:" : "completions:";
}

// The deepest nesting of arrays and objects in `text`, valid JSON.
size_t nesting_depth(std::string_view text) {
    size_t depth = 0;
    size_t deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return deepest;
}

// A request body's DOM as nlohmann's parser reads it; no root when the body
// is not JSON.
class Document {
public:
    explicit Document(std::string_view body) {
        thread_local simdjson::dom::parser pooled(k_max_pooled_bytes);
        simdjson::dom::parser& parser =
            body.size() <= k_max_pooled_bytes ? pooled : m_parser.emplace();
        element root;
        if (parser.parse(body.data(), body.size()).get(root) == simdjson::SUCCESS) {
            m_root = root;
            return;
        }
        // The dump below and the content hash recurse once per level: past
        // k_max_nesting a body is refused as undecodable (Python's json
        // module gives up far sooner, at its recursion limit), not read until
        // the stack runs out.
        if (nesting_depth(body) > k_max_nesting) {
            return;
        }
        nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
        if (j.is_discarded()) {
            return;
        }
        m_rewritten = j.dump();
        simdjson::dom::parser& own = m_parser.emplace();
        if (own.allocate(m_rewritten.size(), nesting_depth(m_rewritten) + 1) == simdjson::SUCCESS &&
            own.parse(m_rewritten.data(), m_rewritten.size()).get(root) == simdjson::SUCCESS) {
            m_root = root;
        }
    }

    const std::optional<element>& root() const { return m_root; }

private:
    std::optional<simdjson::dom::parser> m_parser; // when the pooled one does not do
    std::string m_rewritten;                       // nlohmann's dump of a refused body
    std::optional<element> m_root;
};

// An object's members sorted by key (bytes compared unsigned, as
// std::string compares them) with duplicates resolved to the last: the
// std::map nlohmann would have built. The content hash writes them in this
// order, and validation looks the body's fields up here.
class Members {
public:
    struct Field {
        std::string_view key;
        element value;
    };

    explicit Members(object obj) {
        for (auto field : obj) {
            m_fields.push_back({field.key, field.value});
        }
        std::stable_sort(m_fields.begin(), m_fields.end(),
                         [](const Field& a, const Field& b) { return a.key < b.key; });
        // Of equal keys, now in document order, keep the last.
        size_t kept = 0;
        for (size_t i = 0; i < m_fields.size(); ++i) {
            if (i + 1 < m_fields.size() && m_fields[i + 1].key == m_fields[i].key) {
                continue;
            }
            m_fields[kept++] = m_fields[i];
        }
        m_fields.resize(kept);
    }

    std::optional<element> find(std::string_view key) const {
        auto it = std::lower_bound(m_fields.begin(), m_fields.end(), key,
                                   [](const Field& f, std::string_view k) { return f.key < k; });
        if (it == m_fields.end() || it->key != key) {
            return std::nullopt;
        }
        return it->value;
    }

    const std::vector<Field>& fields() const { return m_fields; }

private:
    std::vector<Field> m_fields;
};

// A field that is there and not null: what vLLM's request model treats as
// given.
bool given(const std::optional<element>& v) {
    return v && !v->is_null();
}

bool is_integer(element v) {
    return v.type() == element_type::INT64 || v.type() == element_type::UINT64;
}

// An integer as nlohmann's get<int64_t>() reads it: an unsigned value past
// INT64_MAX wraps.
int64_t integer_of(element v) {
    if (v.type() == element_type::UINT64) {
        return static_cast<int64_t>(v.get_uint64().value_unsafe());
    }
    return v.get_int64().value_unsafe();
}

std::string_view string_of(element v) {
    return v.get_string().value_unsafe();
}

// nlohmann's name of the type of `v`, as its type errors print it.
std::string_view type_name(element v) {
    switch (v.type()) {
    case element_type::ARRAY:
        return "array";
    case element_type::OBJECT:
        return "object";
    case element_type::STRING:
        return "string";
    case element_type::BOOL:
        return "boolean";
    case element_type::NULL_VALUE:
        return "null";
    default:
        return "number";
    }
}

void append_canonical(std::string& out, element v);

// The object of `members` as append_canonical writes it, leaving out the
// members whose key `skip` picks.
template <typename Skip> void append_object(std::string& out, const Members& members, Skip skip) {
    out += '{';
    bool first = true;
    for (const auto& f : members.fields()) {
        if (skip(f.key)) {
            continue;
        }
        if (!first) {
            out += ',';
        }
        first = false;
        util::append_valid_dump_string(out, f.key);
        out += ':';
        append_canonical(out, f.value);
    }
    out += '}';
}

// `v` as nlohmann's compact dump() writes it, objects' keys sorted.
void append_canonical(std::string& out, element v) {
    switch (v.type()) {
    case element_type::OBJECT:
        append_object(out, Members(v.get_object().value_unsafe()),
                      [](std::string_view) { return false; });
        return;
    case element_type::ARRAY: {
        out += '[';
        bool first = true;
        const array items = v.get_array().value_unsafe();
        for (element item : items) {
            if (!first) {
                out += ',';
            }
            first = false;
            append_canonical(out, item);
        }
        out += ']';
        return;
    }
    case element_type::STRING:
        util::append_valid_dump_string(out, string_of(v));
        return;
    case element_type::INT64:
        util::append_dump_int(out, v.get_int64().value_unsafe());
        return;
    case element_type::UINT64:
        util::append_dump_uint(out, v.get_uint64().value_unsafe());
        return;
    case element_type::DOUBLE:
        util::append_dump_double(out, v.get_double().value_unsafe());
        return;
    case element_type::BOOL:
        out += v.get_bool().value_unsafe() ? "true" : "false";
        return;
    case element_type::NULL_VALUE:
        out += "null";
        return;
    }
}

// The content hash of a body whose members are `body` (see parse_request).
uint64_t content_hash(const Members& body, Endpoint endpoint, size_t body_size) {
    std::string text(endpoint_prefix(endpoint));
    text.reserve(body_size + 64);
    append_object(text, body, [](std::string_view key) {
        return std::find(k_transport_keys.begin(), k_transport_keys.end(), key) !=
               k_transport_keys.end();
    });
    // One framing's canonical bodies begin alike: the hash goes on from a
    // state recorded after a block the body shares with a recent one.
    thread_local RecentPrefixes<util::Hash64Stream> recent;
    auto [pos, hash] = recent.resume(text, util::Hash64Stream());
    while (pos < text.size()) {
        const size_t n = std::min(k_hash_block, text.size() - pos);
        hash.add(std::string_view(text).substr(pos, n));
        pos += n;
        recent.checkpoint(pos, hash);
    }
    recent.finish(text);
    return hash.value();
}

// Prompts are counted by one counter per thread, which counts the few-shot
// examples a framing's prompts repeat once.
int prompt_tokens(std::string_view prompt) {
    thread_local PrefixTokenCounter counter;
    return counter.count(prompt);
}

ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt) {
    return ApiError{400, "BadRequestError", std::move(message), std::move(param)};
}

// The text of a message's content: a string, or the text parts of a list.
// A part whose "type" is not a string made nlohmann's value() throw, which
// the server answers as any exception, with a 500 carrying its message.
std::optional<ApiError> content_text(const std::optional<element>& content, std::string& out) {
    out.clear();
    std::string_view text;
    if (content && content->get_string().get(text) == simdjson::SUCCESS) {
        out = text;
        return std::nullopt;
    }
    array parts;
    if (!content || content->get_array().get(parts) != simdjson::SUCCESS) {
        return std::nullopt;
    }
    for (element part : parts) {
        object obj;
        if (part.get_object().get(obj) != simdjson::SUCCESS) {
            continue;
        }
        auto type = last_member(obj, "type");
        if (type && !type->is_string()) {
            return ApiError{
                500, "InternalServerError",
                fmt::format("[json.exception.type_error.302] type must be string, but is {}",
                            type_name(*type)),
                std::nullopt};
        }
        if (!type || string_of(*type) != "text") {
            continue;
        }
        if (auto t = last_member(obj, "text"); t && t->is_string()) {
            out += string_of(*t);
        }
    }
    return std::nullopt;
}

std::optional<ApiError> read_stop(const Members& body, ParsedRequest& r) {
    auto v = body.find("stop");
    if (!given(v)) {
        return std::nullopt;
    }
    if (v->is_string()) {
        if (!string_of(*v).empty()) {
            r.stop.emplace_back(string_of(*v));
        }
        return std::nullopt;
    }
    if (array list; v->get_array().get(list) == simdjson::SUCCESS) {
        for (element s : list) {
            if (!s.is_string()) {
                return bad_request("stop: Input should be a valid string", "stop");
            }
            if (!string_of(s).empty()) {
                r.stop.emplace_back(string_of(s));
            }
        }
        return std::nullopt;
    }
    return bad_request("stop: Input should be a valid string or list of strings", "stop");
}

// An optional integer field; `error` when present with another type.
std::optional<ApiError> read_int(const Members& body, const char* key,
                                 std::optional<int64_t>& out) {
    auto v = body.find(key);
    if (!given(v)) {
        return std::nullopt;
    }
    if (!is_integer(*v)) {
        return bad_request(fmt::format("{}: Input should be a valid integer", key), key);
    }
    out = integer_of(*v);
    return std::nullopt;
}

std::optional<ApiError> read_bool(const Members& body, const char* key, bool& out) {
    auto v = body.find(key);
    if (!given(v)) {
        return std::nullopt;
    }
    if (!v->is_bool()) {
        return bad_request(fmt::format("{}: Input should be a valid boolean", key), key);
    }
    out = v->get_bool().value_unsafe();
    return std::nullopt;
}

std::optional<ApiError> read_completion_prompts(const Members& body, ParsedRequest& r) {
    auto v = body.find("prompt");
    auto empty =
        bad_request("Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
    if (!given(v)) {
        return empty;
    }
    auto add = [&r](std::string_view text) {
        PromptItem p;
        p.tokens = prompt_tokens(text);
        p.question = extract_question(text);
        p.text = text;
        r.prompts.push_back(std::move(p));
    };
    if (v->is_string()) {
        if (string_of(*v).empty()) {
            return empty;
        }
        add(string_of(*v));
        return std::nullopt;
    }
    array list;
    if (v->get_array().get(list) != simdjson::SUCCESS || list.begin() == list.end()) {
        return empty;
    }
    if (is_integer(list.at(0).value_unsafe())) {
        // Token ids: the model sees a prompt it cannot read as a question.
        // (Counted here: simdjson's size() stops at 2^24 - 1.)
        std::string ids;
        int count = 0;
        for (element t : list) {
            if (!is_integer(t) || integer_of(t) < 0) {
                return bad_request("prompt: token ids must be non-negative integers", "prompt");
            }
            ids += std::to_string(integer_of(t)) + " ";
            ++count;
        }
        PromptItem p;
        p.tokens = count;
        p.question = ids;
        p.text = ids;
        r.prompts.push_back(std::move(p));
        return std::nullopt;
    }
    for (element p : list) {
        if (!p.is_string()) {
            return bad_request("prompt: Input should be a valid string or list of strings",
                               "prompt");
        }
        add(string_of(p));
    }
    return std::nullopt;
}

std::optional<ApiError> read_chat(const Members& body, ParsedRequest& r) {
    auto v = body.find("messages");
    if (!given(v)) {
        return bad_request("messages: Field required", "messages");
    }
    array list;
    if (v->get_array().get(list) != simdjson::SUCCESS) {
        return bad_request("messages: Input should be a valid list", "messages");
    }
    // Every role is checked before any content other than a user's is read,
    // as vLLM's request model checks them before the template runs.
    std::vector<ChatMessage> messages;
    std::vector<object> objects;
    std::vector<bool> read;
    std::optional<size_t> last_user;
    for (element m : list) {
        object obj;
        std::optional<element> role;
        if (m.get_object().get(obj) != simdjson::SUCCESS || !(role = last_member(obj, "role")) ||
            !role->is_string()) {
            return bad_request("messages: each message needs a string 'role'", "messages");
        }
        messages.push_back({string_of(*role), {}});
        objects.push_back(obj);
        read.push_back(messages.back().role == "user");
        if (read.back()) {
            if (auto e = content_text(last_member(obj, "content"), messages.back().content)) {
                return e;
            }
            last_user = messages.size() - 1;
        }
    }
    if (auto kw = body.find("chat_template_kwargs"); kw && kw->is_object()) {
        if (auto et = last_member(kw->get_object().value_unsafe(), "enable_thinking");
            et && et->is_bool()) {
            r.thinking = et->get_bool().value_unsafe();
        }
    }
    for (size_t i = 0; i < messages.size(); ++i) {
        if (!read[i]) {
            if (auto e = content_text(last_member(objects[i], "content"), messages[i].content)) {
                return e;
            }
        }
    }
    PromptItem p;
    p.text = render_chat_prompt(messages, r.thinking ? Thinking::on : Thinking::off);
    p.tokens = prompt_tokens(p.text);
    p.question = extract_question(last_user ? messages[*last_user].content : std::string());
    r.prompts.push_back(std::move(p));
    return std::nullopt;
}

std::optional<ApiError> read_logprobs(const Members& body, ParsedRequest& r) {
    if (r.endpoint == Endpoint::completions) {
        std::optional<int64_t> lp;
        if (auto e = read_int(body, "logprobs", lp)) {
            return e;
        }
        if (lp && *lp < 0) {
            return bad_request("`logprobs` must be a positive value or -1.", "logprobs");
        }
        if (lp) {
            r.logprobs = static_cast<int>(std::min<int64_t>(*lp, 20));
        }
        return std::nullopt;
    }
    bool want = false;
    if (auto e = read_bool(body, "logprobs", want)) {
        return e;
    }
    std::optional<int64_t> top;
    if (auto e = read_int(body, "top_logprobs", top)) {
        return e;
    }
    if (top && (*top < 0 || *top > 20)) {
        return bad_request("`top_logprobs` must be a value between 0 and 20.", "top_logprobs");
    }
    if (top && *top > 0 && !want) {
        return bad_request("when using `top_logprobs`, `logprobs` must be set to true.",
                           "top_logprobs");
    }
    if (want) {
        r.logprobs = static_cast<int>(top.value_or(0));
    }
    return std::nullopt;
}

// stop, include_stop_str_in_output, stream, echo and stream_options.
std::optional<ApiError> read_output_flags(const Members& body, Endpoint endpoint,
                                          ParsedRequest& r) {
    if (auto e = read_stop(body, r)) {
        return *e;
    }
    if (auto e = read_bool(body, "include_stop_str_in_output", r.include_stop_str_in_output)) {
        return *e;
    }
    if (auto e = read_bool(body, "stream", r.stream)) {
        return *e;
    }
    if (endpoint == Endpoint::completions) {
        if (auto e = read_bool(body, "echo", r.echo)) {
            return *e;
        }
    }
    if (auto so = body.find("stream_options"); given(so)) {
        if (!r.stream) {
            return bad_request("Stream options can only be defined when `stream=True`.",
                               "stream_options");
        }
        object options;
        if (so->get_object().get(options) == simdjson::SUCCESS) {
            auto iu = last_member(options, "include_usage");
            r.include_usage = !iu || (iu->is_bool() && iu->get_bool().value_unsafe());
        }
    }
    return std::nullopt;
}

// n (1 to 16) and model (the served id, or a 404 as vLLM answers).
std::optional<ApiError> read_n_and_model(const Members& body, const std::string& model_id,
                                         ParsedRequest& r) {
    std::optional<int64_t> n;
    if (auto e = read_int(body, "n", n)) {
        return *e;
    }
    if (n && (*n < 1 || *n > 16)) {
        return bad_request("n must be between 1 and 16.", "n");
    }
    r.n = static_cast<int>(n.value_or(1));
    if (auto m = body.find("model"); given(m)) {
        if (!m->is_string()) {
            return bad_request("model: Input should be a valid string", "model");
        }
        r.model = string_of(*m);
        if (r.model != model_id) {
            return ApiError{404, "NotFoundError",
                            fmt::format("The model `{}` does not exist.", r.model), "model"};
        }
    }
    return std::nullopt;
}

// max_completion_tokens (chat) or max_tokens, checked against the context
// length as vLLM checks it; vLLM's defaults when absent.
std::optional<ApiError> read_max_tokens(const Members& body, Endpoint endpoint,
                                        const Profile& profile, ParsedRequest& r) {
    std::optional<int64_t> max_tokens;
    if (endpoint == Endpoint::chat) {
        if (auto e = read_int(body, "max_completion_tokens", max_tokens)) {
            return *e;
        }
    }
    if (!max_tokens) {
        if (auto e = read_int(body, "max_tokens", max_tokens)) {
            return *e;
        }
    }
    const int64_t limit = profile.server.max_model_len;
    for (const auto& p : r.prompts) {
        if (p.tokens >= limit) {
            return bad_request(fmt::format("This model's maximum context length is {} tokens. "
                                           "However, your request has {} input tokens. Please "
                                           "reduce the length of the input messages.",
                                           limit, p.tokens),
                               "input_tokens");
        }
        if (max_tokens && *max_tokens + p.tokens > limit) {
            return bad_request(
                fmt::format("'max_tokens' or 'max_completion_tokens' is too large: {}. This "
                            "model's maximum context length is {} tokens and your request has {} "
                            "input tokens ({} > {} - {}).",
                            *max_tokens, limit, p.tokens, *max_tokens, limit, p.tokens),
                "max_tokens");
        }
    }
    if (max_tokens && *max_tokens < 1 && !(r.echo && *max_tokens == 0)) {
        return bad_request(fmt::format("max_tokens must be at least 1, got {}.", *max_tokens),
                           "max_tokens");
    }
    if (max_tokens) {
        r.max_tokens = static_cast<int>(*max_tokens);
    } else if (endpoint == Endpoint::completions) {
        r.max_tokens = 16; // vLLM's CompletionRequest default
    } else {
        r.max_tokens = static_cast<int>(limit - r.prompts.front().tokens);
    }
    return std::nullopt;
}

} // namespace

std::string extract_question(std::string_view prompt) {
    constexpr std::string_view k_marker = "Question: ";
    size_t pos = prompt.rfind(k_marker);
    std::string_view q =
        pos == std::string_view::npos ? prompt : prompt.substr(pos + k_marker.size());
    q = util::trim(q);
    constexpr std::string_view k_answer = "Answer:";
    if (q.size() >= k_answer.size() && q.substr(q.size() - k_answer.size()) == k_answer) {
        q = util::trim(q.substr(0, q.size() - k_answer.size()));
    }
    return std::string(q);
}

std::string render_chat_prompt(const std::vector<ChatMessage>& messages, Thinking thinking) {
    std::string out;
    for (const auto& m : messages) {
        out += "<|im_start|>";
        out += m.role;
        out += "\n";
        out += m.content;
        out += "<|im_end|>\n";
    }
    out += "<|im_start|>assistant\n";
    out += thinking == Thinking::on ? "<think>\n" : "<think>\n\n</think>\n\n";
    return out;
}

std::string error_body(const ApiError& error) {
    std::string out = R"({"error":{"message":)";
    util::append_dump_string(out, error.message);
    out += R"(,"type":)";
    util::append_dump_string(out, error.type);
    out += R"(,"param":)";
    if (error.param) {
        util::append_dump_string(out, *error.param);
    } else {
        out += "null";
    }
    out += R"(,"code":)";
    util::append_dump_int(out, error.status);
    out += "}}";
    return out;
}

std::variant<ParsedRequest, ApiError> parse_request(std::string_view body, Endpoint endpoint,
                                                    const Profile& profile,
                                                    const std::string& model_id) {
    Document doc(body);
    if (!doc.root()) {
        return bad_request("JSON decode error: the request body is not valid JSON");
    }
    object top;
    if (doc.root()->get_object().get(top) != simdjson::SUCCESS) {
        return bad_request("Input should be a valid dictionary or object to extract fields from");
    }
    const Members fields(top);
    ParsedRequest r;
    r.endpoint = endpoint;
    if (auto e = endpoint == Endpoint::chat ? read_chat(fields, r)
                                            : read_completion_prompts(fields, r)) {
        return *e;
    }
    if (auto e = read_output_flags(fields, endpoint, r)) {
        return *e;
    }
    if (auto e = read_logprobs(fields, r)) {
        return *e;
    }
    if (auto e = read_n_and_model(fields, model_id, r)) {
        return *e;
    }
    if (auto e = read_max_tokens(fields, endpoint, profile, r)) {
        return *e;
    }
    r.content_hash = content_hash(fields, endpoint, body.size());
    return r;
}

} // namespace diffeval::sim
