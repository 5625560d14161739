// Cutting a secret out of a raw response body. Redacting the body's bytes
// finds the secret only where it is written whole in a spelling the Redactor
// knows; a server can also split it across stream events (the assembled text
// joins the pieces), between the reasoning and the text, across the end of
// its answer ([DONE], an error event) and what it sends after, or escape it
// in a spelling of its own; and a body cut short (a timeout, a dropped
// connection, the size limit) may end in the key's first characters. The
// run rewrites a body here when a decoded field needed redaction, when a
// stream went on after its end, or when the body was cut, so a whole answer
// with no secret costs nothing.
#pragma once

#include <harness/engine/response_parse.hpp>
#include <harness/util/redact.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace diffeval::engine {

enum class BodyShape { json, stream };

// `body` (one JSON document, or an SSE stream of `endpoint`'s chunks, `end`
// telling whether the transfer cut it short) with every secret of `redactor`
// gone from its decoded strings. In a stream, the text and reasoning strings
// of every event (those after [DONE] or an error too) are read as one text
// each, and as one text in the order they arrived; each string becomes its
// slice of the redacted texts (so the stream still assembles to the stored
// text, the mark where the key started); an event that needs more than its
// known spellings replaced is written again as JSON, and the stream is then
// stored as its complete events, one `data:` line each, followed by the
// unfinished event a cut stream ends with. A JSON body is written again only
// when a decoded string still holds a secret once its known spellings are
// replaced; one that does not parse has its string literals read one by one.
// A cut body, and the text a cut stream assembles to, lose the end that
// begins a secret. The result is read again until nothing more is cut (a
// secret holding a quote moves the strings). Otherwise `body` comes back
// with at most the known spellings replaced.
std::string redact_body(std::string body, BodyShape shape, Endpoint endpoint,
                        const util::Redactor& redactor, util::TextEnd end = util::TextEnd::whole);

// Whether a string literal of `body` written with an escape (`\u`, `\/`)
// decodes to text holding a secret: a key a server escaped in a spelling of
// its own, in a string no field is read from (a body of the wrong shape, an
// `id`), which the Redactor's known spellings miss. Read lexically, as
// redact_body reads a body that does not parse: the test before it, so a
// body whose escapes hold no key is not parsed again (a server escaping all
// non-ASCII text made every body's rewrite test cost 2.3 times the run's
// CPU: an audit).
bool escaped_secret(std::string_view body, const util::Redactor& redactor);

// The strings `pieces` (each `size` bytes at `begin` of `whole`, in order and
// together covering it) once the secrets `spans` (util::Redactor::find of
// `whole`) are cut out: the mark goes to the piece a span starts in, the
// rest of the span is dropped, so the results joined are `whole` redacted.
std::vector<std::string> redact_pieces(std::string_view whole,
                                       const std::vector<StreamPiece>& pieces,
                                       const std::vector<util::Redactor::Span>& spans);

} // namespace diffeval::engine
