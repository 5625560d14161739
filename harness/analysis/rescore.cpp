// Rescoring: one pass over the responses that count, in one transaction, so
// readers see either the old derived rows or the new ones, never a mix. What
// is computed (the classification, which scorers, each question's gold
// prepared once) is decided here; the store reads and writes the rows
// (store/scoring.hpp).
#include <harness/analysis/rescore.hpp>

#include <harness/store/results.hpp>
#include <harness/store/scoring.hpp>
#include <harness/util/text.hpp>
#include <scorers/classify.hpp>
#include <scorers/registry.hpp>

#include <fmt/format.h>

#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace diffeval::analysis {

using util::ErrorKind;
using util::make_error;

util::Result<scorers::ScoreText> stored_mode(store::Store& st,
                                             std::optional<scorers::ScoreText> otherwise) {
    auto stored = store::stored_score_text(st);
    if (!stored) {
        return stored.error();
    }
    if (!*stored && otherwise) {
        return *otherwise;
    }
    auto mode = scorers::parse_score_text(stored->value_or("full"));
    return mode ? *mode : scorers::ScoreText::full;
}

namespace {

// Classify and score every response `responses` yields through `writer`,
// adding to `out`.
util::Result<void> score_each(store::ResponsesToScore& responses, store::RequestStops& stops,
                              ResponseScorer& scorer, store::ScoreWriter& writer,
                              RescoreSummary& out) {
    std::vector<std::string> no_stops;
    while (true) {
        auto next = responses.next();
        if (!next) {
            return next.error();
        }
        if (!*next) {
            return {};
        }
        const auto& r = **next;
        std::vector<std::string> read;
        if (ResponseScorer::needs_stop_strings(r)) {
            auto of = stops.of(r.request_id);
            if (!of) {
                return of.error();
            }
            read = std::move(*of);
        }
        const auto d = scorer.derive(r, read);
        if (auto w = writer.classification(
                {r.response_id, d.opened, d.closed, d.reasoning_started, d.outcome, d.stop_cause});
            !w) {
            return w.error();
        }
        for (const auto& s : d.scores) {
            if (auto w = writer.score({r.response_id, s.scorer, s.scorer_version, s.score_text,
                                       s.extracted, s.valid, s.correct});
                !w) {
                return w.error();
            }
        }
        out.scores += static_cast<int64_t>(d.scores.size());
        ++out.responses;
    }
}

// Store the user scorers `added` (inside the pass's transaction), noting in
// `out` which were new or changed.
util::Result<void> store_added(store::Store& st, const std::vector<scorers::ScorerSource>& added,
                               RescoreSummary& out) {
    for (const auto& source : added) {
        auto scorer = scorers::load_scorer(source.text, source.name, source.origin);
        if (!scorer) {
            return scorer.error();
        }
        auto change =
            store::put_scorer(st, {source.name, scorer->version(), source.text, source.origin, ""});
        if (!change) {
            return change.error();
        }
        if (*change == store::ScorerChange::added) {
            out.added.push_back(source.name);
        } else if (*change == store::ScorerChange::replaced) {
            out.replaced.push_back(source.name);
        }
    }
    return {};
}

} // namespace

ResponseScorer::ResponseScorer(std::vector<const scorers::Scorer*> scorers, scorers::ScoreText mode,
                               size_t memo_bytes)
    : m_scorers(std::move(scorers)), m_mode(mode), m_mode_name(scorers::score_text_name(mode)),
      m_memo_limit(memo_bytes),
      m_invalid(m_scorers.size(), scorers::ScoreResult{"[invalid]", false, false}) {
    for (size_t k = 0; k < m_scorers.size(); ++k) {
        size_t j = 0;
        while (j < k && !m_scorers[k]->same_gold_as(*m_scorers[j])) {
            ++j;
        }
        m_gold_of.push_back(j);
    }
}

bool ResponseScorer::needs_stop_strings(const store::ResponseToScore& r) {
    return r.stop_field.empty() && r.finish_reason == "stop";
}

store::DerivedRows ResponseScorer::derive(const store::ResponseToScore& r,
                                          const std::vector<std::string>& stops) {
    scorers::ClassifyInput in;
    in.text = r.text;
    in.reasoning = r.reasoning;
    in.finish_reason = r.finish_reason;
    in.failed = !r.ok;
    in.stop_field = r.stop_field;
    in.stop_reason = r.stop_reason;
    in.finish_unrecorded = r.finish_unrecorded;
    if (needs_stop_strings(r)) {
        in.stop_strings = stops;
    }
    const auto c = scorers::classify(in);
    store::DerivedRows d;
    d.opened = c.opened;
    d.closed = c.closed;
    d.reasoning_started = c.reasoning_started;
    d.outcome = std::string(scorers::outcome_name(c.outcome));
    d.stop_cause = std::string(scorers::stop_cause_name(c.stop_cause));
    // A failed request is scored as no answer.
    const std::vector<scorers::ScoreResult>& results = r.ok ? scored(r) : m_invalid;
    d.scores.reserve(m_scorers.size());
    for (size_t k = 0; k < m_scorers.size(); ++k) {
        d.scores.push_back({std::string(m_scorers[k]->name()), m_scorers[k]->version(), m_mode_name,
                            results[k].extracted, results[k].valid, results[k].correct});
    }
    return d;
}

