// Subcommand dispatch: each subcommand registers itself (commands.hpp); this
// file parses, runs the chosen one, and maps anything unexpected to one line.
// A mistyped subcommand or flag is answered with the closest known name, and
// every --help shows the defaults and one example.
#include <harness/cli/cli.hpp>

#include <harness/cli/commands.hpp>
#include <harness/cli/util.hpp>
#include <harness/util/names.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <csignal>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace diffeval::cli {

namespace {

// One example per subcommand, shown at the end of its --help.
const std::map<std::string, std::string>& examples() {
    static const std::map<std::string, std::string> k_examples = {
        {"run", "diffeval run --server a=http://gpu1:8000 --server b=http://gpu1:8001 "
                "--framing raw,chat --repeats 3 --db results.sqlite"},
        {"sim", "diffeval sim --port 8000 --profile deepgemm"},
        {"data", "diffeval data fetch gsm8k"},
        {"fetch", "diffeval data fetch gsm8k"},
        {"summary", "diffeval summary --db results.sqlite"},
        {"diff", "diffeval diff --db results.sqlite default deepgemm"},
        {"rescore", "diffeval rescore --db results.sqlite"},
        {"demo", "diffeval demo --dataset sample"},
        {"gate", "diffeval gate --db results.sqlite --baseline default/raw "
                 "--candidate deepgemm/raw --max-drop 1.0"},
        {"report", "diffeval report --db results.sqlite --out report/"},
        {"fingerprint", "diffeval fingerprint server.log"},
        {"plan", "diffeval plan --db pilot.sqlite default deepgemm --drop 2"},
        {"merge", "diffeval merge results.sqlite shard0.sqlite shard1.sqlite"},
        {"export", "diffeval export --db results.sqlite --format lm-eval-samples --out samples/"},
        {"import", "diffeval import lm-eval --db results.sqlite --name hf "
                   "samples_gsm8k_2026-11-30T12-00-00.jsonl"},
        {"lm-eval", "diffeval import lm-eval --db results.sqlite --name hf "
                    "samples_gsm8k_2026-11-30T12-00-00.jsonl"},
    };
    return k_examples;
}

void add_examples(CLI::App& app) {
    for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        if (auto it = examples().find(sub->get_name()); it != examples().end()) {
            sub->footer("Example:\n  " + it->second + "\n");
        }
        add_examples(*sub);
    }
}

std::vector<std::string> subcommand_names(CLI::App& app) {
    std::vector<std::string> names;
    for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        names.push_back(sub->get_name());
    }
    return names;
}

// "did you mean" for a first argument that names no subcommand, or for a
// second that names none of its command's own (`import lm_eval`, `data
// fech`: CLI11 said only that a subcommand is required); or nothing.
std::string unknown_subcommand(CLI::App& app, int argc, char** argv) {
    if (argc < 2 || argv[1][0] == '-') {
        return {};
    }
    const std::string word = argv[1];
    auto names = subcommand_names(app);
    if (std::find(names.begin(), names.end(), word) == names.end()) {
        auto close = util::closest_name(word, names);
        return fmt::format("unknown command '{}'; {}see 'diffeval --help'", word,
                           close ? fmt::format("did you mean '{}'? ", *close) : "");
    }
    auto* command = app.get_subcommand(word);
    auto inner = subcommand_names(*command);
    if (inner.empty() || argc < 3 || argv[2][0] == '-' ||
        std::find(inner.begin(), inner.end(), std::string(argv[2])) != inner.end()) {
        return {};
    }
    auto close = util::closest_name(argv[2], inner);
    return fmt::format("unknown command '{} {}'; {}see 'diffeval {} --help'", word, argv[2],
                       close ? fmt::format("did you mean '{} {}'? ", word, *close) : "", word);
}

// The innermost subcommand the parser reached, or the root.
CLI::App* deepest_parsed(CLI::App& app) {
    CLI::App* at = &app;
    while (!at->get_subcommands().empty()) {
        at = at->get_subcommands().front();
    }
    return at;
}

// An argument that starts with a Unicode dash where a flag's '-' goes, as
// a word processor or a chat app turns "--limit" into "—limit": CLI11 took
// it for a stray value ("not expected: 4 —limit"). Said with the flag as
// typed in ASCII, or empty when no argument starts so.
std::string unicode_dash(const std::vector<std::string>& extras) {
    for (const auto& arg : extras) {
        size_t at = 0;
        std::string_view first;
        int dashes = 0;
        while (at < arg.size()) {
            if (arg[at] == '-') {
                ++at;
                ++dashes;
                continue;
            }
            const size_t n = util::unicode_dash_length(arg, at);
            if (n == 0) {
                break;
            }
            first = first.empty() ? std::string_view(arg).substr(at, n) : first;
            at += n;
            ++dashes;
        }
        if (first.empty() || at >= arg.size() ||
            !std::isalpha(static_cast<unsigned char>(arg[at]))) {
            continue;
        }
        // One en or em dash stands for two hyphens, as autocorrect made it.
        const bool wide = first == "\u2013" || first == "\u2014";
        const std::string flag = (dashes >= 2 || wide ? "--" : "-") + arg.substr(at);
        return fmt::format("'{}' starts with a Unicode dash ('{}'), not '-' (a word processor or "
                           "chat app may have changed it); type {}",
                           arg, first, flag);
    }
    return {};
}

