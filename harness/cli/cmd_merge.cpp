// `diffeval merge OUT IN...`: merge shards and separate runs into one file.
#include <harness/analysis/rescore.hpp>
#include <harness/cli/commands.hpp>
#include <harness/cli/util.hpp>
#include <harness/store/lock.hpp>
#include <harness/store/merge.hpp>
#include <harness/store/results.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <iostream>

namespace diffeval::cli {

namespace {

struct MergeFlags {
    std::string out;
    std::vector<std::string> inputs;
};

int merge_command(const MergeFlags& f) {
    // OUT is replaced by a new file at the end: a run (or another merge)
    // writing it meanwhile would write to the replaced file and lose it all.
    auto lock = store::RunLock::acquire(f.out, "merge", store::RunLock::Wait::no, nullptr,
                                        "wait for it to finish, then merge again");
    if (!lock) {
        return report(lock.error());
    }
    // A shard a run still writes is merged as it stands; merging it again
    // later adds what its run stores meanwhile.
    for (const auto& in : f.inputs) {
        if (auto who = store::RunLock::holder(in)) {
            print_error(fmt::format("{} is still being written by {}: merging what it has stored "
                                    "so far (its requests with no response yet count as failed); "
                                    "merge it again once that has ended to add the rest",
                                    in, *who));
        }
    }
    // Every scorer the merged file will hold must load before OUT is
    // touched: the scoring stage refused it after OUT was replaced, and
    // every reading command and run refused OUT from then on.
    // Nor may a name no diffeval writes reach it (store::result_names).
    auto r = store::merge(f.out, f.inputs, [](store::Store& input) -> util::Result<void> {
        if (auto registry = analysis::stored_registry(input); !registry) {
            return registry.error();
        }
        if (auto names = store::result_names(input); !names) {
            return names.error();
        }
        return {};
    });
    if (!r) {
        return report(r.error());
    }
    // On the text its inputs were scored on: a fresh OUT holds no score
    // to say which.
    if (auto scored = score_stored(f.out, {}, score_text_named(r->score_text)); !scored) {
        return report(scored.error());
    }
    // Two runs of one configuration merged as one: a user who wanted them
    // compared sees only the newer, so it is said.
    if (r->answered_again > 0) {
        print_error(fmt::format(
            "note: {} already had a successful answer from {} (another run of the same server, "
            "framing and token limit): each counts its newest answer, the others are kept but "
            "counted nowhere; to compare two runs, run them under different --server names",
            util::counted(r->answered_again, "request"),
            f.inputs.size() > 1 ? fmt::format("another input or {}", f.out) : f.out));
    }
    std::cout << fmt::format(
        "merged {} into {}: {} and {} added, {} and {} already there{}\n",
        util::counted(f.inputs.size(), "file"), f.out, util::counted(r->requests_added, "request"),
        util::counted(r->responses_added, "response"), util::counted(r->requests_known, "request"),
        util::counted(r->responses_known, "response"),
        r->probe_responses_added > 0
            ? fmt::format("; {} added", util::counted(r->probe_responses_added, "probe response"))
            : std::string());
    return k_exit_ok;
}

} // namespace

void add_merge_command(CLI::App& root, Dispatch& dispatch) {
    auto flags = std::make_shared<MergeFlags>();
    auto* cmd = root.add_subcommand(
        "merge", "Merge results databases (shards of a run, or separate runs) into OUT");
    cmd->add_option("OUT", flags->out, "The merged database (created, or added to)")->required();
    cmd->add_option("IN", flags->inputs, "Databases to merge")
        ->required()
        ->default_str(""); // a list's captured default would show as "=[]"
    dispatch[cmd] = [flags] { return merge_command(*flags); };
}

} // namespace diffeval::cli
