// Fingerprint rules read what a vLLM log says each layer runs, and flag the
// bug report's contradiction: DeepGEMM auto-disabled, yet the MoE layers run
// it. The logs in tests/data are written from vLLM's documented formats.
#include <harness/fingerprint/fingerprint.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace diffeval::fingerprint;

namespace {

std::string read_log(const std::string& name) {
    std::ifstream in(std::string(DIFFEVAL_SOURCE_DIR) + "/tests/data/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace

TEST(Fingerprint, BugReportLogYieldsEveryFactAndTheConflict) {
    auto fp = fingerprint_log(read_log("vllm-blackwell-moe-conflict.log"));
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(fp->engine, "vllm");
    EXPECT_EQ(fp->facts["engine_version"], "0.26.0");
    EXPECT_EQ(fp->facts["attention_backend"], "FLASH_ATTN");
    EXPECT_EQ(fp->facts["fp8_moe_backend"], "DEEPGEMM");
    EXPECT_EQ(fp->facts["fp8_linear_kernel"], "CutlassFp8BlockScaledMMKernel");
    EXPECT_EQ(fp->facts["deepgemm_e8m0"], "enabled");
    EXPECT_EQ(fp->facts["deepgemm_auto_disabled"], "qwen3_5_moe_text");
    EXPECT_EQ(fp->facts["quantization"], "fp8");
    EXPECT_EQ(fp->facts["kv_cache_dtype"], "auto");
    EXPECT_EQ(fp->facts["model"], "Qwen/Qwen3.6-35B-A3B-FP8");
    ASSERT_EQ(fp->conflicts.size(), 2u);
    EXPECT_EQ(fp->conflicts[0].name, "deepgemm-moe-despite-auto-disable");
    EXPECT_EQ(fp->conflicts[0].evidence,
              (std::vector<std::string>{"deepgemm_auto_disabled=qwen3_5_moe_text",
                                        "fp8_moe_backend=DEEPGEMM"}));
}

TEST(Fingerprint, ConsistentLogHasNoConflict) {
    auto fp = fingerprint_log(read_log("vllm-no-deepgemm.log"));
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(fp->facts["engine_version"], "0.28.0");
    EXPECT_EQ(fp->facts["fp8_moe_backend"], "FLASHINFER_TRTLLM");
    EXPECT_EQ(fp->facts["kv_cache_dtype"], "fp8_e4m3");
    EXPECT_EQ(fp->facts.count("deepgemm_auto_disabled"), 0u);
    EXPECT_TRUE(fp->conflicts.empty());
}

TEST(Fingerprint, RulesWithoutCaptureGroupAreRejectedWithFileAndLine) {
    auto r = Rules::parse("version = 1\n[[fact]]\nname = \"x\"\npattern = 'no group'\n", "my.toml");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("my.toml:2"), std::string::npos) << r.error().message;
    auto unknown = Rules::parse("version = 1\nfacts = []\n", "my.toml");
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(unknown.error().message.find("unknown key 'facts'"), std::string::npos);
}

// Logs of llama.cpp's llama-server (Debian build 11669), written by the real
// server: one at the default verbosity, one at `-lv 4` with a q8_0 KV cache
// and flash attention on.
TEST(Fingerprint, LlamaServerLogIsRecognisedWithItsSettings) {
    auto verbose = fingerprint_log(read_log("llamacpp-b11669-lv4.log"));
    ASSERT_TRUE(verbose.ok());
    EXPECT_EQ(verbose->engine, "llamacpp");
    EXPECT_EQ(verbose->facts["engine_version"], "b11669-Debian");
    EXPECT_EQ(verbose->stated["engine_version"], "11669 (Debian)");
    EXPECT_EQ(verbose->facts["backend"], "CPU");
    EXPECT_EQ(verbose->facts["kv_cache_type_k"], "q8_0");
    EXPECT_EQ(verbose->facts["kv_cache_type_v"], "q8_0");
    EXPECT_EQ(verbose->facts["flash_attention"], "enabled");
    EXPECT_EQ(verbose->stated.count("flash_attention"), 0U); // `-fa on`: as requested
    EXPECT_EQ(verbose->facts["threads"], "1");
    EXPECT_EQ(verbose->facts["threads_batch"], "1");
    EXPECT_EQ(verbose->facts["slots"], "2");
    EXPECT_EQ(verbose->facts["context_per_slot"], "2048");
    EXPECT_EQ(verbose->facts["context"], "4096");
    // Batch sizes split the matrix products (engine audit: a `-b 16 -ub 16`
    // server showed only flash attention differing).
    EXPECT_EQ(verbose->facts["batch"], "2048");
    EXPECT_EQ(verbose->facts["ubatch"], "512");
    EXPECT_EQ(verbose->facts["model_file_type"], "all F32");

    auto plain = fingerprint_log(read_log("llamacpp-b11669-default.log"));
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(plain->engine, "llamacpp");
    EXPECT_EQ(plain->facts["slots"], "1");
    EXPECT_EQ(plain->facts["model"], "/opt/diffeval/models/outcomes.gguf");
}

TEST(Fingerprint, LogNoRulesKnowRecognisesNoEngine) {
    auto fp = fingerprint_log("hello\nstarting something\n");
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(fp->engine, "");
    EXPECT_TRUE(fp->facts.empty());
}

// llama.cpp writes its build in the log as "build 11669 (Debian) with ..."
// and at /props as "b11669-Debian" (common/build-info.cpp: "b" + number +
// "-" + commit); the fact is the /props form, the log's words are stated.
TEST(Fingerprint, LlamaServerBuildIsWrittenAsPropsWritesIt) {
    auto fp = fingerprint_log("0.00.096.801 I cmn  common_param: common_params_print_info: build "
                              "11669 (Debian) with GNU 16.2.0 for Linux x86_64\n");
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(fp->facts["engine_version"], "b11669-Debian");
    EXPECT_EQ(fp->stated["engine_version"], "11669 (Debian)");
    auto older = fingerprint_log("build: 4000 (a1b2c3d4) with cc (GCC) 13.2.0 for "
                                 "x86_64-redhat-linux\nllama_context: flash_attn    = auto\n");
    ASSERT_TRUE(older.ok());
    EXPECT_EQ(older->facts["engine_version"], "b4000-a1b2c3d4");
}

// `-fa auto` (llama-server's default): the log's llama_context line says
// "auto", and the server resolves it once it has placed the layers. The
// fact is what it resolved; the request is kept as stated.
TEST(Fingerprint, LlamaServerFlashAttentionIsWhatAutoResolvedTo) {
    auto fp = fingerprint_log(read_log("llamacpp-b11669-fa-auto.log"));
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(fp->engine, "llamacpp");
    EXPECT_EQ(fp->facts["flash_attention"], "enabled");
    EXPECT_EQ(fp->stated["flash_attention"], "auto");

    // The other words llama.cpp resolves with: a fused op placed on another
    // device than its layer, and older builds' one line.
    const std::string asked = "llama_context: flash_attn            = auto\n";
    for (const auto& [line, want] : std::vector<std::pair<std::string, std::string>>{
             {"resolve_fused_ops: Flash Attention not supported, set to disabled", "disabled"},
             {"sched_reserve: Flash Attention was auto, set to disabled", "disabled"},
             {"llama_context: Flash Attention was auto, set to enabled", "enabled"}}) {
        auto r = fingerprint_log(asked + line + "\n");
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r->facts["flash_attention"], want) << line;
        EXPECT_EQ(r->stated["flash_attention"], "auto") << line;
    }
    // A log cut before the server resolved it: only the request is known.
    auto cut = fingerprint_log(asked);
    ASSERT_TRUE(cut.ok());
    EXPECT_EQ(cut->facts.count("flash_attention"), 0U);
    EXPECT_EQ(cut->stated["flash_attention"], "auto");
    // `-fa off` is what it says.
    auto off = fingerprint_log("llama_context: flash_attn            = disabled\n");
    ASSERT_TRUE(off.ok());
    EXPECT_EQ(off->facts["flash_attention"], "disabled");
    EXPECT_TRUE(off->stated.empty());
}

TEST(Fingerprint, ValueThatNamesAMissingGroupIsRefused) {
    auto r = Rules::parse("version = 1\n[[fact]]\nname = \"x\"\npattern = 'a (b+)'\n"
                          "form = '(b)b'\nvalue = 'v\\3'\n",
                          "my.toml");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("my.toml:2: fact 'x': value 'v\\3' does not fit the groups "
                                     "of form '(b)b'"),
              std::string::npos)
        << r.error().message;
    for (const auto* half : {"form = '(b)b'\n", "value = 'v\\1'\n"}) {
        auto alone = Rules::parse(
            std::string("version = 1\n[[fact]]\nname = \"x\"\npattern = 'a (b+)'\n") + half,
            "my.toml");
        ASSERT_FALSE(alone.ok()) << half;
        EXPECT_NE(alone.error().message.find("give `form` and `value` together"), std::string::npos)
            << alone.error().message;
    }
    // A form that does not compile on its own is refused, not wrapped into
    // one that does ('\\A(?:b)|(b)\\z' would match any text ending in b).
    auto open = Rules::parse("version = 1\n[[fact]]\nname = \"x\"\npattern = 'a (b+)'\n"
                             "form = 'b)|(b'\nvalue = 'v\\1'\n",
                             "my.toml");
    ASSERT_FALSE(open.ok());
    EXPECT_NE(open.error().message.find("my.toml:2: fact 'x': form 'b)|(b' must compile"),
              std::string::npos)
        << open.error().message;
}

