// Fingerprint rules: loading, compiling (RE2) and applying them line by line.
#include <harness/fingerprint/fingerprint.hpp>

#include <harness/util/embedded.hpp>
#include <harness/util/file.hpp>
#include <harness/util/text.hpp>
#include <harness/util/toml_json.hpp>

#include <fmt/format.h>
#include <re2/re2.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace diffeval::fingerprint {

using util::ErrorKind;
using util::make_error;

namespace {

// The text of `pattern`'s first capturing group (`enabled|disabled` in
// 'flash_attn\s+= (enabled|disabled)'), or nullopt where it cannot be told
// for sure: no group, a flag such as `(?i)` that would change what the group
// matches alone, or a `\Q...\E` quote. Escapes and character classes are
// stepped over; `(?:` is no capture and `(?P<name>` is one.
std::optional<std::string> first_group(std::string_view pattern) {
    if (pattern.find("\\Q") != std::string_view::npos) {
        return std::nullopt;
    }
    for (size_t at = pattern.find("(?"); at != std::string_view::npos;
         at = pattern.find("(?", at + 2)) {
        const auto rest = pattern.substr(at + 2);
        if (!rest.starts_with(':') && !rest.starts_with("P<")) {
            return std::nullopt; // a flag, or an escaped "(" before a "?": unknown either way
        }
    }
    size_t start = std::string_view::npos;
    int depth = 0; // groups open inside the first capture
    for (size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (c == '\\') {
            ++i;
        } else if (c == '[') {
            // A class: `]` first is a member, `[:alpha:]` is one.
            ++i;
            if (i < pattern.size() && pattern[i] == '^') {
                ++i;
            }
            if (i < pattern.size() && pattern[i] == ']') {
                ++i;
            }
            for (; i < pattern.size() && pattern[i] != ']'; ++i) {
                if (pattern[i] == '\\') {
                    ++i;
                } else if (pattern.substr(i).starts_with("[:")) {
                    const auto end = pattern.find(":]", i + 2);
                    if (end == std::string_view::npos) {
                        return std::nullopt;
                    }
                    i = end + 1;
                }
            }
        } else if (c == '(') {
            if (start != std::string_view::npos) {
                ++depth;
            } else if (pattern.substr(i).starts_with("(?P<")) {
                const auto end = pattern.find('>', i);
                if (end == std::string_view::npos) {
                    return std::nullopt;
                }
                start = end + 1;
            } else if (!pattern.substr(i).starts_with("(?")) {
                start = i + 1;
            }
        } else if (c == ')' && start != std::string_view::npos) {
            if (depth == 0) {
                return std::string(pattern.substr(start, i - start));
            }
            --depth;
        }
    }
    return std::nullopt;
}

} // namespace

struct Rules::Impl {
    struct Fact {
        std::string name;
        std::unique_ptr<RE2> re;
        std::unique_ptr<RE2> form; // group 1 in the words the fact is rewritten from, or null
        std::string value;         // the rewrite of `form`'s groups (`b\1-\2`)
        bool stated = false;       // group 1 is only what the server stated, not the fact
        // Group 1 alone, anchored: the words this rule can capture, or null
        // when the pattern does not say (flags, or a group the scan below
        // cannot find).
        std::unique_ptr<RE2> captures;
    };
    struct ConflictRule {
        std::string name;
        std::string message;
        std::vector<std::pair<std::string, std::string>> facts; // name, required value ("" = any)
    };
    std::string engine;
    std::vector<Fact> facts;
    std::vector<ConflictRule> conflicts;
    // Lines that begin a launch (`launch`), and lines that end its start-up
    // (`ready`): once ready, a server serves requests, and a verbose one
    // logs their prompts, whose text is no statement of what it runs.
    std::vector<std::unique_ptr<RE2>> launch, ready;
    // Lines a server writes as it stops (`stopped`): a log whose last
    // launch wrote one is no longer of a running server.
    std::vector<std::unique_ptr<RE2>> stopped;

