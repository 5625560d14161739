// One escaper for HTML reports and JUnit XML; see escape.hpp.
#include <harness/util/escape.hpp>

#include <harness/util/json_text.hpp>
#include <harness/util/text.hpp>

namespace diffeval::util {

std::string xml_escape(std::string_view text) {
    // XML 1.0 holds no other control character, not even as a reference,
    // and no byte outside UTF-8: a JUnit file with one is no XML at all.
    std::string valid;
    if (!is_utf8(text)) {
        valid = valid_utf8(text);
        text = valid;
    }
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (is_control(c) && c != '\t' && c != '\n' && c != '\r') {
            out += ' ';
            continue;
        }
        switch (c) {
        case '&':
            out += "&amp;";
            break;
        case '<':
            out += "&lt;";
            break;
        case '>':
            out += "&gt;";
            break;
        case '"':
            out += "&quot;";
            break;
        case '\'':
            out += "&#39;";
            break;
        default:
            out += c;
        }
    }
    return out;
}

} // namespace diffeval::util
