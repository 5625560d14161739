// Framings: how a GSM8K question becomes an HTTP request body.
//
// A framing is data (a TOML file in prompts/, or a user's own file): the
// endpoint, how few-shot examples and the question are rendered, the body's
// keys in the order the reference client writes them, and fixed fields such
// as stop strings and seeds. Bodies are serialised exactly as Python's
// json.dumps does, because that is what the reference harnesses send.
#pragma once

#include <datasets/dataset.hpp>
#include <harness/util/pyrandom.hpp>
#include <harness/util/result.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace diffeval::framing {

enum class Kind { completion, chat };

// When the body carries a "model" field.
enum class ModelField { always, if_configured };

// Which few-shot examples a question gets: the first `fewshot` of the pool
// (vLLM's script), or `random.Random(seed).sample(pool, fewshot)` drawn per
// question in dataset order from one generator (lm-eval's default sampler).
enum class FewshotSampler { first_n, python_random };

// Where a chat framing puts its few-shot examples: a user and an assistant
// turn each (lm-eval's --fewshot_as_multiturn), or rendered with
// `example_template` into the one user message that asks the question
// (vLLM's script with --use-chat-completions).
enum class FewshotLayout { turns, one_message };

struct Framing {
    std::string name; // "raw", "chat", or the file's stem
    int version = 1;
    std::string origin; // where it was read from, for messages
    std::string description;
    std::string endpoint; // path appended to the server URL
    Kind kind = Kind::completion;
    int fewshot = 5;
    FewshotSampler sampler = FewshotSampler::first_n;
    int64_t fewshot_seed = 1234;                 // python-random only
    FewshotLayout layout = FewshotLayout::turns; // chat only
    std::string gen_prefix;                      // replaces "{gen_prefix}" in templates
    std::string example_template;  // completion, one-message chat: one few-shot example
    std::string question_template; // completion, one-message chat: the asked question
    std::string user_template;     // chat: a user turn
    std::string assistant_template;
    std::vector<std::string> body_order;
    std::vector<std::string> optional; // body keys sent only when some value sets them
    ModelField model = ModelField::if_configured;
    nlohmann::ordered_json fields; // fixed body fields
    // The decision-point probe (docs/probe.md): the text whose opening it
    // measures, and the whitespace token that may come before it (completion
    // framings: a second probe request ends its prompt with it; "" for none).
    std::string probe_marker = "<think>";
    std::string probe_chain;
};

// Run settings that change a framing, as vLLM's script's options do: the
// number of shots, the generation prefix, and body fields (top_p, top_k,
// reasoning_effort, temperature, chat_template_kwargs, ...). A field goes to
// its place in the framing's body order, or after it when not listed;
// reasoning_effort and chat_template_kwargs apply to chat framings only.
struct Overrides {
    std::optional<int> fewshot;
    std::optional<std::string> gen_prefix;
    nlohmann::ordered_json fields = nlohmann::ordered_json::object();
};

// `framing` with `overrides` applied.
Framing apply_overrides(Framing framing, const Overrides& overrides);

// Load a framing by built-in name ("raw", "chat") or from a TOML file path.
// An unknown name lists the built-in ones; unknown keys are errors with file
// and line.
util::Result<Framing> load_framing(const std::string& name_or_path);

// Names of the built-in framings.
std::vector<std::string> builtin_framings();

// Renders request bodies for one framing and dataset. With the first_n
// sampler the few-shot part is rendered once at construction; with
// python-random each question's shots are drawn on first use, drawing for
// every earlier question first, so a question gets the same shots whatever
// slice of the dataset is asked. `dataset` must outlive the renderer.
class Renderer {
public:
    Renderer(Framing framing, const datasets::Dataset& dataset);

    // The body for `sample` (its `index` is its position among the test
    // questions) with `max_tokens`; `model` is the configured model (or
    // nullopt); `extra` fields are appended in their own order.
    nlohmann::ordered_json body(const datasets::Sample& sample, int max_tokens,
                                const std::optional<std::string>& model,
                                const nlohmann::ordered_json& extra) const;

    // The size in bytes of the prompt body() sends for `sample` (completion:
    // the prompt; chat: every message's content), without building the
    // body: what the context check compares to find the longest prompt.
    size_t prompt_bytes(const datasets::Sample& sample) const;

    // Pool indices of the few-shot examples of test question `question_idx`.
    std::vector<uint32_t> shots(int question_idx) const;

    const Framing& framing() const { return m_framing; }

private:
    // The examples' text (completion, one-message chat) and turns (chat).
    struct Shots {
        std::string prefix;
        nlohmann::ordered_json history = nlohmann::ordered_json::array();
    };
    Shots render_shots(const std::vector<uint32_t>& indices) const;
    // The shots of `sample`: first_n's, rendered once, or python-random's,
    // rendered into `drawn`.
    const Shots& shots_for(const datasets::Sample& sample, Shots& drawn) const;

    Framing m_framing;
    const std::vector<datasets::Sample>* m_pool;
    uint32_t m_count = 0; // shots per question
    Shots m_first_n;      // the first_n sampler's shots, shared by every question
    mutable std::unique_ptr<util::PyRandom> m_rng;
    mutable std::vector<std::vector<uint32_t>> m_draws; // python-random: per question, so far
};

// `text` with "{question}", "{answer}" and "{gen_prefix}" replaced.
std::string render_template(const std::string& text, const datasets::Sample& sample,
                            const std::string& gen_prefix = "");

} // namespace diffeval::framing
