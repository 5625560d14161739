// The decision-point probe end to end against the real simulator: probe
// requests are stored apart from the measured ones (which stay as they were),
// with their readings, and a second run sends nothing again.
#include "e2e.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <regex>
#include <thread>

using e2e::query;
using e2e::query_rows;

TEST(Probe, StoresItsRequestsApartAndResumes) {
    auto dir = e2e::scratch("probe_store");
    e2e::Sim a({"--profile", "default"});
    auto db = dir / "p.sqlite";
    auto plain = dir / "plain.sqlite";
    std::vector<std::string> args = {
        "run",       "--server", "a=" + a.url(), "--framing", "raw,chat", "--limit",   "5",
        "--dataset", "sample",   "--db",         db.string(), "--probe",  "think-open"};
    auto o = e2e::run(args);
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    // Measured: 2 framings x 5 questions. Probes: 2 repeats x 5 questions x
    // (raw: 2 steps, chat: 1).
    EXPECT_EQ(query(db, "SELECT count(*) FROM requests"), "10");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses"), "10");
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests"), "30");
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_responses WHERE ok = 1"), "30");
    // The closing line counts each table's rows apart: a reviewer counting
    // `responses` finds the number it gives.
    EXPECT_NE(o.out.find("stored 10 responses and 30 probe responses in "), std::string::npos)
        << o.out;
    // The measured bodies are those of a run without the probe.
    auto p = e2e::run({"run", "--server", "a=" + a.url(), "--framing", "raw,chat", "--limit", "5",
                       "--dataset", "sample", "--db", plain.string()});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    EXPECT_EQ(query_rows(db, "SELECT request_json FROM v_requests ORDER BY request_key"),
              query_rows(plain, "SELECT request_json FROM v_requests ORDER BY request_key"));
    // Probe bodies: max_tokens 1 and the engine's logprobs options; the chain
    // step's prompt ends in the whitespace.
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probe_requests WHERE framing = 'raw' AND "
                        "request_json LIKE '%\"max_tokens\": 1,%' AND "
                        "request_json LIKE '%\"logprobs\": 20}'"),
              "20");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probe_requests WHERE framing = 'chat' AND "
                        "request_json LIKE '%\"logprobs\": true, \"top_logprobs\": 20}'"),
              "10");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probe_requests WHERE step = 1 AND "
                        "request_json LIKE '%Answer: \", \"max_tokens\"%'"),
              "10");
    // Readings: raw probes measure P(open) through the chain; chat ones are
    // bounded (the closed think block leaves no <think> to write).
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probes WHERE framing = 'raw' AND bounded = 0 "
                        "AND p_open > 0 AND p_after_whitespace > 0.99"),
              "10");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probes WHERE framing = 'chat' AND bounded = 1"),
              "10");
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_responses WHERE top_json LIKE '[[%'"), "30");

    // Resume: a killed probe answer is sent again, nothing else is.
    e2e::exec(db, "UPDATE probe_requests SET response_id = NULL WHERE probe_request_id IN "
                  "(SELECT probe_request_id FROM probe_requests LIMIT 3)");
    auto again = e2e::run(args);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.err.find("40 requests planned, 37 already stored (skipped), 3 sent"),
              std::string::npos)
        << again.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests WHERE response_id IS NULL"), "0");
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "10");
    EXPECT_NE(again.out.find("stored 0 responses and 3 probe responses in "), std::string::npos)
        << again.out;
}

