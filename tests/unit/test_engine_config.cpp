// Experiment files with numbers no integer can hold: found by
// fuzz_experiment_toml, where toml++ converted 1E024 to an integer with
// undefined behaviour. Each must be one usage error naming the line.
#include <harness/engine/config.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace diffeval;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
    auto path = std::filesystem::temp_directory_path() /
                ("diffeval-unit-" + std::to_string(::getpid()) + "-" + name);
    std::ofstream(path) << text;
    return path.string();
}

} // namespace

TEST(ExperimentFile, HugeFloatForAnIntegerIsAUsageErrorNamingTheLine) {
    for (const char* value : {"1E024", "-1e300", "9.3e18", "inf", "nan", "2.5"}) {
        auto path = write_temp("huge.toml",
                               std::string("version = 1\nmax_tokens = [256, ") + value + "]\n");
        engine::RunConfig config;
        auto r = engine::load_experiment(path, config);
        ASSERT_FALSE(r) << value;
        EXPECT_EQ(r.error().kind, util::ErrorKind::usage) << value;
        EXPECT_NE(r.error().message.find(":2:"), std::string::npos) << r.error().message;
        std::filesystem::remove(path);
    }
}

TEST(ExperimentFile, IntegralFloatIsTheSameInteger) {
    auto path = write_temp("integral.toml", "version = 1\nmax_tokens = [512.0]\nrepeats = 3.0\n");
    engine::RunConfig config;
    ASSERT_TRUE(engine::load_experiment(path, config));
    EXPECT_EQ(config.max_tokens, std::vector<int>{512});
    EXPECT_EQ(config.repeats, 3);
    std::filesystem::remove(path);
}

// Every key the file reader handles is allowed and every allowed key read:
// `stream` used to be listed by the reader but refused as unknown.
TEST(ExperimentFile, EveryDocumentedKeyIsReadIntoTheConfig) {
    auto path = write_temp("keys.toml", R"(version = 1
framings = "raw"
max_tokens = 64
repeats = 2
limit = 7
concurrency = "auto"
retries = 0
timeout = 1.5
db = "x.sqlite"
dataset = "gsm8k"
fewshot_from = "train.jsonl"
api_key_env = "KEY"
model = "m"
stream = true
probe = "think-open"
max_response_bytes = 65536

[[servers]]
name = "a"
url = "http://127.0.0.1:9/"
headers = { X-Team = "t" }
env = { A = "1" }
launch = "llama-server --port 9"
body = { top_k = 1 }
)");
    engine::RunConfig c;
    auto r = engine::load_experiment(path, c);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(c.framings, std::vector<std::string>{"raw"});
    EXPECT_EQ(c.max_tokens, std::vector<int>{64});
    EXPECT_EQ(c.repeats, 2);
    EXPECT_EQ(c.limit, 7);
    EXPECT_TRUE(c.concurrency_auto);
    EXPECT_EQ(c.retries, 0);
    EXPECT_EQ(c.timeout.count(), 1500);
    EXPECT_EQ(c.db, "x.sqlite");
    EXPECT_EQ(c.model, "m");
    EXPECT_TRUE(c.stream);
    EXPECT_EQ(c.probe, "think-open");
    EXPECT_EQ(c.max_response_bytes, 65536);
    ASSERT_EQ(c.servers.size(), 1u);
    EXPECT_EQ(c.servers[0].url, "http://127.0.0.1:9");
    EXPECT_EQ(c.servers[0].headers, std::vector<std::string>{"X-Team: t"});
    EXPECT_EQ(c.servers[0].launch, std::vector<std::string>{"llama-server --port 9"});
    EXPECT_EQ(c.servers[0].extra_body.dump(), R"({"top_k":1})");
    std::filesystem::remove(path);
}

TEST(ExperimentFile, UnknownKeysAndVersionsAreRefusedWithTheKnownKeys) {
    auto path = write_temp("unknown.toml", "version = 1\nrepeat = 3\n");
    engine::RunConfig c;
    auto r = engine::load_experiment(path, c);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find(":2: unknown key 'repeat'"), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find("repeats"), std::string::npos) << r.error().message;
    auto v2 = write_temp("v2.toml", "version = 2\n");
    auto bad = engine::load_experiment(v2, c);
    ASSERT_FALSE(bad);
    // Not "must be between 1 and 1".
    EXPECT_EQ(bad.error().message, v2 + ":1: 'version' 2: must be 1");
    std::filesystem::remove(path);
    std::filesystem::remove(v2);
}

