// Subcommand dispatch.
#include <harness/cli/cli.hpp>

#include <CLI/CLI.hpp>

namespace diffeval::cli {

int run_main(int argc, char** argv) {
    CLI::App app{"diffeval: differential accuracy evaluation of LLM inference servers"};
    app.require_subcommand(1);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? k_exit_ok : k_exit_usage;
    }
    return k_exit_ok;
}

} // namespace diffeval::cli
