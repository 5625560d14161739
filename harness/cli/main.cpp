// diffeval's entry point: hands the command line to the CLI layer.
#include <harness/cli/cli.hpp>

int main(int argc, char** argv) {
    return diffeval::cli::run_main(argc, argv);
}
