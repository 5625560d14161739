// Compiling a ScorerDefinition and scoring responses with it.
//
// Extraction follows Python's re.findall() as the reference harnesses use it:
// non-overlapping matches scanned from the left, then the first or the last
// one. Substitutions follow re.sub(): every non-overlapping match replaced.
#include <scorers/scorer.hpp>

#include <scorers/python.hpp>

#include <harness/util/file.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <optional>

namespace diffeval::scorers {

using util::ErrorKind;
using util::make_error;

namespace {

// Characters with a meaning in RE2 syntax; a pattern without any is text.
constexpr std::string_view k_metacharacters = "\\.+*?()|[]{}^$";

struct CompiledSubstitution {
    std::unique_ptr<re2::RE2> re;
    std::string rewrite;
    // Set when the pattern is plain text (vLLM's ","), replaced without RE2:
    // a comma-heavy response would otherwise cost one regex call per comma.
    std::optional<std::string> literal;
};

util::Result<std::unique_ptr<re2::RE2>> compile(const ScorerDefinition& def,
                                                const std::string& pattern, std::string_view role) {
    re2::RE2::Options options;
    options.set_log_errors(false);
    auto re = std::make_unique<re2::RE2>(pattern, options);
    if (!re->ok()) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: scorer '{}': {} pattern '{}' is not valid RE2: {}",
                                      def.origin, def.name, role, pattern, re->error()));
    }
    return re;
}

util::Result<std::vector<CompiledSubstitution>>
compile_substitutions(const ScorerDefinition& def, const std::vector<Substitution>& subs,
                      std::string_view role) {
    std::vector<CompiledSubstitution> out;
    for (const Substitution& sub : subs) {
        auto re = compile(def, sub.pattern, role);
        if (!re) {
            return re.error();
        }
        std::string why;
        if (!(*re)->CheckRewriteString(sub.replace, &why)) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: scorer '{}': {} replacement '{}' for '{}': {}",
                                          def.origin, def.name, role, sub.replace, sub.pattern,
                                          why));
        }
        std::optional<std::string> literal;
        const bool plain_rewrite = sub.replace.find('\\') == std::string::npos;
        if (!sub.pattern.empty() && plain_rewrite &&
            sub.pattern.find_first_of(k_metacharacters) == std::string::npos) {
            literal = sub.pattern;
        }
        out.push_back(CompiledSubstitution{std::move(*re), sub.replace, std::move(literal)});
    }
    return out;
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
    size_t at = text.find(from);
    if (at == std::string::npos) {
        return;
    }
    std::string out;
    out.reserve(text.size());
    size_t done = 0;
    for (; at != std::string::npos; at = text.find(from, done)) {
        out.append(text, done, at - done);
        out.append(to);
        done = at + from.size();
    }
    out.append(text, done);
    text = std::move(out);
}

// Substitutions may grow the text: a pattern that matches the empty string
// puts its replacement between every two characters, and a chain of such
// rules grows it geometrically (found by fuzz_scorer_toml: 12 rules took 25 s
// and 750 MB on a 25-byte answer, 20 would exhaust memory). A scorer file can
// come from a database someone else made, so past k_growth_limit times the
// input (at least k_min_growth_room bytes) no further rule runs and the
// result is no text at all (false): bounded time and memory. Cutting the text
// instead would make different answers equal once only growth is left.
constexpr size_t k_growth_limit = 16;
constexpr size_t k_min_growth_room = size_t{64} << 10;

// What a numpy string array keeps of `text`: all but its trailing NULs.
void drop_trailing_nuls(std::string& text) {
    text.erase(text.find_last_not_of('\0') + 1);
}

