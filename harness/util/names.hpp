// Suggesting the name a user probably meant: framings, scorers and other
// registries answer an unknown name with the closest known one.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::util {

// Levenshtein distance between `a` and `b`, in bytes.
size_t edit_distance(std::string_view a, std::string_view b);

// The name in `known` closest to `name`, if close enough to be a plausible
// typo: within half the length of the longer name (rounded up), or one a prefix of the
// other ("lm-eval" -> "lm-eval-strict").
std::optional<std::string> closest_name(std::string_view name,
                                        const std::vector<std::string>& known);

} // namespace diffeval::util
