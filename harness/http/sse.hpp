// Server-sent events: splits a byte stream into events as they arrive, in
// whatever chunks the network delivers, following the WHATWG rules that
// OpenAI-compatible servers use (`data:` lines, blank line ends an event,
// CRLF, LF or CR, comments ignored, one leading byte order mark dropped).
// One field beyond WHATWG's: llama.cpp's server reports a failure mid-stream
// as an `error:` line, not as data, and WHATWG would drop it; so an event
// with an `error` field comes out as `{"error": VALUE}` (VALUE as sent when
// it is a JSON object, else as a JSON string), the shape an OpenAI-style
// server's error event has. An event whose type is "error" (`event: error`)
// comes out the same way, its data as the error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace diffeval::http {

class SseParser {
public:
    // Feed `chunk`; returns the data of every event completed by it (multiple
    // `data:` lines of one event joined by '\n'; an event with an `error`
    // field as that error, above).
    std::vector<std::string> feed(std::string_view chunk);
    // Bytes fed up to the end of the line that completed the last event: what
    // follows is an event not yet ended (a stream cut short keeps it there).
    size_t complete_bytes() const { return m_complete_bytes; }

private:
    void end_line(std::vector<std::string>& events);

    std::string m_line;
    bool m_after_cr = false;  // the last byte ended a line with CR
    bool m_first_line = true; // no line has ended yet
    std::string m_data;
    bool m_has_data = false;
    std::string m_error; // the event's `error` field
    bool m_has_error = false;
    std::string m_event; // the event's type (`event:`): "error" makes it one
    size_t m_fed = 0;    // bytes fed before the current chunk
    size_t m_complete_bytes = 0;
};

} // namespace diffeval::http
