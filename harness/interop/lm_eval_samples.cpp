// lm-eval samples files out of and into the store; see lm_eval_samples.hpp.
//
// Lines are written as Python's json.dumps(..., ensure_ascii=False) writes
// them (", " and ": " separators, non-ASCII kept as UTF-8), and the hashes
// are lm-eval's: sha256 hex of the doc dumped with indent=2, of the context
// string, and of the target string.
#include <harness/interop/lm_eval_samples.hpp>

#include <harness/util/untrusted_json.hpp>

#include <harness/store/samples.hpp>
#include <harness/util/file.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/json_text.hpp>
#include <harness/util/pyjson.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <tuple>
#include <unordered_set>

namespace diffeval::interop {

using nlohmann::ordered_json;
using util::ErrorKind;
using util::make_error;

namespace {

// The repeat N and the length of a task name's "-rN" ending (N from 1 to
// 1,000,000, no leading zero), as task_names writes it for repeat N.
std::optional<std::pair<int, size_t>> export_repeat_suffix(std::string_view task) {
    const size_t dash = task.rfind("-r");
    if (dash == std::string_view::npos) {
        return std::nullopt;
    }
    const auto digits = task.substr(dash + 2);
    int n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.front() == '0' ||
        n < 1 || n > 1'000'000) {
        return std::nullopt;
    }
    return std::pair{n, task.size() - dash};
}

// Why `line` (UTF-8, not too deep) is no JSON: cut off when the parser ran
// out of text (a run killed while writing), else where and what nlohmann's
// parser found (an unpaired surrogate escape, a stray character), without
// the text it quotes, which is the file's.
std::string json_error_text(const std::string& line, const std::string& where) {
    try {
        const auto parsed = nlohmann::json::parse(line);
        static_cast<void>(parsed);
    } catch (const nlohmann::json::parse_error& e) {
        // "... - WHY; last read: 'TEXT'", or "... - unexpected X; expected
        // Y" when the parser, not the lexer, stopped: its words to "; last
        // read" or the end.
        std::string_view what = e.what();
        const size_t from = what.find(" - ");
        const size_t to = std::min(what.find("; last read"), what.size());
        if (e.byte <= line.size() && from != std::string_view::npos && to > from + 3) {
            return fmt::format("{}: not valid JSON at byte {}: {}; mend the line or log the "
                               "samples again",
                               where, e.byte, what.substr(from + 3, to - from - 3));
        }
    } catch (const nlohmann::json::exception&) {
    }
    return fmt::format("{}: not valid JSON (cut off? a run killed while writing leaves its last "
                       "line short); remove the line or log the samples again",
                       where);
}

namespace fs = std::filesystem;

// Our scorers that reproduce lm-eval's gsm8k filters, by filter name.
constexpr std::pair<const char*, const char*> k_filters[] = {
    {"strict-match", "lm-eval-strict"},
    {"flexible-extract", "lm-eval-flexible"},
};

// `s` as json.dumps(s, ensure_ascii=False) writes it: nlohmann's escapes
// (util::append_dump_string) are Python's for valid UTF-8, and invalid bytes
// become U+FFFD, as a Python str never holds them. Building an nlohmann
// value to dump for every string was half of an export's CPU.
std::string py_string(std::string_view s) {
    std::string out;
    util::append_dump_string(out, s);
    return out;
}

// json.dumps(value, ensure_ascii=False), appended to `out`.
void append_py_dumps(std::string& out, const ordered_json& v) {
    switch (v.type()) {
    case ordered_json::value_t::object: {
        out += '{';
        bool first = true;
        for (const auto& [k, x] : v.items()) {
            if (!first) {
                out += ", ";
            }
            util::append_dump_string(out, k);
            out += ": ";
            append_py_dumps(out, x);
            first = false;
        }
        out += '}';
        return;
    }
    case ordered_json::value_t::array:
        out += '[';
        for (size_t i = 0; i < v.size(); ++i) {
            if (i) {
                out += ", ";
            }
            append_py_dumps(out, v[i]);
        }
        out += ']';
        return;
    case ordered_json::value_t::string:
        util::append_dump_string(out, v.get_ref<const std::string&>());
        return;
    case ordered_json::value_t::number_float:
        out += util::python_float_repr(v.get<double>());
        return;
    default:
        out += v.dump();
    }
}

std::string py_dumps(const ordered_json& v) {
    std::string out;
    append_py_dumps(out, v);
    return out;
}

// lm-eval's doc_hash input: json.dumps(doc, indent=2, ensure_ascii=False)
// for a doc of two strings, given as py_string wrote them.
std::string doc_dump(std::string_view question_json, std::string_view answer_json) {
    return fmt::format("{{\n  \"question\": {},\n  \"answer\": {}\n}}", question_json, answer_json);
}

// `s` as part of a file name: ASCII letters, digits, '.' and '-' as they
// are, any other byte as "_XX" (its hex), so names that differ give parts
// that differ (servers `a_b` and `a-b` once both gave `a-b`, and one file
// overwrote the other). lm-eval reads a task name between a samples file's
// first and last '_', so '_' inside it is safe.
std::string file_part(const std::string& s) {
    std::string out;
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '.' || c == '-') {
            out += c;
        } else {
            out += fmt::format("_{:02X}", u);
        }
    }
    return out;
}

