// diffeval's entry point: hands the command line to the CLI layer.
#include <harness/cli/cli.hpp>

#ifdef DIFFEVAL_JEMALLOC
// jemalloc reads its options from this symbol at the first allocation.
// Transparent huge pages for its arenas (where the kernel offers them on
// request): on these virtual machines a page touched for the first time costs
// about 20 us, and a run touches thousands (the dataset, SQLite's cache,
// buffers); huge pages take a 1-question run from 4,200 minor faults and
// 0.13 s to 1,900 and 0.08 s, for 5-7 MB more resident memory whatever the
// plan's length (ARCHITECTURE.md). One arena for all threads: each thread
// keeps its cache, and the arenas jemalloc makes per CPU (eight here) each
// held pages of their own; one took 5% off a run's CPU and 10-17% off the
// peak memory of a report and of the demo, at the same wall time
// (interleaved runs, ARCHITECTURE.md). MALLOC_CONF in the environment still
// overrides it.
extern "C" {
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables): jemalloc's interface
const char* malloc_conf = "thp:always,narenas:1";
}
#endif

int main(int argc, char** argv) {
    return diffeval::cli::run_main(argc, argv);
}
