// The scorer registry. Built-in scorers are read from the embedded copies of
// scorers/*.toml once, on first use, and shared by every caller.
#include <scorers/registry.hpp>

#include <harness/util/embedded.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace diffeval::scorers {

using util::ErrorKind;
using util::make_error;

namespace {

constexpr std::string_view k_builtin_dir = "scorers/";
constexpr std::string_view k_extension = ".toml";

// The known name closest to `name`, if close enough to be a plausible typo:
// within half the length of the longer name, or one a prefix of the other
// ("lm-eval" -> "lm-eval-strict").
std::optional<std::string_view> closest(std::string_view name,
                                        const std::vector<const Scorer*>& known) {
    std::optional<std::string_view> best;
    size_t best_distance = 0;
    for (const Scorer* scorer : known) {
        const std::string_view candidate = scorer->name();
        const size_t distance = edit_distance(name, candidate);
        const bool prefix = candidate.starts_with(name) || name.starts_with(candidate);
        const size_t limit = std::max(name.size(), candidate.size()) / 2;
        if ((distance <= limit || prefix) && (!best || distance < best_distance)) {
            best = candidate;
            best_distance = distance;
        }
    }
    return best;
}

} // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    std::iota(row.begin(), row.end(), size_t{0});
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t above = row[j];
            row[j] =
                std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

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

util::Result<const Scorer*> Registry::add(Scorer scorer) {
    if (auto existing = std::find_if(m_scorers.begin(), m_scorers.end(),
                                     [&](const auto& s) { return s->name() == scorer.name(); });
        existing != m_scorers.end()) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: a scorer named '{}' already exists (from {}); rename "
                                      "the file",
                                      scorer.definition().origin, scorer.name(),
                                      (*existing)->definition().origin));
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

util::Result<const Scorer*> Registry::find(std::string_view name) const {
    for (const auto& scorer : m_scorers) {
        if (scorer->name() == name) {
            return scorer.get();
        }
    }
    const std::vector<const Scorer*> known = all();
    std::string names;
    for (const Scorer* scorer : known) {
        names += names.empty() ? "" : ", ";
        names += scorer->name();
    }
    std::string message = fmt::format("unknown scorer '{}'", name);
    if (auto suggestion = closest(name, known)) {
        message += fmt::format("; did you mean '{}'?", *suggestion);
    }
    message += fmt::format(" Known scorers: {}", names.empty() ? "(none)" : names);
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