// The stated words are rewritten only when they are all in the form; words
// in another shape are the fact as written.
TEST(Fingerprint, AFactIsRewrittenOnlyWhenItsWordsAreAllInTheForm) {
    auto rules = Rules::parse("version = 1\nengine = \"t\"\n[[fact]]\nname = \"v\"\n"
                              "pattern = 'version (\\S+)'\nform = '(\\d+)-(\\w+)'\n"
                              "value = 'b\\1-\\2'\n",
                              "t.toml");
    ASSERT_TRUE(rules.ok()) << rules.error().message;
    auto fp = rules->apply("version 12-ab\n");
    EXPECT_EQ(fp.facts["v"], "b12-ab");
    EXPECT_EQ(fp.stated["v"], "12-ab");
    auto partly = rules->apply("version x12-ab\n");
    EXPECT_EQ(partly.facts["v"], "x12-ab");
    EXPECT_TRUE(partly.stated.empty());
    // Stored in the words, read back in the form.
    Fingerprint stored;
    stored.engine = "t";
    stored.facts = {{"v", "12-ab"}};
    rules->normalize(stored);
    EXPECT_EQ(stored.facts["v"], "b12-ab");
    EXPECT_EQ(stored.stated["v"], "12-ab");
    rules->normalize(stored);
    EXPECT_EQ(stored.facts["v"], "b12-ab");
}