// A value of the wrong kind names the kind wanted and the kind given: it said
// "'repeats' has the wrong type".
TEST(ExperimentFile, AValueOfTheWrongKindSaysWhichKindIsWanted) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"repeats = \"3\"", ":2: 'repeats' must be a whole number, not a string"},
        {"repeats = 2.5", ":2: 'repeats' must be a whole number, not a floating-point number"},
        // An audit's 1e20 was called "a number with a fraction".
        {"repeats = 1e20", ":2: 'repeats' must be a whole number, not a floating-point number"},
        {"[[servers]]\nname = 5\nurl = \"http://h:1\"",
         ":3: 'name' must be a string, not an integer"},
        {"[[servers]]\nname = [\"a\"]\nurl = \"http://h:1\"",
         ":3: 'name' must be a string, not a list"},
    };
    for (const auto& [text, message] : cases) {
        auto path = write_temp("kind.toml", "version = 1\n" + text + "\n");
        engine::RunConfig c;
        auto r = engine::load_experiment(path, c);
        ASSERT_FALSE(r) << text;
        EXPECT_EQ(r.error().message, path + message);
        std::filesystem::remove(path);
    }
}

// An empty launch command was read as "not launched", and the run went on to
// ask a server nobody started.
TEST(ExperimentFile, AnEmptyLaunchCommandIsRefused) {
    for (const char* launch : {"[]", "\"\"", "[\"\", \"x\"]"}) {
        auto path =
            write_temp("launch.toml", std::string("version = 1\n[[servers]]\nname = \"a\"\nurl = "
                                                  "\"http://h:1\"\nlaunch = ") +
                                          launch + "\n");
        engine::RunConfig c;
        auto r = engine::load_experiment(path, c);
        ASSERT_FALSE(r) << launch;
        EXPECT_EQ(r.error().message,
                  path + ":5: 'launch' is empty; give the command that starts the server, e.g. "
                         "[\"vllm\", \"serve\", \"MODEL\"], or leave the key out for a server "
                         "already running");
        std::filesystem::remove(path);
    }
}

// body's fields go after the framing's and replace them: a body with a
// prompt asked another question, stored and scored as the group's own.
TEST(ExperimentFile, ABodyFieldTheFramingWritesIsRefused) {
    for (const char* key :
         {"prompt", "messages", "max_tokens", "max_completion_tokens", "model", "stream"}) {
        auto path = write_temp("body.toml", fmt::format("version = 1\n[[servers]]\nname = \"a\"\n"
                                                        "url = \"http://h:1\"\nbody = {{ {} = 5, "
                                                        "top_k = 1 }}\n",
                                                        key));
        engine::RunConfig c;
        auto r = engine::load_experiment(path, c);
        ASSERT_FALSE(r) << key;
        EXPECT_EQ(r.error().message,
                  fmt::format("{}:5: body sets '{}', which the framing and the run write (the "
                              "question, --max-tokens, the model, --stream); leave it out of body",
                              path, key));
        std::filesystem::remove(path);
    }
    // And those that change what a response's text is (an audit's `echo`).
    for (const char* key : {"echo", "n", "best_of"}) {
        auto path =
            write_temp("body.toml", fmt::format("version = 1\n[[servers]]\nname = \"a\"\n"
                                                "url = \"http://h:1\"\nbody = {{ {} = 2 }}\n",
                                                key));
        engine::RunConfig c;
        auto r = engine::load_experiment(path, c);
        ASSERT_FALSE(r) << key;
        EXPECT_EQ(r.error().message,
                  fmt::format("{}:5: body sets '{}', which changes what a response's text is "
                              "(echo: the prompt before the answer; n, best_of: more than one "
                              "answer); leave it out of body",
                              path, key));
        std::filesystem::remove(path);
    }
}