// `numpy_strings`: each result is stored as lm-eval's exact_match stores
// it, in a numpy array (drop_trailing_nuls), before the next rule reads it.
[[nodiscard]] bool apply(const std::vector<CompiledSubstitution>& subs, std::string& text,
                         bool numpy_strings = false) {
    const size_t limit = std::max(k_min_growth_room, text.size() * k_growth_limit);
    for (const CompiledSubstitution& sub : subs) {
        if (sub.literal) {
            replace_all(text, *sub.literal, sub.rewrite);
        } else {
            re2::RE2::GlobalReplace(&text, *sub.re, sub.rewrite);
        }
        if (numpy_strings) {
            drop_trailing_nuls(text);
        }
        if (text.size() > limit) {
            text.clear();
            text.shrink_to_fit();
            return false;
        }
    }
    return true;
}

std::string_view view(const re2::StringPiece& piece) {
    return piece.data() == nullptr ? std::string_view()
                                   : std::string_view(piece.data(), piece.size());
}

// Whether `re` matches empty text anywhere: an empty match depends only on
// the characters either side of it (start or end of text, a newline, a word
// or another character), so the sixteen pairs of those decide it.
bool can_match_empty(const re2::RE2& re) {
    static constexpr std::array<std::string_view, 4> k_sides = {"", "\n", "a", " "};
    for (const auto before : k_sides) {
        for (const auto after : k_sides) {
            const std::string text = std::string(before) + std::string(after);
            const re2::StringPiece input(text);
            if (re.Match(input, before.size(), before.size(), re2::RE2::ANCHOR_BOTH, nullptr, 0)) {
                return true;
            }
        }
    }
    return false;
}

void ascii_lower(std::string& text) {
    for (char& c : text) {
        if (c >= 'A' && c <= 'Z') {
            c = static_cast<char>(c - 'A' + 'a');
        }
    }
}

} // namespace

struct Scorer::Compiled {
    std::vector<CompiledSubstitution> prepare;
    std::unique_ptr<re2::RE2> find;
    // `\C*?(?:find)` without captures, matched anchored where a search would
    // start: the end of the match a search from there finds, in one forward
    // DFA pass where `find` needs two (the second finds the start). Null when
    // it does not compile (past RE2's memory budget); `find` alone is used.
    std::unique_ptr<re2::RE2> ahead;
    // `(?:\C*?(?:find)){1,K}` without captures, for a pattern none of whose
    // matches is empty: anchored where a search would start, the end of the
    // last of up to K matches in a row, in one DFA pass (see last_start).
    // Null when `find` can match empty text or the pattern does not compile.
    std::unique_ptr<re2::RE2> stride;
    int groups = 0;
    std::vector<CompiledSubstitution> normalise;

    // Where the match that findall() would take first (or last, `first` false)
    // starts, scanning from `pos` on; `chosen` is the one before `pos`.
    std::optional<size_t> scan(const re2::StringPiece& input, size_t pos, bool first,
                               std::optional<size_t> chosen) const;

    // scan(input, 0, false, nullopt), with `ahead`: the same start.
    std::optional<size_t> last_start(const re2::StringPiece& input) const;

    // The answer `text` holds under the extraction rules (before any
    // python_int check), or nullopt when the fallback applies.
    std::optional<std::string> extract(const Extraction& rules, std::string_view text) const;

    // `text` after the normalising substitutions and case folding; nullopt
    // when the substitutions ran past their bound (see apply).
    std::optional<std::string> normalised(const ScorerDefinition& def, std::string text) const;
};

std::optional<size_t> Scorer::Compiled::scan(const re2::StringPiece& input, size_t pos, bool first,
                                             std::optional<size_t> chosen) const {
    // Scan for the whole match only, which RE2 answers with its DFAs, and
    // ask for the groups once, of the chosen match: far cheaper than
    // capturing groups at every match of a long response.
    const size_t size = input.size();
    re2::StringPiece whole;
    while (pos <= size && find->Match(input, pos, size, re2::RE2::UNANCHORED, &whole, 1)) {
        const size_t start = static_cast<size_t>(whole.data() - input.data());
        chosen = start;
        if (first) {
            break;
        }
        const size_t end = start + whole.size();
        if (!whole.empty()) {
            pos = end;
        } else if (end < size) {
            pos = end + util::utf8_sequence_length(static_cast<unsigned char>(input[end]));
        } else {
            break;
        }
    }
    return chosen;
}

