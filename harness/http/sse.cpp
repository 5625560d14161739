// SSE parsing; see sse.hpp.
#include <harness/http/sse.hpp>

namespace diffeval::http {

std::vector<std::string> SseParser::feed(std::string_view chunk) {
    std::vector<std::string> events;
    for (char c : chunk) {
        if (c != '\n') {
            m_line += c;
            continue;
        }
        if (!m_line.empty() && m_line.back() == '\r') {
            m_line.pop_back();
        }
        if (m_line.empty()) {
            if (m_has_data) {
                events.push_back(std::move(m_data));
            }
            m_data.clear();
            m_has_data = false;
        } else if (m_line[0] != ':') {
            auto colon = m_line.find(':');
            std::string_view field(m_line.data(),
                                   colon == std::string::npos ? m_line.size() : colon);
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
            }
        }
        m_line.clear();
    }
    return events;
}

} // namespace diffeval::http