// Headers are sent as written: a line break in a value injected headers
// (even a second request), a name with a space or a Content-Length made
// the server answer with a misleading error. Each is refused at load.
TEST(ExperimentFile, AHeaderThatWouldBreakTheRequestIsRefused) {
    const std::string says_name = "is no header name (letters, digits and !#$%&'*+-.^_`|~ only, "
                                  "no spaces); rename it";
    const std::string says_framing = "is set by diffeval for each request (it frames the "
                                     "request or names the server); remove it from headers";
    const std::string says_value = "has a line break or control character in its value, which "
                                   "would begin another header; remove it";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"("X Team" = "a")", "header 'X Team' " + says_name},
        {R"("X:Team" = "a")", "header 'X:Team' " + says_name},
        {R"("" = "a")", "header '' " + says_name},
        {R"("Content-Length" = "5")", "header 'Content-Length' " + says_framing},
        {R"("transfer-encoding" = "chunked")", "header 'transfer-encoding' " + says_framing},
        {R"(Host = "elsewhere")", "header 'Host' " + says_framing},
        {R"(CONNECTION = "close")", "header 'CONNECTION' " + says_framing},
        {R"("X-Team" = "a\r\nX-Admin: 1")", "header 'X-Team' " + says_value},
        {R"("X-Team" = "a\nb")", "header 'X-Team' " + says_value},
        {R"("X-Team" = "a\u0000b")", "header 'X-Team' " + says_value},
        {R"("X-Team" = "a\u001bb")", "header 'X-Team' " + says_value},
    };
    for (const auto& [entry, says] : cases) {
        auto path = write_temp("headers.toml", "version = 1\n[[servers]]\nname = \"a\"\nurl = "
                                               "\"http://h:1\"\nheaders = { " +
                                                   entry + " }\n");
        engine::RunConfig c;
        auto r = engine::load_experiment(path, c);
        std::filesystem::remove(path);
        ASSERT_FALSE(r) << entry;
        EXPECT_EQ(r.error().kind, util::ErrorKind::usage);
        EXPECT_EQ(r.error().message, path + ":5: " + says);
    }
    // A tab is a value's own, and any token a name.
    auto path = write_temp("headers-ok.toml", "version = 1\n[[servers]]\nname = \"a\"\nurl = "
                                              "\"http://h:1\"\nheaders = { \"X-A_b.c~1!\" = "
                                              "\"x\\ty\" }\n");
    engine::RunConfig c;
    auto r = engine::load_experiment(path, c);
    std::filesystem::remove(path);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(c.servers.size(), 1U);
    EXPECT_EQ(c.servers[0].headers, std::vector<std::string>{"X-A_b.c~1!: x\ty"});
}

// An empty value in a file is refused as the same flag given empty is:
// `db = ""` stored a run into SQLite's temporary database and lost it.
TEST(ExperimentFile, AnEmptyValueIsRefusedAsAnEmptyFlagIs) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"db = \"\"", "db"},
        {"api_key_env = \"\"", "api_key_env"},
        {"fewshot_from = \" \"", "fewshot_from"},
        {"[[servers]]\napi_key_env = \"\"", "api_key_env"},
    };
    for (const auto& [entry, key] : cases) {
        auto path = write_temp("empty.toml", "version = 1\n" + entry + "\n");
        engine::RunConfig c;
        auto r = engine::load_experiment(path, c);
        std::filesystem::remove(path);
        ASSERT_FALSE(r) << entry;
        EXPECT_EQ(r.error().kind, util::ErrorKind::usage);
        const auto line = entry.find('\n') == std::string::npos ? ":2: '" : ":3: '";
        EXPECT_EQ(r.error().message,
                  path + line + key + "' is empty; give a value, or leave the key out");
    }
}

// A launched server appends its log to `log`: over the database (or its
// WAL) it would write into the stored results.
TEST(ExperimentFile, ALaunchedServersLogThatIsTheDatabaseIsRefused) {
    engine::RunConfig c;
    c.db = "r.sqlite";
    engine::ServerSpec s;
    s.name = "a";
    s.url = "http://127.0.0.1:8000";
    s.launch = {"llama-server"};
    for (const char* log : {"r.sqlite", "./r.sqlite-wal"}) {
        s.log_path = log;
        c.servers = {s};
        auto r = engine::validate(c);
        ASSERT_FALSE(r) << log;
        EXPECT_EQ(r.error().message, std::string("server 'a': its log ") + log +
                                         " is the database r.sqlite or one of its files; give "
                                         "'log' another path");
    }
    s.log_path = "a.log";
    c.servers = {s};
    EXPECT_TRUE(engine::validate(c)) << "another file is a log";
    // A directory was found only when the server started: exit 1, a run
    // marked failed. It is a setting like the others.
    s.log_path = std::filesystem::temp_directory_path().string();
    c.servers = {s};
    auto dir = engine::validate(c);
    ASSERT_FALSE(dir);
    EXPECT_EQ(dir.error().message, "server 'a': its log " + s.log_path +
                                       " is a directory; give 'log' the path of a file");
}

