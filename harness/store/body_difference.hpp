// How two request bodies of one group differ outside their prompt: what a
// refusal names when a run or a merge meets a group sent with another
// configuration (a sampling setting, the model, `stream`).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace diffeval::store {

// The first key outside the prompt ("prompt", "messages": they hold the
// question) whose value differs between bodies `a` and `b`, as each names
// it (`"temperature": 0.6`, `no "stream"`); nothing when none differs or
// either is not a JSON object.
std::optional<std::pair<std::string, std::string>> first_body_difference(std::string_view a,
                                                                         std::string_view b);

// What changed from body `stored` to the body a run sends in its place
// (`now`), for its refusal: the first difference outside the prompt
// (`no "stream" stored, "stream": true now`), else the things that can
// change inside it.
std::string what_changed(std::string_view stored, std::string_view now);

} // namespace diffeval::store
