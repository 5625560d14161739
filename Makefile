# The two commands of the README. Each installs what is missing, builds, then
# runs. BUILD_TYPE and BUILD_DIR may be overridden.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
# Seconds one test may take before ctest fails it: a hang fails its test
# instead of the whole CI run.
TEST_TIMEOUT ?= 900

# The sanitized suite and the fuzz targets share one clang tree (AddressSanitizer,
# UBSan and libFuzzer's coverage in every object), so CI compiles the sources
# twice, not three times: the release tree and this one.
SANITIZE_DIR ?= build-sanitize
FUZZ_DIR ?= $(SANITIZE_DIR)
SANITIZE_CMAKE = -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
	-DDIFFEVAL_SANITIZE=ON -DDIFFEVAL_FUZZ=ON
FUZZ_SECONDS ?= 30
FUZZ_TARGETS ?=
# ThreadSanitizer needs a tree of its own (it cannot share objects with
# AddressSanitizer); only the diffeval binary is built in it.
TSAN_DIR ?= build-tsan

.PHONY: all deps build demo demo-engine test test-sanitize fuzz tsan-smoke bench clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	$(BUILD_DIR)/diffeval demo

# The optional real-engine demo: one GGUF (MODEL, default
# ../shared/models/tiny-gsm8k.gguf) served twice by llama.cpp's server with a
# different KV-cache type; needs root and Debian's archive (see
# scripts/engine-chroot.sh).
demo-engine: build
	scripts/demo-engine.sh $(BUILD_DIR) $(MODEL)

# The engine chroot is provisioned first so that its progress, or the one line
# saying why the real-engine tests will be skipped, is seen.
test: build
	@scripts/install-deps.sh --browser
	@scripts/engine-chroot.sh >/dev/null || true
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout $(TEST_TIMEOUT)

# The whole suite built with AddressSanitizer and UBSan (clang); any report
# fails the test that triggered it.
test-sanitize: deps
	@scripts/install-deps.sh --browser --fuzz
	@cmake -S . -B $(SANITIZE_DIR) $(SANITIZE_CMAKE) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(SANITIZE_DIR) -j $(JOBS)
	cd $(SANITIZE_DIR) && ASAN_OPTIONS=detect_leaks=1:exitcode=86 \
		UBSAN_OPTIONS=print_stacktrace=1:exitcode=86 ctest --output-on-failure -j $(JOBS) \
		--timeout $(TEST_TIMEOUT) $(CTEST_FLAGS)

# libFuzzer targets, each run FUZZ_SECONDS seconds; FUZZ_TARGETS (e.g. "sse
# response") picks some. After test-sanitize only their links are left to do.
fuzz: deps
	@scripts/install-deps.sh --fuzz
	@cmake -S . -B $(FUZZ_DIR) $(SANITIZE_CMAKE) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz_all
	@scripts/fuzz.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The commands that run several threads (the demo, a run against a failing
# simulator, its resume and report, a run stopped by SIGINT, the simulator, the
# official demo when GSM8K_DIR is set), with a ThreadSanitizer build: any race
# fails it.
tsan-smoke: deps
	@scripts/install-deps.sh --fuzz
	@cmake -S . -B $(TSAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
		-DDIFFEVAL_TSAN=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(TSAN_DIR) -j $(JOBS) --target diffeval
	@scripts/tsan-smoke.sh $(TSAN_DIR)/diffeval

bench: build
	$(BUILD_DIR)/bench_run_engine
	$(BUILD_DIR)/bench_report
	$(BUILD_DIR)/bench_calibration
	$(BUILD_DIR)/bench_scoring
	@if [ -n "$$GSM8K_DIR" ]; then bench/goals.sh $(BUILD_DIR)/diffeval; \
	else echo "bench/goals.sh: set GSM8K_DIR to the official GSM8K directory for the figures beside their goals"; fi

clean:
	rm -rf $(BUILD_DIR) $(SANITIZE_DIR) $(FUZZ_DIR) $(TSAN_DIR)
