// `diffeval run` against a simulator that injects every fault it knows: with
// retries each request ends with a good answer and every injected fault shows
// up as exactly one extra attempt; without retries each faulted request is
// stored as an error of the right kind, and rerunning the same command sends
// only those and completes the set with nothing lost or doubled. The
// simulator's /stats endpoint is the independent count the client's records
// are checked against.
#include "e2e.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <fstream>
#include <thread>

using e2e::query;

namespace {

// The sample set's size; every test sends each of its questions once.
constexpr int k_questions = 48;

std::string profile_file(const std::filesystem::path& dir, const std::string& name,
                         const std::string& body) {
    auto p = dir / (name + ".toml");
    std::ofstream(p) << "version = 1\nname = \"" << name << "\"\n" << body;
    return p.string();
}

nlohmann::json stats_of(e2e::Sim& sim) {
    auto j = nlohmann::json::parse(sim.stats(), nullptr, false);
    if (j.is_discarded()) {
        ADD_FAILURE() << "GET /stats did not answer JSON";
        return nlohmann::json::object();
    }
    return j;
}

int count_of(const std::filesystem::path& db, const std::string& sql) {
    return std::stoi("0" + query(db, sql));
}

// Sum of every fault kind the simulator injected (markup excluded: it
// spoils a response that is still delivered, so it costs no attempt).
int failing_faults(const nlohmann::json& stats) {
    int n = 0;
    for (const auto& [kind, value] : stats["faults"].items()) {
        if (kind != "markup") {
            n += value.get<int>();
        }
    }
    return n;
}

// How responses are asked for: one body, or `--stream`.
enum class Delivery { whole, stream };

// One fault kind and what a client must store when it is not retried.
struct FaultCase {
    std::string kind;          // the [faults] key and its /stats name
    std::string extra_profile; // more [faults] keys this kind needs
    Delivery delivery = Delivery::whole;
    std::string timeout;      // --timeout, empty for the default
    std::string error_kind;   // stored error_kind without retries
    std::string status;       // stored HTTP status without retries
    std::string error_prefix; // stored error starts with this
};

std::string case_name(const FaultCase& c) {
    return c.kind + (c.delivery == Delivery::stream ? "_stream" : "");
}

std::ostream& operator<<(std::ostream& os, const FaultCase& c) {
    return os << c.kind << (c.delivery == Delivery::stream ? " (stream)" : "");
}

std::vector<std::string> run_args(const std::string& url, const std::filesystem::path& db,
                                  const FaultCase& c, int retries, int limit = k_questions) {
    std::vector<std::string> a = {"run", "--server", "a=" + url, "--db", db.string(), "--quiet"};
    a.insert(a.end(), {"--framing", "raw", "--dataset", "sample", "--max-tokens", "64"});
    a.insert(a.end(), {"--limit", std::to_string(limit), "--retries", std::to_string(retries)});
    a.insert(a.end(), {"--retry-backoff-ms", "1"});
    if (c.delivery == Delivery::stream) {
        a.push_back("--stream");
    }
    if (!c.timeout.empty()) {
        a.insert(a.end(), {"--timeout", c.timeout});
    }
    return a;
}

std::string profile_for(const std::filesystem::path& dir, const FaultCase& c) {
    return profile_file(dir, "faulty", "[faults]\n" + c.kind + " = 0.4\n" + c.extra_profile);
}

// Every arrival at the server is an attempt the client recorded. Except
// that libcurl itself resends a request once, unrecorded, when a reused
// keep-alive connection dies before any byte of the answer.
void expect_attempts_match(const std::filesystem::path& db, const FaultCase& c,
                           const nlohmann::json& stats) {
    const int attempts = count_of(db, "SELECT sum(attempts) FROM responses");
    const int arrivals = stats["requests"]["completions"].get<int>();
    if (c.kind == "reset_before_body") {
        EXPECT_LE(attempts, arrivals);
        EXPECT_GE(attempts, k_questions);
    } else {
        EXPECT_EQ(attempts, arrivals);
    }
}

class FaultKind : public ::testing::TestWithParam<FaultCase> {};

TEST_P(FaultKind, RetriesRecoverEveryRequestAndAccountForEachFault) {
    const FaultCase& c = GetParam();
    auto dir = e2e::scratch("faults-retry-" + c.kind);
    e2e::Sim sim({"--profile", profile_for(dir, c)});
    auto db = dir / "r.sqlite";
    auto o = e2e::run(run_args(sim.url(), db, c, 8));
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    auto stats = stats_of(sim);
    const int injected = stats["faults"][c.kind].get<int>();
    ASSERT_GT(injected, 0) << stats.dump();
    EXPECT_EQ(failing_faults(stats), injected) << "only " << c.kind << " is configured";

    // One answer per question, all good, none stored twice.
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM requests"), k_questions);
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM responses"), k_questions);
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM v_responses WHERE ok = 1 AND status = 200 AND "
                           "error IS NULL AND length(text) > 0"),
              k_questions);
    EXPECT_GT(count_of(db, "SELECT count(*) FROM v_responses WHERE attempts > 1"), 0);
    // Each retried row says why its earlier attempts failed (an engine
    // audit's row had attempts 2 and nothing to say why).
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM responses WHERE attempts > 1 AND notes LIKE "
                           "'%retried after attempt 1: " +
                               c.error_kind + ": " + c.error_prefix + "%'"),
              count_of(db, "SELECT count(*) FROM v_responses WHERE attempts > 1"));
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM responses WHERE attempts = 1 AND notes LIKE "
                           "'%retried after%'"),
              0);
    // Each injected fault cost exactly one more arrival, and the client
    // counted it as an attempt.
    EXPECT_EQ(stats["requests"]["completions"].get<int>(), k_questions + injected);
    expect_attempts_match(db, c, stats);
    if (c.kind != "reset_before_body") {
        EXPECT_NE(o.out.find(std::to_string(injected) + " retries"), std::string::npos) << o.out;
    }
    EXPECT_EQ(query(db, "SELECT status FROM runs"), "complete");
}

