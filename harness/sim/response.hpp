// Response bodies in vLLM's shapes: text_completion and chat.completion
// objects, and the server-sent-event streams of text_completion and
// chat.completion.chunk objects, with usage and logprobs where asked.
//
// Field order follows vLLM's pydantic models so a byte-level diff against a
// real server shows only real differences. Every value is a function of the
// request and its generations: `id` comes from the content hash and the
// sighting, `created` from the profile.
#pragma once

#include <harness/sim/generate.hpp>
#include <harness/sim/profile.hpp>
#include <harness/sim/request.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace diffeval::sim {

struct ResponseMeta {
    std::string id;
    int64_t created = 0;
    std::string model;
};

// The id of a response to `request` seen for the `sighting`-th time:
// "cmpl-" or "chatcmpl-" and 32 hex digits.
std::string response_id(const ParsedRequest& request, int sighting);

// The JSON body of a non-streaming response. `choices` are ordered by
// prompt, then by choice within the prompt (`request.n` per prompt).
std::string response_body(const Profile& profile, const ParsedRequest& request,
                          const std::vector<Generation>& choices, const ResponseMeta& meta);

// One server-sent event of a stream: its "data: ...\n\n" bytes and how many
// tokens it carries (for pacing).
struct StreamEvent {
    std::string data;
    int tokens = 0;
};

// The events of a streaming response, ending with "data: [DONE]\n\n".
std::vector<StreamEvent> response_events(const Profile& profile, const ParsedRequest& request,
                                         const std::vector<Generation>& choices,
                                         const ResponseMeta& meta);

} // namespace diffeval::sim