const std::vector<scorers::ScoreResult>& ResponseScorer::scored(const store::ResponseToScore& r) {
    // Past the limit the memory starts over, golds included: a memo key
    // names its gold by address, so neither outlives the other.
    if (m_memo_bytes > m_memo_limit) {
        m_memo.clear();
        m_golds.clear();
        m_memo_bytes = 0;
    }
    // What an entry holds besides its text's bytes: map and vector nodes,
    // a string per scorer.
    constexpr size_t k_entry_bytes = 64;
    auto& gold = m_golds[{r.dataset, r.question_idx}];
    if (gold.empty()) {
        gold.reserve(m_scorers.size());
        for (size_t k = 0; k < m_scorers.size(); ++k) {
            gold.push_back(m_gold_of[k] == k ? m_scorers[k]->prepare_gold(r.answer)
                                             : gold[m_gold_of[k]]);
            m_memo_bytes += k_entry_bytes + gold.back().value.size();
        }
        m_memo_bytes += k_entry_bytes + r.dataset.size();
    }
    const auto text = scorers::select_scored_text(r.text, m_mode);
    // The question's gold is the map node's address: one per question.
    std::string key = fmt::format("{}:", static_cast<const void*>(&gold));
    key += text;
    if (auto it = m_memo.find(key); it != m_memo.end()) {
        return it->second;
    }
    std::vector<scorers::ScoreResult> results;
    results.reserve(m_scorers.size());
    m_memo_bytes += k_entry_bytes + key.size();
    for (size_t k = 0; k < m_scorers.size(); ++k) {
        results.push_back(m_scorers[k]->score(text, gold[k]));
        m_memo_bytes += k_entry_bytes + results.back().extracted.size();
    }
    return m_memo.emplace(std::move(key), std::move(results)).first->second;
}

util::Result<std::unique_ptr<StoredScoring>> StoredScoring::open(store::Store& st) {
    auto registry = stored_registry(st);
    if (!registry) {
        return registry.error();
    }
    auto mode = stored_mode(st);
    if (!mode) {
        return mode.error();
    }
    return std::unique_ptr<StoredScoring>(new StoredScoring(std::move(*registry), *mode));
}

util::Result<std::vector<scorers::ScorerSource>>
read_scorer_files(const std::vector<std::string>& paths) {
    auto registry = scorers::Registry::builtin();
    if (!registry) {
        return registry.error();
    }
    std::vector<scorers::ScorerSource> out;
    for (const auto& path : paths) {
        auto source = scorers::read_scorer_source(path);
        if (!source) {
            return source.error();
        }
        if (auto added = registry->add_source(*source); !added) {
            return added.error();
        }
        out.push_back(std::move(*source));
    }
    return out;
}

util::Result<scorers::Registry> stored_registry(store::Store& st) {
    auto registry = scorers::Registry::builtin();
    if (!registry) {
        return registry.error();
    }
    auto stored = store::stored_scorers(st);
    if (!stored) {
        return stored.error();
    }
    for (const auto& s : *stored) {
        // A name a scorer file could not have (a terminal escape reached
        // every summary's header, and merge carried it on).
        if (auto problem = store::stored_name_problem(s.name)) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: the stored scorer name '{}', which {}: no diffeval "
                                          "stores such a name, so the file was edited or is not "
                                          "diffeval's; delete its row from the scorers table and "
                                          "rescore (docs/scorers.md)",
                                          st.path(), util::one_line(s.name, 80), *problem));
        }
        // No file to rename: the fix is the row's, said below.
        if (auto added = registry->add_source({s.name, s.definition, s.origin}, ""); !added) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: the stored scorer '{}' cannot be used by this "
                                          "diffeval: {}; use the diffeval that stored it, or "
                                          "delete its row from the scorers table and rescore "
                                          "(docs/scorers.md)",
                                          st.path(), util::one_line(s.name, 80),
                                          added.error().message));
        }
    }
    return registry;
}

util::Result<RescoreSummary> rescore(store::Store& st, scorers::ScoreText mode, Scope scope,
                                     const std::vector<scorers::ScorerSource>& added) {
    // Take the write lock; everything below is undone unless committed.
    auto tx = store::ScoringTransaction::begin(st);
    if (!tx) {
        return tx.error();
    }
    // Store the user's scorers; a new or changed one scores everything.
    RescoreSummary out;
    if (auto r = store_added(st, added, out); !r) {
        return r.error();
    }
    if (!out.added.empty() || !out.replaced.empty()) {
        scope = Scope::all;
    }
    auto registry = stored_registry(st);
    if (!registry) {
        return registry.error();
    }
    // Rescoring everything starts from no derived rows.
    if (scope == Scope::all) {
        if (auto r = store::clear_derived(st); !r) {
            return r.error();
        }
    }
    // Prepare the reads and writes, then score each response.
    auto responses = store::ResponsesToScore::open(
        st, scope == Scope::all ? store::Pending::all : store::Pending::unclassified);
    if (!responses) {
        return responses.error();
    }
    auto stops = store::RequestStops::prepare(st);
    if (!stops) {
        return stops.error();
    }
    auto writer = store::ScoreWriter::prepare(st);
    if (!writer) {
        return writer.error();
    }
    ResponseScorer scorer(registry->all(), mode);
    if (auto r = score_each(*responses, *stops, scorer, *writer, out); !r) {
        return r.error();
    }
    if (auto r = tx->commit(); !r) {
        return r.error();
    }
    return out;
}

util::Result<RescoreSummary> ensure_scored(store::Store& st,
                                           const std::vector<scorers::ScorerSource>& added,
                                           std::optional<scorers::ScoreText> mode) {
    auto as_stored = stored_mode(st, mode);
    if (!as_stored) {
        return as_stored.error();
    }
    return rescore(st, *as_stored, Scope::missing, added);
}

} // namespace diffeval::analysis