// "did you mean" for the first unexpected flag of `sub`, or nothing.
std::string flag_suggestion(CLI::App& sub, const std::vector<std::string>& extras) {
    std::vector<std::string> words; // "max-tokens" for --max-tokens
    for (const auto* opt : sub.get_options()) {
        for (const auto& l : opt->get_lnames()) {
            words.push_back(l);
        }
    }
    for (const auto& extra : extras) {
        if (extra.size() < 2 || extra[0] != '-') {
            continue;
        }
        std::string flag = extra.substr(0, extra.find('='));
        std::string dashed = flag;
        std::replace(dashed.begin(), dashed.end(), '_', '-');
        // Compared without the dashes, which every name shares: with them,
        // '--power' was within reach of '--scorer' and '--group' of '--help'.
        const auto first = dashed.find_first_not_of('-');
        const std::string word = first == std::string::npos ? "" : dashed.substr(first);
        if (dashed.starts_with("--") &&
            std::find(words.begin(), words.end(), word) != words.end()) {
            return fmt::format("unknown flag '{}': did you mean '{}'?", flag, dashed);
        }
        auto close = util::closest_name(word, words);
        return fmt::format("unknown flag '{}': {}", flag,
                           close ? fmt::format("did you mean '--{}'?", *close) : "no such flag");
    }
    return {};
}

} // namespace

// CLI11 also reads "0x10" (16), " 3", "+3", "-1" for an unsigned flag
// (2^64 - 1), "nan" and "1e400" (inf); the docs promise the text as typed is
// a plain decimal number within range.
std::string number_problem(const std::string& type, const std::string& text) {
    const bool whole = type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0;
    const bool real = type.rfind("FLOAT", 0) == 0;
    if (!whole && !real) {
        return {};
    }
    // A sign is a minus alone: "+3" is no plain decimal text.
    const size_t digits = text.starts_with('-') ? 1 : 0;
    if (whole) {
        if (text.size() <= digits ||
            text.find_first_not_of("0123456789", digits) != std::string::npos) {
            return "expected a whole number";
        }
        // Not "of 0 or more": a flag's own least value may be 1 (--resamples),
        // which its range check names next.
        if (type.rfind("UINT", 0) == 0 && text[0] == '-') {
            return "expected a whole number, not a negative one";
        }
        // Past its type's 64 bits: said as typed, not as the bound CLI11
        // clamped it to (18446744073709551615 for a signed flag read as
        // 9223372036854775807 and refused as 9223372036854775808).
        errno = 0;
        if (type.rfind("UINT", 0) == 0) {
            (void)std::strtoull(text.c_str(), nullptr, 10);
        } else {
            (void)std::strtoll(text.c_str(), nullptr, 10);
        }
        if (errno == ERANGE) {
            return "too large a number for this flag";
        }
        return {};
    }
    if (text.empty() || text.starts_with('+') ||
        text.find_first_not_of("0123456789+-.eE") != std::string::npos) {
        return "expected a number";
    }
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) {
        return "expected a number";
    }
    if (!std::isfinite(v) || (errno == ERANGE && std::fabs(v) >= 1.0)) {
        return "too large a number for this flag";
    }
    // Nearer 0 than a double holds (1e-400 read as 0, 4.9e-324 called
    // too large): no flag means anything there.
    if (errno == ERANGE) {
        return "too small a number for this flag";
    }
    return {};
}

