// The command-line interface: parses arguments, dispatches subcommands and
// turns every error into one line and a documented exit code.
#pragma once

namespace diffeval::cli {

// Documented exit codes (docs/cli.md).
enum ExitCode : int {
    k_exit_ok = 0,
    k_exit_failed = 1, // the run finished but some requests failed; gate: a check failed
    k_exit_usage = 2,  // bad arguments, bad input files, unreachable server at preflight
    k_exit_interrupted = 130,
};

// Run diffeval with `argc`/`argv`; returns the process exit code.
int run_main(int argc, char** argv);

} // namespace diffeval::cli