std::string lower(std::string s) {
    for (auto& c : s) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return s;
}

// The longest task a file name takes: "samples_" (8), "_", the date id (26)
// and ".jsonl" (6) leave 214 of a file name's 255 bytes.
constexpr size_t k_max_task_bytes = 200;

// The task name of each of `groups`, in order: "gsm8k-SERVER-FRAMING-
// MAX_TOKENS[-rN]". Names with '-' can still meet ("a-b"/"raw" and
// "a"/"b-raw"), as can names differing in case on a case-insensitive file
// system: such groups' tasks end in "-" and 8 hex digits of the group's hash.
std::vector<std::string> task_names(const std::vector<store::AnsweredGroup>& groups) {
    std::vector<std::string> tasks;
    std::map<std::string, int> uses;
    for (const auto& g : groups) {
        tasks.push_back(fmt::format("gsm8k-{}-{}-{}{}", file_part(g.server), file_part(g.framing),
                                    g.max_tokens, g.repeat ? fmt::format("-r{}", g.repeat) : ""));
        ++uses[lower(tasks.back())];
    }
    for (size_t i = 0; i < groups.size(); ++i) {
        const auto& g = groups[i];
        const auto hash = [&g] {
            return "-" + util::sha256_hex(fmt::format("{}\n{}\n{}\n{}", g.server, g.framing,
                                                      g.max_tokens, g.repeat))
                             .substr(0, 8);
        };
        if (tasks[i].size() > k_max_task_bytes) {
            // A file name holds 255 bytes, and every escaped byte of a
            // name takes three (40 Cyrillic letters failed the export):
            // the task is cut, and its group's hash keeps it apart.
            tasks[i].resize(k_max_task_bytes - 9);
            tasks[i] += hash();
        } else if (uses[lower(tasks[i])] > 1) {
            tasks[i] += hash();
        }
    }
    return tasks;
}

// The context and generation arguments lm-eval would log for a stored body.
ordered_json arguments_for(std::string_view request_json, int max_tokens) {
    auto body = ordered_json::parse(request_json, nullptr, false);
    if (body.is_object() && body.contains("lm_eval_arguments")) {
        return body["lm_eval_arguments"]; // imported from lm-eval: as it was
    }
    ordered_json context = "";
    ordered_json gen = ordered_json::object();
    if (body.is_object()) {
        if (body.contains("prompt")) {
            context = body["prompt"];
        } else if (body.contains("messages")) {
            // lm-eval's JsonChatStr, a NamedTuple of the messages' json.dumps:
            // json.dumps logs it as a list of that one string.
            context = ordered_json::array({py_dumps(body["messages"])});
        }
        gen["until"] = body.value("stop", ordered_json::array());
        gen["do_sample"] = false;
        if (body.contains("temperature")) {
            gen["temperature"] = body["temperature"];
        }
    }
    gen["max_gen_toks"] = max_tokens;
    return {{"gen_args_0", {{"arg_0", context}, {"arg_1", gen}}}};
}

// What lm-eval's prompt_hash is of: the context, `arg_0` of the first
// request's arguments (a list of arguments in files of lm-eval before 0.4.3),
// hashed as a string; a JsonChatStr (logged as a list of one string) by its
// string. Arguments of another shape (an import's file may carry any) give
// "" rather than a guess.
std::string hashed_context(const ordered_json& args) {
    const ordered_json* context = nullptr;
    if (args.is_object()) {
        if (auto it = args.find("gen_args_0"); it != args.end() && it->is_object()) {
            if (auto arg = it->find("arg_0"); arg != it->end()) {
                context = &*arg;
            }
        }
    } else if (args.is_array() && !args.empty() && args[0].is_array() && !args[0].empty()) {
        context = &args[0][0];
    }
    if (!context) {
        return "";
    }
    if (context->is_array() && context->size() == 1 && (*context)[0].is_string()) {
        context = &(*context)[0];
    }
    return context->is_string() ? context->get<std::string>() : py_dumps(*context);
}

