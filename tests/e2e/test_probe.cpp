// The decision-point probe end to end against the real simulator: probe
// requests are stored apart from the measured ones (which stay as they were),
// with their readings, and a second run sends nothing again.
#include "e2e.hpp"

#include <gtest/gtest.h>

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
    // The measured bodies are those of a run without the probe.
    auto p = e2e::run({"run", "--server", "a=" + a.url(), "--framing", "raw,chat", "--limit", "5",
                       "--dataset", "sample", "--db", plain.string()});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    EXPECT_EQ(query_rows(db, "SELECT request_json FROM requests ORDER BY request_key"),
              query_rows(plain, "SELECT request_json FROM requests ORDER BY request_key"));
    // Probe bodies: max_tokens 1 and the engine's logprobs options; the chain
    // step's prompt ends in the whitespace.
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests WHERE framing = 'raw' AND "
                        "request_json LIKE '%\"max_tokens\": 1,%' AND "
                        "request_json LIKE '%\"logprobs\": 20}'"),
              "20");
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests WHERE framing = 'chat' AND "
                        "request_json LIKE '%\"logprobs\": true, \"top_logprobs\": 20}'"),
              "10");
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests WHERE step = 1 AND "
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
    EXPECT_NE(again.err.find("40 requests planned, 37 already stored (skipped), 3 to send"),
              std::string::npos)
        << again.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_requests WHERE response_id IS NULL"), "0");
    EXPECT_EQ(query(db, "SELECT count(*) FROM responses"), "10");
}

TEST(Probe, UnknownProbeIsAUsageError) {
    auto dir = e2e::scratch("probe_bad");
    auto o = e2e::run({"run", "--server", "a=http://127.0.0.1:9", "--probe", "think-close", "--db",
                       (dir / "x.sqlite").string()});
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_NE(o.err.find("unknown probe 'think-close'; known: think-open"), std::string::npos)
        << o.err;
}
