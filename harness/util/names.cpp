// Name suggestions; see names.hpp.
#include <harness/util/names.hpp>

#include <algorithm>
#include <numeric>

namespace diffeval::util {

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

std::optional<std::string> closest_name(std::string_view name,
                                        const std::vector<std::string>& known) {
    std::optional<std::string> best;
    size_t best_distance = 0;
    for (const auto& candidate : known) {
        const size_t distance = edit_distance(name, candidate);
        const bool prefix = candidate.starts_with(name) || name.starts_with(candidate);
        const size_t limit = (std::max(name.size(), candidate.size()) + 1) / 2;
        if ((distance <= limit || prefix) && (!best || distance < best_distance)) {
            best = candidate;
            best_distance = distance;
        }
    }
    return best;
}

} // namespace diffeval::util
