// One uniform draw per request lays the fault shares end to end, so the
// kinds are exclusive and each one's share is exactly its profile value;
// markup is drawn separately because it spoils a response that is otherwise
// delivered.
#include <harness/sim/faults.hpp>

#include <harness/util/hash.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

namespace diffeval::sim {

namespace {

// Markup a client must never render as HTML or follow as a link.
constexpr std::array<std::string_view, 4> k_markup = {
    "<script>alert(1)</script>",
    "</td>",
    "\"><img src=x onerror=alert(1)>",
    "[details](javascript:alert(1))",
};

double share_of(const Faults& f, Fault kind) {
    switch (kind) {
    case Fault::http_500:
        return f.http_500;
    case Fault::http_503:
        return f.http_503;
    case Fault::http_429:
        return f.http_429;
    case Fault::reset_before_body:
        return f.reset_before_body;
    case Fault::reset_during_body:
        return f.reset_during_body;
    case Fault::stall:
        return f.stall;
    case Fault::malformed_json:
        return f.malformed_json;
    case Fault::stream_error:
        return f.stream_error;
    case Fault::none:
        return 0;
    }
    return 0;
}

uint64_t attempt_seed(uint64_t content_hash, int attempt) {
    return content_hash + 0xD1B54A32D192ED03ULL * static_cast<uint64_t>(attempt + 1);
}

} // namespace

util::Result<void> check_fault_shares(const Faults& faults) {
    double total = 0;
    std::vector<std::string> named;
    for (const Fault kind : k_fault_kinds) {
        const double share = share_of(faults, kind);
        if (share > 0) {
            total += share;
            named.push_back(fmt::format("{} {}", fault_name(kind), share));
        }
    }
    // A little over 1 from adding decimals (0.7 + 0.2 + 0.1) is 1.
    if (total <= 1 + 1e-9) {
        return {};
    }
    return util::make_error(util::ErrorKind::usage,
                            fmt::format("the fault shares add up to {:g} ({}); a request gets one "
                                        "fault at most: lower them",
                                        total, fmt::join(named, ", ")));
}

std::string_view fault_name(Fault fault) {
    switch (fault) {
    case Fault::none:
        return "none";
    case Fault::http_500:
        return "http_500";
    case Fault::http_503:
        return "http_503";
    case Fault::http_429:
        return "http_429";
    case Fault::reset_before_body:
        return "reset_before_body";
    case Fault::reset_during_body:
        return "reset_during_body";
    case Fault::stall:
        return "stall";
    case Fault::malformed_json:
        return "malformed_json";
    case Fault::stream_error:
        return "stream_error";
    }
    return "none";
}

Fault pick_fault(const Faults& faults, uint64_t content_hash, int attempt, Delivery delivery) {
    double u = util::unit_interval(util::hash64("fault", attempt_seed(content_hash, attempt)));
    double edge = 0;
    for (Fault kind : k_fault_kinds) {
        edge += share_of(faults, kind);
        if (u < edge) {
            return kind == Fault::stream_error && delivery != Delivery::stream ? Fault::none : kind;
        }
    }
    return Fault::none;
}

std::string_view pick_markup(const Faults& faults, uint64_t content_hash, int attempt) {
    uint64_t h = util::hash64("markup", attempt_seed(content_hash, attempt));
    if (util::unit_interval(h) >= faults.markup) {
        return {};
    }
    return k_markup[(h >> 7) % k_markup.size()];
}

} // namespace diffeval::sim
