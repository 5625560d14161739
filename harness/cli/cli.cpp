// Subcommand dispatch: each subcommand registers itself (commands.hpp); this
// file parses, runs the chosen one, and maps anything unexpected to one line.
#include <harness/cli/cli.hpp>

#include <harness/cli/commands.hpp>

#include <fmt/format.h>

#include <iostream>

namespace diffeval::cli {

int run_main(int argc, char** argv) {
    CLI::App app{"diffeval: differential accuracy evaluation of LLM inference servers"};
    app.set_version_flag("--version", DIFFEVAL_VERSION);
    app.require_subcommand(1);
    Dispatch dispatch;
    add_run_command(app, dispatch);
    add_sim_command(app, dispatch);
    add_data_command(app, dispatch);
    add_analyse_commands(app, dispatch);
    add_demo_command(app, dispatch);
    add_gate_command(app, dispatch);
    add_report_command(app, dispatch);
    add_fingerprint_command(app, dispatch);
    add_merge_command(app, dispatch);
    add_export_command(app, dispatch);
    add_import_command(app, dispatch);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::cerr << fmt::format("diffeval: {}; see 'diffeval --help'\n", e.what());
        return k_exit_usage;
    }
    for (const auto* sub : app.get_subcommands()) {
        // Nested subcommands (data fetch) register the innermost one.
        const CLI::App* chosen = sub;
        while (!chosen->get_subcommands().empty()) {
            chosen = chosen->get_subcommands().front();
        }
        if (auto it = dispatch.find(chosen); it != dispatch.end()) {
            try {
                return it->second();
            } catch (const std::exception& e) {
                std::cerr << fmt::format("diffeval: internal error: {}; please report it\n",
                                         e.what());
                return k_exit_failed;
            }
        }
    }
    std::cerr << "diffeval: choose a subcommand; see 'diffeval --help'\n";
    return k_exit_usage;
}

} // namespace diffeval::cli