TEST_P(FaultKind, WithoutRetriesFaultsAreStoredAsErrorsAndARerunCompletesThem) {
    const FaultCase& c = GetParam();
    auto dir = e2e::scratch("faults-resume-" + c.kind);
    e2e::Sim sim({"--profile", profile_for(dir, c)});
    auto db = dir / "r.sqlite";

    // 1. No retries: each faulted request is one stored error of its kind.
    auto first = e2e::run(run_args(sim.url(), db, c, 0));
    EXPECT_EQ(first.exit_code, 1) << first.err << first.out;
    const auto first_stats = stats_of(sim);
    const int injected = first_stats["faults"][c.kind].get<int>();
    ASSERT_GT(injected, 0);
    ASSERT_LT(injected, k_questions);
    // A reset before any byte of the answer on a kept-alive connection is
    // the idle-close race: that request is sent again once, not counted as
    // an attempt (TCP drops unread bytes on a reset, so whether the head
    // was read first is a race). Each such resend is one arrival beyond the
    // plan's; every other fault is one stored error.
    const int resent = first_stats["requests"]["completions"].get<int>() - k_questions;
    if (c.kind == "reset_before_body") {
        EXPECT_GE(resent, 0);
    } else {
        EXPECT_EQ(resent, 0);
    }
    const int failed = injected - resent;
    ASSERT_GT(failed, 0);
    EXPECT_NE(first.out.find(failed == 1 ? std::string("1 request has no successful response")
                                         : std::to_string(failed) +
                                               " requests have no successful response"),
              std::string::npos)
        << first.out;
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM v_responses WHERE ok = 0 AND error_kind = '" +
                               c.error_kind + "' AND status = " + c.status +
                               " AND attempts = 1 AND error LIKE '" + c.error_prefix + "%'"),
              failed)
        << e2e::query(db, "SELECT error_kind || ' ' || status || ' ' || error FROM v_responses "
                          "WHERE ok = 0");
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), k_questions - failed);
    if (c.kind == "malformed_json" && c.delivery == Delivery::whole) {
        // The cut body is kept as it arrived, so the failure can be inspected.
        EXPECT_EQ(count_of(db, "SELECT count(*) FROM v_responses WHERE ok = 0 AND "
                               "length(response_json) > 0 AND NOT json_valid(response_json) AND "
                               "response_json LIKE '{\"id\":\"cmpl-%'"),
                  failed);
    }
    EXPECT_EQ(query(db, "SELECT status FROM runs"), "incomplete");

    // 2. The same command with retries sends only what has no good answer.
    auto again_args = run_args(sim.url(), db, c, 8);
    auto again = e2e::run(again_args);
    ASSERT_EQ(again.exit_code, 0) << again.err << again.out;
    EXPECT_NE(again.err.find(std::to_string(k_questions - failed) + " already stored (skipped), " +
                             std::to_string(failed) + " sent"),
              std::string::npos)
        << again.err;
    EXPECT_EQ(query(db, "PRAGMA integrity_check"), "ok");
    EXPECT_EQ(query(db, "SELECT count(*) FROM pragma_foreign_key_check"), "0");
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM requests"), k_questions);
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM responses WHERE ok = 1"), k_questions);
    EXPECT_EQ(count_of(db, "SELECT count(DISTINCT request_id) FROM responses WHERE ok = 1"),
              k_questions);
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), k_questions);
    // The failed rows stay as history; the request points at its success.
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM responses WHERE ok = 0"), failed);

    // 3. Every attempt of both runs reached the server, and every fault it
    //    injected is either a stored failure or a retry.
    auto stats = stats_of(sim);
    EXPECT_EQ(stats["requests"]["completions"].get<int>(),
              k_questions + stats["faults"][c.kind].get<int>());
    expect_attempts_match(db, c, stats);
}