namespace {

// CLI11's "Could not convert: --limit = 1e3" in our own words, naming what
// the flag takes: "--limit '1e3': expected a whole number". Other
// conversion messages are kept as CLI11 words them.
std::string conversion_message(const CLI::App& sub, const std::string& what) {
    constexpr std::string_view k_prefix = "Could not convert: ";
    const auto equals = what.find(" = ");
    if (what.rfind(k_prefix, 0) != 0 || equals == std::string::npos) {
        return what;
    }
    const std::string name = what.substr(k_prefix.size(), equals - k_prefix.size());
    const std::string value = what.substr(equals + 3);
    const CLI::Option* opt = sub.get_option_no_throw(name);
    const std::string type = opt ? opt->get_type_name() : "";
    std::string problem = number_problem(type, value);
    // Plain decimal text CLI11 refused is out of the flag's type's range.
    if (problem.empty() &&
        (type.starts_with("INT") || type.starts_with("UINT") || type.starts_with("FLOAT"))) {
        problem = "too large a number for this flag";
    }
    return fmt::format("{} '{}': {}", name, value,
                       problem.empty() ? "expected a valid value" : problem);
}

// The option of `sub` (or its parents) that takes one value and was given
// more than once, or nullptr.
const CLI::Option* given_twice(const CLI::App& sub) {
    for (const CLI::App* at = &sub; at != nullptr; at = at->get_parent()) {
        for (const auto* opt : at->get_options()) {
            if (opt->get_items_expected_max() == 1 && opt->count() > 1) {
                return opt;
            }
        }
    }
    return nullptr;
}

std::string help_hint(const CLI::App& app, const CLI::App& sub) {
    if (&sub == &app) {
        return "see 'diffeval --help'";
    }
    std::string path = sub.get_name();
    for (const CLI::App* p = sub.get_parent(); p != nullptr && p != &app; p = p->get_parent()) {
        path = p->get_name() + " " + path;
    }
    return fmt::format("see 'diffeval {} --help'", path);
}

} // namespace

CLI::Option* add_list_option(CLI::App& cmd, const std::string& name,
                             std::vector<std::string>& values, const std::string& description,
                             const std::string& default_shown) {
    // The type marks the flag for value_problem; the default is set as text
    // because a list's captured default would show as "=[]".
    return cmd.add_option(name, values, description)
        ->type_name(k_list_type)
        ->default_str(default_shown);
}

// What is wrong with the first value given to a flag or argument of `sub`
// (or its parents), or nothing. No value falls back to a default: `--db ""`
// once meant ./diffeval.sqlite, `--api-key-env ""` no key at all
// (--gen-prefix, whose default is empty, aside). A comma list (any flag of
// type k_list_type: add_list_option) may not hold an empty item either:
// `--max-tokens 256,,1024` read as 256,1024. And a number is plain decimal
// text (number_problem).
std::string value_problem(const CLI::App& sub) {
    for (const CLI::App* at = &sub; at != nullptr; at = at->get_parent()) {
        for (const auto* opt : at->get_options()) {
            const bool list = opt->get_type_name() == k_list_type;
            // --gen-prefix's default is the empty text, which a flag may
            // give back over a file's.
            if (opt->check_lname("gen-prefix")) {
                continue;
            }
            const bool positional = opt->get_lnames().empty() && opt->get_snames().empty();
            const std::string type = opt->get_type_name();
            for (const auto& v : opt->results()) {
                if (v.find_first_not_of(" \t") == std::string::npos) {
                    return positional
                               ? fmt::format("argument {} is empty; give a value", opt->get_name())
                               : fmt::format("{} '{}': empty; give a value", opt->get_name(), v);
                }
                if (auto bad = number_problem(type, v); !bad.empty()) {
                    return fmt::format("{} '{}': {}", opt->get_name(), v, bad);
                }
                if (list &&
                    (v.front() == ',' || v.back() == ',' || v.find(",,") != std::string::npos)) {
                    return fmt::format("{} '{}': an empty item in the list; give comma-separated "
                                       "values",
                                       opt->get_name(), v);
                }
            }
        }
    }
    return {};
}

