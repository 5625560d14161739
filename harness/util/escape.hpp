// Escaping untrusted text (model output, names) for HTML and XML.
#pragma once

#include <string>
#include <string_view>

namespace diffeval::util {

// `text` with & < > " ' replaced by entities valid in both HTML and XML;
// a control character XML 1.0 cannot hold (all but tab and line ends)
// becomes a space, and bytes that are not UTF-8 become U+FFFD, so the text
// is always well-formed XML.
std::string xml_escape(std::string_view text);

} // namespace diffeval::util
