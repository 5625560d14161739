// Loading GSM8K-format JSONL and resolving `--dataset` names.
#include <datasets/dataset.hpp>

#include <harness/util/file.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>
#include <simdjson.h>

#include <cstdlib>

#include <pwd.h>
#include <unistd.h>

namespace diffeval::datasets {

namespace fs = std::filesystem;
using util::ErrorKind;
using util::make_error;

namespace {

// Whether a line of a JSONL file holds a sample: blank lines and lines
// starting with '#' do not (its '\r' already removed).
bool holds_sample(std::string_view line) {
    return line.find_first_not_of(" \t") != std::string_view::npos && line[0] != '#';
}

// A line of `text` from `pos` (without its '\n' or '\r'), moving `pos` past
// it; false at the end.
bool next_line(std::string_view text, size_t& pos, std::string_view& line) {
    if (pos >= text.size()) {
        return false;
    }
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) {
        end = text.size();
    }
    line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') {
        line.remove_suffix(1);
    }
    return true;
}

} // namespace

util::Result<std::vector<Sample>> parse_jsonl(const std::string& text, const std::string& origin,
                                              size_t limit) {
    // simdjson validates a whole line (UTF-8, structure, nothing after the
    // object) several times faster than nlohmann: the official train file
    // (7,473 lines) took 30 ms, most of a run's start before its first
    // request.
    simdjson::dom::parser parser;
    std::vector<Sample> out;
    // A byte-order mark, as editors on Windows write one, is no part of the
    // first line's JSON.
    size_t pos = std::string_view(text).starts_with("\xEF\xBB\xBF") ? 3 : 0;
    int line_no = 0;
    std::string_view line;
    while (out.size() < limit && next_line(text, pos, line)) {
        ++line_no;
        if (!holds_sample(line)) {
            continue;
        }
        simdjson::dom::object object;
        if (const auto err = parser.parse(line.data(), line.size()).get_object().get(object);
            err != simdjson::SUCCESS) {
            // The parser's words say what is wrong (a lone surrogate escape
            // is "not valid UTF-8" there, a stray comma a structure error).
            return make_error(ErrorKind::data,
                              fmt::format("{}:{}: not a JSON object ({}); each line must be "
                                          "{{\"question\": ..., \"answer\": ...}}",
                                          origin, line_no, simdjson::error_message(err)));
        }
        std::string_view question, answer;
        if (object["question"].get_string().get(question) != simdjson::SUCCESS ||
            object["answer"].get_string().get(answer) != simdjson::SUCCESS) {
            return make_error(ErrorKind::data,
                              fmt::format("{}:{}: needs string fields \"question\" and \"answer\"",
                                          origin, line_no));
        }
        out.push_back(
            Sample{static_cast<int>(out.size()), std::string(question), std::string(answer)});
    }
    if (out.empty()) {
        return make_error(ErrorKind::data, fmt::format("{}: no questions in the file", origin));
    }
    return out;
}

util::Result<std::vector<Sample>> load_jsonl(const fs::path& path, size_t limit) {
    // With a limit, the file is read only until it holds `limit` samples'
    // lines whole (a few KiB of the official train set's 4 MB for 5 shots).
    // The start only grows between calls: each byte is looked at once,
    // however long a line (a file of zeros has none).
    util::ReadEnough enough;
    if (limit != k_all_samples) {
        enough = [limit, line_start = size_t{0}, scanned = size_t{0},
                  found = size_t{0}](std::string_view start) mutable {
            for (;;) {
                if (start.find('\n', scanned) == std::string_view::npos) {
                    scanned = start.size(); // the last line is not whole yet
                    return false;
                }
                std::string_view line;
                next_line(start, line_start, line); // whole: its '\n' was just found
                found += holds_sample(line) ? 1 : 0;
                scanned = line_start;
                if (found >= limit) {
                    return true;
                }
            }
        };
    }
    auto text = util::read_input(path, util::k_max_data_bytes, enough);
    if (!text) {
        return make_error(ErrorKind::data, fmt::format("cannot read {}", text.error().message));
    }
    return parse_jsonl(*text, path.string(), limit);
}

fs::path cache_dir() {
    if (const char* d = std::getenv("DIFFEVAL_DATA"); d && *d) {
        return d;
    }
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
        return fs::path(x) / "diffeval";
    }
    // HOME is unset under cron, some systemd units and containers: the
    // account's home directory then, as getpwuid says it, where the cache
    // stayed across working directories (./.cache was a new one in each).
    const char* home = std::getenv("HOME");
    if (!home || !*home) {
        const passwd* pw = getpwuid(getuid());
        home = pw && pw->pw_dir && *pw->pw_dir ? pw->pw_dir : ".";
    }
    return fs::path(home) / ".cache" / "diffeval";
}

