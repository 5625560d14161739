// vLLM GSM8K CI configurations; see vllm_config.hpp. YAML is parsed by
// yaml-cpp.
#include <harness/engine/vllm_config.hpp>

#include <harness/engine/launcher.hpp>
#include <harness/util/file.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <arpa/inet.h>
#include <filesystem>
#include <limits>
#include <netinet/in.h>
#include <regex>
#include <sstream>
#include <sys/socket.h>
#include <unistd.h>

namespace diffeval::engine {

using util::ErrorKind;
using util::make_error;

namespace {

namespace fs = std::filesystem;

// A port nothing listens on now, chosen by the kernel.
util::Result<int> free_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return make_error(ErrorKind::io, "cannot open a socket to find a free port");
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
        port = ntohs(addr.sin_port);
    }
    close(fd);
    if (port <= 0) {
        return make_error(ErrorKind::io, "cannot find a free loopback port for vllm serve");
    }
    return port;
}

template <typename T>
util::Result<T> field(const YAML::Node& root, const char* key, const std::string& path,
                      const char* what) {
    try {
        return root[key].as<T>();
    } catch (const YAML::Exception& e) {
        return make_error(ErrorKind::usage, fmt::format("{}:{}: {} must be {}", path,
                                                        root[key].Mark().line + 1, key, what));
    }
}

} // namespace

namespace {

// yaml-cpp keeps a key's first value, the CI's PyYAML its last: a key given
// twice in `map` would be another rule, model or environment than the CI's.
util::Result<void> no_key_twice(const YAML::Node& map, const std::string& path) {
    std::vector<std::string> keys;
    for (const auto& kv : map) {
        if (!kv.first.IsScalar()) {
            continue;
        }
        auto key = kv.first.Scalar();
        if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}:{}: {} is given twice (vLLM's CI would take the "
                                          "last, diffeval the first); keep one",
                                          path, kv.first.Mark().line + 1, util::one_line(key, 80)));
        }
        keys.push_back(std::move(key));
    }
    return {};
}

// Whether PyYAML (YAML 1.1, the CI's reader) reads `n` as a number: a plain
// scalar in its float form (a dot needed: 5e-1 is text to it) or a decimal
// integer. A quoted "0.5" or 5e-1 is text there, and the CI's comparison
// with it fails with a TypeError, where yaml-cpp read 0.5 and the gate
// passed (an outside audit).
bool pyyaml_number(const YAML::Node& n) {
    // A decimal integer, or one of PyYAML's two plain float forms.
    static const std::regex k_number(R"([-+]?(?:0|[1-9][0-9_]*))"
                                     R"(|[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?)"
                                     R"(|\.[0-9_]+(?:[eE][-+][0-9]+)?)");
    return n.IsScalar() && n.Tag() == "?" && std::regex_match(n.Scalar(), k_number);
}

// The file as a YAML mapping.
util::Result<YAML::Node> read_yaml_map(const std::string& path) {
    auto text = util::read_input(path, util::k_max_config_bytes);
    if (!text) {
        return make_error(ErrorKind::usage,
                          fmt::format("--vllm-config: cannot read {}", text.error().message));
    }
    YAML::Node root;
    try {
        // PyYAML's safe_load, the CI's, refuses a stream of several
        // documents, where taking the first passed a gate the CI failed.
        const auto documents = YAML::LoadAll(*text);
        if (documents.size() > 1) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: holds {} YAML documents, and vLLM's CI reads one "
                                          "(PyYAML's safe_load refuses more); keep one",
                                          path, documents.size()));
        }
        root = documents.empty() ? YAML::Node() : documents.front();
    } catch (const YAML::Exception& e) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}:{}: not valid YAML: {}", path, e.mark.line + 1, e.msg));
    }
    if (!root.IsMap()) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: expected a mapping with model_name and "
                                      "accuracy_threshold (a vLLM GSM8K config)",
                                      path));
    }
    if (auto r = no_key_twice(root, path); !r) {
        return r.error();
    }
    return root;
}