TEST(Probe, UnknownProbeIsAUsageError) {
    auto dir = e2e::scratch("probe_bad");
    auto o = e2e::run({"run", "--server", "a=http://127.0.0.1:9", "--probe", "think-close", "--db",
                       (dir / "x.sqlite").string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("unknown probe 'think-close'; known: think-open"), std::string::npos)
        << o.err;
}

namespace {

// Two simulated servers answering the raw framing, with the probe.
void probe_run(const std::filesystem::path& db, const std::string& a_profile,
               const std::string& b_profile, const std::string& limit) {
    e2e::Sim a({"--profile", a_profile});
    e2e::Sim b({"--profile", b_profile});
    auto o = e2e::run({"run",        "--server",      "a=" + a.url(),
                       "--server",   "b=" + b.url(),  "--framing",
                       "raw",        "--max-tokens",  "64",
                       "--limit",    limit,           "--dataset",
                       "sample",     "--concurrency", "1",
                       "--db",       db.string(),     "--probe",
                       "think-open", "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
}

} // namespace

TEST(Probe, DiffAndReportShowTheShiftTheAccuracyCannotYetSee) {
    auto dir = e2e::scratch("probe_diff");
    auto db = dir / "p.sqlite";
    probe_run(db, "default", "deepgemm", "24");
    auto d = e2e::run({"diff", "--db", db.string(), "a/raw", "b/raw"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_NE(d.out.find("probe think-open on raw: b vs a: P(open) logit shift +0.4"),
              std::string::npos)
        << d.out;
    EXPECT_NE(d.out.find("numerics differ after 7 questions"), std::string::npos) << d.out;
    auto j = e2e::run({"diff", "--db", db.string(), "a/raw", "b/raw", "--format", "json"});
    auto diff = nlohmann::json::parse(j.out);
    ASSERT_EQ(diff["probes"].size(), 1u);
    EXPECT_LT(diff["probes"][0]["direction"]["p_value"].get<double>(), 0.01);
    EXPECT_EQ(diff["probes"][0]["points"].size(), 24u);
    // As Markdown the interval's brackets are text, as the comparisons' are.
    auto m = e2e::run({"diff", "--db", db.string(), "a/raw", "b/raw", "--format", "md"});
    ASSERT_EQ(m.exit_code, 0) << m.err;
    EXPECT_NE(m.out.find("probe think-open on raw: b vs a: P(open) logit shift +0.4"),
              std::string::npos)
        << m.out;
    const auto shift = m.out.find("logit shift");
    ASSERT_NE(shift, std::string::npos) << m.out;
    const auto bracket = m.out.find('[', shift);
    ASSERT_NE(bracket, std::string::npos) << m.out.substr(shift, 60);
    EXPECT_EQ(m.out[bracket - 1], '\\') << m.out.substr(shift, 60);

    auto r = e2e::run({"report", "--db", db.string(), "--out", (dir / "rep").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto md = e2e::slurp(dir / "rep" / "report.md");
    EXPECT_NE(md.find("## Decision-point probe"), std::string::npos);
    EXPECT_NE(md.find("- probe think-open on raw: b vs a"), std::string::npos);
    auto html = e2e::slurp(dir / "rep" / "report.html");
    EXPECT_NE(html.find("<h2 id=\"probe\">Decision-point probe</h2>"), std::string::npos);
    auto scatter = html.find("<svg class=\"probe-scatter\"");
    ASSERT_NE(scatter, std::string::npos);
    int circles = 0;
    for (auto at = html.find("<circle", scatter);
         at != std::string::npos && at < html.find("</svg>", scatter);
         at = html.find("<circle", at + 1)) {
        ++circles;
    }
    EXPECT_EQ(circles, 24); // one point per question
    auto summary = nlohmann::json::parse(e2e::slurp(dir / "rep" / "summary.json"));
    ASSERT_EQ(summary["probes"]["comparisons"].size(), 1u);
    EXPECT_EQ(summary["probes"]["comparisons"][0]["perturbation"]["numerics_differ"], true);
    // Its diff is the document diff --format json writes, probe keys and all.
    EXPECT_EQ(summary["diff"]["probes"], summary["probes"]["comparisons"]);
    EXPECT_EQ(summary["diff"]["probes_skipped"], summary["probes"]["skipped"]);
}

TEST(Probe, GateFailsOnAShiftAndOnChangedNumerics) {
    auto dir = e2e::scratch("probe_gate");
    auto db = dir / "p.sqlite";
    probe_run(db, "default", "deepgemm", "12");
    auto base = std::vector<std::string>{"gate", "--db",        db.string(), "--baseline",
                                         "a",    "--candidate", "b"};
    auto with = [&](std::vector<std::string> extra) {
        auto args = base;
        args.insert(args.end(), extra.begin(), extra.end());
        return e2e::run(args);
    };
    auto shift = with({"--max-probe-shift", "0.2"});
    EXPECT_EQ(shift.exit_code, 1) << shift.out << shift.err;
    EXPECT_NE(shift.out.find("b opens the think block more often than a"), std::string::npos)
        << shift.out;
    auto loose = with({"--max-probe-shift", "2"});
    EXPECT_EQ(loose.exit_code, 0) << loose.out << loose.err;

    // A limit just inside the interval's lower end and one just outside it
    // print as given and decide apart, and the printed bound is on the side
    // of the limit it was compared on: at three decimals an audit's PASS and
    // FAIL printed the same limit and the same bound.
    const auto json_path = (dir / "g.json").string();
    with({"--max-probe-shift", "0.2", "--json", json_path});
    const auto checks = nlohmann::json::parse(e2e::slurp(json_path))["checks"];
    ASSERT_EQ(checks.size(), 1u);
    const double lo = checks[0]["detail"]["direction"]["ci"][0].get<double>();
    ASSERT_GT(lo, 0.2);
    const std::regex bound(R"(95% CI \[([-+][0-9.]+), )");
    for (const double x : {std::floor(lo * 1e5) / 1e5, std::ceil(lo * 1e5) / 1e5}) {
        const std::string given = fmt::format("{}", x);
        auto o = with({"--max-probe-shift", given});
        EXPECT_EQ(o.exit_code, x < lo ? 1 : 0) << o.out;
        EXPECT_NE(o.out.find("beyond +-" + given + " logits"), std::string::npos) << o.out;
        std::smatch m;
        ASSERT_TRUE(std::regex_search(o.out, m, bound)) << o.out;
        EXPECT_EQ(std::stod(m[1]) > x, lo > x) << m[0] << " against " << given;
    }
    auto numerics = with({"--expect-same-numerics"});
    EXPECT_EQ(numerics.exit_code, 1) << numerics.out;
    EXPECT_NE(numerics.out.find("the numerics differ"), std::string::npos) << numerics.out;

    // Two servers of one configuration: the same numerics.
    auto same = dir / "same.sqlite";
    probe_run(same, "default", "default", "12");
    auto aa = e2e::run({"gate", "--db", same.string(), "--baseline", "a", "--candidate", "b",
                        "--expect-same-numerics", "--max-probe-shift", "0.2"});
    EXPECT_EQ(aa.exit_code, 0) << aa.out << aa.err;

    auto none = e2e::run({"gate", "--db", db.string(), "--max-probe-shift", "1"});
    EXPECT_EQ(none.exit_code, 2);
    EXPECT_NE(none.err.find("give both"), std::string::npos) << none.err;
}

namespace {

// An OpenAI-compatible server that ignores the logprobs options, as some
// engines and proxies do: every completion is " 42" without log-probabilities.
class NoLogprobsServer {
public:
    // `every_other`: every second probe answer (max_tokens 1) lists " <think>"
    // among its log-probabilities, the others none, as an engine that drops
    // them now and then.
    explicit NoLogprobsServer(bool every_other = false) {
        m_server.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(R"({"object":"list","data":[{"id":"m","object":"model"}]})",
                            "application/json");
        });
        m_server.Post("/v1/completions", [this, every_other](const httplib::Request& req,
                                                             httplib::Response& res) {
            if (every_other && req.body.find("\"max_tokens\": 1,") != std::string::npos &&
                m_probes++ % 2 == 0) {
                res.set_content(R"({"id":"c","object":"text_completion","choices":[{"index":0,)"
                                R"("text":" <think>","logprobs":{"tokens":[" <think>"],)"
                                R"("token_logprobs":[-0.5],"top_logprobs":[{" <think>":-0.5,)"
                                R"(" 42":-1.0}]},"finish_reason":"length"}]})",
                                "application/json");
                return;
            }
            res.set_content(R"({"id":"c","object":"text_completion","choices":[{"index":0,)"
                            R"("text":" 42","logprobs":null,"finish_reason":"length"}],)"
                            R"("usage":{"prompt_tokens":9,"completion_tokens":1}})",
                            "application/json");
        });
        m_port = m_server.bind_to_any_port("127.0.0.1");
        m_thread = std::thread([this] { m_server.listen_after_bind(); });
    }
    ~NoLogprobsServer() {
        m_server.stop();
        m_thread.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port); }

private:
    httplib::Server m_server;
    std::thread m_thread;
    int m_port = 0;
    std::atomic<int> m_probes{0};
};

} // namespace

TEST(Probe, EnginesWithoutLogprobsAreSkippedWithOneLine) {
    auto dir = e2e::scratch("probe_nolp");
    NoLogprobsServer plain;
    e2e::Sim sim({"--profile", "default"});
    auto db = dir / "p.sqlite";
    auto o = e2e::run({"run", "--server", "sim=" + sim.url(), "--server", "plain=" + plain.url(),
                       "--framing", "raw", "--limit", "3", "--dataset", "sample", "--db",
                       db.string(), "--probe", "think-open", "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out; // nothing to resend: the engine answered
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_responses r JOIN probe_requests q ON "
                        "q.response_id = r.response_id WHERE q.server = 'plain' AND r.ok = 1 AND "
                        "r.error_kind = 'no-logprobs'"),
              "12");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probes WHERE server = 'plain' AND p_open IS NULL"),
              "6");
    auto d = e2e::run({"diff", "--db", db.string(), "sim/raw", "plain/raw"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_NE(
        d.out.find("probe skipped for plain: its engine returned no usable log-probabilities (12 "
                   "probe responses)"),
        std::string::npos)
        << d.out;
    EXPECT_EQ(d.out.find("probe think-open on raw"), std::string::npos) << d.out;
    EXPECT_EQ(d.out.find("probe skipped for sim"), std::string::npos) << d.out;
}

TEST(Probe, ExperimentFilesTurnItOnAndStreamingLeavesProbesWhole) {
    auto dir = e2e::scratch("probe_config");
    e2e::Sim a({"--profile", "deepgemm"});
    auto config = dir / "experiment.toml";
    std::ofstream(config) << "version = 1\nframings = [\"raw\"]\nmax_tokens = [32]\nlimit = 4\n"
                             "dataset = \"sample\"\nprobe = \"think-open\"\n\n"
                             "[[servers]]\nname = \"a\"\nurl = \""
                          << a.url() << "\"\n";
    auto db = dir / "p.sqlite";
    auto o =
        e2e::run({"run", "--config", config.string(), "--stream", "--db", db.string(), "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE streamed = 1"), "4");
    // Probes are sent whole (no "stream" in their bodies) and read as such.
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probe_requests WHERE request_json NOT LIKE "
                        "'%stream%'"),
              "16");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probes WHERE bounded = 0"), "8");
    EXPECT_EQ(query(db, "SELECT json_extract(config_json, '$.probe') FROM runs"), "think-open");

    std::ofstream(dir / "bad.toml") << "version = 1\nprobe = \"think-close\"\n";
    auto bad = e2e::run({"run", "--config", (dir / "bad.toml").string(), "--server", "a=" + a.url(),
                         "--db", (dir / "bad.sqlite").string()});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("unknown probe 'think-close'"), std::string::npos) << bad.err;
}

// A chain whose second request has no answer (failed after its retries, or
// not yet sent when the run was killed) has not measured P(open): the first
// request's smallest listed probability is no bound on it, since the
// whitespace that leads to the marker was listed. Such a reading is left
// out, not taken as a tiny P(open) that moves the shift by logits.
TEST(Probe, AChainWithoutItsSecondAnswerIsNotAReading) {
    auto dir = e2e::scratch("probe_chain_missing");
    auto db = dir / "p.sqlite";
    probe_run(db, "default", "default", "12");
    // What a run killed between the two steps, or a step 1 that kept
    // failing, leaves: b's chains on 6 questions have no second answer.
    e2e::exec(db, "UPDATE probe_requests SET response_id = NULL WHERE server = 'b' AND step = 1 "
                  "AND question_idx < 6");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probes WHERE server = 'b' AND question_idx < 6 "
                        "AND p_open IS NOT NULL"),
              "0");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probes WHERE server = 'b' AND p_open IS NOT NULL"),
              "12");
    // An A/A pair: no shift, whatever is missing.
    auto d = e2e::run({"diff", "--db", db.string(), "a/raw", "b/raw"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_NE(d.out.find("P(open) logit shift 0.000 [0.000, 0.000] over 6 questions"),
              std::string::npos)
        << d.out;
    EXPECT_NE(
        d.out.find("probe readings missing for b: 12 probe requests have no successful "
                   "response (failed, as probe_responses.error says, or no response stored); run "
                   "the same command again to send them"),
        std::string::npos)
        << d.out;
    auto g = e2e::run({"gate", "--db", db.string(), "--baseline", "a", "--candidate", "b",
                       "--max-probe-shift", "0.2"});
    EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
}

// With fewer questions than its sign test needs to reach 0.01, the numerics
// check cannot fail: it says it cannot tell and fails, rather than pass
// saying the probe moved no more than the baseline's repeats beside a mean
// |delta| of 0.48 against 0.
TEST(Probe, TheNumericsCheckOnTooFewQuestionsCannotTell) {
    auto dir = e2e::scratch("probe_numerics_few");
    auto db = dir / "p.sqlite";
    probe_run(db, "default", "deepgemm", "5");
    auto g = e2e::run({"gate", "--db", db.string(), "--baseline", "a", "--candidate", "b",
                       "--expect-same-numerics"});
    EXPECT_EQ(g.exit_code, 1) << g.out << g.err;
    EXPECT_NE(g.out.find("cannot tell: 5 questions cannot show the numerics differ (a one-sided "
                         "sign test needs 7 to reach p < 0.01); run more questions"),
              std::string::npos)
        << g.out;
    EXPECT_EQ(g.out.find("moved no more than"), std::string::npos) << g.out;
    auto d = e2e::run({"diff", "--db", db.string(), "a/raw", "b/raw"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_EQ(d.out.find("numerics within the A/A spread"), std::string::npos) << d.out;
}

// Five questions cannot show a shift (a two-sided sign-flip test needs six
// to reach 0.05): the shift check said a 0.48-logit shift lay beyond 0.2
// beside sign-flip p 0.063, and passed an A/A pair on nothing. Both cannot
// tell now.
TEST(Probe, TheShiftCheckOnTooFewQuestionsCannotTell) {
    auto dir = e2e::scratch("probe_shift_few");
    for (const char* b : {"deepgemm", "default"}) {
        auto db = dir / (std::string(b) + ".sqlite");
        probe_run(db, "default", b, "5");
        auto g = e2e::run({"gate", "--db", db.string(), "--baseline", "a", "--candidate", "b",
                           "--max-probe-shift", "0.2"});
        EXPECT_EQ(g.exit_code, 1) << g.out << g.err;
        EXPECT_NE(g.out.find("cannot tell: 5 questions cannot show a shift (a two-sided "
                             "sign-flip test needs 6 to reach p < 0.05); run more questions"),
                  std::string::npos)
            << g.out;
    }
}

// An engine that returned log-probabilities for some probes and not others
// was measured on those: the line says how many it left out, not that the
// probe was skipped for it beside its comparison. One that returned none is
// named as such by the gate, which is not told to run with --probe again.
TEST(Probe, AServerMeasuredOnSomeProbesIsNotSaidToBeSkipped) {
    auto dir = e2e::scratch("probe_some_lp");
    NoLogprobsServer half(true);
    NoLogprobsServer plain;
    e2e::Sim sim({"--profile", "default"});
    auto db = dir / "p.sqlite";
    auto o = e2e::run({"run",
                       "--server",
                       "sim=" + sim.url(),
                       "--server",
                       "half=" + half.url(),
                       "--server",
                       "plain=" + plain.url(),
                       "--framing",
                       "raw",
                       "--limit",
                       "3",
                       "--dataset",
                       "sample",
                       "--db",
                       db.string(),
                       "--probe",
                       "think-open",
                       "--concurrency",
                       "1",
                       "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    const auto left_out = query(db, "SELECT count(*) FROM probe_responses r JOIN probe_requests q "
                                    "ON q.response_id = r.response_id WHERE q.server = 'half' "
                                    "AND r.error_kind = 'no-logprobs'");
    ASSERT_EQ(left_out, "6");
    auto d = e2e::run({"diff", "--db", db.string(), "sim/raw", "half/raw"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_NE(d.out.find("probe think-open on raw: half vs sim"), std::string::npos) << d.out;
    EXPECT_EQ(d.out.find("probe skipped for half"), std::string::npos) << d.out;
    EXPECT_NE(d.out.find("probe readings of half left out: 6 probe responses carried no "
                         "usable log-probabilities"),
              std::string::npos)
        << d.out;
    auto g = e2e::run({"gate", "--db", db.string(), "--baseline", "sim", "--candidate", "plain",
                       "--max-probe-shift", "1"});
    EXPECT_EQ(g.exit_code, 2) << g.out << g.err;
    EXPECT_NE(g.err.find("cannot measure the probe for plain: its engine returned no usable "
                         "log-probabilities (12 probe responses)"),
              std::string::npos)
        << g.err;
    EXPECT_EQ(g.err.find("run 'diffeval run --probe"), std::string::npos) << g.err;
}

// The gate's probe checks alone read the probe, not the answers: one server
// probed on the sample set and another on other questions were paired by
// index and a shift between different questions failed the gate.
TEST(Probe, TheGateRefusesProbesOfDifferentQuestions) {
    auto dir = e2e::scratch("probe_other_questions");
    auto db = dir / "p.sqlite";
    auto other = dir / "other.jsonl";
    {
        std::ofstream f(other);
        for (int i = 0; i < 8; ++i) {
            f << R"({"question": "Tom has )" << i + 3
              << R"( apples and buys 2 more. How many now?", "answer": "#### )" << i + 5 << "\"}\n";
        }
    }
    e2e::Sim a({"--profile", "default"});
    e2e::Sim b(
        {"--profile", "default", "--dataset", other.string(), "--fewshot-from", other.string()});
    auto one =
        e2e::run({"run", "--server", "a=" + a.url(), "--framing", "raw", "--limit", "8",
                  "--dataset", "sample", "--db", db.string(), "--probe", "think-open", "--quiet"});
    ASSERT_EQ(one.exit_code, 0) << one.err;
    auto two = e2e::run({"run", "--server", "b=" + b.url(), "--framing", "raw", "--dataset",
                         other.string(), "--fewshot-from", other.string(), "--db", db.string(),
                         "--probe", "think-open", "--quiet"});
    ASSERT_EQ(two.exit_code, 0) << two.err;
    auto g = e2e::run({"gate", "--db", db.string(), "--baseline", "a", "--candidate", "b",
                       "--max-probe-shift", "0.2"});
    EXPECT_EQ(g.exit_code, 2) << g.out << g.err;
    EXPECT_NE(g.err.find("cannot pair the probe of b with a on raw: 8 of 8 questions differ"),
              std::string::npos)
        << g.err;
}

// A probe that was sent but cannot be measured on the framing (chat: the
// prompt closed the think block) is not "no probe readings; run with
// --probe", which the user did.
TEST(Probe, TheGateSaysWhyAProbeOnChatCannotBeMeasured) {
    auto dir = e2e::scratch("probe_chat_gate");
    e2e::Sim a({"--profile", "default"});
    e2e::Sim b({"--profile", "deepgemm"});
    auto db = dir / "p.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + a.url(), "--server", "b=" + b.url(), "--framing",
                       "chat", "--limit", "6", "--dataset", "sample", "--db", db.string(),
                       "--probe", "think-open", "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto g = e2e::run({"gate", "--db", db.string(), "--baseline", "a", "--candidate", "b",
                       "--max-probe-shift", "0.2"});
    EXPECT_EQ(g.exit_code, 2) << g.out << g.err;
    EXPECT_NE(g.err.find("cannot measure the probe for b against a: on chat no question lists "
                         "the marker on either side (6 questions)"),
              std::string::npos)
        << g.err;
    EXPECT_EQ(g.err.find("run 'diffeval run --probe"), std::string::npos) << g.err;
}

// A framing the probe cannot measure beside one it can: an audit's gate
// printed raw's checks and nothing of chat, as if chat had been judged. Each
// framing gets its lines; chat's are SKIP with why, neither passing nor
// failing, in the text, the JSON and the JUnit file.
TEST(Probe, TheGateNamesAFramingItCouldNotJudgeBesideOneItCould) {
    auto dir = e2e::scratch("probe_skip_gate");
    e2e::Sim a({"--profile", "default"});
    e2e::Sim b({"--profile", "deepgemm"});
    auto db = dir / "p.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + a.url(), "--server", "b=" + b.url(), "--framing",
                       "raw,chat", "--limit", "8", "--dataset", "sample", "--db", db.string(),
                       "--probe", "think-open", "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto json = dir / "gate.json";
    const auto junit = dir / "gate.xml";
    auto g = e2e::run({"gate", "--db", db.string(), "--baseline", "a", "--candidate", "b",
                       "--max-probe-shift", "2", "--expect-same-numerics", "--json", json.string(),
                       "--junit", junit.string()});
    EXPECT_EQ(g.exit_code, 1) << g.out << g.err; // raw's numerics differ
    EXPECT_NE(g.out.find("PASS  probe_shift a/raw -> b/raw"), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("FAIL  probe_numerics a/raw -> b/raw"), std::string::npos) << g.out;
    for (const std::string kind : {"probe_shift", "probe_numerics"}) {
        EXPECT_NE(g.out.find("SKIP  " + kind + " a/chat -> b/chat"), std::string::npos) << g.out;
    }
    EXPECT_NE(g.out.find("not judged: no question of chat lists the marker on either side"),
              std::string::npos)
        << g.out;
    EXPECT_NE(g.out.find("FAIL: 1 of 2 checks failed, 2 not judged (SKIP)"), std::string::npos)
        << g.out;
    const auto verdict = nlohmann::json::parse(e2e::slurp(json));
    EXPECT_EQ(verdict["checks_skipped"], 2);
    EXPECT_EQ(verdict["checks_failed"], 1);
    size_t skipped = 0;
    for (const auto& c : verdict["checks"]) {
        if (c["name"].get<std::string>().find("/chat") != std::string::npos) {
            EXPECT_EQ(c["status"], "skipped") << c.dump();
            EXPECT_TRUE(c["measured"].is_null()) << c.dump();
            ++skipped;
        }
    }
    EXPECT_EQ(skipped, 2U);
    const auto xml = e2e::slurp(junit);
    EXPECT_NE(xml.find("skipped=\"2\""), std::string::npos) << xml;
    EXPECT_NE(xml.find("<skipped message=\"not judged: no question of chat"), std::string::npos)
        << xml;

    // Passing on raw with chat not judged says both.
    g = e2e::run({"gate", "--db", db.string(), "--baseline", "a", "--candidate", "b",
                  "--max-probe-shift", "2"});
    EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
    EXPECT_NE(g.out.find("PASS: the one check passed, 1 not judged (SKIP)"), std::string::npos)
        << g.out;
}

// A shard holds every request of its questions and none of the others': the
// probe's went to every question in every shard, so N shards sent the probe
// N times over and a shard's probe line covered questions its answers did
// not.
TEST(Probe, AShardProbesOnlyItsOwnQuestions) {
    auto dir = e2e::scratch("probe_shard");
    e2e::Sim a({"--profile", "default"});
    auto db = dir / "s1.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + a.url(), "--framing", "raw", "--limit", "12",
                       "--dataset", "sample", "--db", db.string(), "--probe", "think-open",
                       "--shard", "1/3", "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests WHERE question_idx % 3 != 1"), "0");
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests"), "16"); // 4 questions x 2 x 2
    EXPECT_NE(o.err.find("20 requests planned"), std::string::npos) << o.err;
}

// Shards of a run with the probe merge into what they stored: merge copied
// no probe table, so the merged database had no reading and the gate told
// the user to run with --probe.
// Probe audit D7: one server's probe on two datasets (which a run refuses)
// merged into one file, and the analysis, keying readings by question index,
// kept one dataset's and dropped the other's without a word. The merge is
// refused, naming the place, and OUT is left as it was.
TEST(Probe, AMergeOfOneServersProbeOnTwoDatasetsIsRefused) {
    auto dir = e2e::scratch("probe_merge_datasets");
    e2e::Sim a;
    // Another set of three questions, with shots of its own beside it.
    std::filesystem::create_directories(dir / "other");
    const auto other = dir / "other" / "test.jsonl";
    for (const auto& path : {other, dir / "other" / "train.jsonl"}) {
        std::ofstream out(path);
        for (int i = 0; i < 6; ++i) {
            out << "{\"question\": \"How many apples are " << i + 10
                << "?\", \"answer\": \"Count them.\\n#### " << i + 10 << "\"}\n";
        }
    }
    // Another token limit too: the measured groups differ, the probe's
    // places (which have no token limit) do not.
    auto run = [&](const std::filesystem::path& db, const std::string& dataset,
                   const std::string& max_tokens) {
        return e2e::run({"run", "--server", "a=" + a.url(), "--framing", "raw", "--limit", "3",
                         "--max-tokens", max_tokens, "--dataset", dataset, "--db", db.string(),
                         "--probe", "think-open", "--quiet"});
    };
    auto one = dir / "sample.sqlite";
    auto two = dir / "other.sqlite";
    ASSERT_EQ(run(one, "sample", "256").exit_code, 0);
    ASSERT_EQ(run(two, other.string(), "128").exit_code, 0);
    const auto before = e2e::slurp(one);
    auto m = e2e::run({"merge", one.string(), two.string()});
    EXPECT_EQ(m.exit_code, 2) << m.out << m.err;
    EXPECT_NE(m.err.find("conflicts with what is merged before it: probe think-open of a/raw "
                         "question 0 (repeat 0) was sent with another request body (another "
                         "dataset or configuration) there than here"),
              std::string::npos)
        << m.err;
    EXPECT_EQ(e2e::slurp(one), before);
}

// Probe audit D5, D11 (schema version 15): the marker listed directly and
// the chain's whitespace too, but the reading after the whitespace listing
// no marker, was stored as measured at its direct part alone (0.0025 where
// P(open) may be 0.041); it is bounded by the direct part plus P(whitespace)
// times the second floor. A response with no usable reading is no bound.
TEST(Probe, AChainWhoseSecondReadingListsNoMarkerIsBounded) {
    auto dir = e2e::scratch("probe_chain_bound");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw", "--limit", "1",
                       "--db", db.string(), "--probe", "think-open", "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const std::string step = "(SELECT response_id FROM probe_requests WHERE step = {})";
    e2e::exec(db, "UPDATE probe_responses SET marker_listed = 1, p_marker = 0.0025, "
                  "whitespace_listed = 1, p_whitespace = 0.95 WHERE response_id = " +
                      fmt::format(fmt::runtime(step), 0));
    e2e::exec(db, "UPDATE probe_responses SET marker_listed = 0, p_marker = 0, floor = 0.041 "
                  "WHERE response_id = " +
                      fmt::format(fmt::runtime(step), 1));
    EXPECT_EQ(query(db, "SELECT round(p_open, 6) || ' ' || bounded FROM v_probes"), "0.04145 1");
    // A step-0 answer without a usable reading (stored as no-logprobs).
    e2e::exec(db, "UPDATE probe_responses SET marker_listed = NULL, p_marker = NULL, "
                  "whitespace_listed = NULL, p_whitespace = NULL, floor = NULL, error_kind = "
                  "'no-logprobs' WHERE response_id = " +
                      fmt::format(fmt::runtime(step), 0));
    EXPECT_EQ(query(db, "SELECT coalesce(p_open, 'null') || ' ' || coalesce(bounded, 'null') FROM "
                        "v_probes"),
              "null null");
}

// Probe audit D9: a gate of probe checks alone with a misspelled server said
// to run with --probe; it names the server the database does not hold.
TEST(Probe, TheGateNamesAServerTheDatabaseDoesNotHold) {
    auto dir = e2e::scratch("probe_gate_nosuch");
    e2e::Sim sim;
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + sim.url(), "--framing", "raw", "--limit", "2",
                       "--db", db.string(), "--probe", "think-open", "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    auto g = e2e::run({"gate", "--db", db.string(), "--baseline", "a", "--candidate", "nosuch",
                       "--max-probe-shift", "0.2"});
    EXPECT_EQ(g.exit_code, 2) << g.out << g.err;
    EXPECT_EQ(g.err, "diffeval: --candidate nosuch: no server of that name in the database\n");
}

