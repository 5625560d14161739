// `diffeval run --stream`: the same answers as without streaming, plus time
// to first token and the gaps between chunks; an error object mid-stream is
// stored as an error, not as a short answer.
#include "e2e.hpp"
#include "hostile.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

using e2e::query;

TEST(Stream, SameTextAsNonStreamingWithTimings) {
    auto dir = e2e::scratch("stream");
    auto profile = dir / "paced.toml";
    std::ofstream(profile)
        << "version = 1\nname = \"paced\"\n[latency]\nttft_ms = 5\nper_token_ms = 0\n";
    e2e::Sim a({"--profile", profile.string()});
    auto plain = dir / "plain.sqlite";
    auto streamed = dir / "streamed.sqlite";
    std::vector<std::string> base = {"run",      "--server",     "a=" + a.url(), "--framing",
                                     "raw,chat", "--max-tokens", "96",           "--limit",
                                     "8",        "--quiet"};
    auto args_plain = base;
    args_plain.insert(args_plain.end(), {"--db", plain.string()});
    auto args_stream = base;
    args_stream.insert(args_stream.end(), {"--db", streamed.string(), "--stream"});
    ASSERT_EQ(e2e::run(args_plain).exit_code, 0);
    auto o = e2e::run(args_stream);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(
        query(streamed,
              "SELECT count(*) FROM v_responses WHERE streamed = 1 AND ok = 1 AND ttft_ms >= 5 "
              "AND ttft_ms <= latency_ms AND json_valid(token_gaps_ms)"),
        "16");
    EXPECT_EQ(query(streamed,
                    "SELECT count(*) FROM v_responses WHERE request_json LIKE "
                    "'%\"stream\": true, \"stream_options\": {\"include_usage\": true}}'"),
              "16");
    auto rows_plain =
        e2e::query_rows(plain, "SELECT framing, question_idx, text, reasoning, finish_reason, "
                               "stop_reason, completion_tokens FROM v_responses ORDER BY 1, 2");
    auto rows_stream =
        e2e::query_rows(streamed, "SELECT framing, question_idx, text, reasoning, finish_reason, "
                                  "stop_reason, completion_tokens FROM v_responses ORDER BY 1, 2");
    EXPECT_EQ(rows_plain, rows_stream);
}

TEST(Stream, ErrorObjectMidStreamIsAnError) {
    auto dir = e2e::scratch("stream_error");
    auto profile = dir / "broken.toml";
    std::ofstream(profile) << "version = 1\nname = \"broken\"\n[faults]\nstream_error = 1.0\n";
    e2e::Sim a({"--profile", profile.string()});
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--server", "a=" + a.url(), "--framing", "raw", "--limit", "3",
                       "--stream", "--retries", "0", "--db", db.string()});
    EXPECT_EQ(o.exit_code, 1) << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 0 AND error_kind = 'stream' "
                        "AND error LIKE "
                        "'the server sent an error mid-stream%'"),
              "3");
}

// Errors in the two other shapes engines send mid-stream: llama.cpp's
// `error:` line (then [DONE]) and vLLM's {"object":"error"} event. Both are
// errors of kind stream, never the partial text stored as an answer, and
// are retried like any failed delivery.
TEST(Stream, LlamaCppAndVllmErrorEventsAreErrors) {
    auto dir = e2e::scratch("stream_error_shapes");
    e2e::HostileServer::Options opts;
    opts.cycle = {e2e::Hostile::error_line, e2e::Hostile::object_error};
    opts.hostile_arrivals_per_body = 1;
    e2e::HostileServer server(opts);
    auto db = dir / "r.sqlite";
    std::vector<std::string> args = {"run",       "--server",  "h=" + server.url(),
                                     "--framing", "raw,chat",  "--limit",
                                     "2",         "--stream",  "--dataset",
                                     "sample",    "--retries", "0",
                                     "--db",      db.string(), "--quiet"};
    auto o = e2e::run(args);
    EXPECT_EQ(o.exit_code, 1) << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 0 AND error_kind = 'stream' "
                        "AND (error = 'the server sent an error mid-stream: Invalid input batch.' "
                        "OR error = 'the server sent an error mid-stream: engine dead')"),
              "4");
    EXPECT_EQ(query(db, "SELECT count(DISTINCT error) FROM v_responses"), "2");
    // Sent again, each body is answered well the second time.
    auto again = e2e::run(args);
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_EQ(server.total_arrivals(), 8);
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 1"), "4");
}

// Not streamed, vLLM's error object in a 200 is an error too, named so.
TEST(Stream, AnErrorObjectAsA200BodyIsAnError) {
    auto dir = e2e::scratch("object_error_body");
    e2e::HostileServer::Options opts;
    opts.cycle = {e2e::Hostile::object_error};
    e2e::HostileServer server(opts);
    auto db = dir / "r.sqlite";
    auto o =
        e2e::run({"run", "--server", "h=" + server.url(), "--framing", "raw,chat", "--limit", "2",
                  "--dataset", "sample", "--retries", "0", "--db", db.string(), "--quiet"});
    EXPECT_EQ(o.exit_code, 1) << o.err;
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_responses WHERE ok = 0 AND error_kind = 'parse' "
                        "AND error = 'the server answered with an error object: engine dead'"),
              "4");
}
