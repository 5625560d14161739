// Small helpers shared by the subcommands: comma lists and error lines.
#pragma once

#include <harness/cli/cli.hpp>
#include <harness/util/result.hpp>

#include <string>
#include <vector>

namespace diffeval::cli {

// Split "a,b,c" (and repeated flags) into items, dropping empty ones.
std::vector<std::string> split_list(const std::vector<std::string>& values);

// Print `error` as one line on stderr and return its exit code.
int report(const util::Error& error);

// True when stderr is a terminal (progress bars).
bool stderr_is_tty();

} // namespace diffeval::cli