// The accuracy rule: model_name and accuracy_threshold (required),
// tolerance, num_questions and num_fewshot.
util::Result<void> read_rule(const YAML::Node& root, const std::string& path, VllmConfig& c) {
    for (const char* key : {"model_name", "accuracy_threshold"}) {
        if (!root[key]) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: no {} (a vLLM GSM8K config needs model_name and "
                                          "accuracy_threshold)",
                                          path, key));
        }
    }
    auto model = field<std::string>(root, "model_name", path, "a string");
    if (!model) {
        return model.error();
    }
    c.model_name = *model;
    for (const char* key : {"accuracy_threshold", "tolerance"}) {
        // What neither reads as a number is "must be a number" below.
        double ignored = 0;
        if (root[key] && root[key].IsScalar() && !pyyaml_number(root[key]) &&
            YAML::convert<double>::decode(root[key], ignored)) {
            return make_error(
                ErrorKind::usage,
                fmt::format("{}:{}: {} {} is text to vLLM's CI (PyYAML reads a quoted value, or "
                            "a number without a dot such as 5e-1, as a string), whose check then "
                            "fails; write a plain number with a dot, such as 0.5",
                            path, root[key].Mark().line + 1, key,
                            util::one_line(root[key].Scalar(), 40)));
        }
    }
    auto threshold = field<double>(root, "accuracy_threshold", path, "a number");
    if (!threshold) {
        return threshold.error();
    }
    c.accuracy_threshold = *threshold;
    if (root["tolerance"]) {
        auto t = field<double>(root, "tolerance", path, "a number");
        if (!t) {
            return t.error();
        }
        c.tolerance = *t;
    }
    // Proportions, as gsm8k_eval.py compares them with its accuracy: 85
    // (a percentage) could never be met, and said so in --expect's words.
    for (auto [key, value] : {std::pair{"accuracy_threshold", c.accuracy_threshold},
                              std::pair{"tolerance", c.tolerance}}) {
        if (root[key] && !(value >= 0 && value <= 1)) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}:{}: {} is {}: a proportion from 0 to 1 (0.82 for "
                                          "82%); give one",
                                          path, root[key].Mark().line + 1, key, value));
        }
    }
    for (auto [key, target] :
         {std::pair{"num_questions", &c.num_questions}, std::pair{"num_fewshot", &c.num_fewshot}}) {
        if (root[key]) {
            // Read as 64 bits: a count past an int's range is still a count
            // (gsm8k_eval.py asks min(n, 1319)), held to what an int holds.
            auto wide = field<int64_t>(root, key, path, "an integer");
            if (!wide) {
                return wide.error();
            }
            const int v = static_cast<int>(std::clamp<int64_t>(
                *wide, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
            // gsm8k_eval.py takes min(num_questions, 1319) questions: 0 or
            // fewer asks none, and the CI's check of the NaN accuracy of no
            // answers fails whatever the server does.
            if (v < 1 && target == &c.num_questions) {
                return make_error(
                    ErrorKind::usage,
                    fmt::format("{}:{}: num_questions is {}: vLLM's gsm8k_eval.py then asks no "
                                "questions and its accuracy check cannot pass; give how many "
                                "questions to ask (1319 or more for all of them)",
                                path, root[key].Mark().line + 1, v));
            }
            if (v < 0) {
                return make_error(ErrorKind::usage,
                                  fmt::format("{}: {} must be 0 or more", path, key));
            }
            *target = v;
        }
    }
    return {};
}

// How the CI launches the server: server_args, env, startup_max_wait_seconds.
util::Result<void> read_launch(const YAML::Node& root, const std::string& path, VllmConfig& c) {
    if (root["server_args"] && !root["server_args"].IsNull()) {
        auto args = field<std::string>(root, "server_args", path, "a string");
        if (!args) {
            return args.error();
        }
        auto words = split_command(*args);
        if (!words) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}: server_args: {}", path, words.error().message));
        }
        // vLLM's test launcher refuses these words (a ValueError before any
        // server starts): it sets the port and the seed itself.
        for (const auto& word : *words) {
            if (word == "--port" || word == "-p" || word == "--seed") {
                return make_error(
                    ErrorKind::usage,
                    fmt::format("{}:{}: server_args gives {}, which vLLM's test launcher sets "
                                "itself and refuses in a config (its CI fails before the server "
                                "starts); remove it",
                                path, root["server_args"].Mark().line + 1, word));
            }
        }
        c.server_args = *words;
    }
    if (root["env"] && !root["env"].IsNull()) {
        if (!root["env"].IsMap()) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}:{}: env must be a mapping of variable names to "
                                          "values",
                                          path, root["env"].Mark().line + 1));
        }
        if (auto r = no_key_twice(root["env"], path); !r) {
            return r.error();
        }
        for (const auto& kv : root["env"]) {
            try {
                c.env.emplace_back(kv.first.as<std::string>(), kv.second.as<std::string>());
            } catch (const YAML::Exception&) {
                return make_error(ErrorKind::usage, fmt::format("{}:{}: env values must be scalars",
                                                                path, kv.first.Mark().line + 1));
            }
        }
    }
    if (root["startup_max_wait_seconds"]) {
        auto w = field<int>(root, "startup_max_wait_seconds", path, "an integer");
        if (!w) {
            return w.error();
        }
        if (*w < 1) {
            return make_error(ErrorKind::usage,
                              fmt::format("{}:{}: startup_max_wait_seconds is {}: give the "
                                          "seconds the server may take to start, 1 or more",
                                          path, root["startup_max_wait_seconds"].Mark().line + 1,
                                          *w));
        }
        c.startup_max_wait = std::chrono::seconds(*w);
    }
    return {};
}

} // namespace

