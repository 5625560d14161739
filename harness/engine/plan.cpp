// Planning: reading one server's part of the (framing x max_tokens x question
// x repeat) matrix, and the probe's requests, a question at a time into
// request rows stored before they are sent and work queued for what has no
// successful response. The key of a request hashes what identifies it and its
// body's bytes, so a changed framing is a new request and an unchanged one
// resumes. The event loop asks for more as its queue runs low (send.cpp).
#include <harness/engine/run_parts.hpp>

#include <harness/store/body_difference.hpp>

#include <harness/util/hash.hpp>
#include <harness/util/pyjson.hpp>

#include <fmt/format.h>

#include <chrono>

namespace diffeval::engine {

using util::ErrorKind;
using util::make_error;

namespace {

// How long one turn of the event loop plans once its server's queue is full
// enough to keep every connection busy.
constexpr auto k_plan_slice = std::chrono::milliseconds(10);

// A body's leading text shorter than this is stored with the body: a row of
// its own would save less than looking it up costs.
constexpr size_t k_min_shared_prefix = 256;

// How many leading bytes `body` shares with every body of template `t`
// (store::RequestRow::prefix_bytes).
size_t shared_prefix_bytes(const framing::BodyTemplate& t, std::string_view body) {
    const std::string& lead = t.leading_text();
    return lead.size() >= k_min_shared_prefix && body.starts_with(lead) ? lead.size() : 0;
}

Endpoint endpoint_of(const framing::Framing& f) {
    return f.kind == framing::Kind::chat ? Endpoint::chat : Endpoint::completion;
}

// The model a framing's bodies name: the configured one, else (when the
// framing always sends one) the one the server serves.
util::Result<std::optional<std::string>> body_model_for(const RunContext& ctx, size_t si,
                                                        const framing::Framing& f,
                                                        const ServerInfo& info) {
    const auto& spec = ctx.config.servers[si];
    std::optional<std::string> body_model = ctx.configured_model(si);
    if (!body_model && f.model == framing::ModelField::always) {
        body_model = info.served_model;
        if (!body_model) {
            return make_error(ErrorKind::usage,
                              fmt::format("framing '{}' needs a model name for server '{}': "
                                          "pass --model (preflight is off)",
                                          f.name, spec.name));
        }
    }
    return body_model;
}

} // namespace

util::Result<std::unique_ptr<Planner>> Planner::create(const RunContext& ctx, size_t si,
                                                       const ServerInfo& info) {
    const auto& config = ctx.config;
    const auto& spec = config.servers[si];
    std::unique_ptr<Planner> p(new Planner(ctx, si));
    p->m_stages = config.max_tokens.size() + (config.probe ? 1 : 0);
    const auto n = ctx.inputs.n_questions;
    for (const auto& f : ctx.inputs.framings) {
        auto body_model = body_model_for(ctx, si, f, info);
        if (!body_model) {
            return body_model.error();
        }
        auto extra = spec.extra_body;
        if (config.stream) {
            extra["stream"] = true;
            extra["stream_options"] = {{"include_usage", true}};
        }
        p->m_parts.push_back(
            Part{framing::Renderer(f, ctx.inputs.dataset),
                 *body_model,
                 std::move(extra),
                 probe_options(f, spec.extra_body),
                 endpoint_of(f),
                 spec.url + f.endpoint,
                 std::make_shared<const ProbeTarget>(ProbeTarget{f.probe_marker, f.probe_chain}),
                 std::nullopt,
                 {}});
        auto& part = p->m_parts.back();
        part.measured = framing::BodyTemplate::make([&](const datasets::Sample& s, int max_tokens) {
            return util::python_json_dumps(
                part.renderer.body(s, max_tokens, part.body_model, part.extra));
        });
        if (part.measured) {
            part.measured_hash.emplace(part.measured->leading_text());
        }
        if (config.probe) {
            for (int step = 0; step < probe_steps(f); ++step) {
                part.probe_steps.push_back(
                    framing::BodyTemplate::make([&](const datasets::Sample& s, int) {
                        return probe_body(part.renderer, s, step, part.body_model,
                                          part.probe_options);
                    }));
            }
        }
        p->m_total += static_cast<int64_t>(config.max_tokens.size()) *
                      static_cast<int64_t>(questions_in_shard(config.shard, n)) * config.repeats;
        if (config.probe) {
            p->m_total += static_cast<int64_t>(questions_in_shard(config.shard, n)) *
                          probe_requests_per_question(f, config.repeats);
        }
    }
    return p;
}

util::Result<void> Planner::check_stored_groups(store::Store& db) const {
    const auto& config = m_ctx.config;
    const auto& dataset = m_ctx.inputs.dataset;
    const auto& server = config.servers[m_si].name;
    const auto n = m_ctx.inputs.n_questions;
    // A group's places differ from its first one only in their questions.
    // put_questions has found this dataset's stored questions unchanged, and
    // a group holds one dataset, so unless a run of another dataset is
    // stored (a group an earlier diffeval filled from two files), the first
    // place speaks for the rest: rendering every stored place cost a resumed
    // 100,000-request plan 0.1-0.2 s before its first request.
    auto other_dataset = db.holds_other_dataset(dataset.name);
    if (!other_dataset) {
        return other_dataset.error();
    }
    const bool every_place = *other_dataset;
    for (const auto& part : m_parts) {
        const auto& framing = part.renderer.framing().name;
        for (const int max_tokens : config.max_tokens) {
            // Each question's body hash, rendered once for all its repeats,
            // and its content hash.
            std::vector<std::string> hashes(dataset.test.size());
            std::vector<std::string> question_hashes(dataset.test.size());
            std::optional<util::Error> refused;
            const auto check = [&](const store::Store::StoredPlace& p) {
                if (p.question_idx < 0 || static_cast<size_t>(p.question_idx) >= hashes.size()) {
                    return true; // a question this run's dataset does not have
                }
                const auto q = static_cast<size_t>(p.question_idx);
                const auto& sample = dataset.test[q];
                if (hashes[q].empty()) {
                    hashes[q] = body_hash(part, measured_body(part, sample, max_tokens));
                }
                if (store::request_key(server, framing, max_tokens, p.repeat, p.question_idx,
                                       hashes[q]) == p.request_key) {
                    // The same body can ask another question: the same text
                    // with another gold answer (a question is both). Its
                    // stored responses answer the stored question.
                    if (question_hashes[q].empty()) {
                        question_hashes[q] = store::question_hash(sample.question, sample.answer);
                    }
                    if (p.question_sha256.empty() || p.question_sha256 == question_hashes[q]) {
                        return true;
                    }
                    auto stored = db.stored_question(p.dataset, p.question_idx);
                    if (!stored) {
                        refused = stored.error();
                        return false;
                    }
                    const bool same_text = *stored && (*stored)->question == sample.question;
                    refused = make_error(
                        ErrorKind::usage,
                        fmt::format(
                            "{}/{}/{} holds question {} of dataset {} {}: a question is its text "
                            "and its gold answer, so the responses stored for it answer another "
                            "question than this run's; run {} into another --db",
                            server, framing, max_tokens, p.question_idx, p.dataset,
                            same_text
                                ? fmt::format("with gold answer {}; {} gives the same "
                                              "question the gold answer {}",
                                              datasets::answer_shown((*stored)->answer),
                                              dataset.name, datasets::answer_shown(sample.answer))
                                : fmt::format("sent with the body {} sends for another "
                                              "question",
                                              dataset.name),
                            dataset.name));
                    return false;
                }
                refused = make_error(
                    ErrorKind::usage,
                    fmt::format(
                        "{}/{}/{} already holds question {} (repeat {}) sent with another "
                        "request body{}: {}; run this configuration under another --server "
                        "name or into another --db",
                        server, framing, max_tokens, p.question_idx, p.repeat,
                        p.dataset == dataset.name ? "" : fmt::format(" (dataset {})", p.dataset),
                        store::what_changed(db.request_body(server, framing, max_tokens, p.repeat,
                                                            p.question_idx, p.request_key),
                                            measured_body(part, sample, max_tokens))));
                return false;
            };
            // The group's first place, wherever it is: a run whose places
            // miss the stored ones (another shard) would still mix two
            // configurations in the group. Then, beside another dataset's
            // run, every place this run plans: one found taken while sending
            // stopped the run after it had sent and stored the questions
            // before it.
            bool first = true;
            auto r = db.for_each_stored_place(
                server, framing, max_tokens, [&](const store::Store::StoredPlace& p) {
                    if (!first) {
                        if (!every_place) {
                            return false;
                        }
                        if (p.repeat >= config.repeats || p.question_idx < 0 ||
                            static_cast<size_t>(p.question_idx) >= n ||
                            !in_shard(config.shard, static_cast<size_t>(p.question_idx))) {
                            return true; // a place this run does not plan
                        }
                        return check(p);
                    }
                    first = false;
                    // A group holds one dataset: its questions are counted by
                    // their dataset's name and index, so the same file given
                    // by another path counted each question twice (96
                    // questions of 48, with uneven repeats, in an audit's
                    // summary).
                    if (p.dataset != dataset.name) {
                        refused = make_error(
                            ErrorKind::usage,
                            fmt::format("{}/{}/{} holds questions of dataset {}, and this run "
                                        "gives {}: a group holds one dataset, or its questions "
                                        "would be counted twice (a dataset given as a path is "
                                        "named by the path as written); give --dataset as "
                                        "before if it is the same file, or run this one under "
                                        "another --server name or into another --db",
                                        server, framing, max_tokens, p.dataset, dataset.name));
                        return false;
                    }
                    return check(p);
                });
            if (!r) {
                return r.error();
            }
            if (refused) {
                return *refused;
            }
        }
        if (config.probe) {
            if (auto r = check_stored_probes(db, part, every_place); !r) {
                return r;
            }
        }
    }
    return {};
}

util::Result<void> Planner::check_stored_probes(store::Store& db, const Part& part,
                                                bool every_place) const {
    const auto& config = m_ctx.config;
    const auto& dataset = m_ctx.inputs.dataset;
    const auto& server = config.servers[m_si].name;
    const auto& framing = part.renderer.framing().name;
    // Each question's probe body hashes, one per step this run sends.
    std::vector<std::vector<std::string>> hashes(dataset.test.size());
    std::optional<util::Error> refused;
    // The first stored place the dataset has a question for, wherever it is
    // (another shard's, past --limit), then, as check_stored_groups does,
    // every place this run plans when another dataset's run is stored.
    const int repeats = std::max(config.repeats, k_min_probe_repeats);
    const auto n = m_ctx.inputs.n_questions;
    // The first place's every step: a changed chain changes step 1 alone.
    std::optional<std::pair<int, int64_t>> first;
    auto r = db.for_each_stored_probe_place(
        *config.probe, server, framing, [&](const store::Store::StoredProbePlace& p) {
            if (p.question_idx < 0 || static_cast<size_t>(p.question_idx) >= hashes.size()) {
                return true; // a question this run's dataset does not have
            }
            const auto q = static_cast<size_t>(p.question_idx);
            if (!first) {
                first.emplace(p.repeat, p.question_idx);
            } else if (*first != std::pair(p.repeat, p.question_idx)) {
                if (!every_place) {
                    return false;
                }
                if (p.repeat >= repeats || q >= n || !in_shard(config.shard, q)) {
                    return true; // a place this run does not plan
                }
            }
            auto& steps = hashes[q];
            if (steps.empty()) {
                for (const auto& body : probe_bodies(part, dataset.test[q])) {
                    steps.push_back(util::sha256_hex(body));
                }
            }
            if (p.step >= 0 && static_cast<size_t>(p.step) < steps.size() &&
                probe_request_key(*config.probe, p.step, server, framing, p.repeat, p.question_idx,
                                  steps[static_cast<size_t>(p.step)]) == p.request_key) {
                return true;
            }
            // Another chain (or none) beside the stored steps would join
            // readings of two configurations in one place.
            refused = make_error(
                ErrorKind::usage,
                fmt::format("{}/{} already holds probe {} step {} of question {} (repeat {}) "
                            "sent with another request body: the framing's probe_chain, the "
                            "framing, a sampling setting, the model or the question changed "
                            "since; run this configuration under another --server name or into "
                            "another --db",
                            server, framing, *config.probe, p.step, p.question_idx, p.repeat));
            return false;
        });
    if (!r) {
        return r.error();
    }
    if (refused) {
        return *refused;
    }
    return {};
}

std::string Planner::body_hash(const Part& part, const std::string& body) {
    return part.measured_hash ? part.measured_hash->hex(body) : util::sha256_hex(body);
}

std::string Planner::measured_body(const Part& part, const datasets::Sample& sample,
                                   int max_tokens) const {
    if (part.measured) {
        return part.measured->render(sample, max_tokens);
    }
    return util::python_json_dumps(
        part.renderer.body(sample, max_tokens, part.body_model, part.extra));
}

std::vector<std::string> Planner::probe_bodies(const Part& part,
                                               const datasets::Sample& sample) const {
    std::vector<std::string> bodies;
    for (size_t step = 0; step < part.probe_steps.size(); ++step) {
        const auto& t = part.probe_steps[step];
        bodies.push_back(t ? t->render(sample, 1)
                           : probe_body(part.renderer, sample, static_cast<int>(step),
                                        part.body_model, part.probe_options));
    }
    return bodies;
}

std::shared_ptr<const std::string> Planner::body(const Work& w) {
    const std::tuple recipe{w.part, w.question, w.max_tokens, w.probe_step};
    if (m_last_body && recipe == m_last_recipe) {
        return m_last_body;
    }
    const Part& part = m_parts[w.part];
    const auto& sample = m_ctx.inputs.dataset.test[static_cast<size_t>(w.question)];
    std::string body;
    if (w.probe_step < 0) {
        body = measured_body(part, sample, w.max_tokens);
    } else {
        const auto& t = part.probe_steps[static_cast<size_t>(w.probe_step)];
        body = t ? t->render(sample, 1)
                 : probe_body(part.renderer, sample, w.probe_step, part.body_model,
                              part.probe_options);
    }
    m_last_body = std::make_shared<const std::string>(std::move(body));
    m_last_recipe = recipe;
    return m_last_body;
}

void Planner::read_question(std::vector<Read>& out) {
    const auto& config = m_ctx.config;
    const auto& dataset = m_ctx.inputs.dataset;
    const auto& server = config.servers[m_si].name;
    const Part& part = m_parts[m_part];
    const auto& framing = part.renderer.framing().name;
    const size_t q = m_question;
    // A shard holds every request of its questions, the probe's too, and
    // none of the others'.
    const bool in_shard = engine::in_shard(config.shard, q);
    if (in_shard && m_stage == config.max_tokens.size()) {
        for (auto& row : plan_probe_question(*config.probe, server, framing, dataset.name, q,
                                             config.repeats, probe_bodies(part, dataset.test[q]))) {
            const auto step = static_cast<size_t>(row.probe_step);
            if (step < part.probe_steps.size() && part.probe_steps[step]) {
                row.prefix_bytes = shared_prefix_bytes(*part.probe_steps[step], row.body);
            }
            out.push_back(Read{std::move(row), m_part});
        }
    } else if (in_shard) {
        const int max_tokens = config.max_tokens[m_stage];
        std::string body = measured_body(part, dataset.test[q], max_tokens);
        auto body_sha = body_hash(part, body);
        for (int rep = 0; rep < config.repeats; ++rep) {
            store::RequestRow row{"",           server,
                                  framing,      max_tokens,
                                  rep,          static_cast<int>(q),
                                  dataset.name, rep == 0 ? std::move(body) : std::string(),
                                  body_sha};
            row.key = store::request_key(server, framing, max_tokens, rep, static_cast<int64_t>(q),
                                         body_sha);
            if (part.measured) {
                row.prefix_bytes = shared_prefix_bytes(*part.measured, row.body);
            }
            out.push_back(Read{std::move(row), m_part});
        }
    }
    // Move on: the next stage (token limit, then the probe), framing,
    // question. A question's requests follow each other, so the texts a run
    // scores again (repeats, an answer that ended before the smaller limit,
    // the same answer under another framing) come within a few responses
    // (analysis::ResponseScorer's memory).
    if (++m_stage == m_stages) {
        m_stage = 0;
        if (++m_part == m_parts.size()) {
            m_part = 0;
            ++m_question;
        }
    }
}

util::Result<void> Planner::fill(ServerState& server, store::Store& db, RunSummary& summary,
                                 size_t want) {
    // Read a question at a time into the store's transaction, so only one
    // question's bodies are in memory; the work is queued once the
    // transaction is committed: the store knows what was asked before any is
    // sent.
    std::vector<Work> ready;
    std::vector<size_t> parts; // the part of each row read
    size_t rows_read = 0;      // in this transaction: at most `want`
    // While the event loop plans, answers wait unread in their sockets and
    // count as latency: once the queue holds what the server has room for,
    // planning stops after k_plan_slice and goes on at the loop's next turn.
    // A read of up to 4,096 requests held the loop for tens of milliseconds:
    // with the slice, p99 latency against the zero-latency simulator at 64
    // connections went from 36-75 ms to 14-17 ms, at the same CPU.
    const auto start = std::chrono::steady_clock::now();
    const auto sliced = [&] {
        return server.queue.size() + ready.size() >= server.limit &&
               std::chrono::steady_clock::now() - start >= k_plan_slice;
    };
    const auto read = [&](std::vector<store::RequestRow>& rows) {
        if (finished() || server.queue.size() + ready.size() >= want || rows_read >= want ||
            sliced()) {
            return false;
        }
        std::vector<Read> reads;
        read_question(reads);
        parts.clear();
        rows_read += reads.size();
        for (auto& r : reads) {
            rows.push_back(std::move(r.row));
            parts.push_back(r.part);
        }
        return true;
    };
    const auto take = [&](std::vector<store::RequestRow>& rows,
                          const std::vector<store::Store::Planned>& planned) {
        for (size_t i = 0; i < rows.size(); ++i) {
            ++summary.planned;
            if (planned[i].answered) {
                ++summary.skipped;
                continue;
            }
            const Part& part = m_parts[parts[i]];
            Work w{m_si, part.endpoint, nullptr};
            w.part = parts[i];
            w.max_tokens = rows[i].max_tokens;
            w.probe_step = rows[i].probe_step;
            w.question = rows[i].question_idx;
            w.request_id = planned[i].id;
            if (rows[i].probe_step >= 0) {
                w.probe = part.probe_target;
            }
            ready.push_back(std::move(w));
        }
    };
    while (!finished() && server.queue.size() < want && !sliced()) {
        rows_read = 0;
        // With requests still queued, a batch the writer is storing is not
        // waited for: the loop reads answers and sends meanwhile, and plans
        // at a later turn. Waiting held every answer unread for the batch's
        // commit, tens of milliseconds at 1,024 connections, where a batch
        // holds up to 1,024 responses.
        const auto wait = server.queue.empty() ? store::Store::Wait::yes : store::Store::Wait::no;
        auto r = db.put_unanswered(read, take, wait);
        if (!r) {
            return r.error();
        }
        if (!*r) {
            break;
        }
        for (auto& w : ready) {
            server.queue.push_back(std::move(w));
        }
        ready.clear();
    }
    return {};
}

} // namespace diffeval::engine