// One samples line per filter for `row` of a group run with `max_tokens`,
// appended to `text` and counted in `lines`; a response without one of the
// scores is an error that names the rescore to run.
util::Result<void> append_lines(const store::AnsweredRequest& row, int max_tokens,
                                const std::string& db_path, std::string& text, int64_t& lines) {
    const auto args = arguments_for(row.request_json, max_tokens);
    const auto prompt_hash = util::sha256_hex(hashed_context(args));
    // What both filters' lines share, dumped once: the line is the object
    // {doc_id, doc, target, arguments, resps, filtered_resps, filter,
    // metrics, doc_hash, prompt_hash, target_hash, exact_match} as
    // json.dumps writes it (", " and ": " separators).
    const auto question = py_string(row.question);
    const auto answer = py_string(row.answer);
    std::string head =
        fmt::format("{{\"doc_id\": {}, \"doc\": {{\"question\": {}, \"answer\": {}}}, "
                    "\"target\": {}, \"arguments\": ",
                    row.question_idx, question, answer, answer);
    append_py_dumps(head, args);
    head += ", \"resps\": [[";
    util::append_dump_string(head, row.text);
    head += "]], \"filtered_resps\": [";
    const auto hashes = fmt::format(
        ", \"metrics\": [\"exact_match\"], \"doc_hash\": \"{}\", \"prompt_hash\": \"{}\", "
        "\"target_hash\": \"{}\", \"exact_match\": ",
        util::sha256_hex(doc_dump(question, answer)), prompt_hash, util::sha256_hex(row.answer));
    for (size_t i = 0; i < std::size(k_filters); ++i) {
        const auto& [filter, scorer] = k_filters[i];
        const auto& verdict = row.verdicts.at(i);
        if (!verdict) {
            return make_error(ErrorKind::internal,
                              fmt::format("response {} has no {} score; run 'diffeval "
                                          "rescore --db {}' first",
                                          row.response_id, scorer, db_path));
        }
        text += head;
        util::append_dump_string(text, verdict->extracted);
        text += "], \"filter\": ";
        util::append_dump_string(text, filter);
        text += hashes;
        text += util::python_float_repr(verdict->correct ? 1.0 : 0.0);
        // A failed request is exported as lm-eval counts it (no answer,
        // exact_match 0), marked so that an import stores it as the failure
        // it was: imported as an answer "", it became a stored success.
        if (!row.ok) {
            text += ", \"diffeval_error_kind\": ";
            util::append_dump_string(text, row.error_kind);
            text += ", \"diffeval_error\": ";
            util::append_dump_string(text, row.error);
        }
        text += "}\n";
        ++lines;
    }
    return {};
}

} // namespace

std::string lm_eval_date_id() {
    auto now = std::chrono::system_clock::now();
    auto secs = std::chrono::system_clock::to_time_t(now);
    auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
        1'000'000;
    std::tm tm{};
    localtime_r(&secs, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H-%M-%S", &tm);
    return fmt::format("{}.{:06d}", buf, static_cast<int>(us));
}

util::Result<ExportSummary> export_samples(store::Store& st, const std::string& dir,
                                           const std::string& date_id) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        return make_error(ErrorKind::usage, fmt::format("--out {}: cannot create the directory: {}",
                                                        dir, ec.message()));
    }
    auto groups = store::answered_groups(st);
    if (!groups) {
        return groups.error();
    }
    std::vector<std::string> scorers;
    for (const auto& f : k_filters) {
        scorers.emplace_back(f.second);
    }
    ExportSummary summary;
    const auto tasks = task_names(*groups);
    std::map<std::string, size_t> written; // lower-cased file name -> group
    for (size_t i = 0; i < groups->size(); ++i) {
        const auto& g = (*groups)[i];
        auto name = fmt::format("samples_{}_{}.jsonl", tasks[i], date_id);
        auto path = fs::path(dir) / name;
        // Never one file for two groups, whatever the names.
        if (auto [at, fresh] = written.emplace(lower(name), i); !fresh) {
            const auto& other = (*groups)[at->second];
            return make_error(ErrorKind::data,
                              fmt::format("groups {}/{}/{} (repeat {}) and {}/{}/{} (repeat {}) "
                                          "would both be written to {}; nothing more is written",
                                          other.server, other.framing, other.max_tokens,
                                          other.repeat, g.server, g.framing, g.max_tokens, g.repeat,
                                          path.string()));
        }
        std::string text;
        auto r = store::for_each_answered_request(
            st, g, scorers, [&](const store::AnsweredRequest& row) -> util::Result<void> {
                return append_lines(row, g.max_tokens, st.path(), text, summary.lines);
            });
        if (!r) {
            return r.error();
        }
        auto out = util::ReplacingFile::create(path.string());
        if (!out) {
            return out.error();
        }
        out->write(text);
        if (auto done = out->commit(); !done) {
            return done.error();
        }
        summary.files.push_back(path.string());
    }
    return summary;
}

