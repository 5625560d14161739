// The probe against a real engine: llama-server (the engine chroot, built by
// the real-engine work's scripts/engine-chroot.sh) serving the shared tiny
// GSM8K model three times: f16 KV cache twice (an A/A pair) and q4_0 once.
// The probe must find "numerics differ" for q4_0 within 10 questions and not
// for the A/A pair. Skips visibly without the chroot or the model.
#include "e2e.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fs = std::filesystem;
using e2e::query;

namespace {

// The chroot with llama-server: $DIFFEVAL_ENGINE_CHROOT, else where
// scripts/engine-chroot.sh builds it.
std::optional<fs::path> engine_chroot() {
    const char* env = std::getenv("DIFFEVAL_ENGINE_CHROOT");
    fs::path dir = env && *env ? env : "/var/cache/diffeval/engine-chroot";
    if (fs::exists(dir / ".diffeval-engine-ready") && fs::exists(dir / "usr/bin/llama-server")) {
        return dir;
    }
    return std::nullopt;
}

// The shared tiny model: $DIFFEVAL_TINY_MODEL, else beside the GSM8K files
// ($GSM8K_DIR/../../models/tiny-gsm8k.gguf).
std::optional<fs::path> tiny_model() {
    if (const char* m = std::getenv("DIFFEVAL_TINY_MODEL"); m && *m && fs::exists(m)) {
        return fs::path(m);
    }
    if (const char* g = std::getenv("GSM8K_DIR"); g && *g) {
        auto p = fs::path(g) / ".." / ".." / "models" / "tiny-gsm8k.gguf";
        if (fs::exists(p)) {
            return fs::canonical(p);
        }
    }
    return std::nullopt;
}

std::string server_block(const fs::path& root, const std::string& name, const std::string& model,
                         const std::vector<std::string>& extra) {
    auto q = [](const std::string& s) { return nlohmann::json(s).dump(); };
    const int port = e2e::free_port();
    std::vector<std::string> argv = {"chroot",    root.string(), "llama-server",
                                     "-m",        model,         "--host",
                                     "127.0.0.1", "--port",      std::to_string(port),
                                     "-t",        "1",           "-tb",
                                     "1",         "-np",         "1",
                                     "-c",        "4096"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::string out = "\n[[servers]]\nname = " + q(name) +
                      "\nurl = " + q("http://127.0.0.1:" + std::to_string(port)) +
                      "\nready_timeout = 120\nlaunch = [";
    for (size_t i = 0; i < argv.size(); ++i) {
        out += (i ? ", " : "") + q(argv[i]);
    }
    return out + "]\n";
}

} // namespace

TEST(ProbeEngine, KvCacheQuantisationChangesTheNumericsAndAnAAPairDoesNot) {
    auto root = engine_chroot();
    if (!root) {
        GTEST_SKIP() << "engine chroot unavailable: build it with the real-engine work's "
                        "scripts/engine-chroot.sh (or set DIFFEVAL_ENGINE_CHROOT)";
    }
    if (geteuid() != 0) {
        GTEST_SKIP() << "engine chroot needs root to enter (chroot)";
    }
    auto model = tiny_model();
    if (!model) {
        GTEST_SKIP() << "tiny model unavailable: set DIFFEVAL_TINY_MODEL or GSM8K_DIR (with "
                        "../../models/tiny-gsm8k.gguf beside it)";
    }
    // The model must be inside the chroot; copied where the engine scripts
    // put users' models.
    const std::string inside = "/opt/diffeval/models/user/tiny-gsm8k.gguf";
    std::error_code ec;
    fs::create_directories(*root / "opt/diffeval/models/user", ec);
    if (!fs::exists(*root / inside.substr(1)) ||
        fs::file_size(*root / inside.substr(1)) != fs::file_size(*model)) {
        fs::copy_file(*model, *root / inside.substr(1), fs::copy_options::overwrite_existing, ec);
    }
    if (ec) {
        GTEST_SKIP() << "cannot copy the tiny model into " << root->string() << ": "
                     << ec.message();
    }

    auto dir = e2e::scratch("probe_engine");
    auto config = dir / "experiment.toml";
    std::ofstream(config) << "version = 1\nframings = [\"raw\"]\nmax_tokens = [8]\n"
                             "dataset = \"sample\"\nlimit = 10\nconcurrency = 1\n"
                          << server_block(*root, "f16", inside, {})
                          << server_block(*root, "f16-again", inside, {})
                          << server_block(*root, "q4_0", inside, {"-ctk", "q4_0", "-ctv", "q4_0"});
    auto db = dir / "r.sqlite";
    auto o = e2e::run({"run", "--config", config.string(), "--db", db.string(), "--probe",
                       "think-open", "--sequential-servers", "--quiet"});
    ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
    // llama-server's /v1/completions answers in the content[] shape, and
    // its byte-level BPE tokenizer puts " " before the special <think>.
    EXPECT_EQ(query(db, "SELECT count(*) FROM v_probes WHERE bounded = 0"), "60");
    EXPECT_EQ(query(db, "SELECT count(*) FROM probe_responses WHERE response_json LIKE "
                        "'%\"content\":[{%' AND top_json LIKE '%<think>%'"),
              "60"); // every step-1 response lists the marker

    auto changed =
        e2e::run({"diff", "--db", db.string(), "f16/raw", "q4_0/raw", "--format", "json"});
    ASSERT_EQ(changed.exit_code, 0) << changed.err;
    auto c = nlohmann::json::parse(changed.out)["probes"].at(0)["perturbation"];
    EXPECT_EQ(c["numerics_differ"], true) << c.dump();
    EXPECT_LE(c["questions_to_differ"].get<int>(), 10) << c.dump();

    auto same =
        e2e::run({"diff", "--db", db.string(), "f16/raw", "f16-again/raw", "--format", "json"});
    ASSERT_EQ(same.exit_code, 0) << same.err;
    auto s = nlohmann::json::parse(same.out)["probes"].at(0)["perturbation"];
    EXPECT_EQ(s["numerics_differ"], false) << s.dump();

    auto gate = e2e::run({"gate", "--db", db.string(), "--baseline", "f16", "--candidate", "q4_0",
                          "--expect-same-numerics"});
    EXPECT_EQ(gate.exit_code, 1) << gate.out << gate.err;
    auto aa = e2e::run({"gate", "--db", db.string(), "--baseline", "f16", "--candidate",
                        "f16-again", "--expect-same-numerics"});
    EXPECT_EQ(aa.exit_code, 0) << aa.out << aa.err;
    std::cout << "probe f16 -> q4_0: " << c.dump() << "\nprobe f16 -> f16-again: " << s.dump()
              << "\n";
}
