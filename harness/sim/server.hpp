// The simulated vLLM server over HTTP: vLLM's OpenAI-compatible endpoints
// served by an event loop on one background thread, answering from the behaviour
// model (generate.hpp), with simulated latency, injected faults, and a
// statistics endpoint so tests can check that every fault was handled.
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions, GET /v1/models,
// GET /health, GET /version, and GET /stats (the simulator's own counters,
// JSON; not a vLLM endpoint). docs/simulator.md describes each.
#pragma once

#include <harness/sim/profile.hpp>
#include <harness/sim/request.hpp>
#include <harness/util/result.hpp>

#include <datasets/dataset.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace diffeval::sim {

struct SimConfig {
    std::string host = "127.0.0.1";
    int port = 0; // 0 = pick a free port
    Profile profile;
    std::string model_id = std::string(k_default_model_id);
    datasets::Dataset dataset;
};

// Counters since the server started.
struct Stats {
    std::map<std::string, int64_t> requests; // by endpoint: completions, chat, models, ...
    std::map<int, int64_t> statuses;         // responses by HTTP status
    std::map<std::string, int64_t> faults;   // injected faults by kind (every kind listed)
    int64_t distinct_requests = 0;           // distinct request contents generated
    int64_t repeated_sightings = 0;          // generations of a content seen before
    int64_t in_flight = 0;      // generation requests read and not yet answered in full
    int64_t in_flight_peak = 0; // the most at once since the server started
};

class Server {
public:
    // Start serving `config` on a background thread; returns once the socket
    // is listening, or an error when it cannot bind.
    static util::Result<std::unique_ptr<Server>> start(SimConfig config);

    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    int port() const;
    std::string base_url() const; // "http://HOST:PORT"

    // Stop serving: drops stalled and paced responses, closes open
    // connections and joins the thread. Idempotent; the destructor calls it.
    void stop();

    Stats stats() const;

    struct Impl;

private:
    explicit Server(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

} // namespace diffeval::sim