namespace {

// The error kinds a response row may carry (docs/schema.md).
constexpr std::array<std::string_view, 7> k_error_kinds = {
    "http", "transport", "timeout", "parse", "stream", "size", "finish"};

struct Document {
    int64_t doc_id = 0;
    int line = 0; // the first line that logged it
    std::string question;
    std::string answer;
    ordered_json arguments;
    int max_tokens = 256; // its max_gen_toks (max_gen_toks_of)
    std::vector<std::string> resps;
    ordered_json filters = ordered_json::object(); // filter -> {filtered_resps, metrics}
    // Set for a request diffeval's export marked failed (diffeval_error):
    // its kind and error, stored as a failure, not as an answer.
    std::optional<std::pair<std::string, std::string>> failure;
};

// The task name in "samples_<task>_<date_id>.jsonl" (lm-eval's own rule:
// between the first and the last underscore).
std::string task_of(const std::string& path) {
    auto stem = fs::path(path).stem().string();
    auto first = stem.find('_');
    auto last = stem.rfind('_');
    if (first == std::string::npos || last == first) {
        return stem;
    }
    return stem.substr(first + 1, last - first - 1);
}

// The most tokens a request may ask for: --max-tokens's bound
// (engine::Limits::max_max_tokens), which this folder may not include.
constexpr int64_t k_max_gen_toks = 10'000'000;

// The max_tokens lm-eval ran a document with: its max_gen_toks (in
// `arguments`, on line `where`), lm-eval's default 256 without one; an error
// for one that is no token limit (-5 made the group lm/raw/-5, and "abc" or
// 1e20 became 256 without a word).
util::Result<int> max_gen_toks_of(const ordered_json& arguments, const std::string& where) {
    if (!arguments.is_object() || !arguments.contains("gen_args_0") ||
        !arguments["gen_args_0"].is_object() || !arguments["gen_args_0"].contains("arg_1") ||
        !arguments["gen_args_0"]["arg_1"].is_object() ||
        !arguments["gen_args_0"]["arg_1"].contains("max_gen_toks")) {
        return 256;
    }
    const auto& v = arguments["gen_args_0"]["arg_1"]["max_gen_toks"];
    const bool in_range =
        v.is_number_unsigned()  ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= k_max_gen_toks
        : v.is_number_integer() ? v.get<int64_t>() >= 1 && v.get<int64_t>() <= k_max_gen_toks
                                : false;
    if (!in_range) {
        return make_error(ErrorKind::data,
                          fmt::format("{}: max_gen_toks {} is no token limit (a whole number from "
                                      "1 to {}); correct it, or remove it for lm-eval's default "
                                      "256",
                                      where, util::one_line(v.dump(), 40), k_max_gen_toks));
    }
    return static_cast<int>(v.get<int64_t>());
}

util::Result<std::vector<Document>> parse_samples(const std::string& path) {
    auto text = util::read_input(path, util::k_max_data_bytes);
    if (!text) {
        return make_error(ErrorKind::usage, fmt::format("cannot read {}", text.error().message));
    }
    std::vector<Document> docs;
    std::map<int64_t, size_t> by_id;
    std::istringstream in(*text);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.empty()) {
            continue;
        }
        auto where = fmt::format("{}:{}", path, n);
        // Depth-bounded: a deep line would overflow the stack when copied.
        auto j = util::json_depth_within(line) ? ordered_json::parse(line, nullptr, false)
                                               : ordered_json(ordered_json::value_t::discarded);
        // A gzipped file, and lm-eval's samples before 0.4.3 (one JSON
        // array, on one line or over many), are no JSON lines at all: said
        // so, not "not UTF-8", "cut off" or "not a samples line" (interop
        // audit #10).
        if (n == 1 && line.starts_with("\x1f\x8b")) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: the file is gzip-compressed; decompress it "
                                          "(gunzip) and import the .jsonl",
                                          path));
        }
        if (n == 1 && (j.is_array() || (j.is_discarded() && util::trim(line).starts_with("[")))) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: the file is one JSON array, as lm-eval wrote "
                                          "samples before 0.4.3, not a line per sample; log the "
                                          "samples with lm-eval 0.4.3 or later",
                                          where));
        }
        // A line lm-eval cut off when it was killed, or written in another
        // encoding, is no JSON: said so, not sent looking for keys it has.
        if (j.is_discarded()) {
            return make_error(
                ErrorKind::data,
                !util::is_utf8(line)
                    ? fmt::format("{}: not UTF-8 (lm-eval writes its samples in UTF-8); was the "
                                  "file converted to another encoding?",
                                  where)
                : util::json_depth_within(line)
                    ? json_error_text(line, where)
                    : fmt::format("{}: nests deeper than {} levels; not an lm-eval samples line",
                                  where, util::k_max_json_depth));
        }
        if (!j.is_object() || !j.contains("doc_id") || !j.contains("doc") || !j.contains("resps")) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: not an lm-eval samples line (needs doc_id, doc, "
                                          "resps); is this a --log_samples file?",
                                          where));
        }
        // lm-eval writes an integer doc_id, the doc as an object, and resps
        // as lists of answer strings (checked as they are read, below).
        const auto wrong_type = [&](std::string_view what) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: {}, as lm-eval never writes it; give the samples "
                                          "file lm-eval's --log_samples wrote",
                                          where, what));
        };
        if (const char* wrong = !j["doc_id"].is_number_integer() ? "doc_id is not an integer"
                                : !j["doc"].is_object()          ? "doc is not an object"
                                : !j["resps"].is_array()         ? "resps is not a list"
                                                                 : nullptr) {
            return wrong_type(wrong);
        }
        const auto& doc = j["doc"];
        if (!doc.contains("question") || !doc["question"].is_string() || !doc.contains("answer") ||
            !doc["answer"].is_string()) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: doc has no question and answer strings; only "
                                          "GSM8K-style tasks (gsm8k, gsm8k_cot, their chat "
                                          "variants) can be imported",
                                          where));
        }
        const auto id = j["doc_id"].get<int64_t>();
        if (id < 0 || id > std::numeric_limits<int>::max()) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: doc_id {} is not a question index", where, id));
        }
        Document read;
        read.doc_id = id;
        read.line = n;
        read.question = doc["question"].get<std::string>();
        read.answer = doc["answer"].get<std::string>();
        read.arguments = j.value("arguments", ordered_json::object());
        auto max_tokens = max_gen_toks_of(read.arguments, where);
        if (!max_tokens) {
            return max_tokens.error();
        }
        read.max_tokens = *max_tokens;
        if (j.contains("diffeval_error")) {
            const auto& kind = j.value("diffeval_error_kind", ordered_json());
            const auto& error = j["diffeval_error"];
            if (!error.is_string() || !kind.is_string() ||
                !std::count(k_error_kinds.begin(), k_error_kinds.end(),
                            kind.get_ref<const std::string&>())) {
                return make_error(ErrorKind::data,
                                  fmt::format("{}: diffeval_error needs a string and "
                                              "diffeval_error_kind one of {}",
                                              where, fmt::join(k_error_kinds, ", ")));
            }
            read.failure.emplace(kind.get<std::string>(), error.get<std::string>());
        }
        // resps: one list per request, one string per repeat.
        for (const auto& per_request : j["resps"]) {
            const auto& list =
                per_request.is_array() ? per_request : ordered_json::array({per_request});
            for (const auto& r : list) {
                if (!r.is_string()) {
                    return wrong_type("resps holds something other than answer strings");
                }
                read.resps.push_back(r.get<std::string>());
            }
        }
        // lm-eval writes an answer for every request, a failed one's "":
        // left out, the document was no question of its group.
        if (read.resps.empty()) {
            return wrong_type("resps holds no answer");
        }
        auto [it, fresh] = by_id.emplace(id, docs.size());
        if (fresh) {
            docs.push_back(std::move(read));
        }
        auto& d = docs[it->second];
        // lm-eval logs a document once per filter, each line with the same
        // answers; other answers are another run, which keeping the first
        // line's would drop without a word.
        if (!fresh &&
            (read.resps != d.resps || read.question != d.question || read.answer != d.answer)) {
            return make_error(
                ErrorKind::data,
                fmt::format("{}: document {} is logged again with other {} than on line {}; a "
                            "samples file holds one run: put each run in its own file and import "
                            "the second with --first-repeat",
                            where, id, read.resps != d.resps ? "resps" : "doc", d.line));
        }
        // A filter that is no name ended the import with an internal error
        // (an outside audit).
        std::string filter = "none";
        if (const auto f = j.find("filter"); f != j.end()) {
            if (!f->is_string()) {
                return wrong_type("filter is not a string");
            }
            filter = f->get<std::string>();
        }
        // lm-eval's own verdict is stored as it is: of the types lm-eval
        // writes, or an audit's `exact_match: "yes"` was kept as one.
        ordered_json verdict = ordered_json::object();
        verdict["filtered_resps"] = j.value("filtered_resps", ordered_json::array());
        if (!verdict["filtered_resps"].is_array() ||
            !std::all_of(verdict["filtered_resps"].begin(), verdict["filtered_resps"].end(),
                         [](const ordered_json& v) { return v.is_string(); })) {
            return wrong_type("filtered_resps is not a list of answer strings");
        }
        for (const auto& m : j.value("metrics", ordered_json::array())) {
            if (m.is_string() && j.contains(m.get<std::string>())) {
                const auto& value = j[m.get<std::string>()];
                if (!value.is_number()) {
                    return wrong_type(fmt::format("metric {} is not a number",
                                                  util::one_line(m.get<std::string>(), 80)));
                }
                verdict[m.get<std::string>()] = value;
            }
        }
        // One verdict a filter: a second line with another, kept silently,
        // stored the later one (a correct answer's exact_match flipped to 0).
        if (const auto known = d.filters.find(filter);
            known != d.filters.end() && *known != verdict) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: document {} is logged again under filter '{}' with "
                                          "another verdict than on line {}; a samples file holds "
                                          "one verdict a document and filter: give the file "
                                          "lm-eval's --log_samples wrote",
                                          where, id, util::one_line(filter, 80), d.line));
        }
        d.filters[filter] = std::move(verdict);
    }
    if (docs.empty()) {
        return make_error(ErrorKind::data, fmt::format("{} holds no samples", path));
    }
    return docs;
}

} // namespace

