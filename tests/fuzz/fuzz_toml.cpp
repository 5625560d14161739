// libFuzzer targets for the TOML loaders (one executable per loader, chosen
// by DIFFEVAL_FUZZ_LOADER at compile time): framings, scorers, simulator
// profiles, fingerprint rules and experiment files. Loaders that read a
// path get the input through a file in /dev/shm.
#include <harness/engine/config.hpp>
#include <harness/fingerprint/fingerprint.hpp>
#include <harness/framing/framing.hpp>
#include <harness/sim/profile.hpp>
#include <scorers/scorer.hpp>

#include <cstdint>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace diffeval;

namespace {

std::string as_file(const uint8_t* data, size_t size) {
    static const std::string path = "/dev/shm/diffeval-fuzz-" + std::to_string(getpid()) + ".toml";
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
#if DIFFEVAL_FUZZ_LOADER == 1
    (void)framing::load_framing(as_file(data, size));
#elif DIFFEVAL_FUZZ_LOADER == 2
    if (auto s = scorers::load_scorer(text, "fuzz", "fuzz.toml")) {
        (void)s->score("The answer is 42.\n#### 42", "#### 42");
    }
#elif DIFFEVAL_FUZZ_LOADER == 3
    (void)sim::parse_profile(text, "fuzz.toml");
#elif DIFFEVAL_FUZZ_LOADER == 4
    if (auto r = fingerprint::Rules::parse(text, "fuzz.toml")) {
        (void)r->apply("INFO vLLM API server version 0.28.0\nUsing DeepGEMM\n");
        // The rules over their own text (their patterns' words are there),
        // each fact read back as stored, then as `auto`: the rules' groups
        // decide what is stated.
        auto fp = r->apply(text);
        auto stored = fp;
        r->normalize(stored);
        for (auto& [name, value] : fp.facts) {
            value = "auto";
        }
        r->normalize(fp);
    }
#else
    engine::RunConfig config;
    if (engine::load_experiment(as_file(data, size), config)) {
        (void)engine::validate(config);
    }
#endif
    return 0;
}