// scan() goes from match to match with a search that finds each match's end
// and then its start. Only the last match's start matters, so this loop asks
// `ahead` for ends alone, and the start once, of the last match.
//
// Each `pos` here is one scan() would search from, or the start of an empty
// match scan() found: a search from there finds that empty match again, ends
// where it started, and hands the rest to scan(), which records it and steps
// past it as before. A search that finds nothing leaves `previous` as the
// position the last match was found from.
//
// `stride` goes faster where no match can be empty. Matched anchored, its
// leftmost-first parse takes each repetition's own first choice (the
// leftmost match, and the pattern's preferred match there) because stopping
// after any repetition always succeeds: so it ends where the loop would be
// after up to eight matches. Once a stride finds nothing, the loop goes on
// match by match from the start of the last stride, up to where it ended.
// On the simulator's 5,276 answers to the official set this took scoring
// from 44,000 to 26,500 instructions a response (callgrind, `diffeval
// rescore`), with the same scores.
std::optional<size_t> Scorer::Compiled::last_start(const re2::StringPiece& input) const {
    const size_t size = input.size();
    size_t pos = 0;
    std::optional<size_t> previous;
    re2::StringPiece reach;
    size_t stop = size + 1; // searches run from below here (all of the text without `stride`)
    if (stride) {
        // Up to K matches a step, then single matches from the last step's
        // start: the search positions are those of the loop below.
        std::optional<size_t> last_stride;
        while (pos <= size && stride->Match(input, pos, size, re2::RE2::ANCHOR_START, &reach, 1)) {
            const size_t end = static_cast<size_t>(reach.data() - input.data()) + reach.size();
            if (end == pos) {
                // An empty match after all: never loop on it, take the plain way.
                return scan(input, 0, false, std::nullopt);
            }
            last_stride = pos;
            pos = end;
        }
        if (!last_stride) {
            return std::nullopt;
        }
        stop = pos;
        pos = *last_stride;
    }
    while (pos < stop && ahead->Match(input, pos, size, re2::RE2::ANCHOR_START, &reach, 1)) {
        const size_t end = static_cast<size_t>(reach.data() - input.data()) + reach.size();
        if (end == pos) {
            return scan(input, pos, false, std::nullopt);
        }
        previous = pos;
        pos = end;
    }
    if (stride && pos != stop) {
        return scan(input, 0, false, std::nullopt); // engines disagree: take the plain way
    }
    if (!previous) {
        return std::nullopt;
    }
    re2::StringPiece whole;
    if (!find->Match(input, *previous, size, re2::RE2::UNANCHORED, &whole, 1)) {
        return scan(input, 0, false, std::nullopt); // engines disagree: take the plain way
    }
    return static_cast<size_t>(whole.data() - input.data());
}

std::optional<std::string> Scorer::Compiled::extract(const Extraction& rules,
                                                     std::string_view text) const {
    std::string prepared;
    if (!prepare.empty()) {
        prepared.assign(text);
        if (!apply(prepare, prepared)) {
            return std::nullopt; // no answer: the rules ran past their bound
        }
        text = prepared;
    }
    const re2::StringPiece input(text.data(), text.size());
    const bool first = rules.match == MatchPick::first;
    const std::optional<size_t> chosen_start =
        !first && ahead ? last_start(input) : scan(input, 0, first, std::nullopt);
    std::array<re2::StringPiece, k_max_capture_groups + 1> chosen;
    // Anchored at the chosen start, with the text after it still in view,
    // RE2 picks the same (leftmost-first) match again.
    const bool found =
        chosen_start && find->Match(input, *chosen_start, text.size(), re2::RE2::ANCHOR_START,
                                    chosen.data(), groups + 1);
    if (!found) {
        return std::nullopt;
    }
    std::string_view answer;
    if (rules.group.kind == GroupChoice::Kind::index) {
        answer = view(chosen[rules.group.index]);
    } else if (groups == 0) {
        // findall() yields the whole match for a pattern without groups.
        answer = view(chosen[0]);
    } else if (groups == 1) {
        // ... and the one group, empty or not, for a pattern with one.
        answer = view(chosen[1]);
    } else {
        // ... and a tuple for two or more, of which lm-eval keeps the first
        // non-empty element, or falls back when all are empty.
        bool any = false;
        for (int i = 1; i <= groups && !any; ++i) {
            if (!chosen[i].empty()) {
                answer = view(chosen[i]);
                any = true;
            }
        }
        if (!any) {
            return std::nullopt;
        }
    }
    if (rules.strip) {
        answer = python_strip(answer);
    }
    return std::string(answer);
}