namespace {

// The character of `text` at byte `i`, as a message shows it beyond doubt:
// printable ASCII quoted, anything else (a space, a line end, a no-break
// space, any non-ASCII character) as U+XXXX, and the end of the text as such.
std::string character_at(std::string_view text, size_t i) {
    if (i >= text.size()) {
        return "nothing (the text ends)";
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c > 0x20 && c < 0x7F && c != '"') {
        return fmt::format("\"{}\"", static_cast<char>(c));
    }
    const size_t n = util::utf8_valid_length(text, i);
    return n == 0 ? fmt::format("byte 0x{:02X}", c)
                  : util::code_point_name(util::utf8_code_point(text, i, n));
}

// Where `got` first differs from `expected`: "at character N (after
// "...the text before it") it has X where the dataset has Y", each
// character as character_at shows it: two texts shown whole read the same
// when they differ in a space (an audit).
std::string where_differs(std::string_view got, std::string_view expected) {
    size_t i = 0;
    while (i < got.size() && i < expected.size() && got[i] == expected[i]) {
        ++i;
    }
    // Back to the start of the character the difference is in.
    i = util::utf8_byte_prefix(got, i).size();
    std::string after;
    if (i > 0) {
        const size_t from = util::utf8_byte_prefix(got, i > 40 ? i - 40 : 0).size();
        after = fmt::format(" (after \"{}{}\")", from > 0 ? "..." : "",
                            util::one_line(got.substr(from, i - from), 60));
    }
    return fmt::format("at character {}{} it has {} where the dataset has {}",
                       util::utf8_length(got.substr(0, i)) + 1, after, character_at(got, i),
                       character_at(expected, i));
}

// Each document must be the dataset's question at its doc_id, with its
// answer: the documents are stored as that question (and hashed as `run`
// hashes it), so a wrong --dataset or an edited file would be compared in
// `diff` with other questions under the same index.
util::Result<void> check_against_dataset(const ImportOptions& o,
                                         const std::vector<Document>& docs) {
    const auto& ds = o.dataset;
    const auto hint = "pass --dataset with the dataset lm-eval ran on ('gsm8k' for the official "
                      "test set, 'sample', or the path of its test .jsonl)";
    for (const auto& d : docs) {
        const auto where = fmt::format("{}:{}: document {}", o.path, d.line, d.doc_id);
        if (d.doc_id >= static_cast<int64_t>(ds.test.size())) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: doc_id {} is beyond dataset '{}' ({}), which has "
                                          "{} questions; {}",
                                          where, d.doc_id, ds.name, ds.source, ds.test.size(),
                                          hint));
        }
        const auto& want = ds.test[static_cast<size_t>(d.doc_id)];
        for (const auto& [field, got, expected] :
             {std::tuple{"question", &d.question, &want.question},
              std::tuple{"answer", &d.answer, &want.answer}}) {
            if (*got != *expected) {
                // Where they first differ: two texts cut at their first 40
                // bytes read the same when they differ later (an audit).
                return make_error(
                    ErrorKind::data,
                    fmt::format("{}: its {} is not that of question {} of dataset '{}' ({}): {}; "
                                "{}",
                                where, field, d.doc_id, ds.name, ds.source,
                                where_differs(*got, *expected), hint));
            }
        }
    }
    return {};
}

