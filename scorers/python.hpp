// The few Python behaviours the reference scorers depend on, reproduced on
// UTF-8 text: reading a digit run with ast.literal_eval, and str.strip().
//
// vLLM's GSM8K script passes the last digit run to ast.literal_eval and
// counts a SyntaxError as an invalid answer, so "007" is invalid while "00"
// is 0. Values can be arbitrarily large Python ints, so they are kept as
// canonical decimal strings instead of machine integers.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace diffeval::scorers {

// CPython (3.11, and the 3.7.14 to 3.10.7 security releases) refuses to
// convert a decimal literal with more digits than this (the default of
// sys.get_int_max_str_digits()), raising SyntaxError.
inline constexpr size_t k_python_int_max_digits = 4300;

// The canonical decimal form of `digits` (str(ast.literal_eval(digits))) if
// it is a valid Python int literal made only of ASCII digits, else nullopt:
// non-ASCII digits, a leading zero in a non-zero value, or more than
// k_python_int_max_digits digits in a non-zero value.
std::optional<std::string> python_int_literal(std::string_view digits);

// `text` (UTF-8) without the leading and trailing characters Python's
// str.isspace() accepts, as str.strip() returns it.
std::string_view python_strip(std::string_view text);

// The same without the leading ones only, as str.lstrip() returns it.
std::string_view python_lstrip(std::string_view text);

} // namespace diffeval::scorers