INSTANTIATE_TEST_SUITE_P(
    FaultsHttp, FaultKind,
    ::testing::Values(FaultCase{"http_500", "", Delivery::whole, "", "http", "500", "HTTP 500: "},
                      FaultCase{"http_503", "", Delivery::whole, "", "http", "503", "HTTP 503: "},
                      FaultCase{"http_429", "retry_after_s = 0\n", Delivery::whole, "", "http",
                                "429", "HTTP 429: "}),
    [](const auto& test_info) { return case_name(test_info.param); });

INSTANTIATE_TEST_SUITE_P(FaultsTransport, FaultKind,
                         ::testing::Values(FaultCase{"reset_before_body", "", Delivery::whole, "",
                                                     "transport", "0", ""},
                                           FaultCase{"reset_during_body", "", Delivery::whole, "",
                                                     "transport", "200", "transfer closed with "},
                                           FaultCase{"reset_during_body", "", Delivery::stream, "",
                                                     "transport", "200", "transfer closed with "},
                                           FaultCase{"stall", "stall_ms = 600000\n",
                                                     Delivery::whole, "0.3", "timeout", "0", ""}),
                         [](const auto& test_info) { return case_name(test_info.param); });

INSTANTIATE_TEST_SUITE_P(
    FaultsBody, FaultKind,
    ::testing::Values(FaultCase{"malformed_json", "", Delivery::whole, "", "parse", "200",
                                "the response body is not valid JSON"},
                      FaultCase{"malformed_json", "", Delivery::stream, "", "stream", "200",
                                "a stream event is not valid JSON"},
                      FaultCase{"stream_error", "", Delivery::stream, "", "stream", "200",
                                "the server sent an error mid-stream"}),
    [](const auto& test_info) { return case_name(test_info.param); });

TEST(FaultsMarkup, HostileMarkupIsStoredVerbatimAsText) {
    auto dir = e2e::scratch("faults-markup");
    FaultCase c{"markup", "", Delivery::whole, "", "", "", ""};
    e2e::Sim sim({"--profile", profile_for(dir, c)});
    auto db = dir / "r.sqlite";
    auto o = e2e::run(run_args(sim.url(), db, c, 0));
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    auto stats = stats_of(sim);
    const int injected = stats["faults"]["markup"].get<int>();
    ASSERT_GT(injected, 0);
    EXPECT_EQ(failing_faults(stats), 0);
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM v_responses WHERE ok = 1 AND attempts = 1"),
              k_questions);
    // Exactly the spoiled answers carry one of the four strings, byte for byte.
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM v_responses WHERE "
                           "instr(text, '<script>alert(1)</script>') > 0 OR "
                           "instr(text, '</td>') > 0 OR "
                           "instr(text, '\"><img src=x onerror=alert(1)>') > 0 OR "
                           "instr(text, '[details](javascript:alert(1))') > 0"),
              injected);
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM v_responses WHERE instr(text, '&lt;') > 0 OR "
                           "instr(text, '&quot;') > 0"),
              0)
        << "the client must store the text, not an escaped copy";
}

// Several kinds at once, many requests in flight: every fault is one retry.
void expect_mixed_faults_all_retried(const std::string& name, const std::string& faults,
                                     Delivery delivery) {
    auto dir = e2e::scratch("faults-" + name);
    e2e::Sim sim({"--profile", profile_file(dir, name, "[faults]\n" + faults)});
    auto db = dir / "r.sqlite";
    FaultCase c{name, "", delivery, "0.5", "", "", ""};
    auto args = run_args(sim.url(), db, c, 12);
    args.insert(args.end(), {"--concurrency", "8"});
    auto o = e2e::run(args);
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    auto stats = stats_of(sim);
    const int injected = failing_faults(stats);
    EXPECT_GT(injected, 0);
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM responses"), k_questions);
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), k_questions);
    EXPECT_EQ(stats["requests"]["completions"].get<int>(), k_questions + injected) << stats.dump();
    // Only libcurl's own resend after a reset on a reused connection goes
    // unrecorded (see expect_attempts_match).
    const int attempts = count_of(db, "SELECT sum(attempts) FROM responses");
    EXPECT_LE(attempts - k_questions, injected);
    EXPECT_GE(attempts - k_questions, injected - stats["faults"]["reset_before_body"].get<int>());
    for (const auto& [kind, value] : stats["faults"].items()) {
        if (faults.find(kind + " =") != std::string::npos) {
            EXPECT_GT(value.get<int>(), 0) << kind << " was configured but never injected";
        }
    }
}