TEST(Probe, MergedShardsKeepTheirProbeReadings) {
    auto dir = e2e::scratch("probe_merge");
    e2e::Sim a({"--profile", "default"});
    e2e::Sim b({"--profile", "deepgemm"});
    std::vector<std::string> merge = {"merge", (dir / "merged.sqlite").string()};
    std::vector<std::string> readings;
    const char* rows = "SELECT server, framing, repeat, question_idx, p_open, bounded FROM "
                       "v_probes ORDER BY 1, 2, 3, 4";
    for (const char* shard : {"0/2", "1/2"}) {
        auto db = dir / (std::string("s") + shard[0] + ".sqlite");
        auto o = e2e::run({"run", "--server", "a=" + a.url(), "--server", "b=" + b.url(),
                           "--framing", "raw", "--limit", "12", "--dataset", "sample", "--db",
                           db.string(), "--probe", "think-open", "--shard", shard, "--quiet"});
        ASSERT_EQ(o.exit_code, 0) << o.err;
        auto r = e2e::query_rows(db, rows);
        readings.insert(readings.end(), r.begin(), r.end());
        merge.push_back(db.string());
    }
    std::sort(readings.begin(), readings.end());
    auto merged = dir / "merged.sqlite";
    auto m = e2e::run(merge);
    ASSERT_EQ(m.exit_code, 0) << m.err;
    EXPECT_NE(m.out.find("; 96 probe responses added"), std::string::npos) << m.out;
    auto got = e2e::query_rows(merged, rows);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, readings);
    EXPECT_EQ(readings.size(), 48u); // 12 questions x 2 servers x 2 repeats
    EXPECT_EQ(query(merged, "SELECT count(*) FROM v_probe_requests WHERE request_json IS NULL OR "
                            "response_id IS NULL"),
              "0");
    EXPECT_EQ(query(merged, "SELECT count(*) FROM v_probe_responses WHERE response_json NOT "
                            "LIKE '{%'"),
              "0");
    // Merging again adds nothing.
    auto again = e2e::run(merge);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_EQ(query(merged, "SELECT count(*) FROM probe_responses"), "96");
    auto g = e2e::run({"gate", "--db", merged.string(), "--baseline", "a", "--candidate", "b",
                       "--max-probe-shift", "0.2"});
    EXPECT_EQ(g.exit_code, 1) << g.out << g.err;
    EXPECT_NE(g.out.find("b opens the think block more often than a"), std::string::npos) << g.out;
}

