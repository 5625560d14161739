// How subcommands plug into the CLI: each subcommand file adds its CLI11
// sub-app with its options and registers the function that runs it.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

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
// A gate whose command line `args` (argv after the program) could not be
// parsed still writes the JUnit file its --junit names, with `message` as
// its error, and the JSON document its --json names (not passed, `error`
// `message`): a mistyped flag in a CI job shows as a failed test, not as
// no test results or an earlier pass. Nothing for other commands.
void write_parse_error_outputs(const std::vector<std::string>& args, const std::string& message);
void add_report_command(CLI::App& root, Dispatch& dispatch);
void add_fingerprint_command(CLI::App& root, Dispatch& dispatch);
void add_merge_command(CLI::App& root, Dispatch& dispatch);
void add_export_command(CLI::App& root, Dispatch& dispatch);
void add_import_command(CLI::App& root, Dispatch& dispatch);

// The type --help shows for a flag that takes a comma-separated list
// (`--framing LIST=raw,chat`); value_problem refuses an empty item in any
// flag of this type.
inline constexpr const char* k_list_type = "LIST";

// Add to `cmd` the flag `name` that takes a comma-separated list into
// `values` (split_list splits it; repeating the flag adds to it), of type
// k_list_type, described by `description` and showing `default_shown` as
// its default ("" shows none). Every comma-list flag is added with this.
CLI::Option* add_list_option(CLI::App& cmd, const std::string& name,
                             std::vector<std::string>& values, const std::string& description,
                             const std::string& default_shown);

// What is wrong with `text` as the number a flag of CLI11 type `type`
// ("INT", "UINT", "FLOAT"...; any other type: nothing) takes, or nothing: a
// number is plain decimal text, an optional minus and digits, within the
// type's range. Flags CLI11 reads as text (a list, "auto", I/N) ask it of
// each number they hold.
std::string number_problem(const std::string& type, const std::string& text);

// What is wrong with the first value given to a flag or argument of `sub`
// (or its parents) once parsed, or nothing: an empty value, an empty item
// in a comma list (a flag of type k_list_type), or a number that is not
// plain decimal text within its type (cli.cpp). `run_main` asks it for every subcommand but `gate`,
// which asks it itself so that its JUnit file says why.
std::string value_problem(const CLI::App& sub);

} // namespace diffeval::cli