std::optional<std::string> Scorer::Compiled::normalised(const ScorerDefinition& def,
                                                        std::string text) const {
    // lm-eval's exact_match holds both sides in numpy string arrays, after
    // each of regexes_to_ignore (np.array of the re.sub results) or once
    // without them (np.asarray): a trailing NUL never reaches the compare.
    if (!apply(normalise, text, true)) {
        return std::nullopt;
    }
    drop_trailing_nuls(text); // the np.asarray of no rules; after rules, a no-op
    if (def.ignore_case) {
        ascii_lower(text);
    }
    return text;
}

util::Result<Scorer> Scorer::create(ScorerDefinition definition) {
    auto compiled = std::make_unique<Compiled>();
    auto prepare = compile_substitutions(definition, definition.extract.prepare, "extract.prepare");
    if (!prepare) {
        return prepare.error();
    }
    compiled->prepare = std::move(*prepare);
    auto find = compile(definition, definition.extract.pattern, "extract");
    if (!find) {
        return find.error();
    }
    compiled->find = std::move(*find);
    // \Q quotes to the end of the pattern, so the wrapper's ")" would be
    // text; such patterns keep the plain way.
    if (definition.extract.match == MatchPick::last &&
        definition.extract.pattern.find("\\Q") == std::string::npos) {
        re2::RE2::Options options;
        options.set_log_errors(false);
        options.set_never_capture(true);
        auto ahead =
            std::make_unique<re2::RE2>("\\C*?(?:" + definition.extract.pattern + ")", options);
        if (ahead->ok()) {
            compiled->ahead = std::move(ahead);
            if (!can_match_empty(*compiled->find)) {
                auto stride = std::make_unique<re2::RE2>(
                    "(?:\\C*?(?:" + definition.extract.pattern + ")){1,8}", options);
                if (stride->ok()) {
                    compiled->stride = std::move(stride);
                }
            }
        }
    }
    compiled->groups = compiled->find->NumberOfCapturingGroups();
    if (compiled->groups > k_max_capture_groups) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: scorer '{}': the extract pattern has {} capture groups; "
                                      "at most {} are supported (use (?:...) for the others)",
                                      definition.origin, definition.name, compiled->groups,
                                      k_max_capture_groups));
    }
    if (definition.extract.group.kind == GroupChoice::Kind::index &&
        definition.extract.group.index > compiled->groups) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: scorer '{}': group = {} but the extract pattern has "
                                      "{} capture group(s)",
                                      definition.origin, definition.name,
                                      definition.extract.group.index, compiled->groups));
    }
    auto normalise = compile_substitutions(definition, definition.normalise, "compare.normalise");
    if (!normalise) {
        return normalise.error();
    }
    compiled->normalise = std::move(*normalise);
    return Scorer(std::move(definition), std::move(compiled));
}

Scorer::Scorer(ScorerDefinition definition, std::unique_ptr<Compiled> compiled)
    : m_def(std::move(definition)), m_compiled(std::move(compiled)) {}

Scorer::Scorer(Scorer&&) noexcept = default;
Scorer& Scorer::operator=(Scorer&&) noexcept = default;
Scorer::~Scorer() = default;

