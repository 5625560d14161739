// The scorer registry. Built-in scorers are read from the embedded copies of
// scorers/*.toml once, on first use, and shared by every caller.
#include <scorers/registry.hpp>

#include <harness/util/embedded.hpp>
#include <harness/util/file.hpp>
#include <harness/util/names.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace diffeval::scorers {

using util::ErrorKind;
using util::make_error;

namespace {

constexpr std::string_view k_builtin_dir = "scorers/";
constexpr std::string_view k_extension = ".toml";

} // namespace

util::Result<Registry> Registry::builtin() {
    Registry registry;
    for (const std::string& path : util::embedded_files_under(k_builtin_dir)) {
        if (!std::string_view(path).ends_with(k_extension)) {
            continue;
        }
        const std::string name = path.substr(
            k_builtin_dir.size(), path.size() - k_builtin_dir.size() - k_extension.size());
        auto scorer = load_scorer(*util::embedded_file(path), name, path);
        if (!scorer) {
            return make_error(ErrorKind::internal,
                              fmt::format("built-in scorer is broken: {}", scorer.error().message));
        }
        if (auto added = registry.add(std::move(*scorer)); !added) {
            return added.error();
        }
    }
    if (registry.m_scorers.empty()) {
        return make_error(ErrorKind::internal,
                          "no built-in scorers are embedded: scorers/*.toml must be in the "
                          "embed list in CMakeLists.txt");
    }
    return registry;
}

util::Result<const Scorer*> Registry::add(Scorer scorer, std::string_view clash_fix) {
    if (auto existing = std::find_if(m_scorers.begin(), m_scorers.end(),
                                     [&](const auto& s) { return s->name() == scorer.name(); });
        existing != m_scorers.end()) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: a scorer named '{}' already exists (from {}){}{}",
                                      scorer.definition().origin, scorer.name(),
                                      (*existing)->definition().origin,
                                      clash_fix.empty() ? "" : "; ", clash_fix));
    }
    m_scorers.push_back(std::make_unique<Scorer>(std::move(scorer)));
    return m_scorers.back().get();
}

util::Result<const Scorer*> Registry::add_file(const std::filesystem::path& path) {
    auto scorer = load_scorer_file(path);
    if (!scorer) {
        return scorer.error();
    }
    return add(std::move(*scorer));
}

util::Result<const Scorer*> Registry::add_source(const ScorerSource& source,
                                                 std::string_view clash_fix) {
    auto scorer = load_scorer(source.text, source.name, source.origin);
    if (!scorer) {
        return scorer.error();
    }
    return add(std::move(*scorer), clash_fix);
}

util::Result<const Scorer*> Registry::find(std::string_view name) const {
    for (const auto& scorer : m_scorers) {
        if (scorer->name() == name) {
            return scorer.get();
        }
    }
    std::vector<std::string> known;
    for (const Scorer* scorer : all()) {
        known.emplace_back(scorer->name());
    }
    return unknown_scorer(name, known);
}

util::Error unknown_scorer(std::string_view name, const std::vector<std::string>& known) {
    const std::string names = fmt::format("{}", fmt::join(known, ", "));
    std::string message = fmt::format("unknown scorer '{}'", name);
    if (auto suggestion = util::closest_name(name, known)) {
        message += fmt::format("; did you mean '{}'? Known scorers: ", *suggestion);
    } else {
        message += "; known scorers: ";
    }
    message += names.empty() ? "(none)" : names;
    return make_error(ErrorKind::usage, std::move(message));
}

std::vector<const Scorer*> Registry::all() const {
    std::vector<const Scorer*> out;
    out.reserve(m_scorers.size());
    for (const auto& scorer : m_scorers) {
        out.push_back(scorer.get());
    }
    std::sort(out.begin(), out.end(),
              [](const Scorer* a, const Scorer* b) { return a->name() < b->name(); });
    return out;
}

namespace {

const util::Result<Registry>& builtin_registry() {
    static const util::Result<Registry> registry = Registry::builtin();
    return registry;
}

} // namespace

util::Result<const Scorer*> find_scorer(std::string_view name) {
    const auto& registry = builtin_registry();
    if (!registry) {
        return registry.error();
    }
    return registry->find(name);
}

std::vector<const Scorer*> all_scorers() {
    const auto& registry = builtin_registry();
    return registry ? registry->all() : std::vector<const Scorer*>{};
}

} // namespace diffeval::scorers