namespace {

// A server whose first probe lists " " at 0.99 and " Jan" at 1e-4, and whose
// second (after the whitespace) lists no marker down to 0.01; measured
// requests get " 42".
class UnlistedAfterWhitespaceServer {
public:
    UnlistedAfterWhitespaceServer() {
        m_server.Post("/v1/completions", [](const httplib::Request& req, httplib::Response& res) {
            auto top = [](const std::string& chosen, const std::string& dict) {
                return R"({"id":"c","object":"text_completion","choices":[{"index":0,"text":")" +
                       chosen + R"(","logprobs":{"tokens":[")" + chosen +
                       R"("],"token_logprobs":[null],"top_logprobs":[)" + dict +
                       R"(]},"finish_reason":"length"}]})";
            };
            if (req.body.find("Answer: \", \"max_tokens\": 1,") != std::string::npos) {
                res.set_content(top("Jan", R"({"Jan":-0.10536052,"In":-4.60517019})"),
                                "application/json");
            } else if (req.body.find("\"max_tokens\": 1,") != std::string::npos) {
                res.set_content(top(" ", R"({" ":-0.01005034," Jan":-9.21034037})"),
                                "application/json");
            } else {
                res.set_content(R"({"id":"c","object":"text_completion","choices":[{"index":0,)"
                                R"("text":" 42","logprobs":null,"finish_reason":"stop"}],)"
                                R"("usage":{"prompt_tokens":9,"completion_tokens":1}})",
                                "application/json");
            }
        });
        m_port = m_server.bind_to_any_port("127.0.0.1");
        m_thread = std::thread([this] { m_server.listen_after_bind(); });
    }
    ~UnlistedAfterWhitespaceServer() {
        m_server.stop();
        m_thread.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port); }

private:
    httplib::Server m_server;
    std::thread m_thread;
    int m_port = 0;
};

} // namespace

