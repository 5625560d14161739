// Cutting a secret out of a raw response body whose decoded fields held it.
// Redacting the body's bytes finds the secret only where it is written whole
// in a spelling the Redactor knows; a server can also split it across stream
// events (the assembled text joins the pieces) or escape it in a spelling of
// its own. A body is rewritten here only when a decoded field needed
// redaction, so a response with no secret costs nothing.
#pragma once

#include <harness/engine/response_parse.hpp>
#include <harness/util/redact.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace diffeval::engine {

enum class BodyShape { json, stream };

// `body` (one JSON document, or an SSE stream of `endpoint`'s chunks) with
// every secret of `redactor` gone from its decoded strings. In a stream, the
// text and reasoning strings of the events become the slices of the redacted
// assembled text and reasoning (so the stream still assembles to the stored
// text); an event that needs more than its known spellings replaced is
// written again as JSON, and the stream is then stored as its complete
// events, one `data:` line each. A JSON body is written again only when a
// decoded string still holds a secret once its known spellings are replaced.
// Otherwise `body` comes back with at most those spellings replaced (also
// when it does not parse).
std::string redact_body(std::string body, BodyShape shape, Endpoint endpoint,
                        const util::Redactor& redactor);

// The strings `pieces` (each `size` bytes at `begin` of `whole`, in order and
// together covering it) once the secrets `spans` (util::Redactor::find of
// `whole`) are cut out: the mark goes to the piece a span starts in, the
// rest of the span is dropped, so the results joined are `whole` redacted.
std::vector<std::string> redact_pieces(std::string_view whole,
                                       const std::vector<StreamPiece>& pieces,
                                       const std::vector<util::Redactor::Span>& spans);

} // namespace diffeval::engine
