// Fingerprints: what a server's log says it actually ran (engine version,
// attention and MoE backends, kernels, quantization), extracted by rules that
// are data (fingerprints/*.toml), plus contradiction rules for facts that
// must not appear together. A server's own summary can be wrong; its log
// lines about each layer are what it did.
#pragma once

#include <harness/util/result.hpp>

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::fingerprint {

struct Conflict {
    std::string name;
    std::string message;
    std::vector<std::string> evidence; // the facts, as "name=value"
};

struct Fingerprint {
    std::string engine;                       // which rules matched best; "" when none found a fact
    std::map<std::string, std::string> facts; // name -> value (last match wins); compared
    // name -> the server's own words where they are not the fact's value: a
    // version as its log writes it ("11669 (Debian)" for "b11669-Debian"), a
    // setting as requested before the server resolved it (flash attention
    // "auto"). Recorded, never compared.
    std::map<std::string, std::string> stated;
    std::vector<Conflict> conflicts;
    // The line saying the server stopped (a rules file's `stopped` pattern)
    // when its log's last launch wrote one, else empty: such a log is not
    // of a server answering now. Read from the log, never stored.
    std::string stopped;
};

// A compiled rules file.
class Rules {
public:
    // Built-in rules by engine name ("vllm", "sglang", "llamacpp") or a TOML
    // file path.
    static util::Result<Rules> load(const std::string& name_or_path);
    // Parse rules TOML `text` from `origin`.
    static util::Result<Rules> parse(std::string_view text, const std::string& origin);
    Rules(Rules&&) noexcept;
    Rules& operator=(Rules&&) noexcept;
    ~Rules();

    const std::string& engine() const;
    // Facts and conflicts of the log text `log`.
    Fingerprint apply(std::string_view log) const;
    // Rewrite each fact of `fp` that is still in the words the server stated
    // (a rule's `form`) into the fact's one form, as apply() does, keeping
    // the words as stated: a fact an older diffeval stored before its rule
    // had a rewrite reads as this one writes it. Other facts are kept.
    void normalize(Fingerprint& fp) const;
    // Whether the first rule for the fact engine_version matches in `line`:
    // the line a launch of this engine states its version in first.
    bool starts_launch(std::string_view line) const;

private:
    struct Impl;
    explicit Rules(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

// `fp` as JSON, the one shape a fingerprint is stored in (servers.facts_json)
// and printed in (`diffeval fingerprint --format json` adds its schema):
// {"engine": "...", "facts": {name: value}, "stated": {name: text} (only when
// not empty), "conflicts": [{"name", "message", "evidence": [...]}]}.
nlohmann::json to_json(const Fingerprint& fp);

// Read back what to_json wrote, or an older diffeval did: a value that is
// not a string reads as its JSON text, a part of the wrong type as absent,
// and facts are normalized (below), so a database written before a rule
// gained its rewrite compares as one written after; nullopt when `text` is
// not a JSON object.
std::optional<Fingerprint> fingerprint_from_json(std::string_view text);

// Rules::normalize with the built-in rules of `fp`'s engine (none for an
// engine they do not name): llama.cpp's build stored as its log writes it,
// "11669 (Debian)", reads "b11669-Debian" with the words as stated.
void normalize(Fingerprint& fp);

// A fact both `a` and `b` state, with a different value in each: the first by
// name, with a's value and b's; nullopt when they agree on every fact both
// state. What a server restarted with another flag, or another server under
// the same name, first shows.
struct FactDifference {
    std::string fact, a, b;
};
std::optional<FactDifference> first_fact_difference(const Fingerprint& a, const Fingerprint& b);

// The server's words, as whatever prints or reports them shows them: `text`
// as one line of at most util::k_server_words_bytes (left as it is when it
// already is one).
void bound_words(std::string& text);
// bound_words on each value, stated text, conflict message and evidence of
// `fp` (the words a log gave; the names are the rules').
void bound_words(Fingerprint& fp);

// Whether `name` is the engine of a built-in rules file ("vllm", "sglang",
// "llamacpp"): the name each of them gives itself in /v1/models' `owned_by`.
bool is_builtin_engine(std::string_view name);

// Apply every built-in rules file and keep the one that found most facts;
// its engine is "" when no rules found any.
util::Result<Fingerprint> fingerprint_log(std::string_view log);

// Whether `line` is where a launch of a server starts saying what it runs:
// the first line a built-in rules file reads its engine's version from,
// written once, near the start, so the last such line of a file a server
// was restarted into starts the running launch.
bool starts_launch(std::string_view line);

} // namespace diffeval::fingerprint