int run_main(int argc, char** argv) {
    // A write past the file-size limit (`ulimit -f`) then fails with EFBIG,
    // which every command words as a full disk (docs/cli.md), instead of
    // SIGXFSZ ending the process without a word, a run marked `running`.
    std::signal(SIGXFSZ, SIG_IGN);
    // A reader that went away (`diffeval run 2>&1 | head`, a CI log
    // collector that stopped) makes the next write fail with EPIPE instead
    // of SIGPIPE killing a run mid-send, its answers in flight lost and
    // the run left `running` (a user-side audit). Sockets never raise it.
    std::signal(SIGPIPE, SIG_IGN);
    // A standard descriptor closed at exec (`2>&-`) would be the next file
    // opened, and diagnostics would land in it (the run's lock file): each
    // closed one is /dev/null instead (in order, so open takes its number).
    for (int fd = 0; fd <= 2; ++fd) {
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
            (void)::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        }
    }
    CLI::App app{"diffeval: differential accuracy evaluation of LLM inference servers"};
    app.set_version_flag("--version", DIFFEVAL_VERSION);
    app.require_subcommand(1);
    // Every option's --help line shows its default (subcommands inherit this).
    app.option_defaults()->always_capture_default();
    Dispatch dispatch;
    add_run_command(app, dispatch);
    add_sim_command(app, dispatch);
    add_data_command(app, dispatch);
    add_analyse_commands(app, dispatch);
    add_demo_command(app, dispatch);
    add_gate_command(app, dispatch);
    add_report_command(app, dispatch);
    add_fingerprint_command(app, dispatch);
    add_merge_command(app, dispatch);
    add_export_command(app, dispatch);
    add_import_command(app, dispatch);
    add_examples(app);
    app.footer("Run 'diffeval COMMAND --help' for a command's flags, defaults and an example.");
    if (auto unknown = unknown_subcommand(app, argc, argv); !unknown.empty()) {
        print_error(unknown);
        return k_exit_usage;
    }
    // What is wrong with the command line, said once below (and in a gate's
    // JUnit file).
    std::optional<std::string> refused;
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ExtrasError& e) {
        auto* sub = deepest_parsed(app);
        auto hint = unicode_dash(sub->remaining());
        if (hint.empty()) {
            hint = flag_suggestion(*sub, sub->remaining());
        }
        // A flag before the command (`diffeval --bogus run`) is diffeval's
        // own, not the command's: CLI11 said "The following argument was not
        // expected".
        if (hint.empty() && sub != &app) {
            if (auto own = flag_suggestion(app, app.remaining()); !own.empty()) {
                hint = std::move(own);
                sub = &app;
            }
        }
        // After a question ("did you mean '--format'?") the hint follows as
        // it does for a mistyped command.
        refused = fmt::format("{}{} {}", hint.empty() ? e.what() : hint,
                              hint.ends_with('?') ? "" : ";", help_hint(app, *sub));
    } catch (const CLI::ConversionError& e) {
        const auto* sub = deepest_parsed(app);
        refused = fmt::format("{}; {}", conversion_message(*sub, e.what()), help_hint(app, *sub));
    } catch (const CLI::ArgumentMismatch& e) {
        // A flag that takes one value given twice (CLI11: "--limit: At Most
        // 1 required but received 2"), told from what the parser holds.
        const auto* sub = deepest_parsed(app);
        const auto* twice = given_twice(*sub);
        refused = fmt::format(
            "{}; {}",
            twice ? fmt::format("{} given more than once; give it once", twice->get_name())
                  : std::string(e.what()),
            help_hint(app, *sub));
    } catch (const CLI::ParseError& e) {
        const auto* sub = deepest_parsed(app);
        std::string what = e.what();
        // A flag of diffeval's own given with no command (`diffeval
        // --bogus`): the flag is what is wrong.
        if (auto own = sub == &app ? flag_suggestion(app, app.remaining()) : std::string();
            what == "A subcommand is required" && !own.empty()) {
            what = std::move(own);
        } else if (what == "A subcommand is required" && !sub->get_subcommands({}).empty()) {
            // CLI11's "A subcommand is required", said with the subcommands.
            std::vector<std::string> names;
            for (const auto* s : sub->get_subcommands({})) {
                names.push_back(s->get_name());
            }
            // The root's name is argv[0] as typed ("./build/diffeval"):
            // the tool is diffeval wherever it was run from.
            what = sub->get_parent() == nullptr
                       ? fmt::format("a command is needed: {}", fmt::join(names, ", "))
                       : fmt::format("'{}' needs a subcommand: {}", sub->get_name(),
                                     fmt::join(names, ", "));
        }
        // CLI11's "NAME is required" for an argument given by its place: which
        // argument is missing, and what it holds.
        for (const auto* o : sub->get_options()) {
            if (!o->nonpositional() && what == o->get_name() + " is required") {
                what = fmt::format("missing {}: {}", o->get_name(), o->get_description());
                break;
            }
        }
        refused =
            fmt::format("{}{} {}", what, what.ends_with('?') ? "" : ";", help_hint(app, *sub));
    }
    if (refused) {
        print_error(*refused);
        write_parse_error_outputs(std::vector<std::string>(argv + 1, argv + argc),
                                  util::controls_as_spaces(*refused));
        return k_exit_usage;
    }
    // `gate` asks value_problem itself, so that its JUnit file says why.
    if (auto* sub = deepest_parsed(app); sub->get_name() != "gate") {
        if (auto problem = value_problem(*sub); !problem.empty()) {
            print_error(fmt::format("{}; {}", problem, help_hint(app, *sub)));
            return k_exit_usage;
        }
    }
    for (const auto* sub : app.get_subcommands()) {
        // Nested subcommands (data fetch) register the innermost one.
        const CLI::App* chosen = sub;
        while (!chosen->get_subcommands().empty()) {
            chosen = chosen->get_subcommands().front();
        }
        if (auto it = dispatch.find(chosen); it != dispatch.end()) {
            try {
                return it->second();
            } catch (const std::exception& e) {
                print_error(fmt::format("internal error: {}; please report it", e.what()));
                return k_exit_failed;
            }
        }
    }
    std::cerr << "diffeval: choose a subcommand; see 'diffeval --help'\n";
    return k_exit_usage;
}

} // namespace diffeval::cli