// A stored fact only a stated rule could capture reads as stated. What a
// resolving rule captures is read from its first group, stepping over
// classes, non-capturing and named groups; a flag that would change what the
// group matches alone leaves the value a fact.
TEST(Fingerprint, AStoredValueOnlyAStatedRuleCapturesReadsAsStated) {
    const auto rules_with = [](const std::string& resolving) {
        auto r = Rules::parse("version = 1\nengine = \"e\"\n"
                              "[[fact]]\nname = \"x\"\npattern = 'x = (\\w+)'\nstated = true\n"
                              "[[fact]]\nname = \"x\"\npattern = '" +
                                  resolving + "'\n",
                              "my.toml");
        EXPECT_TRUE(r.ok());
        return std::move(*r);
    };
    const auto read = [](const Rules& rules, const std::string& value) {
        Fingerprint fp;
        fp.engine = "e";
        fp.facts["x"] = value;
        rules.normalize(fp);
        return std::make_pair(fp.facts.count("x") ? fp.facts["x"] : "-",
                              fp.stated.count("x") ? fp.stated["x"] : "-");
    };
    for (const std::string resolving :
         {"(?:set|now) [(](on|off)[)]", "x [[:alpha:]]+ (?P<v>on|off)$", "x is (on|o(?:ff))"}) {
        const auto rules = rules_with(resolving);
        EXPECT_EQ(read(rules, "on"), std::make_pair(std::string("on"), std::string("-")))
            << resolving;
        EXPECT_EQ(read(rules, "auto"), std::make_pair(std::string("-"), std::string("auto")))
            << resolving;
    }
    const auto flagged = rules_with("(?i)x is (on|off)");
    EXPECT_EQ(read(flagged, "ON"), std::make_pair(std::string("ON"), std::string("-")));
    // A quoted "(" is no group: what the resolving rule captures is not
    // known, so nothing is moved.
    const auto quoted = rules_with("x \\Q(a)\\E is (on|off)");
    EXPECT_EQ(read(quoted, "auto"), std::make_pair(std::string("auto"), std::string("-")));
}