util::Result<VllmConfig> load_vllm_config(const std::string& path) {
    auto root = read_yaml_map(path);
    if (!root) {
        return root.error();
    }
    VllmConfig c;
    c.path = path;
    c.name = fs::path(path).stem().string();
    if (auto r = read_rule(*root, path, c); !r) {
        return r.error();
    }
    if (auto r = read_launch(*root, path, c); !r) {
        return r.error();
    }
    return c;
}

util::Result<std::vector<VllmConfig>> load_vllm_configs(const std::string& path) {
    const auto ext = fs::path(path).extension().string();
    if (ext == ".yaml" || ext == ".yml") {
        auto c = load_vllm_config(path);
        if (!c) {
            return c.error();
        }
        return std::vector<VllmConfig>{std::move(*c)};
    }
    auto text = util::read_input(path, util::k_max_config_bytes);
    if (!text) {
        return make_error(ErrorKind::usage,
                          fmt::format("--vllm-config: cannot read {}", text.error().message));
    }
    std::vector<VllmConfig> out;
    std::istringstream in(*text);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        auto b = line.find_first_not_of(" \t\r");
        auto e = line.find_last_not_of(" \t\r");
        if (b == std::string::npos || line[b] == '#') {
            continue;
        }
        auto entry = fs::path(path).parent_path() / line.substr(b, e - b + 1);
        std::error_code ec;
        if (!fs::exists(entry, ec)) {
            return make_error(ErrorKind::usage,
                              ec ? fmt::format("{}:{}: cannot read config {}: {}", path, n,
                                               entry.string(), ec.message())
                                 : fmt::format("{}:{}: no config {}", path, n, entry.string()));
        }
        auto c = load_vllm_config(entry.string());
        if (!c) {
            return c.error();
        }
        out.push_back(std::move(*c));
    }
    if (out.empty()) {
        return make_error(ErrorKind::usage, fmt::format("{} lists no configs", path));
    }
    return out;
}

util::Result<void> apply_vllm_configs(const std::vector<VllmConfig>& configs,
                                      const std::string& vllm_bin, RunConfig& run) {
    run.servers.clear();
    for (const auto& c : configs) {
        auto port = free_port();
        if (!port) {
            return port.error();
        }
        ServerSpec s;
        s.name = c.name;
        s.url = fmt::format("http://127.0.0.1:{}", *port);
        // The CI sends no model name with completions; neither do we.
        s.launch = {vllm_bin, "serve", c.model_name};
        s.launch_named_by = "--vllm-bin";
        s.launch.insert(s.launch.end(), c.server_args.begin(), c.server_args.end());
        // vLLM's test launcher (tests/utils.py's RemoteOpenAIServer) then
        // adds the port and `--seed 0`, and starts the server with
        // VLLM_WORKER_MULTIPROC_METHOD=spawn under the config's env.
        s.launch.insert(s.launch.end(), {"--trust-remote-code", "--disable-uvicorn-access-log",
                                         "--port", std::to_string(*port), "--seed", "0"});
        s.env = {{"VLLM_WORKER_MULTIPROC_METHOD", "spawn"}};
        s.env.insert(s.env.end(), c.env.begin(), c.env.end());
        s.ready_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(c.startup_max_wait);
        run.servers.push_back(std::move(s));
    }
    // The CI's settings: the raw framing, 256 tokens, one repeat.
    run.framings = {"raw"};
    run.max_tokens = {256};
    run.repeats = 1;
    run.limit = configs.front().num_questions;
    run.framing_overrides.fewshot = configs.front().num_fewshot;
    run.sequential_servers = configs.size() > 1;
    for (const auto& c : configs) {
        if (c.num_questions != configs.front().num_questions ||
            c.num_fewshot != configs.front().num_fewshot) {
            return make_error(ErrorKind::usage,
                              fmt::format("{} asks for {} questions with {} shots but {} for {} "
                                          "with {}; run them with separate --vllm-config calls",
                                          c.path, c.num_questions, c.num_fewshot,
                                          configs.front().path, configs.front().num_questions,
                                          configs.front().num_fewshot));
        }
    }
    return {};
}

} // namespace diffeval::engine