// A chain whose second request lists no marker bounds P(open) by the first
// floor plus P(" ") times the second floor: v_probes gave the first floor
// alone, 1e-4, where the marker may be as likely as 0.01.
TEST(Probe, AChainsBoundCountsTheMarkerUnlistedAfterTheWhitespace) {
    auto dir = e2e::scratch("probe_chain_bound");
    UnlistedAfterWhitespaceServer server;
    auto db = dir / "p.sqlite";
    auto o = e2e::run({"run", "--server", "s=" + server.url(), "--framing", "raw", "--limit", "2",
                       "--dataset", "sample", "--db", db.string(), "--probe", "think-open",
                       "--no-preflight", "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probes WHERE bounded = 1 AND "
                        "abs(p_open - (1e-4 + 0.99 * 0.01)) < 1e-6"),
              "4");
}

namespace {

// A server that rejects the probe's logprobs options with a 400, as some
// engines do for models or settings without log-probabilities; measured
// requests get " 42".
class RejectingProbeServer {
public:
    RejectingProbeServer() {
        m_server.Post("/v1/completions", [](const httplib::Request& req, httplib::Response& res) {
            if (req.body.find("\"max_tokens\": 1,") != std::string::npos) {
                res.status = 400;
                res.set_content(R"({"error":{"message":"logprobs is not supported","code":400}})",
                                "application/json");
                return;
            }
            res.set_content(R"({"id":"c","object":"text_completion","choices":[{"index":0,)"
                            R"("text":" 42","logprobs":null,"finish_reason":"stop"}],)"
                            R"("usage":{"prompt_tokens":9,"completion_tokens":1}})",
                            "application/json");
        });
        m_port = m_server.bind_to_any_port("127.0.0.1");
        m_thread = std::thread([this] { m_server.listen_after_bind(); });
    }
    ~RejectingProbeServer() {
        m_server.stop();
        m_thread.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port); }

private:
    httplib::Server m_server;
    std::thread m_thread;
    int m_port = 0;
};

} // namespace