Gold Scorer::prepare_gold(std::string_view gold_answer_full_text) const {
    std::optional<std::string> answer;
    if (m_def.gold == GoldSource::extract) {
        answer = m_compiled->extract(m_def.extract, gold_answer_full_text);
    } else {
        answer = std::string(gold_answer_full_text);
    }
    Gold gold;
    if (m_def.compare == Comparison::python_int) {
        std::optional<std::string> value = answer ? python_int_literal(*answer) : std::nullopt;
        gold.valid = value.has_value();
        gold.value = value ? std::move(*value) : m_def.extract.fallback;
        return gold;
    }
    gold.valid = answer.has_value();
    auto normalised =
        m_compiled->normalised(m_def, answer ? std::move(*answer) : m_def.extract.fallback);
    gold.comparable = normalised.has_value();
    gold.value = normalised ? std::move(*normalised) : std::string();
    return gold;
}

bool Scorer::same_gold_as(const Scorer& other) const {
    const ScorerDefinition& a = m_def;
    const ScorerDefinition& b = other.m_def;
    // prepare_gold reads the extraction only for a gold extracted like an
    // answer, its fallback always, and the normalising rules only for
    // exact_match.
    return a.gold == b.gold && a.compare == b.compare &&
           (a.gold == GoldSource::full_text || a.extract == b.extract) &&
           a.extract.fallback == b.extract.fallback &&
           (a.compare == Comparison::python_int ||
            (a.ignore_case == b.ignore_case && a.normalise == b.normalise));
}

ScoreResult Scorer::score(std::string_view response_text, const Gold& gold) const {
    std::optional<std::string> answer = m_compiled->extract(m_def.extract, response_text);
    ScoreResult result;
    if (m_def.compare == Comparison::python_int) {
        std::optional<std::string> value = answer ? python_int_literal(*answer) : std::nullopt;
        result.valid = value.has_value();
        result.extracted = value ? std::move(*value) : m_def.extract.fallback;
        result.correct = result.valid && gold.valid && result.extracted == gold.value;
        return result;
    }
    // lm-eval's exact_match compares whatever the filter produced, the
    // fallback included; it can only equal a gold that normalises to it.
    result.valid = answer.has_value();
    result.extracted = answer ? std::move(*answer) : m_def.extract.fallback;
    const auto normalised = m_compiled->normalised(m_def, result.extracted);
    result.correct = normalised && gold.comparable && *normalised == gold.value;
    return result;
}

ScoreResult Scorer::score(std::string_view response_text,
                          std::string_view gold_answer_full_text) const {
    return score(response_text, prepare_gold(gold_answer_full_text));
}

util::Result<Scorer> load_scorer(std::string_view text, std::string name, std::string origin) {
    auto definition = parse_scorer_definition(text, std::move(name), std::move(origin));
    if (!definition) {
        return definition.error();
    }
    return Scorer::create(std::move(*definition));
}

util::Result<ScorerSource> read_scorer_source(const std::filesystem::path& path) {
    auto text = util::read_input(path, util::k_max_config_bytes);
    if (!text) {
        return make_error(
            ErrorKind::usage,
            fmt::format("cannot read scorer file {}; check the path", text.error().message));
    }
    // The stem names the scorer in every table, terminal line and JSON
    // document: a line end or a terminal escape in it would reach them all,
    // and bytes that are not UTF-8 would make each JSON output fail.
    auto name = path.stem().string();
    if (!util::is_utf8(name) || util::has_control_character(name)) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: the scorer's name is the file's name without "
                                      "'.toml', which must be UTF-8 text without control "
                                      "characters (line ends, terminal escapes); rename the file",
                                      util::one_line(path.string(), util::k_server_words_bytes)));
    }
    return ScorerSource{std::move(name), std::move(*text), path.string()};
}

util::Result<Scorer> load_scorer_file(const std::filesystem::path& path) {
    auto source = read_scorer_source(path);
    if (!source) {
        return source.error();
    }
    return load_scorer(source->text, source->name, source->origin);
}

} // namespace diffeval::scorers
