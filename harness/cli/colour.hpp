// Colour for the words a reader scans for (PASS, FAIL, worse, better,
// CONFLICT), only on a terminal and never when NO_COLOR is set
// (https://no-color.org): piped output and files stay plain text.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace diffeval::cli {

// Whether output to `stream` gets colour: a terminal, and NO_COLOR unset or empty.
bool colour_enabled(std::FILE* stream);

// `text` with each whole-word verdict wrapped in ANSI colour: PASS and better
// in green, FAIL, worse and CONFLICT in red, INCONCLUSIVE in yellow.
std::string colour_verdicts(std::string_view text);

// `text` coloured for `stream` when colour_enabled(stream), else unchanged.
std::string for_terminal(std::string_view text, std::FILE* stream);

} // namespace diffeval::cli
