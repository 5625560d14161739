// Scorers by name: the built-in ones compiled into the binary, plus any a
// user loads from a file.
//
// Names are unique; an unknown name is answered with the known ones and the
// closest match, so a typo on the command line is fixed in one step.
#pragma once

#include <scorers/scorer.hpp>

#include <harness/util/names.hpp>
#include <harness/util/result.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::scorers {

class Registry {
public:
    // A registry holding the built-in scorers (scorers/*.toml in the source
    // tree, embedded in the binary): "lm-eval-flexible", "lm-eval-strict",
    // "vllm".
    static util::Result<Registry> builtin();

    // Add `scorer`; an error if a scorer of the same name is already there,
    // ending with `clash_fix` when it is not empty (a file's fix is to
    // rename it; a stored row's is not). The returned pointer stays valid
    // for the registry's lifetime.
    util::Result<const Scorer*> add(Scorer scorer, std::string_view clash_fix = "rename the file");

    // Load the scorer file at `path` (named after its stem) and add it.
    util::Result<const Scorer*> add_file(const std::filesystem::path& path);

    // Parse and compile `source` and add it (see add); errors name its
    // origin, and the line where the file says something wrong.
    util::Result<const Scorer*> add_source(const ScorerSource& source,
                                           std::string_view clash_fix = "rename the file");

    // The scorer called `name`, or an error listing the known names and
    // suggesting the closest one.
    util::Result<const Scorer*> find(std::string_view name) const;

    // Every scorer, sorted by name.
    std::vector<const Scorer*> all() const;

private:
    std::vector<std::unique_ptr<Scorer>> m_scorers;
};

// The usage error for scorer `name` not among `known`: the known names and
// the closest one. Every lookup by scorer name answers with it.
util::Error unknown_scorer(std::string_view name, const std::vector<std::string>& known);

// The built-in scorer called `name` (see Registry::find).
util::Result<const Scorer*> find_scorer(std::string_view name);

// The built-in scorers, sorted by name.
std::vector<const Scorer*> all_scorers();

// Levenshtein distance, shared with every other name lookup.
using util::edit_distance;

} // namespace diffeval::scorers
