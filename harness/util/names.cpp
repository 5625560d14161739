// Name suggestions; see names.hpp.
#include <harness/util/names.hpp>

#include <algorithm>
#include <numeric>

namespace diffeval::util {

size_t edit_distance(std::string_view a, std::string_view b) {
    // Three rows of the optimal string alignment table: i-2, i-1 and i.
    std::vector<size_t> before(b.size() + 1), above(b.size() + 1), row(b.size() + 1);
    std::iota(row.begin(), row.end(), size_t{0});
    for (size_t i = 1; i <= a.size(); ++i) {
        before.swap(above);
        above.swap(row);
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            row[j] = std::min(
                {above[j] + 1, row[j - 1] + 1, above[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
                row[j] = std::min(row[j], before[j - 2] + 1);
            }
        }
    }
    return row[b.size()];
}

std::optional<std::string> closest_name(std::string_view name,
                                        const std::vector<std::string>& known) {
    std::optional<std::string> best;
    if (name.empty()) {
        return best; // a prefix of every name, a typo of none
    }
    size_t best_distance = 0;
    for (const auto& candidate : known) {
        const size_t distance = edit_distance(name, candidate);
        const bool prefix = candidate.starts_with(name) || name.starts_with(candidate);
        // A third of the longer name, at least one edit: with half, 'power'
        // was taken for 'scorer' and 'group' for 'help'.
        const size_t limit = std::max<size_t>(1, std::max(name.size(), candidate.size()) / 3);
        if ((distance <= limit || prefix) && (!best || distance < best_distance)) {
            best = candidate;
            best_distance = distance;
        }
    }
    return best;
}

} // namespace diffeval::util