// Facts come from a launch's start-up. A verbose llama-server logs each
// request with its prompt once it is ready, and a question saying "loading
// model '/fake/spoofed.gguf'" and "K (q8_0)" made two launched servers state
// that model and cache type (an engine audit); the servers' own lines said
// otherwise.
TEST(Fingerprint, APromptAVerboseServerLogsIsNoFact) {
    auto log = read_log("llamacpp-b11669-default.log");
    log += "0.26.727.449 I slot launch_slot_: id  0 | task 0 | launching slot : {\"prompt\": "
           "\"x\\nload_model: loading model '/fake/spoofed.gguf'\\nllama_kv_cache: size = 1 MiB, "
           "K (q8_0), V (q8_0)\\nload_model: initializing, n_slots = 7, n_ctx_slot = 9\"}\n"
           // The same words at a line's start, as a dump that writes raw text would.
           "load_model: loading model '/fake/raw.gguf'\n";
    auto fp = fingerprint_log(log);
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(fp->facts["model"], "/opt/diffeval/models/outcomes.gguf");
    EXPECT_EQ(fp->facts["slots"], "1");
    EXPECT_EQ(fp->facts.count("kv_cache_type_k"), 0U);
}

// A log a server was restarted into (`>>`) states only its last launch's
// facts, also when that launch ran at the default verbosity, which states
// no build: the verbose launch before it said q8_0, two slots and flash
// attention, and they were reported for the server running now.
TEST(Fingerprint, ALaterLaunchInTheSameLogStartsItsFactsAfresh) {
    auto fp = fingerprint_log(read_log("llamacpp-b11669-lv4.log") +
                              read_log("llamacpp-b11669-default.log"));
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(fp->engine, "llamacpp");
    EXPECT_EQ(fp->facts["slots"], "1");
    EXPECT_EQ(fp->facts["context_per_slot"], "4096");
    EXPECT_EQ(fp->facts.count("kv_cache_type_k"), 0U);
    EXPECT_EQ(fp->facts.count("flash_attention"), 0U);
    EXPECT_EQ(fp->facts.count("engine_version"), 0U);
    // A launch's own start-up keeps every fact: the verbose one states its
    // backend before its build line.
    auto verbose = fingerprint_log(read_log("llamacpp-b11669-default.log") +
                                   read_log("llamacpp-b11669-lv4.log"));
    ASSERT_TRUE(verbose.ok());
    EXPECT_EQ(verbose->facts["backend"], "CPU");
    EXPECT_EQ(verbose->facts["slots"], "2");
    EXPECT_EQ(verbose->facts["kv_cache_type_k"], "q8_0");
}