// A shard number past int's range left the parsed value as it was: an
// audit's `--shard 0/3000000000` ran the whole plan as shard 0/1, and
// `--shard 3000000000/4` ran shard 0/4, each exit 0 with another shard's
// questions. Each is one usage error saying the limit.
TEST(ShardFlag, ANumberPastTheLimitIsRefusedNotReadAsAnotherShard) {
    for (const char* value : {"0/3000000000", "3000000000/4", "0/99999999999999999999"}) {
        auto r = engine::parse_shard(value);
        ASSERT_FALSE(r) << value;
        EXPECT_EQ(r.error().kind, util::ErrorKind::usage);
        EXPECT_EQ(r.error().message,
                  fmt::format("--shard '{}': I and N are at most 2147483647; expected I/N with 0 "
                              "<= I < N, such as 0/4",
                              value));
    }
    auto last = engine::parse_shard("2147483646/2147483647");
    ASSERT_TRUE(last);
    EXPECT_EQ(last->index, 2147483646);
    EXPECT_EQ(last->count, 2147483647);
    auto plain = engine::parse_shard("0/x");
    ASSERT_FALSE(plain);
    EXPECT_EQ(plain.error().message, "--shard '0/x': expected I/N with 0 <= I < N, such as 0/4");
}

// A health path without its '/' was found only when the ready timeout ran
// out (ten minutes by default), and an empty list skipped the wait, so
// preflight met a server still loading and said to start it: both are
// refused with the file's line.
TEST(ExperimentFile, AHealthPathMustStartWithASlashAndTheListHoldOne) {
    const std::string server = "version = 1\n[[servers]]\nname = \"s\"\nurl = "
                               "\"http://127.0.0.1:8000\"\nlaunch = [\"vllm\", \"serve\", \"m\"]\n";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"health = [\"nope\"]", ":6: 'health' path 'nope' must start with '/'"},
        {"health = []", ":6: 'health' is empty; give the paths that answer once the server is "
                        "ready"}};
    for (const auto& [line, says] : cases) {
        auto path = write_temp("health.toml", server + line + "\n");
        engine::RunConfig config;
        auto r = engine::load_experiment(path, config);
        ASSERT_FALSE(r) << line;
        EXPECT_EQ(r.error().kind, util::ErrorKind::usage) << line;
        EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
        std::filesystem::remove(path);
    }
    auto path = write_temp("health.toml", server + "health = [\"/ready\"]\n");
    engine::RunConfig config;
    ASSERT_TRUE(engine::load_experiment(path, config));
    EXPECT_EQ(config.servers.at(0).health, std::vector<std::string>{"/ready"});
    std::filesystem::remove(path);
}

// The file's concurrency may be "auto": another word is refused saying so,
// not that no string is allowed.
TEST(ExperimentFile, AConcurrencyWordOtherThanAutoNamesBothForms) {
    auto path = write_temp("concurrency.toml", "version = 1\nconcurrency = \"lots\"\n");
    engine::RunConfig config;
    auto r = engine::load_experiment(path, config);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find(":2: 'concurrency' \"lots\" is not a number from 1 to "
                                     "10000 or \"auto\""),
              std::string::npos)
        << r.error().message;
    std::filesystem::remove(path);
    // A number in quotes is told to drop them.
    path = write_temp("concurrency.toml", "version = 1\nconcurrency = \"8\"\n");
    r = engine::load_experiment(path, config);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find(":2: 'concurrency' \"8\" is a string: write the number "
                                     "without quotes, or \"auto\""),
              std::string::npos)
        << r.error().message;
    std::filesystem::remove(path);
}
