// Framings: how a GSM8K question becomes an HTTP request body.
//
// A framing is data (a TOML file in prompts/, or a user's own file): the
// endpoint, how few-shot examples and the question are rendered, the body's
// keys in the order the reference client writes them, and fixed fields such
// as stop strings and seeds. Bodies are serialised exactly as Python's
// json.dumps does, because that is what the reference harnesses send.
#pragma once

#include <datasets/dataset.hpp>
#include <harness/util/result.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace diffeval::framing {

enum class Kind { completion, chat };

// When the body carries a "model" field.
enum class ModelField { always, if_configured };

struct Framing {
    std::string name; // "raw", "chat", or the file's stem
    int version = 1;
    std::string origin; // where it was read from, for messages
    std::string description;
    std::string endpoint; // path appended to the server URL
    Kind kind = Kind::completion;
    int fewshot = 5;
    std::string example_template;  // completion: one few-shot example
    std::string question_template; // completion: the asked question
    std::string user_template;     // chat: a user turn
    std::string assistant_template;
    std::vector<std::string> body_order;
    ModelField model = ModelField::if_configured;
    nlohmann::ordered_json fields; // fixed body fields
    // The decision-point probe (docs/probe.md): the text whose opening it
    // measures, and the whitespace token that may come before it (completion
    // framings: a second probe request ends its prompt with it; "" for none).
    std::string probe_marker = "<think>";
    std::string probe_chain;
};

// Load a framing by built-in name ("raw", "chat") or from a TOML file path.
// An unknown name lists the built-in ones; unknown keys are errors with file
// and line.
util::Result<Framing> load_framing(const std::string& name_or_path);

// Names of the built-in framings.
std::vector<std::string> builtin_framings();

// Renders request bodies for one framing and dataset. The few-shot part is
// rendered once at construction.
class Renderer {
public:
    Renderer(Framing framing, const datasets::Dataset& dataset);

    // The body for `sample` with `max_tokens`; `model` is the configured model
    // (or nullopt); `extra` fields are appended in their own order.
    nlohmann::ordered_json body(const datasets::Sample& sample, int max_tokens,
                                const std::optional<std::string>& model,
                                const nlohmann::ordered_json& extra) const;

    const Framing& framing() const { return m_framing; }

private:
    Framing m_framing;
    std::string m_prefix;             // completion: rendered few-shot examples
    nlohmann::ordered_json m_history; // chat: few-shot turns
};

// `text` with "{question}" and "{answer}" replaced.
std::string render_template(const std::string& text, const datasets::Sample& sample);

} // namespace diffeval::framing