// The name must not be a server diffeval ran, and the questions must be the
// stored ones.
util::Result<void> check_against_store(store::Store& st, const ImportOptions& o,
                                       const std::vector<Document>& docs) {
    auto url = store::server_url(st, o.name);
    if (!url) {
        return url.error();
    }
    if (*url && !(*url)->starts_with(store::k_imported_url_prefix)) {
        return make_error(ErrorKind::usage,
                          fmt::format("--name '{}' is a server diffeval ran ({}); choose "
                                      "another name for the imported group",
                                      o.name, **url));
    }
    std::vector<int64_t> idxs;
    for (const auto& d : docs) {
        idxs.push_back(d.doc_id);
    }
    auto stored = store::stored_questions(st, o.dataset.name, idxs);
    if (!stored) {
        return stored.error();
    }
    for (size_t i = 0; i < docs.size(); ++i) {
        const auto& d = docs[i];
        // The document is the dataset's question (check_against_dataset):
        // the database holds another text under the same dataset name.
        if ((*stored)[i] && *(*stored)[i] != d.question) {
            return make_error(
                ErrorKind::data,
                fmt::format("{}:{}: document {}: {} holds another text for question {} of "
                            "dataset '{}' than {} (stored from other files under that name); "
                            "import into another --db",
                            o.path, d.line, d.doc_id, st.path(), d.doc_id, o.dataset.name,
                            o.dataset.source));
        }
    }
    return {};
}

