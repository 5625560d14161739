// What each server said it ran, read back from the `servers` table: the
// model and version it reported (info_json) and, when a server log was
// attached, the fingerprint's facts and the conflicts it flagged
// (facts_json). Reports lay these side by side and the gate fails on
// conflicts, so a comparison is never read without knowing what ran.
#pragma once

#include <harness/fingerprint/fingerprint.hpp>
#include <harness/store/readers.hpp>
#include <harness/store/store.hpp>
#include <harness/util/result.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace diffeval::analysis {

// One server's record.
struct ServerFacts {
    std::string name;
    std::string model;                    // as configured, else models[0].id
    std::string version;                  // /version, else the Server header; empty when unknown
    std::optional<int64_t> max_model_len; // models[0].max_model_len
    bool fingerprinted = false;           // facts_json was recorded
    fingerprint::Fingerprint fingerprint; // read from facts_json
    // The profile's name when the server's /version said it is diffeval's
    // simulator: no model ran there, whatever engine and version it imitates.
    std::optional<std::string> simulator;
    // The model names and system fingerprints its successful responses
    // gave, with how many gave each, most first (store::answered_as): more
    // than one of either, and its answers are not one backend's.
    store::AnsweredAs answered_as;
};

// The records of `names`, in that order; a name missing from the table gets
// an empty record. Malformed JSON columns read as absent. Every text in them
// is the server's words, given as one line of at most
// util::k_server_words_bytes, so each place that prints them need not.
util::Result<std::vector<ServerFacts>> load_server_facts(store::Store& store,
                                                         const std::vector<std::string>& names);

// One row of the fact-by-fact comparison: a fact name and each server's
// value ("" when that server does not report it).
struct FactRow {
    std::string name;
    std::vector<std::string> values; // per server, in `servers` order
    // Per server, its own words where they are not the value (the
    // fingerprint's `stated`: "auto" for flash attention it resolved), else
    // "". The server's words, as bounded as every text of a record that
    // load_server_facts read.
    std::vector<std::string> stated;
    bool differs = false; // two servers report different values; stated words never count
};

// Rows for engine, version, model, max_model_len; "answered as" when any
// server's responses name more than one model or another than it serves;
// "system fingerprint" when any server's responses give one; "simulated"
// when any server is diffeval's simulator; then every fingerprint fact any
// server reports or only stated, in name order.
std::vector<FactRow> fact_rows(const std::vector<ServerFacts>& servers);

// "a (1200), b (319)": the names a server's responses gave (past the
// listed ones, "and 3 more (40)").
std::string names_text(const store::NameCounts& names);

// One kind of name a server's successful responses gave more than one of.
struct MixedAnswers {
    // "mixed-models", "its 1519 successful responses name 2 models: ...; its
    // answers are not one model's" with "model=NAME (N)" per model listed
    // ("K more models (N)" for the rest); "mixed-system-fingerprints",
    // likewise with "system_fingerprint=NAME (N)".
    fingerprint::Conflict conflict;
    std::string_view kind;    // "model", "system fingerprint"
    std::string_view heading; // "MIXED MODELS", "MIXED SYSTEM FINGERPRINTS"
};

// Where `s`'s successful responses name more than one model, or more than
// one system fingerprint, one for each, models first. The report and the
// gate's conflict check say them beside the fingerprint's conflicts.
std::vector<MixedAnswers> mixed_answers(const ServerFacts& s);

// A sentence saying which servers are diffeval's simulator and that no
// model ran on them; "" when none is.
std::string simulated_sentence(const std::vector<ServerFacts>& servers);

} // namespace diffeval::analysis
