// lm-evaluation-harness's per-sample logs (`lm_eval --log_samples`), out of
// and into the store, so lm-eval's tooling reads diffeval runs and diffeval's
// scorers, classifier and `diff` read lm-eval runs.
//
// A samples file is JSON lines, one per (document, filter), with the keys
// lm-eval's evaluator writes (lm_eval/evaluator.py, then
// loggers/evaluation_tracker.py's save_results_samples): doc_id, doc,
// target, arguments ({"gen_args_0": {"arg_0": context, "arg_1":
// gen_kwargs}}), resps, filtered_resps, filter, metrics, doc_hash,
// prompt_hash, target_hash, and the metric values (exact_match).
#pragma once

#include <datasets/dataset.hpp>
#include <harness/store/store.hpp>
#include <harness/util/result.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace diffeval::interop {

struct ExportSummary {
    std::vector<std::string> files; // one per group, in group order
    int64_t lines = 0;
};

// Write one `samples_<task>_<date_id>.jsonl` per stored group (server,
// framing, max_tokens, repeat) into `dir`; <task> is
// "gsm8k-SERVER-FRAMING-MAX_TOKENS" (and "-rN" for repeat N > 0), each byte
// of a name other than an ASCII letter, digit, '.' or '-' written "_XX" (hex),
// and "-" plus 8 hex digits of the group's hash appended where two groups'
// tasks would still be equal ignoring case; two groups are never written to
// one file (an error before that happens). Lines for
// the filters "strict-match" and "flexible-extract" carry the lm-eval-strict
// and lm-eval-flexible scorers' extractions and verdicts, so `store` must be
// scored (the scoring stage, analysis::ensure_scored). `date_id` is lm-eval's
// timestamp form, e.g. "2026-11-30T17-20-00.000000".
util::Result<ExportSummary> export_samples(store::Store& store, const std::string& dir,
                                           const std::string& date_id);

struct ImportOptions {
    std::string path;    // the samples file
    std::string name;    // the server name the group gets
    std::string framing; // "" = the task name from the file name
    // The dataset lm-eval ran on, its test questions read (open_test_set):
    // each document must be its question at its doc_id, and is stored under
    // its name with the question's hash, as `run` stores it.
    datasets::Dataset dataset;
    // The repeat number of the file's first answer to each document: a file
    // of another run of the same requests is stored as further repeats.
    // Unless given (`first_repeat_given`), a file `export` wrote for repeat
    // N (its task ends "-rN") starts at N, in the group of repeat 0's file.
    int first_repeat = 0;
    bool first_repeat_given = false;
};

struct ImportSummary {
    std::string group; // NAME/FRAMING/MAX_TOKENS (", "-separated when several)
    int64_t documents = 0;
    int64_t responses = 0;
    int64_t already_stored = 0;
    // A task whose strict-match filter is not gsm8k's "#### N" (gsm8k_cot's
    // "The answer is N."): the lm-eval-strict scorer reads it by gsm8k's
    // rule, so a note says where lm-eval's own verdicts are.
    bool other_strict_rule = false;
    // gsm8k_cot_llama's strict filter reads "The final answer is N", not
    // gsm8k_cot's "The answer is N.".
    bool final_answer_rule = false;
    int first_repeat = 0; // the repeat the file's first answers were stored as
    // Documents logged with more than one answer (a task with `repeats`),
    // and the most answers one had: each answer is a repeat, and accuracy
    // averages them, where lm-eval's take_first filter scores the first.
    int64_t several_answers = 0;
    size_t most_answers = 0;
};

// Read the samples file and store it as group NAME/FRAMING/MAX_TOKENS:
// questions from `doc`, the context and generation arguments as the
// request, each of `resps` as a response (one repeat each) whose
// response_json keeps lm-eval's filtered responses and verdicts per filter.
// A malformed line, a document whose doc_id is not a question of the
// dataset or whose question or answer differs from the dataset's (or from
// the stored one), a document logged twice with other answers, or a NAME
// used by a server diffeval ran are errors naming the file and document.
// Importing the same file again stores nothing new.
util::Result<ImportSummary> import_samples(store::Store& store, ImportOptions options);

// lm-eval's timestamp for file names: ISO 8601 local time with ':' as '-'.
std::string lm_eval_date_id();

} // namespace diffeval::interop
