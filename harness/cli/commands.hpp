// How subcommands plug into the CLI: each subcommand file adds its CLI11
// sub-app with its options and registers the function that runs it.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>

namespace diffeval::cli {

// Maps each parsed subcommand to the function that runs it and returns the
// process exit code (see cli.hpp for the codes).
using Dispatch = std::map<const CLI::App*, std::function<int()>>;

// Each adds one subcommand to `root` and its runner to `dispatch`.
void add_run_command(CLI::App& root, Dispatch& dispatch);
void add_sim_command(CLI::App& root, Dispatch& dispatch);
void add_data_command(CLI::App& root, Dispatch& dispatch);
void add_analyse_commands(CLI::App& root, Dispatch& dispatch);
void add_demo_command(CLI::App& root, Dispatch& dispatch);
void add_gate_command(CLI::App& root, Dispatch& dispatch);
void add_report_command(CLI::App& root, Dispatch& dispatch);
void add_fingerprint_command(CLI::App& root, Dispatch& dispatch);
void add_merge_command(CLI::App& root, Dispatch& dispatch);
void add_export_command(CLI::App& root, Dispatch& dispatch);
void add_import_command(CLI::App& root, Dispatch& dispatch);

// What is wrong with the first value given to a flag or argument of `sub`
// (or its parents) once parsed, or nothing: an empty value, an empty item
// in a comma list, or a number that is not plain decimal text within its
// type (cli.cpp). `run_main` asks it for every subcommand but `gate`, which
// asks it itself so that its JUnit file says why.
std::string value_problem(const CLI::App& sub);

} // namespace diffeval::cli
