// `diffeval fingerprint LOGFILE`: the facts and conflicts in one server log.
#include <harness/cli/colour.hpp>
#include <harness/cli/commands.hpp>
#include <harness/cli/util.hpp>

#include <harness/engine/launcher.hpp>
#include <harness/fingerprint/fingerprint.hpp>
#include <harness/util/json_text.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <vector>

namespace diffeval::cli {

namespace {

// How the engine behind a rules name is called.
std::string engine_display_name(const std::string& engine) {
    if (engine == "vllm") {
        return "vLLM";
    }
    if (engine == "sglang") {
        return "SGLang";
    }
    if (engine == "llamacpp") {
        return "llama.cpp server";
    }
    return engine;
}

struct FingerprintFlags {
    std::string log;
    std::string rules;
    std::string format = "text";
    bool fail_on_conflict = false;
};

int fingerprint_command(const FingerprintFlags& f) {
    // What `run --server-log` keeps of a log, so both read the same facts:
    // its first 2 MiB and last 512 KiB, in memory whatever the log's size.
    // With where each launch starts: a log a server was restarted into
    // holds several, and only the last one's facts are read (as `run
    // --server-log` reads them), so that is said: an earlier launch with
    // another KV-cache type read as if it had never run (engine audit).
    std::vector<uint64_t> launches;
    auto text = engine::read_server_log(f.log, 0, &launches);
    if (!text) {
        return report(util::make_error(
            util::ErrorKind::usage, fmt::format("cannot read log file {}", text.error().message)));
    }
    const std::string& log = *text;
    util::Result<fingerprint::Fingerprint> fp = fingerprint::Fingerprint{};
    if (f.rules.empty()) {
        fp = fingerprint::fingerprint_log(log);
    } else {
        auto rules = fingerprint::Rules::load(f.rules);
        if (!rules) {
            return report(rules.error());
        }
        fp = rules->apply(log);
    }
    if (!fp) {
        return report(fp.error());
    }
    // Rules named with --rules that found nothing recognise no engine, as
    // the best match finds none: a plain text file was "vLLM (vllm rules)",
    // a vLLM log read with llama.cpp's rules "llama.cpp server".
    if (fp->facts.empty() && fp->stated.empty()) {
        fp->engine.clear();
    }
    if (f.format == "json") {
        auto out = fingerprint::to_json(*fp);
        out["schema"] = "diffeval.fingerprint/1";
        out["launches"] = launches.size();
        if (fp->engine.empty()) {
            out["engine"] = nullptr;
        }
        std::cout << util::document_text(out);
    } else {
        // A log's words as the terminal shows them: one line, bounded,
        // without the escapes a log may hold (colour codes, or worse);
        // --format json keeps them whole, escaped.
        fingerprint::bound_words(*fp);
        if (fp->engine.empty()) {
            std::cout << fmt::format(
                "{}: no engine recognised ({}; built-in rules: vllm, sglang, llamacpp)\n", f.log,
                f.rules.empty() ? std::string("no rules found a known fact")
                                : "the rules of --rules " + f.rules + " found no known fact");
        } else {
            std::cout << fmt::format("{}: {} ({} rules)\n", f.log, engine_display_name(fp->engine),
                                     fp->engine);
        }
        if (launches.size() > 1) {
            std::cout << fmt::format("  {} launches in this log (a server restarted into it): the "
                                     "facts below are the last one's\n",
                                     launches.size());
        }
        if (!fp->engine.empty() && fp->facts.empty()) {
            std::cout << "  no known facts found in this log\n";
        }
        for (const auto& [k, v] : fp->facts) {
            auto stated = fp->stated.find(k);
            std::cout << fmt::format(
                "  {:<24} {}{}\n", k, v,
                stated == fp->stated.end() ? "" : fmt::format(" (stated: {})", stated->second));
        }
        // Said but not resolved: flash attention `auto` in a log cut before
        // the server placed its layers.
        for (const auto& [k, v] : fp->stated) {
            if (!fp->facts.count(k)) {
                std::cout << fmt::format("  {:<24} (stated: {})\n", k, v);
            }
        }
        for (const auto& c : fp->conflicts) {
            // The word alone: the rest quotes the server's log.
            std::cout << fmt::format("{} {}: {} ({})\n", for_terminal("CONFLICT", stdout), c.name,
                                     c.message, fmt::join(c.evidence, ", "));
        }
    }
    return f.fail_on_conflict && !fp->conflicts.empty() ? k_exit_failed : k_exit_ok;
}

} // namespace

void add_fingerprint_command(CLI::App& root, Dispatch& dispatch) {
    auto flags = std::make_shared<FingerprintFlags>();
    auto* cmd = root.add_subcommand("fingerprint", "Show what a server log says it actually ran");
    cmd->add_option("LOG", flags->log, "Server log file")->required();
    cmd->add_option("--rules", flags->rules,
                    "vllm, sglang, llamacpp or a rules .toml (default: best match)");
    cmd->add_option("--format", flags->format, "text or json")
        ->check(CLI::IsMember({"text", "json"}));
    cmd->add_flag("--fail-on-conflict", flags->fail_on_conflict, "Exit 1 when a conflict is found");
    dispatch[cmd] = [flags] { return fingerprint_command(*flags); };
}

} // namespace diffeval::cli
