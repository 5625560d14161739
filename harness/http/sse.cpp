// SSE parsing; see sse.hpp.
#include <harness/http/sse.hpp>

#include <harness/util/json_text.hpp>
#include <harness/util/text.hpp>

namespace diffeval::http {

namespace {

constexpr std::string_view k_bom = "\xEF\xBB\xBF";

} // namespace

std::vector<std::string> SseParser::feed(std::string_view chunk) {
    std::vector<std::string> events;
    for (size_t i = 0; i < chunk.size(); ++i) {
        const char c = chunk[i];
        // A CR ends a line; an LF right after it belongs to the same ending,
        // in this chunk or the next.
        if (m_after_cr) {
            m_after_cr = false;
            if (c == '\n') {
                continue;
            }
        }
        if (c == '\r' || c == '\n') {
            m_after_cr = c == '\r';
            const size_t before = events.size();
            end_line(events);
            if (events.size() != before) {
                m_complete_bytes = m_fed + i + 1;
            }
            continue;
        }
        m_line += c;
    }
    m_fed += chunk.size();
    return events;
}

void SseParser::end_line(std::vector<std::string>& events) {
    // One byte order mark at the start of the stream is not part of it.
    if (m_first_line) {
        m_first_line = false;
        if (m_line.compare(0, k_bom.size(), k_bom) == 0) {
            m_line.erase(0, k_bom.size());
        }
    }
    if (m_line.empty()) {
        // An event named "error" (`event: error`, the SSE standard's own way
        // to type one) is the failure its data describes, as an `error` field
        // is, and says so with no data too: read as data, an audit's "engine
        // died" between two chunks was stored as one answer and scored.
        if (m_has_error || m_event == "error") {
            // The event is the failure, whatever data it also carried.
            const std::string& what = m_has_error ? m_error : m_data;
            std::string event = "{\"error\":";
            if (util::trim(what).starts_with('{')) {
                event += what;
            } else {
                util::append_dump_string(event, what.empty() ? "an event named error" : what);
            }
            events.push_back(event + "}");
        } else if (m_has_data) {
            events.push_back(std::move(m_data));
        }
        m_data.clear();
        m_has_data = false;
        m_error.clear();
        m_has_error = false;
        m_event.clear();
    } else if (m_line[0] != ':') {
        auto colon = m_line.find(':');
        std::string_view field(m_line.data(), colon == std::string::npos ? m_line.size() : colon);
        std::string_view value;
        if (colon != std::string::npos) {
            value = std::string_view(m_line).substr(colon + 1);
            if (!value.empty() && value.front() == ' ') {
                value.remove_prefix(1);
            }
        }
        if (field == "data") {
            if (m_has_data) {
                m_data += '\n';
            }
            m_data += value;
            m_has_data = true;
        } else if (field == "event") {
            m_event = value;
        } else if (field == "error") {
            if (m_has_error) {
                m_error += '\n';
            }
            m_error += value;
            m_has_error = true;
        }
    }
    m_line.clear();
}

} // namespace diffeval::http