    static bool any_match(const std::vector<std::unique_ptr<RE2>>& res, re2::StringPiece line) {
        return std::any_of(res.begin(), res.end(),
                           [&](const auto& re) { return RE2::PartialMatch(line, *re); });
    }

    // Whether `f` could have made `value` a fact: its group's words, or any
    // value when they are not known or the fact is a rewrite of them.
    static bool may_yield(const Fact& f, const std::string& value) {
        return !f.captures || f.form || RE2::FullMatch(value, *f.captures);
    }

    // `f`'s value for what the server stated (`text`): the rewrite when
    // `text` is in `f`'s form, else nullopt (the text is the value).
    static std::optional<std::string> rewritten(const Fact& f, std::string_view text) {
        std::string out;
        if (!f.form || !RE2::Extract(text, *f.form, f.value, &out)) {
            return std::nullopt;
        }
        return out;
    }
};

Rules::Rules(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Rules::Rules(Rules&&) noexcept = default;
Rules& Rules::operator=(Rules&&) noexcept = default;
Rules::~Rules() = default;

const std::string& Rules::engine() const {
    return m_impl->engine;
}

util::Result<Rules> Rules::parse(std::string_view text, const std::string& origin) {
    auto parsed = util::parse_toml(text, origin);
    if (!parsed) {
        return parsed.error();
    }
    const toml::table& tbl = *parsed;
    auto where = [&](const toml::node& n) {
        return fmt::format("{}:{}", origin, n.source().begin.line);
    };
    static const std::set<std::string> k_top = {"version", "engine", "fact",   "conflict",
                                                "launch",  "ready",  "stopped"};
    for (const auto& [k, v] : tbl) {
        if (!k_top.count(std::string(k.str()))) {
            return make_error(
                ErrorKind::usage,
                fmt::format("{}: unknown key '{}' in fingerprint rules", where(v), k.str()));
        }
    }
    if (!tbl["version"].is_integer()) {
        return make_error(ErrorKind::usage, fmt::format("{}: rules need `version = 1`", origin));
    }
    auto impl = std::make_unique<Impl>();
    impl->engine = tbl["engine"].value_or(std::filesystem::path(origin).stem().string());
    for (const auto& [key, into] : {std::pair{"launch", &impl->launch},
                                    {"ready", &impl->ready},
                                    {"stopped", &impl->stopped}}) {
        const auto* list = tbl[key].as_array();
        if (tbl[key] && (!list || !list->is_homogeneous(toml::node_type::string))) {
            return make_error(
                ErrorKind::usage,
                fmt::format("{}: `{}` is a list of patterns (strings)", where(*tbl.get(key)), key));
        }
        for (const auto& p : list ? *list : toml::array{}) {
            auto re = std::make_unique<RE2>(*p.value<std::string>(), RE2::Quiet);
            if (!re->ok()) {
                return make_error(
                    ErrorKind::usage,
                    fmt::format("{}: `{}` pattern must compile ({})", where(p), key, re->error()));
            }
            into->push_back(std::move(re));
        }
    }
    if (auto* facts = tbl["fact"].as_array()) {
        for (const auto& f : *facts) {
            const auto* t = f.as_table();
            auto name = t ? (*t)["name"].value<std::string>() : std::nullopt;
            auto pattern = t ? (*t)["pattern"].value<std::string>() : std::nullopt;
            if (!name || !pattern) {
                return make_error(ErrorKind::usage,
                                  fmt::format("{}: a [[fact]] needs name and pattern", where(f)));
            }
            auto re = std::make_unique<RE2>(*pattern, RE2::Quiet);
            if (!re->ok() || re->NumberOfCapturingGroups() < 1) {
                return make_error(
                    ErrorKind::usage,
                    fmt::format("{}: fact '{}': pattern must compile and capture the value "
                                "in a group ({})",
                                where(f), *name, re->ok() ? "no group" : re->error()));
            }
            Impl::Fact fact{*name,
                            std::move(re),
                            nullptr,
                            (*t)["value"].value_or(std::string{}),
                            (*t)["stated"].value_or(false),
                            nullptr};
            if (auto group = first_group(*pattern)) {
                auto captures = std::make_unique<RE2>("\\A(?:" + *group + ")\\z", RE2::Quiet);
                if (captures->ok()) {
                    fact.captures = std::move(captures);
                }
            }
            auto form = (*t)["form"].value<std::string>();
            if (form.has_value() != !fact.value.empty()) {
                return make_error(ErrorKind::usage,
                                  fmt::format("{}: fact '{}': give `form` and `value` together "
                                              "(the stated words' pattern and its rewrite)",
                                              where(f), *name));
            }
            if (form) {
                // Compiled alone first: a form such as 'a)|(b' would
                // otherwise escape the anchors put around it.
                if (RE2 alone(*form, RE2::Quiet); !alone.ok()) {
                    return make_error(ErrorKind::usage,
                                      fmt::format("{}: fact '{}': form '{}' must compile ({})",
                                                  where(f), *name, *form, alone.error()));
                }
                // Anchored: the stated words are the form, not a part of it.
                fact.form = std::make_unique<RE2>("\\A(?:" + *form + ")\\z", RE2::Quiet);
                std::string why;
                if (!fact.form->CheckRewriteString(fact.value, &why)) {
                    return make_error(ErrorKind::usage,
                                      fmt::format("{}: fact '{}': value '{}' does not fit the "
                                                  "groups of form '{}' ({})",
                                                  where(f), *name, fact.value, *form, why));
                }
            }
            impl->facts.push_back(std::move(fact));
        }
    }
    if (auto* conflicts = tbl["conflict"].as_array()) {
        for (const auto& c : *conflicts) {
            const auto* t = c.as_table();
            auto name = t ? (*t)["name"].value<std::string>() : std::nullopt;
            const auto* facts = t ? (*t)["facts"].as_array() : nullptr;
            if (!name || !facts || facts->size() < 2) {
                return make_error(
                    ErrorKind::usage,
                    fmt::format("{}: a [[conflict]] needs a name and two or more facts", where(c)));
            }
            Impl::ConflictRule rule{*name, (*t)["message"].value_or(*name), {}};
            for (const auto& f : *facts) {
                auto s = f.value_or(std::string{});
                auto eq = s.find('=');
                rule.facts.emplace_back(s.substr(0, eq),
                                        eq == std::string::npos ? "" : s.substr(eq + 1));
            }
            impl->conflicts.push_back(std::move(rule));
        }
    }
    return Rules(std::move(impl));
}

util::Result<Rules> Rules::load(const std::string& name_or_path) {
    if (auto text = util::embedded_file(fmt::format("fingerprints/{}.toml", name_or_path))) {
        return parse(*text, fmt::format("fingerprints/{}.toml", name_or_path));
    }
    std::error_code ec;
    if (!std::filesystem::exists(name_or_path, ec)) {
        return make_error(
            ErrorKind::usage,
            fmt::format(
                "unknown fingerprint rules '{}': use vllm, sglang, llamacpp or a .toml path",
                name_or_path));
    }
    auto text = util::read_input(name_or_path, util::k_max_config_bytes);
    if (!text) {
        return make_error(ErrorKind::usage,
                          fmt::format("cannot read rules file {}", text.error().message));
    }
    return parse(*text, name_or_path);
}

namespace {

// The server's words are kept only where they say something the fact does
// not.
void drop_stated_facts(Fingerprint& fp) {
    for (auto it = fp.stated.begin(); it != fp.stated.end();) {
        auto fact = fp.facts.find(it->first);
        it = fact != fp.facts.end() && fact->second == it->second ? fp.stated.erase(it)
                                                                  : std::next(it);
    }
}

} // namespace

bool Rules::starts_launch(std::string_view line) const {
    const re2::StringPiece piece(line.data(), line.size());
    if (!m_impl->launch.empty()) {
        return Impl::any_match(m_impl->launch, piece);
    }
    // Else the file's first engine_version rule: the earliest line a launch
    // states its version in (vLLM states it again, later, when its engine
    // starts, with start-up facts between the two).
    const auto first = std::find_if(m_impl->facts.begin(), m_impl->facts.end(),
                                    [](const Impl::Fact& f) { return f.name == "engine_version"; });
    return first != m_impl->facts.end() && RE2::PartialMatch(piece, *first->re);
}

void Rules::normalize(Fingerprint& fp) const {
    for (const auto& f : m_impl->facts) {
        auto it = fp.facts.find(f.name);
        if (it == fp.facts.end()) {
            continue;
        }
        if (auto fact = Impl::rewritten(f, it->second)) {
            // The words a newer diffeval would have kept, unless it did.
            fp.stated.try_emplace(f.name, it->second);
            it->second = std::move(*fact);
        }
    }
    // A value only a stated rule captures was, when an older diffeval
    // stored it as the fact, what the server was asked (llama.cpp's
    // `flash_attn = auto`), not what it ran: it reads back as stated, and
    // the fact as unknown, as a newer diffeval would have written it.
    for (auto it = fp.facts.begin(); it != fp.facts.end();) {
        bool stated = false;
        bool resolved = false;
        for (const auto& f : m_impl->facts) {
            if (f.name != it->first) {
                continue;
            }
            if (f.stated) {
                stated = stated || (f.captures && RE2::FullMatch(it->second, *f.captures));
            } else {
                resolved = resolved || Impl::may_yield(f, it->second);
            }
        }
        if (stated && !resolved) {
            fp.stated.try_emplace(it->first, it->second);
            it = fp.facts.erase(it);
        } else {
            ++it;
        }
    }
    drop_stated_facts(fp);
}

Fingerprint Rules::apply(std::string_view log) const {
    Fingerprint fp;
    fp.engine = m_impl->engine;
    // Facts come from a launch's start-up: its lines until one says the
    // server is ready. After that a verbose server logs each request, and
    // a prompt saying "loading model '...'" is no fact. Every launch (a
    // restart appended to the same file) starts afresh, so no fact of the
    // one before is stated for it; and the server is the last launch that
    // became ready: one after it that never did (it failed to bind the
    // port, or is still loading) does not stand for it.
    bool serving = false;
    std::optional<std::pair<std::map<std::string, std::string>, std::map<std::string, std::string>>>
        last_ready;
    // The stop line of the launch last_ready is of: the facts come from it
    // when the last launch never became ready, and so does whether it
    // stopped (an audit's log ended in a restart still loading after its
    // ready launch had stopped). That launch is the current one while
    // `serving`.
    std::string last_ready_stopped;
    size_t pos = 0;
    while (pos < log.size()) {
        auto end = log.find('\n', pos);
        if (end == std::string_view::npos) {
            end = log.size();
        }
        re2::StringPiece line(log.data() + pos, end - pos);
        pos = end + 1;
        if (Impl::any_match(m_impl->launch, line)) {
            fp.facts.clear();
            fp.stated.clear();
            serving = false;
            fp.stopped.clear();
        } else if (Impl::any_match(m_impl->stopped, line)) {
            fp.stopped = util::one_line(std::string_view(line.data(), line.size()),
                                        util::k_server_words_bytes);
            if (serving) {
                last_ready_stopped = fp.stopped;
            }
            continue;
        } else if (serving) {
            continue;
        } else if (Impl::any_match(m_impl->ready, line)) {
            serving = true;
            last_ready.emplace(fp.facts, fp.stated);
            last_ready_stopped.clear();
            continue;
        }
        for (const auto& f : m_impl->facts) {
            std::string value;
            if (!RE2::PartialMatch(line, *f.re, &value)) {
                continue;
            }
            if (f.stated) {
                fp.stated[f.name] = std::move(value);
                continue;
            }
            if (auto fact = Impl::rewritten(f, value)) {
                fp.stated[f.name] = std::move(value);
                value = std::move(*fact);
            }
            fp.facts[f.name] = std::move(value);
        }
    }
    if (!serving && last_ready) {
        fp.facts = std::move(last_ready->first);
        fp.stated = std::move(last_ready->second);
        // Whether the launch that stands for the server stopped, not
        // whether the later one did (it may have failed to bind the port).
        fp.stopped = std::move(last_ready_stopped);
    }
    drop_stated_facts(fp);
    for (const auto& rule : m_impl->conflicts) {
        Conflict c{rule.name, rule.message, {}};
        bool all = true;
        for (const auto& [name, want] : rule.facts) {
            auto it = fp.facts.find(name);
            if (it == fp.facts.end() || (!want.empty() && it->second != want)) {
                all = false;
                break;
            }
            c.evidence.push_back(fmt::format("{}={}", name, it->second));
        }
        if (all) {
            fp.conflicts.push_back(std::move(c));
        }
    }
    return fp;
}

namespace {

// The built-in rule files, parsed and compiled once per process: compiling
// their RE2 patterns costs far more than applying them to a log.
const util::Result<std::vector<Rules>>& builtin_rules() {
    static const util::Result<std::vector<Rules>> rules = []() -> util::Result<std::vector<Rules>> {
        std::vector<Rules> out;
        for (const auto& path : util::embedded_files_under("fingerprints/")) {
            auto r = Rules::parse(*util::embedded_file(path), path);
            if (!r) {
                return r.error();
            }
            out.push_back(std::move(*r));
        }
        return out;
    }();
    return rules;
}

} // namespace

std::optional<FactDifference> first_fact_difference(const Fingerprint& a, const Fingerprint& b) {
    for (const auto& [fact, value] : a.facts) {
        if (const auto other = b.facts.find(fact);
            other != b.facts.end() && other->second != value) {
            return FactDifference{fact, value, other->second};
        }
    }
    return std::nullopt;
}

void normalize(Fingerprint& fp) {
    const auto& all = builtin_rules();
    if (!all) {
        return;
    }
    for (const auto& rules : *all) {
        if (rules.engine() == fp.engine) {
            rules.normalize(fp);
        }
    }
}

void bound_words(std::string& text) {
    if (util::has_control_character(text) || text.size() > util::k_server_words_bytes) {
        text = util::one_line(text, util::k_server_words_bytes);
    }
}

void bound_words(Fingerprint& fp) {
    for (auto* words : {&fp.facts, &fp.stated}) {
        for (auto& [name, value] : *words) {
            bound_words(value);
        }
    }
    for (auto& c : fp.conflicts) {
        bound_words(c.message);
        for (auto& e : c.evidence) {
            bound_words(e);
        }
    }
}

bool is_builtin_engine(std::string_view name) {
    const auto& all = builtin_rules();
    return all && std::any_of(all->begin(), all->end(),
                              [&](const Rules& rules) { return rules.engine() == name; });
}

bool starts_launch(std::string_view line) {
    const auto& all = builtin_rules();
    if (!all) {
        return false;
    }
    return std::any_of(all->begin(), all->end(),
                       [&](const Rules& rules) { return rules.starts_launch(line); });
}

util::Result<Fingerprint> fingerprint_log(std::string_view log) {
    const auto& all = builtin_rules();
    if (!all) {
        return all.error();
    }
    Fingerprint best;
    bool any = false;
    for (const auto& rules : *all) {
        auto fp = rules.apply(log);
        if (!any || fp.facts.size() > best.facts.size()) {
            best = std::move(fp);
            any = true;
        }
    }
    // No rules found a fact: no engine was recognised, whichever came first.
    if (best.facts.empty()) {
        best.engine.clear();
    }
    return best;
}

} // namespace diffeval::fingerprint
