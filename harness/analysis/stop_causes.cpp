// Unknown stop causes per group; see stop_causes.hpp.
#include <harness/analysis/stop_causes.hpp>

#include <harness/store/sqlite.hpp>

#include <fmt/format.h>

namespace diffeval::analysis {

util::Result<std::vector<UnknownStops>> unknown_stop_causes(store::Store& st) {
    store::Statement select(
        st.handle(),
        "SELECT server, framing, max_tokens, sum(stop_cause = 'unknown'), count(*) FROM "
        "v_responses WHERE stop_cause IS NOT NULL GROUP BY server, framing, max_tokens HAVING "
        "sum(stop_cause = 'unknown') > 0 ORDER BY server, framing, max_tokens");
    if (!select.valid()) {
        return util::make_error(util::ErrorKind::io,
                                fmt::format("cannot read stop causes: {}", select.error()));
    }
    std::vector<UnknownStops> out;
    while (select.step()) {
        out.push_back({select.column_text(0), select.column_text(1),
                       static_cast<int>(select.column_int(2)), select.column_int(3),
                       select.column_int(4)});
    }
    if (!select.error().empty()) {
        return util::make_error(util::ErrorKind::io,
                                fmt::format("cannot read stop causes: {}", select.error()));
    }
    return out;
}

} // namespace diffeval::analysis
