// Suggesting the name a user probably meant: framings, scorers and other
// registries answer an unknown name with the closest known one.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::util {

// Edit distance between `a` and `b`, in bytes: Levenshtein's, with two
// adjacent bytes swapped counted as one edit (optimal string alignment), the
// commonest typo ('rwa' for 'raw').
size_t edit_distance(std::string_view a, std::string_view b);

// The name in `known` closest to `name`, if close enough to be a plausible
// typo: within a third of the length of the longer name (at least one edit),
// or one a prefix of the other ("lm-eval" -> "lm-eval-strict").
std::optional<std::string> closest_name(std::string_view name,
                                        const std::vector<std::string>& known);

} // namespace diffeval::util