TEST(FaultsMixed, EveryKindAtOnceIsRetriedToCompletion) {
    expect_mixed_faults_all_retried("mixed",
                                    "http_500 = 0.1\nhttp_503 = 0.1\nhttp_429 = 0.1\n"
                                    "retry_after_s = 0\nreset_before_body = 0.1\n"
                                    "reset_during_body = 0.1\nstall = 0.1\n"
                                    "stall_ms = 600000\nmarkup = 0.1\n",
                                    Delivery::whole);
}

// Adds the kinds that spoil a 200 answer: malformed JSON and an error event.
TEST(FaultsMixed, EveryKindAtOnceIsRetriedToCompletionWhenStreaming) {
    expect_mixed_faults_all_retried("mixed_stream",
                                    "http_500 = 0.1\nhttp_503 = 0.1\nhttp_429 = 0.1\n"
                                    "retry_after_s = 0\nreset_before_body = 0.1\n"
                                    "reset_during_body = 0.1\nstall = 0.05\n"
                                    "stall_ms = 600000\nmalformed_json = 0.05\n"
                                    "stream_error = 0.05\nmarkup = 0.1\n",
                                    Delivery::stream);
}

TEST(FaultsStall, SimulatorStopsAtOnceWithRequestsStalled) {
    auto dir = e2e::scratch("faults-stall-stop");
    auto profile = profile_file(dir, "stuck", "[faults]\nstall = 1.0\nstall_ms = 600000\n");
    e2e::Child sim({"sim", "--port", "0", "--host", "127.0.0.1", "--profile", profile});
    std::string url;
    for (int i = 0; i < 500 && url.empty(); ++i) {
        auto out = sim.out();
        auto pos = out.find("http://");
        if (pos != std::string::npos && out.find('\n', pos) != std::string::npos) {
            url = out.substr(pos, out.find_first_of(" \n", pos) - pos);
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    ASSERT_FALSE(url.empty()) << sim.err();
    auto db = dir / "r.sqlite";
    FaultCase c{"stall", "", Delivery::whole, "0.3", "", "", ""};
    auto o = e2e::run(run_args(url, db, c, 0, 4));
    EXPECT_EQ(o.exit_code, 1) << o.err << o.out;
    EXPECT_EQ(count_of(db,
                       "SELECT count(*) FROM v_responses WHERE ok = 0 AND error_kind = 'timeout' "
                       "AND status = 0"),
              4);
    // Four handlers are still inside their stall: SIGTERM must end them.
    EXPECT_EQ(sim.stop(SIGTERM), 0) << sim.err();
}

TEST(FaultsRetryAfter, Http429WithRetryAfterIsRetriedAfterTheWait) {
    auto dir = e2e::scratch("faults-retry-after");
    // At this share, of the first 40 questions only question 35 draws a 429
    // (the draw is seeded by content), and only on its first arrival.
    FaultCase c{"http_429", "retry_after_s = 1\n", Delivery::whole, "", "", "", ""};
    e2e::Sim sim({"--profile",
                  profile_file(dir, "limited", "[faults]\nhttp_429 = 0.03\nretry_after_s = 1\n")});
    auto db = dir / "r.sqlite";
    auto o = e2e::run(run_args(sim.url(), db, c, 3, 40));
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    auto stats = stats_of(sim);
    ASSERT_EQ(stats["faults"]["http_429"].get<int>(), 1) << stats.dump();
    EXPECT_EQ(stats["responses"]["429"].get<int>(), 1);
    EXPECT_EQ(query(db, "SELECT group_concat(question_idx) FROM v_responses WHERE attempts > 1"),
              "35");
    EXPECT_EQ(count_of(db, "SELECT attempts FROM v_responses WHERE question_idx = 35 AND ok = 1"),
              2);
    EXPECT_EQ(count_of(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), 40);
}

} // namespace