// The documents' questions at their doc_ids, hashed as `run` hashes them;
// questions already stored are kept (check_against_store found them equal).
util::Result<void> store_questions(store::Store& st, const ImportOptions& o,
                                   const std::vector<Document>& docs) {
    std::vector<store::IndexedQuestion> questions;
    for (const auto& d : docs) {
        questions.push_back({d.doc_id, d.question, d.answer});
    }
    return store::put_questions_at(st, o.dataset.name, questions);
}

// An answer of the file to a request the store has answered already.
struct AlreadyStored {
    store::RequestRow request; // without its body
    const Document* doc = nullptr;
    size_t answer = 0; // index into doc->resps
};

// One document's requests and responses (one per repeat); those already
// answered in the store go to `stored` instead, for check_same_answers, and
// a failure its request counts already is skipped.
void add_document(const Document& d, const ImportOptions& o, const std::string& framing,
                  const std::string& started_at, const std::unordered_set<std::string>& done,
                  const store::CountedFailures& failed, ImportSummary& summary,
                  std::vector<store::RequestRow>& requests,
                  std::vector<store::ResponseRow>& responses, std::vector<AlreadyStored>& stored) {
    const int max_tokens = d.max_tokens;
    const auto body = util::python_json_dumps(ordered_json{{"lm_eval_arguments", d.arguments}});
    const auto body_sha = util::sha256_hex(body);
    for (size_t i = 0; i < d.resps.size(); ++i) {
        const int rep = o.first_repeat + static_cast<int>(i);
        store::RequestRow row{
            "",   o.name,  framing, max_tokens, rep, static_cast<int>(d.doc_id), o.dataset.name,
            body, body_sha};
        row.key = store::request_key(o.name, framing, max_tokens, rep, d.doc_id, body_sha);
        if (done.count(row.key)) {
            ++summary.already_stored;
            row.body.clear();
            stored.push_back({std::move(row), &d, i});
            continue;
        }
        // The same failure as the one its request counts: this file's line
        // again (it was stored once more at each import of the file).
        if (const auto f = failed.find(row.key);
            d.failure && f != failed.end() && f->second == *d.failure) {
            ++summary.already_stored;
            continue;
        }
        store::ResponseRow resp;
        resp.key = row.key;
        resp.ok = !d.failure;
        resp.status = d.failure ? 0 : 200;
        if (d.failure) {
            resp.error_kind = d.failure->first;
            resp.error = d.failure->second;
        }
        resp.response_json = util::python_json_dumps(
            ordered_json{{"lm_eval", {{"resps", d.resps[i]}, {"filters", d.filters}}}});
        resp.text = d.resps[i];
        resp.attempts = 1;
        resp.started_at = started_at;
        responses.push_back(std::move(resp));
        requests.push_back(std::move(row));
        ++summary.responses;
    }
}

// A stored answer to one of the file's requests that differs from the
// file's: the file is another run of the same requests, which taken as
// "already stored" would be dropped without a word.
util::Result<void> check_same_answers(store::Store& st, const ImportOptions& o,
                                      const std::vector<Document>& docs,
                                      const std::vector<AlreadyStored>& stored) {
    std::vector<store::RequestRow> requests;
    requests.reserve(stored.size());
    for (const auto& s : stored) {
        requests.push_back(s.request);
    }
    auto texts = store::answered_texts(st, requests);
    if (!texts) {
        return texts.error();
    }
    size_t most = 0;
    for (const auto& d : docs) {
        most = std::max(most, d.resps.size());
    }
    for (size_t k = 0; k < stored.size(); ++k) {
        const auto& [request, d, i] = stored[k];
        if ((*texts)[k] && *(*texts)[k] != d->resps[i]) {
            return make_error(
                ErrorKind::data,
                fmt::format("{}: document {} (repeat {}) is stored with another answer, so this "
                            "file is another run of the same requests; import it as further "
                            "repeats with --first-repeat {}",
                            o.path, d->doc_id, o.first_repeat + static_cast<int>(i),
                            o.first_repeat + static_cast<int>(most)));
        }
    }
    return {};
}

} // namespace

