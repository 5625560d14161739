// Reading scorer TOML files into ScorerDefinition. Every key is checked, so a
// misspelt key is an error with its line instead of a silently different
// scorer.
#include <scorers/definition.hpp>

#include <harness/util/toml_json.hpp>

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <initializer_list>
#include <optional>

namespace diffeval::scorers {

using util::ErrorKind;
using util::make_error;

namespace {

// Reads values out of one parsed file, turning every problem into a message
// that names the file, the line and the key.
class Reader {
public:
    explicit Reader(const std::string& origin) : m_origin(origin) {}

    util::Error error(const toml::node& node, std::string_view message) const {
        return make_error(ErrorKind::usage,
                          fmt::format("{}:{}: {}", m_origin, node.source().begin.line, message));
    }

    util::Result<void> only_keys(const toml::table& table, std::string_view where,
                                 std::initializer_list<std::string_view> allowed) const {
        for (const auto& [key, value] : table) {
            if (std::find(allowed.begin(), allowed.end(), key.str()) == allowed.end()) {
                return error(value, fmt::format("unknown key '{}' in {}", key.str(), where));
            }
        }
        return {};
    }

    util::Result<const toml::table*> table(const toml::table& parent, std::string_view key,
                                           std::string_view where) const {
        const toml::node* node = parent.get(key);
        if (node == nullptr) {
            return error(parent, fmt::format("{} needs a [{}] table", where, key));
        }
        if (!node->is_table()) {
            return error(*node, fmt::format("'{}' must be a table", key));
        }
        return node->as_table();
    }

    util::Result<std::string> string(const toml::table& parent, std::string_view key,
                                     std::optional<std::string_view> fallback) const {
        const toml::node* node = parent.get(key);
        if (node == nullptr) {
            if (fallback) {
                return std::string(*fallback);
            }
            return error(parent, fmt::format("missing key '{}'", key));
        }
        if (!node->is_string()) {
            return error(*node, fmt::format("'{}' must be a string", key));
        }
        return std::string(node->as_string()->get());
    }

    util::Result<bool> boolean(const toml::table& parent, std::string_view key,
                               bool fallback) const {
        const toml::node* node = parent.get(key);
        if (node == nullptr) {
            return fallback;
        }
        if (!node->is_boolean()) {
            return error(*node, fmt::format("'{}' must be true or false", key));
        }
        return node->as_boolean()->get();
    }

