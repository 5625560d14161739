// Unknown stop causes per group; see stop_causes.hpp.
#include <harness/analysis/stop_causes.hpp>

#include <harness/store/readers.hpp>

namespace diffeval::analysis {

util::Result<std::vector<UnknownStops>> unknown_stop_causes(store::Store& st) {
    auto rows = store::unknown_stop_causes(st);
    if (!rows) {
        return rows.error();
    }
    std::vector<UnknownStops> out;
    for (auto& r : *rows) {
        out.push_back(
            {std::move(r.server), std::move(r.framing), r.max_tokens, r.unknown, r.stopped});
    }
    return out;
}

} // namespace diffeval::analysis
