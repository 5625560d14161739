// Escaping untrusted text (model output, names) for HTML and XML.
#pragma once

#include <string>
#include <string_view>

namespace diffeval::util {

// `text` with & < > " ' replaced by entities valid in both HTML and XML.
std::string xml_escape(std::string_view text);

} // namespace diffeval::util