    util::Result<std::vector<Substitution>> substitutions(const toml::table& parent,
                                                          std::string_view key) const {
        std::vector<Substitution> out;
        const toml::node* node = parent.get(key);
        if (node == nullptr) {
            return out;
        }
        const toml::array* items = node->as_array();
        if (items == nullptr) {
            return error(*node,
                         fmt::format("'{}' must be an array of tables ([[...{}]])", key, key));
        }
        for (const toml::node& item : *items) {
            const toml::table* sub = item.as_table();
            if (sub == nullptr) {
                return error(item, fmt::format("each '{}' entry must be a table with 'pattern' "
                                               "and 'replace'",
                                               key));
            }
            if (auto ok = only_keys(*sub, key, {"pattern", "replace"}); !ok) {
                return ok.error();
            }
            auto pattern = string(*sub, "pattern", std::nullopt);
            if (!pattern) {
                return pattern.error();
            }
            auto replace = string(*sub, "replace", std::nullopt);
            if (!replace) {
                return replace.error();
            }
            out.push_back(Substitution{std::move(*pattern), std::move(*replace)});
        }
        return out;
    }

private:
    const std::string& m_origin;
};

util::Result<MatchPick> parse_match(const Reader& r, const toml::table& extract) {
    auto text = r.string(extract, "match", std::nullopt);
    if (!text) {
        return text.error();
    }
    if (*text == "first") {
        return MatchPick::first;
    }
    if (*text == "last") {
        return MatchPick::last;
    }
    return r.error(*extract.get("match"),
                   fmt::format("match must be \"first\" or \"last\", not \"{}\"", *text));
}

util::Result<GroupChoice> parse_group(const Reader& r, const toml::table& extract) {
    const toml::node* node = extract.get("group");
    if (node == nullptr) {
        return GroupChoice{};
    }
    if (const auto* index = node->as_integer()) {
        // Checked before it is narrowed: 2^32 + 1 would pass as group 1, and
        // a larger number became a negative index (found by fuzz_scorer_toml).
        if (index->get() < 0 || index->get() > k_max_capture_groups) {
            return r.error(*node, fmt::format("group must be 0 (the whole match) or a capture "
                                              "group number up to {}",
                                              k_max_capture_groups));
        }
        return GroupChoice{GroupChoice::Kind::index, static_cast<int>(index->get())};
    }
    if (const auto* text = node->as_string(); text && text->get() == "first_nonempty") {
        return GroupChoice{GroupChoice::Kind::first_nonempty, 0};
    }
    return r.error(*node, "group must be a group number or \"first_nonempty\"");
}

util::Result<Extraction> parse_extract(const Reader& r, const toml::table& root) {
    auto table = r.table(root, "extract", "a scorer");
    if (!table) {
        return table.error();
    }
    const toml::table& t = **table;
    if (auto ok = r.only_keys(t, "[extract]",
                              {"prepare", "pattern", "match", "group", "strip", "fallback"});
        !ok) {
        return ok.error();
    }
    Extraction out;
    auto prepare = r.substitutions(t, "prepare");
    auto pattern = r.string(t, "pattern", std::nullopt);
    auto match = parse_match(r, t);
    auto group = parse_group(r, t);
    auto strip = r.boolean(t, "strip", false);
    auto fallback = r.string(t, "fallback", "[invalid]");
    if (!prepare) {
        return prepare.error();
    }
    if (!pattern) {
        return pattern.error();
    }
    if (!match) {
        return match.error();
    }
    if (!group) {
        return group.error();
    }
    if (!strip) {
        return strip.error();
    }
    if (!fallback) {
        return fallback.error();
    }
    out.prepare = std::move(*prepare);
    out.pattern = std::move(*pattern);
    out.match = *match;
    out.group = *group;
    out.strip = *strip;
    out.fallback = std::move(*fallback);
    return out;
}

util::Result<GoldSource> parse_gold(const Reader& r, const toml::table& root) {
    auto table = r.table(root, "gold", "a scorer");
    if (!table) {
        return table.error();
    }
    if (auto ok = r.only_keys(**table, "[gold]", {"from"}); !ok) {
        return ok.error();
    }
    auto from = r.string(**table, "from", std::nullopt);
    if (!from) {
        return from.error();
    }
    if (*from == "extract") {
        return GoldSource::extract;
    }
    if (*from == "full_text") {
        return GoldSource::full_text;
    }
    return r.error(
        *(*table)->get("from"),
        fmt::format("gold.from must be \"extract\" or \"full_text\", not \"{}\"", *from));
}

util::Result<void> parse_compare(const Reader& r, const toml::table& root, ScorerDefinition& def) {
    auto table = r.table(root, "compare", "a scorer");
    if (!table) {
        return table.error();
    }
    const toml::table& t = **table;
    if (auto ok = r.only_keys(t, "[compare]", {"kind", "ignore_case", "normalise"}); !ok) {
        return ok.error();
    }
    auto kind = r.string(t, "kind", std::nullopt);
    if (!kind) {
        return kind.error();
    }
    if (*kind == "python_int") {
        def.compare = Comparison::python_int;
    } else if (*kind == "exact_match") {
        def.compare = Comparison::exact_match;
    } else {
        return r.error(*t.get("kind"), fmt::format("compare.kind must be \"python_int\" or "
                                                   "\"exact_match\", not \"{}\"",
                                                   *kind));
    }
    auto ignore_case = r.boolean(t, "ignore_case", false);
    if (!ignore_case) {
        return ignore_case.error();
    }
    auto normalise = r.substitutions(t, "normalise");
    if (!normalise) {
        return normalise.error();
    }
    if (def.compare == Comparison::python_int && (*ignore_case || !normalise->empty())) {
        return r.error(t, "ignore_case and normalise apply to exact_match only");
    }
    def.ignore_case = *ignore_case;
    def.normalise = std::move(*normalise);
    return {};
}

} // namespace

util::Result<ScorerDefinition> parse_scorer_definition(std::string_view text, std::string name,
                                                       std::string origin) {
    auto parsed = util::parse_toml(text, origin);
    if (!parsed) {
        return parsed.error();
    }
    const toml::table& root = *parsed;
    const Reader r(origin);
    if (auto ok =
            r.only_keys(root, "a scorer", {"version", "description", "extract", "gold", "compare"});
        !ok) {
        return ok.error();
    }
    ScorerDefinition def;
    def.name = std::move(name);
    def.origin = origin;

    const toml::node* version = root.get("version");
    if (version == nullptr) {
        return r.error(root, "missing key 'version' (a positive integer, raised whenever the "
                             "rules change)");
    }
    if (!version->is_integer() || version->as_integer()->get() < 1 ||
        version->as_integer()->get() > 1'000'000) {
        return r.error(*version, "version must be a whole number from 1 to 1000000");
    }
    def.version = static_cast<int>(version->as_integer()->get());

    auto description = r.string(root, "description", "");
    if (!description) {
        return description.error();
    }
    def.description = std::move(*description);

    auto extract = parse_extract(r, root);
    if (!extract) {
        return extract.error();
    }
    def.extract = std::move(*extract);

    auto gold = parse_gold(r, root);
    if (!gold) {
        return gold.error();
    }
    def.gold = *gold;

    if (auto ok = parse_compare(r, root, def); !ok) {
        return ok.error();
    }
    return def;
}

} // namespace diffeval::scorers
