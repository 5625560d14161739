// Planning and reading the decision-point probe's requests; see
// probe_plan.hpp. The probability arithmetic lives in harness/probe/.
#include <harness/engine/probe_plan.hpp>

#include <harness/probe/reading.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/pyjson.hpp>
#include <harness/util/untrusted_json.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace diffeval::engine {

using util::ErrorKind;
using util::make_error;

util::Result<void> validate_probe(const std::string& name) {
    if (name != k_think_open_probe) {
        return make_error(ErrorKind::usage,
                          fmt::format("unknown probe '{}'; known: {}", name, k_think_open_probe));
    }
    return {};
}

nlohmann::ordered_json probe_options(const framing::Framing& f,
                                     const nlohmann::ordered_json& extra) {
    auto options = extra;
    if (f.kind == framing::Kind::chat) {
        options["logprobs"] = true;
        options["top_logprobs"] = k_probe_top_logprobs;
    } else {
        options["logprobs"] = k_probe_top_logprobs;
    }
    return options;
}

int probe_steps(const framing::Framing& f) {
    return f.kind != framing::Kind::chat && !f.probe_chain.empty() ? 2 : 1;
}

int64_t probe_requests_per_question(const framing::Framing& f, int repeats) {
    return int64_t{probe_steps(f)} * std::max(repeats, k_min_probe_repeats);
}

std::string probe_body(const framing::Renderer& renderer, const datasets::Sample& sample, int step,
                       const std::optional<std::string>& model,
                       const nlohmann::ordered_json& options) {
    auto body = renderer.body(sample, 1, model, options);
    if (step == 1) {
        body["prompt"] = body["prompt"].get<std::string>() + renderer.framing().probe_chain;
    }
    return util::python_json_dumps(body);
}

std::string probe_request_key(const std::string& probe, int step, const std::string& server,
                              const std::string& framing, int repeat, int64_t q,
                              const std::string& body_sha256) {
    return util::sha256_hex(fmt::format("probe\n{}\n{}\n{}\n{}\n{}\n{}\n{}", probe, step, server,
                                        framing, repeat, q, body_sha256));
}

std::vector<store::RequestRow> plan_probe_question(const std::string& probe,
                                                   const std::string& server,
                                                   const std::string& framing,
                                                   const std::string& dataset, size_t q,
                                                   int repeats, std::vector<std::string> bodies) {
    const int probe_repeats = std::max(repeats, k_min_probe_repeats);
    std::vector<store::RequestRow> out;
    for (int step = 0; step < static_cast<int>(bodies.size()); ++step) {
        auto sha = util::sha256_hex(bodies[step]);
        for (int rep = 0; rep < probe_repeats; ++rep) {
            store::RequestRow row{"",      server,
                                  framing, 1,
                                  rep,     static_cast<int>(q),
                                  dataset, rep == 0 ? std::move(bodies[step]) : std::string(),
                                  sha};
            row.probe = probe;
            row.probe_step = step;
            row.key =
                probe_request_key(probe, step, server, framing, rep, static_cast<int64_t>(q), sha);
            out.push_back(std::move(row));
        }
    }
    return out;
}

namespace {

// Why `body`, which holds no first position, is not an answer at all (not
// JSON, not an object, an error object, no choice; "" when first_position's
// own message says why); nullopt for an answer that merely lacks
// log-probabilities.
std::optional<std::string> not_an_answer(const std::string& body) {
    auto j = util::parse_untrusted_json(body);
    if (j.is_discarded()) {
        return std::string();
    }
    if (!j.is_object()) {
        return "the response body is not a JSON object";
    }
    if (is_error_object(j)) {
        return "the server answered with an error object: " + error_message(body);
    }
    auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array() || choices->empty() ||
        !(*choices)[0].is_object()) {
        return "the response has no choices";
    }
    return std::nullopt;
}

} // namespace

void parse_probe_body(const std::string& body, const ProbeTarget& target, store::ResponseRow& row) {
    auto position = probe::first_position(body);
    if (!position) {
        // Only an answer the engine gave without log-probabilities is
        // "no-logprobs", kept and not sent again; anything else is the
        // server failing to answer, retried like a cut body.
        const auto why = not_an_answer(body);
        row.ok = !why;
        row.error_kind = row.ok ? "no-logprobs" : "parse";
        row.error = why && !why->empty() ? *why : position.error().message;
        return;
    }
    auto reading = probe::read(*position, target.marker, target.chain);
    row.ok = true;
    if (!reading.unusable.empty()) {
        // An answer, kept and not sent again, whose log-probabilities
        // neither read nor bound P(open): no reading is stored for it.
        row.error_kind = "no-logprobs";
        row.error = reading.unusable;
        return;
    }
    row.reading = store::ProbeReadingRow{
        reading.chosen,       probe::top_json(reading.top), reading.p_marker, reading.marker_listed,
        reading.p_whitespace, reading.whitespace_listed,    reading.floor};
}

} // namespace diffeval::engine