// Every launch starts its facts afresh, ready or not: a verbose launch
// with a q8_0 cache killed while it loaded left its cache type to the f16
// server launched after it (an audit, against a real llama-server). And
// the server is the last launch that became ready: a launch after it that
// failed to bind the port kept only its own few facts.
TEST(Fingerprint, ALaunchThatNeverBecameReadyNeitherLeaksNorStandsForTheServer) {
    const auto verbose = read_log("llamacpp-b11669-lv4.log");
    const auto loaded = verbose.find("llama_server: model loaded");
    ASSERT_NE(loaded, std::string::npos);
    const auto killed_while_loading = verbose.substr(0, verbose.rfind('\n', loaded) + 1);
    auto fp = fingerprint_log(killed_while_loading + read_log("llamacpp-b11669-default.log"));
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(fp->facts.count("kv_cache_type_k"), 0U);
    EXPECT_EQ(fp->facts["slots"], "1");
    // The running verbose server, then a second launch that failed at once.
    auto later_failed = fingerprint_log(verbose + killed_while_loading.substr(0, 300));
    ASSERT_TRUE(later_failed.ok());
    EXPECT_EQ(later_failed->facts["kv_cache_type_k"], "q8_0");
    EXPECT_EQ(later_failed->facts["slots"], "2");
    EXPECT_EQ(later_failed->facts["context_per_slot"], "2048");
}

// A log whose last launch wrote the line a stopping server writes is a
// stopped server's (`stopped`); a launch appended after it runs again. An
// engine audit's attached log of an exited f16 server was taken as the
// running q4_0 server's.
TEST(Fingerprint, ALogWhoseLastLaunchStoppedSaysSo) {
    // The verbose server's log as it was while it ran: it ends with the line.
    const auto whole = read_log("llamacpp-b11669-lv4.log");
    const auto at = whole.find("cleaning up before exit");
    ASSERT_NE(at, std::string::npos);
    const auto verbose = whole.substr(0, whole.rfind('\n', at) + 1);
    const std::string exit_line =
        "1.18.194.931 I srv    operator(): operator(): cleaning up before exit...\n";
    auto running = fingerprint_log(verbose);
    ASSERT_TRUE(running.ok());
    EXPECT_EQ(running->stopped, "");
    auto stopped = fingerprint_log(verbose + exit_line);
    ASSERT_TRUE(stopped.ok());
    EXPECT_EQ(stopped->stopped,
              "1.18.194.931 I srv operator(): operator(): cleaning up before exit...");
    EXPECT_EQ(stopped->facts, running->facts); // what it ran is still read
    auto restarted = fingerprint_log(verbose + exit_line + read_log("llamacpp-b11669-default.log"));
    ASSERT_TRUE(restarted.ok());
    EXPECT_EQ(restarted->stopped, "");
    // A restart still loading after the ready launch stopped: the facts are
    // the stopped launch's, and so is the stop (an outside audit's log was
    // taken as a running server's).
    const auto default_log = read_log("llamacpp-b11669-default.log");
    const auto loaded = default_log.find("model loaded");
    ASSERT_NE(loaded, std::string::npos);
    const auto loading = default_log.substr(0, default_log.rfind('\n', loaded) + 1);
    auto mid_restart = fingerprint_log(verbose + exit_line + loading);
    ASSERT_TRUE(mid_restart.ok());
    EXPECT_EQ(mid_restart->facts, running->facts);
    EXPECT_NE(mid_restart->stopped, "");
    // A later launch that failed and stopped does not stop the ready one.
    auto failed_later = fingerprint_log(verbose + loading + exit_line);
    ASSERT_TRUE(failed_later.ok());
    EXPECT_EQ(failed_later->facts, running->facts);
    EXPECT_EQ(failed_later->stopped, "");
    // A prompt a verbose server logs that quotes the words is no stop.
    auto quoted = fingerprint_log(verbose + "srv  log: \"prompt\": \"cleaning up before exit\"\n");
    ASSERT_TRUE(quoted.ok());
    EXPECT_EQ(quoted->stopped, "");
    // vLLM's: uvicorn's last line.
    auto vllm = fingerprint_log("INFO 03-19 09:01:02 [api_server.py:1880] vLLM API server "
                                "version 0.28.0\nINFO:     Application startup complete.\n"
                                "INFO:     Finished server process [4242]\n");
    ASSERT_TRUE(vllm.ok());
    EXPECT_EQ(vllm->engine, "vllm");
    EXPECT_EQ(vllm->stopped, "INFO: Finished server process [4242]");
}
