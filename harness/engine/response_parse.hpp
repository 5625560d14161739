// Turning a server's raw answer into the stored fields: the text, the
// separated reasoning, finish and stop reasons (with their JSON types kept),
// and token usage. Parsing never throws: what cannot be parsed is an error
// that keeps the raw body.
#pragma once

#include <harness/store/store.hpp>

#include <string>

namespace diffeval::engine {

enum class Endpoint { completion, chat };

// Fill `row` from an HTTP 2xx `body` of `endpoint`. Sets row.ok, or row.error
// and row.error_kind = "parse" when the body is not a usable response.
void parse_success_body(const std::string& body, Endpoint endpoint, store::ResponseRow& row);

// The message of an OpenAI-style error body ({"error": {"message": ...}} or
// {"message": ...}), else the body itself cut to a readable length.
std::string error_message(const std::string& body);

} // namespace diffeval::engine
