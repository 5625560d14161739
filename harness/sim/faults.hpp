// Fault injection: which fault, if any, a generation request gets. Each
// fault is a share of requests from the profile (or a command-line flag),
// drawn from the content hash and the attempt number, so a retry of the
// same request draws again and can succeed.
#pragma once

#include <harness/sim/profile.hpp>
#include <harness/util/result.hpp>

#include <array>
#include <cstdint>
#include <string_view>

namespace diffeval::sim {

enum class Fault {
    none,
    http_500,
    http_503,
    http_429,          // with a Retry-After header
    reset_before_body, // the connection is closed before any response byte
    reset_during_body, // headers and part of the body, then the connection is closed
    stall,             // no answer for `stall_ms` (or until the server stops)
    malformed_json,    // 200 with a truncated JSON body (or one truncated stream event)
    stream_error,      // streaming only: an error event mid-stream, then [DONE]
};

// Every fault kind except `none`, in the order shares are laid out.
inline constexpr std::array<Fault, 8> k_fault_kinds = {
    Fault::http_500,          Fault::http_503, Fault::http_429,       Fault::reset_before_body,
    Fault::reset_during_body, Fault::stall,    Fault::malformed_json, Fault::stream_error};

// The profile key (and stats name) of `fault`; "markup" is k_markup_name.
std::string_view fault_name(Fault fault);
inline constexpr std::string_view k_markup_name = "markup";

// A usage error when the shares of k_fault_kinds add up to more than 1:
// laid end to end they would not each happen at their share (the last ones
// less or never). `fault_name`s name them, as the profile keys do.
// Server::start refuses such a profile.
util::Result<void> check_fault_shares(const Faults& faults);

// How a response is delivered: some faults exist only for streams.
enum class Delivery { whole, stream };

// The fault for the `attempt`-th arrival (0 = first) of the request with
// `content_hash` delivered as `delivery`; stream_error only hits streams.
Fault pick_fault(const Faults& faults, uint64_t content_hash, int attempt, Delivery delivery);

// The markup to insert into the response text, or "" for none.
std::string_view pick_markup(const Faults& faults, uint64_t content_hash, int attempt);

} // namespace diffeval::sim
