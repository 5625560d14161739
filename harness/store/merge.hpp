// Merging results databases: the shards of one run (`diffeval run --shard`)
// or separate runs, into one file every other command reads as if one run
// had written it.
#pragma once

#include <harness/util/result.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::store {

class Store;

// The suffix of the temporary file `merge OUT` builds in (OUT + it), which
// it removes first: no command writes a database of such a name.
inline constexpr std::string_view k_merge_tmp_suffix = ".merge-tmp";

struct MergeSummary {
    int64_t requests_added = 0;
    int64_t requests_known = 0; // already in the output (same request key)
    int64_t responses_added = 0;
    int64_t responses_known = 0;
    int64_t probe_responses_added = 0; // the decision-point probe's
    // Requests this merge gave a second successful answer (another run of
    // the same configuration answered them): the newest counts, the others
    // are kept but count nowhere.
    int64_t answered_again = 0;
    // The text the inputs (and OUT) were scored on ("full", "after-think":
    // `rescore --score-text`), when any was scored: OUT's responses are
    // scored on it, as a resumed run or an import keeps it. Inputs scored
    // on different texts are refused.
    std::optional<std::string> score_text;
};

// Merge `inputs` into `out` (created when missing; what it holds is kept).
// Requests are identified by their key, responses by request, start time and
// body, so merging the same file twice adds nothing. Inputs that disagree
// about what a server is (model, version, fingerprint facts), about a
// question's text, about a key's dataset, or about the configuration one
// group's requests were sent with (dataset, body outside the prompt, the
// prompt before the question) are refused naming both files.
// The result is built in a temporary file beside `out` and renamed over it,
// so an error or a killed merge leaves `out` as it was. `check`, when given,
// is asked of each input (and of `out` when it exists) while it is open for
// the checks before anything is written: its error refuses the merge (the
// CLI checks that every stored scorer loads).
using InputCheck = std::function<util::Result<void>(Store& input)>;
util::Result<MergeSummary> merge(const std::string& out, const std::vector<std::string>& inputs,
                                 const InputCheck& check = {});

// Build `out` (replaced) holding `baseline_db` with every server renamed
// `prefix` + NAME, merged with `db`: one database where a gate compares a
// group of `db` with a group of another run's database. Questions must agree
// as in merge(), and so must the text both are scored on (rescore
// --score-text): the text, when either says, is returned, for `out` to be
// scored on.
util::Result<std::optional<std::string>> combine_with_baseline(const std::string& out,
                                                               const std::string& db,
                                                               const std::string& baseline_db,
                                                               const std::string& prefix);

} // namespace diffeval::store