// Probes that all failed (a 400 for the logprobs options) measured nothing:
// diff said nothing about the server and the gate said to run with --probe,
// which the user had done.
TEST(Probe, AServerWhoseProbesFailedIsNamedAsNotMeasured) {
    auto dir = e2e::scratch("probe_rejected");
    RejectingProbeServer rejecting;
    e2e::Sim sim({"--profile", "default"});
    auto db = dir / "p.sqlite";
    auto o = e2e::run({"run", "--server", "sim=" + sim.url(), "--server", "r=" + rejecting.url(),
                       "--framing", "raw", "--limit", "3", "--dataset", "sample", "--db",
                       db.string(), "--probe", "think-open", "--no-preflight", "--quiet"});
    ASSERT_EQ(o.exit_code, 1) << o.err << o.out; // the failed probes are left to resend
    // The closing line counts probe responses, failed ones too, not readings.
    EXPECT_NE(o.out.find("stored 6 responses and 24 probe responses in "), std::string::npos)
        << o.out;
    const std::string line =
        "probe not measured for r: 12 probe requests have no successful "
        "response (failed, as probe_responses.error says, or no response stored); "
        "run the same command again to send them";
    auto d = e2e::run({"diff", "--db", db.string(), "sim/raw", "r/raw"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_NE(d.out.find(line), std::string::npos) << d.out;
    auto g = e2e::run({"gate", "--db", db.string(), "--baseline", "sim", "--candidate", "r",
                       "--max-probe-shift", "1"});
    EXPECT_EQ(g.exit_code, 2) << g.out << g.err;
    EXPECT_NE(g.err.find("cannot measure the probe for r: 12 probe requests have no successful "
                         "response"),
              std::string::npos)
        << g.err;
}

// A framing whose probe chain changed keeps its measured bodies, so only the
// probe's second step is new: an audit's run stored a second step-1 request
// in every place, v_probes gave two readings per repeat (one of each chain)
// and the run exited 0. Refused before anything is sent, as a measured
// request in a taken place is.
TEST(Probe, AChangedProbeChainIsRefusedBeforeSending) {
    auto dir = e2e::scratch("probe_chain_changed");
    e2e::Sim a({"--profile", "default"});
    auto db = dir / "p.sqlite";
    std::vector<std::string> args = {
        "run", "--server", "a=" + a.url(), "--framing", "raw",        "--limit",
        "4",   "--db",     db.string(),    "--probe",   "think-open", "--quiet"};
    ASSERT_EQ(e2e::run(args).exit_code, 0);
    const auto served = [&a] {
        return nlohmann::json::parse(a.stats())["requests"]["completions"].get<int>();
    };
    const auto sent = served();
    auto raw = e2e::slurp(std::filesystem::path(DIFFEVAL_SOURCE_DIR) / "prompts/raw.toml");
    const std::string chain = "probe_chain = \" \"";
    ASSERT_NE(raw.find(chain), std::string::npos);
    raw.replace(raw.find(chain), chain.size(), "probe_chain = \"\\n\"");
    std::ofstream(dir / "raw.toml") << raw;
    auto changed = args;
    changed[4] = (dir / "raw.toml").string();
    auto o = e2e::run(changed);
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("a/raw already holds probe think-open step 1 of question 0 (repeat 0) "
                         "sent with another request body"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(served(), sent);
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests"), "16");
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probes"), "8");
    EXPECT_EQ(query(db, "SELECT group_concat(status) FROM runs"), "complete");
}

// Numerics that differ with no shift in P(open) (what a KV-cache or kernel
// change does first) are said in the report's headline: an engine audit
// found them only in the probe's section, under a headline of "no
// detectable difference". Here b is the default profile under another
// name, so its per-request noise is its own.
TEST(Probe, NumericsThatDifferWithoutAShiftAreInTheHeadline) {
    auto dir = e2e::scratch("probe_numerics_headline");
    auto db = dir / "p.sqlite";
    const auto other = dir / "other.toml";
    std::ofstream(other) << "version = 1\nname = \"other\"\n";
    probe_run(db, "default", other.string(), "24");
    auto r = e2e::run(
        {"report", "--db", db.string(), "--out", (dir / "rep").string(), "--format", "md"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto md = e2e::slurp(dir / "rep" / "report.md");
    const auto headline = md.substr(0, md.find("Baseline:"));
    EXPECT_NE(headline.find("The decision-point probe finds b's numerics differ from a's on raw: "
                            "mean \\|delta\\|"),
              std::string::npos)
        << headline;
    EXPECT_NE(headline.find("though no shift in P(open) is detectable."), std::string::npos)
        << headline;
}
