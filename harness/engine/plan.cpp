// Planning: turning one server's part of the (framing x max_tokens x repeat x
// question) matrix, and the probe's requests, into request rows stored before
// anything is sent and work queued for what has no successful response. The
// key of a request hashes what identifies it and its body's bytes, so a
// changed framing is a new request and an unchanged one resumes.
#include <harness/engine/run_parts.hpp>

#include <harness/util/hash.hpp>
#include <harness/util/pyjson.hpp>

#include <fmt/format.h>

namespace diffeval::engine {

using util::ErrorKind;
using util::make_error;

namespace {

// Where one framing's requests of one server go, and how they are counted.
struct Target {
    const RunContext& ctx;
    size_t si;
    const std::unordered_set<std::string>& done_keys;
    ServerState& server;
    RunSummary& summary;
    Endpoint endpoint;
    std::string url;
};

Endpoint endpoint_of(const framing::Framing& f) {
    return f.kind == framing::Kind::chat ? Endpoint::chat : Endpoint::completion;
}

// Count `row` as planned; queue it and keep it in `rows` unless answered.
void plan_row(Target& t, store::RequestRow row, std::shared_ptr<const std::string> body,
              std::shared_ptr<const ProbeTarget> probe, std::vector<store::RequestRow>& rows) {
    ++t.summary.planned;
    if (t.done_keys.count(row.key)) {
        ++t.summary.skipped;
        return;
    }
    Work w{row.key, t.si, t.endpoint, t.url, std::move(body), 0, "", nullptr, {}};
    w.probe = std::move(probe);
    t.server.queue.push_back(std::move(w));
    rows.push_back(std::move(row));
}

// The requests of one token limit: one per (question of the shard, repeat).
util::Result<void> plan_max_tokens(Target& t, const framing::Framing& f,
                                   const framing::Renderer& renderer,
                                   const std::optional<std::string>& body_model,
                                   const nlohmann::ordered_json& extra, int max_tokens,
                                   store::Store& db) {
    const auto& config = t.ctx.config;
    const auto& dataset = t.ctx.inputs.dataset;
    const auto& spec = config.servers[t.si];
    std::vector<store::RequestRow> rows;
    for (size_t q = 0; q < t.ctx.inputs.n_questions; ++q) {
        if (config.shard &&
            static_cast<int>(q % static_cast<size_t>(config.shard->count)) != config.shard->index) {
            continue;
        }
        auto body = std::make_shared<const std::string>(
            util::python_json_dumps(renderer.body(dataset.test[q], max_tokens, body_model, extra)));
        auto body_sha = util::sha256_hex(*body);
        for (int rep = 0; rep < config.repeats; ++rep) {
            store::RequestRow row{"",           spec.name, f.name,
                                  max_tokens,   rep,       static_cast<int>(q),
                                  dataset.name, *body,     body_sha};
            row.key = store::request_key(spec.name, f.name, max_tokens, rep,
                                         static_cast<int64_t>(q), body_sha);
            plan_row(t, std::move(row), body, nullptr, rows);
        }
    }
    return db.put_requests(rows);
}

// The probe's requests (probe_plan.hpp) under framing `f`, like the measured
// ones: stored first, queued unless answered.
util::Result<void> plan_probes(Target& t, const framing::Framing& f,
                               const framing::Renderer& renderer,
                               const std::optional<std::string>& body_model, store::Store& db) {
    const auto& config = t.ctx.config;
    const auto& spec = config.servers[t.si];
    auto target = std::make_shared<const ProbeTarget>(ProbeTarget{f.probe_marker, f.probe_chain});
    std::vector<store::RequestRow> rows;
    for (auto& p : plan_probe_requests(*config.probe, spec.name, renderer, t.ctx.inputs.dataset,
                                       t.ctx.inputs.n_questions, config.repeats, body_model,
                                       spec.extra_body)) {
        plan_row(t, std::move(p.row), p.body, target, rows);
    }
    return db.put_requests(rows);
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

util::Result<void> plan_server(const RunContext& ctx, size_t si, const ServerInfo& info,
                               const std::unordered_set<std::string>& done_keys,
                               ServerState& server, store::Store& db, RunSummary& summary) {
    const auto& config = ctx.config;
    const auto& spec = config.servers[si];
    for (const auto& f : ctx.inputs.framings) {
        auto body_model = body_model_for(ctx, si, f, info);
        if (!body_model) {
            return body_model.error();
        }
        framing::Renderer renderer(f, ctx.inputs.dataset);
        auto extra = spec.extra_body;
        if (config.stream) {
            extra["stream"] = true;
            extra["stream_options"] = {{"include_usage", true}};
        }
        Target t{ctx, si, done_keys, server, summary, endpoint_of(f), spec.url + f.endpoint};
        for (int max_tokens : config.max_tokens) {
            if (auto r = plan_max_tokens(t, f, renderer, *body_model, extra, max_tokens, db); !r) {
                return r;
            }
        }
        if (config.probe) {
            if (auto r = plan_probes(t, f, renderer, *body_model, db); !r) {
                return r;
            }
        }
    }
    return {};
}

} // namespace diffeval::engine
