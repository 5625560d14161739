// Server-sent events: splits a byte stream into events as they arrive, in
// whatever chunks the network delivers, following the WHATWG rules that
// OpenAI-compatible servers use (`data:` lines, blank line ends an event,
// CRLF or LF, comments ignored).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace diffeval::http {

class SseParser {
public:
    // Feed `chunk`; returns the data of every event completed by it (multiple
    // `data:` lines of one event joined by '\n').
    std::vector<std::string> feed(std::string_view chunk);

private:
    std::string m_line;
    std::string m_data;
    bool m_has_data = false;
};

} // namespace diffeval::http
