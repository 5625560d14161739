# The two commands of the README. Each installs what is missing, builds, then
# runs. BUILD_TYPE and BUILD_DIR may be overridden.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)

.PHONY: all deps build demo demo-engine test bench clean

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
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

bench: build
	$(BUILD_DIR)/bench_run_engine
	$(BUILD_DIR)/bench_report
	$(BUILD_DIR)/bench_calibration

clean:
	rm -rf $(BUILD_DIR)
