// How many stopped responses of each group have a stop cause the server never
// stated (llama.cpp's OpenAI endpoints name none): shown under the breakdown
// so a count of finished or stop-truncated answers is read knowing which part
// of it rests on the text alone.
#pragma once

#include <harness/store/store.hpp>
#include <harness/util/result.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace diffeval::analysis {

struct UnknownStops {
    std::string server;
    std::string framing;
    int max_tokens = 0;
    int64_t unknown = 0; // stopped responses whose stop cause is unknown
    int64_t stopped = 0; // responses with any stop cause
};

// The groups of the store `st` with at least one unknown stop cause, in
// server, framing, max_tokens order (classifications must be current).
util::Result<std::vector<UnknownStops>> unknown_stop_causes(store::Store& st);

} // namespace diffeval::analysis