util::Result<ImportSummary> import_samples(store::Store& st, ImportOptions o) {
    // 1. Read the whole file before touching the store.
    auto docs = parse_samples(o.path);
    if (!docs) {
        return docs.error();
    }
    const std::string task = task_of(o.path);
    std::string framing = o.framing.empty() ? task : o.framing;
    // `export` writes repeat N of a group to a file whose task ends "-rN"
    // (task_names): read as the group of repeat 0's file, from repeat N,
    // an export imports as the groups and repeats it came from.
    if (const auto suffix = export_repeat_suffix(task)) {
        if (o.framing.empty()) {
            framing = task.substr(0, task.size() - suffix->second);
        }
        if (!o.first_repeat_given) {
            o.first_repeat = suffix->first;
        }
    }
    // A task read from the file's name names the group as --framing would,
    // so it is held to the same rule: a line end or a terminal escape in a
    // file name reached every table and terminal as the group's framing.
    if (auto problem = util::name_problem(framing); problem && o.framing.empty()) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: the task in its name, '{}', would be the group's "
                                      "framing, which {}; pass --framing NAME",
                                      util::one_line(o.path, util::k_server_words_bytes),
                                      util::one_line(framing, 80), *problem));
    }
    // 2. Check the questions against the dataset, then the name and the
    //    questions against the store.
    if (auto r = check_against_dataset(o, *docs); !r) {
        return r.error();
    }
    if (auto r = check_against_store(st, o, *docs); !r) {
        return r.error();
    }
    // 3. The rows to store: the same file again stores nothing; another run
    //    of the same requests (its answers differ) is refused unless given
    //    its own repeats.
    auto done = st.completed_keys();
    if (!done) {
        return done.error();
    }
    auto failed = store::counted_failures(st, o.name, framing);
    if (!failed) {
        return failed.error();
    }
    ImportSummary summary;
    summary.first_repeat = o.first_repeat;
    std::vector<store::RequestRow> requests;
    std::vector<store::ResponseRow> responses;
    std::vector<AlreadyStored> stored;
    const auto started_at = store::now_iso8601();
    for (const auto& d : *docs) {
        ++summary.documents;
        add_document(d, o, framing, started_at, *done, *failed, summary, requests, responses,
                     stored);
    }
    if (auto r = check_same_answers(st, o, *docs, stored); !r) {
        return r.error();
    }
    // A request new to the store in a place another holds: the file was
    // logged with other arguments (a sampling setting, the prompt, the
    // stop strings), so it is another configuration, which beside the
    // stored one would count each question twice in one repeat.
    auto taken = store::first_taken_place(st, requests);
    if (!taken) {
        return taken.error();
    }
    if (*taken) {
        const auto& r = requests[**taken];
        return make_error(ErrorKind::data,
                          fmt::format("{}: document {} (repeat {}) is stored in {}/{}/{} from a "
                                      "file logged with other arguments (another "
                                      "configuration); import it under another --name or into "
                                      "another --db",
                                      o.path, r.question_idx, r.repeat, o.name, framing,
                                      r.max_tokens));
    }
    // 4. Store the run, the server, the questions, the requests, then the
    //    responses that are not stored yet.
    std::error_code ec; // no working directory: the path as given
    auto abs = fs::absolute(o.path, ec).string();
    if (abs.empty()) {
        abs = o.path;
    }
    // Kept as JSON (and shown as the server's url): a file name in another
    // encoding is stored with U+FFFD, where dump() threw and the import
    // ended as an internal error.
    abs = util::valid_utf8(abs);
    ordered_json config = {{"import", "lm-eval-samples"}, {"path", abs}, {"task", task}};
    auto run_id = st.begin_run(config.dump(), o.dataset.name);
    if (!run_id) {
        return run_id.error();
    }
    // A write that fails from here on (a full disk) leaves the run marked
    // failed, not `running`: what it stored is whole rows, and importing
    // the file again stores the rest.
    const auto give_up = [&](util::Error e) {
        (void)st.mark_run_failed(*run_id);
        return e;
    };
    if (auto r = st.put_server({o.name, std::string(store::k_imported_url_prefix) + abs, "",
                                ordered_json{{"imported_from", abs}}.dump()});
        !r) {
        return give_up(r.error());
    }
    if (auto r = store_questions(st, o, *docs); !r) {
        return give_up(r.error());
    }
    for (auto& resp : responses) {
        resp.run_id = *run_id;
    }
    // Each response answers the request pushed with it.
    auto planned = st.put_requests(requests);
    if (!planned) {
        return give_up(planned.error());
    }
    for (size_t i = 0; i < responses.size(); ++i) {
        responses[i].request_id = (*planned)[i].id;
    }
    if (auto r = st.write_batch(responses); !r) {
        return give_up(r.error());
    }
    (void)st.end_run(*run_id, "complete");
    // Documents logged with other max_gen_toks went to other groups: each
    // is named, in order of its token limit.
    std::vector<int> limits;
    for (const auto& d : *docs) {
        limits.push_back(d.max_tokens);
    }
    std::sort(limits.begin(), limits.end());
    limits.erase(std::unique(limits.begin(), limits.end()), limits.end());
    std::vector<std::string> groups;
    for (const int limit : limits) {
        groups.push_back(fmt::format("{}/{}/{}", o.name, framing, limit));
    }
    summary.other_strict_rule = task.find("cot") != std::string::npos;
    summary.final_answer_rule = task.find("cot_llama") != std::string::npos;
    for (const auto& d : *docs) {
        summary.several_answers += d.resps.size() > 1 ? 1 : 0;
        summary.most_answers = std::max(summary.most_answers, d.resps.size());
    }
    summary.group = groups.empty() ? fmt::format("{}/{}/0", o.name, framing)
                                   : fmt::format("{}", fmt::join(groups, ", "));
    return summary;
}

} // namespace diffeval::interop