namespace {

// Why the cached official file `file` cannot be read: missing, or on a path
// this user may not search; nullopt when it is there.
std::optional<util::Error> not_cached(const fs::path& file) {
    std::error_code ec;
    if (fs::exists(file, ec)) {
        return std::nullopt;
    }
    return util::Error{ErrorKind::data,
                       fmt::format("GSM8K is not in the cache ({}{}); run 'diffeval data fetch "
                                   "gsm8k' or set DIFFEVAL_DATA",
                                   file.string(), ec ? ": " + ec.message() : " missing")};
}

} // namespace

std::string answer_shown(std::string_view answer) {
    constexpr size_t k_chars = 40;
    const auto marker = answer.rfind("####");
    const auto final =
        util::trim(marker == std::string_view::npos ? answer : answer.substr(marker + 4));
    std::string shown(util::utf8_prefix(final, k_chars));
    if (shown.size() < final.size()) {
        shown += "...";
    }
    if (shown.empty() || shown.find_first_of(" \t\r\n") != std::string::npos) {
        return fmt::format("'{}'", shown);
    }
    return shown;
}

util::Result<Dataset> open_test_set(const std::string& spec) {
    if (spec == "sample") {
        auto test = parse_jsonl(sample_test_jsonl(), "<sample>/test.jsonl");
        if (!test) {
            return test.error();
        }
        return Dataset{"sample", "built-in sample set", std::move(*test), {}};
    }
    if (spec == "gsm8k") {
        auto dir = cache_dir() / "gsm8k";
        auto file = dir / k_gsm8k_files[0].name;
        if (auto missing = not_cached(file)) {
            return *missing;
        }
        auto test = load_jsonl(file);
        if (!test) {
            return test.error();
        }
        return Dataset{"gsm8k", dir.string(), std::move(*test), {}};
    }
    auto test = load_jsonl(spec);
    if (!test) {
        std::error_code ec;
        if (!fs::exists(spec, ec) && !ec) {
            // A path (a '/' or a file name's ending) meant a file: say it is
            // not there, not that the name is unknown.
            const bool path = spec.find('/') != std::string::npos || fs::path(spec).has_extension();
            return make_error(ErrorKind::usage,
                              path ? fmt::format("cannot read dataset {}: no such file; give the "
                                                 "path of a GSM8K-format .jsonl file, 'sample' "
                                                 "or 'gsm8k'",
                                                 spec)
                                   : fmt::format("unknown dataset '{}': use 'sample', 'gsm8k' "
                                                 "or a path to a GSM8K-format .jsonl file",
                                                 spec));
        }
        return test.error();
    }
    return Dataset{spec, spec, std::move(*test), {}};
}

fs::path fewshot_beside(const std::string& test_path) {
    return fs::path(test_path).parent_path() / "train.jsonl";
}

util::Result<Dataset> open_dataset(const std::string& spec, const std::string& fewshot_from,
                                   size_t fewshot_limit) {
    // The official set needs both files: say so before reading either.
    if (spec == "gsm8k") {
        auto dir = cache_dir() / "gsm8k";
        for (const auto& f : k_gsm8k_files) {
            if (auto missing = not_cached(dir / f.name)) {
                return *missing;
            }
        }
    }
    auto ds = open_test_set(spec);
    if (!ds) {
        return ds.error();
    }
    if (fewshot_limit == 0) {
        return ds; // no framing takes a shot
    }
    if (!fewshot_from.empty()) {
        auto train = load_jsonl(fewshot_from, fewshot_limit);
        if (!train) {
            return train.error();
        }
        ds->fewshot = std::move(*train);
        return ds;
    }
    if (spec == "sample") {
        auto train = parse_jsonl(sample_train_jsonl(), "<sample>/train.jsonl", fewshot_limit);
        if (!train) {
            return train.error();
        }
        ds->fewshot = std::move(*train);
    } else if (spec == "gsm8k") {
        auto train = load_jsonl(cache_dir() / "gsm8k" / "train.jsonl", fewshot_limit);
        if (!train) {
            return train.error();
        }
        ds->fewshot = std::move(*train);
    } else {
        const auto sibling = fewshot_beside(spec);
        std::error_code ec;
        if (!fs::exists(sibling, ec)) {
            return make_error(ErrorKind::usage,
                              fmt::format("no few-shot examples for {}: pass --fewshot-from "
                                          "PATH.jsonl (or put train.jsonl beside it)",
                                          spec));
        }
        auto train = load_jsonl(sibling, fewshot_limit);
        if (!train) {
            return train.error();
        }
        ds->fewshot = std::move(*train);
    }
    return ds;
}

} // namespace diffeval::datasets
