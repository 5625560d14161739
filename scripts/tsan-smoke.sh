#!/usr/bin/env bash
# Runs the commands that use several threads with a ThreadSanitizer build of
# diffeval (make tsan-smoke): the demo (three simulators, the run's event loop,
# writer and checkpoint threads, the report's readers and comparisons), a run
# with streaming and the probe against a simulator that fails, resets and
# stalls, its resume, a report of it, a run stopped by SIGINT and, when
# GSM8K_DIR is set, the official demo (the report then reads in two halves).
# Any race ThreadSanitizer reports fails the script (exit 1) with its report.
# Usage: scripts/tsan-smoke.sh BIN
set -euo pipefail
bin=$(realpath "$1")
work=$(mktemp -d)
sim_pid=
trap '[ -z "$sim_pid" ] || kill "$sim_pid" 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=sim-listening.sh
. "$(dirname "$0")/sim-listening.sh"

export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
# Kernels that randomise mmap with more bits than clang 14's ThreadSanitizer
# expects stop it at start ("unexpected memory mapping"); without address
# randomisation it runs.
prefix=()
if "$bin" --version 2>&1 | grep -q "unexpected memory mapping"; then
    prefix=(setarch "$(uname -m)" -R)
fi
# Where neither works (a container that forbids turning randomisation off),
# say so and skip rather than fail every later step.
if ! "${prefix[@]}" "$bin" --version >/dev/null 2>&1; then
    echo "tsan-smoke: skipped: the ThreadSanitizer build cannot start here:" \
        "$("${prefix[@]}" "$bin" --version 2>&1 | head -1)"
    exit 0
fi

failed=0
# judge NAME ALLOWED_CODES RC OUTPUT: a ThreadSanitizer report in the file
# OUTPUT, or an exit code RC outside ALLOWED_CODES (e.g. "0 1"), fails NAME.
judge() {
    local name=$1 allowed=$2 rc=$3 output=$4
    if grep -q "ThreadSanitizer" "$output" || [[ " $allowed " != *" $rc "* ]]; then
        echo "tsan-smoke: $name: FAILED (exit $rc)"
        grep -A40 "ThreadSanitizer" "$output" | head -80 || tail -20 "$output"
        failed=1
    else
        echo "tsan-smoke: $name: no race reported (exit $rc)"
    fi
}
# check NAME ALLOWED_CODES CMD...: runs CMD under ThreadSanitizer and judges it.
check() {
    local name=$1 allowed=$2
    shift 2
    local rc=0
    "${prefix[@]}" "$@" >"$work/out" 2>&1 || rc=$?
    judge "$name" "$allowed" "$rc" "$work/out"
}

check "demo (sample set)" "0" "$bin" demo --out "$work/demo"

# A simulator that misbehaves in every way it can, under the sanitizer too.
"${prefix[@]}" "$bin" sim --port 0 --fault-http-500 0.05 --fault-http-429 0.05 --retry-after-s 0 \
    --fault-reset-before-body 0.05 --fault-reset-during-body 0.05 --fault-stall 0.02 \
    --stall-ms 300 --fault-malformed-json 0.05 --fault-stream-error 0.05 --fault-markup 0.05 \
    >"$work/sim.out" 2>&1 &
sim_pid=$!
url=$(wait_listening "$work/sim.out")
[ -n "$url" ] || { echo "tsan-smoke: the simulator did not start"; cat "$work/sim.out"; exit 1; }
faulty=("$bin" run --server "s=$url" --dataset sample --db "$work/faulty.sqlite" --quiet
        --concurrency 256 --timeout 0.2 --retries 1 --repeats 2 --probe think-open --stream)
check "run against a failing simulator" "0 1" "${faulty[@]}"
check "the same run resumed" "0 1" "${faulty[@]}"
check "report of it" "0" "$bin" report --db "$work/faulty.sqlite" --out "$work/faulty-report"

# Stopped part-way: the loop, the writer and the checkpoint thread wind down.
"${prefix[@]}" "$bin" run --server "s=$url" --dataset sample --db "$work/stopped.sqlite" --quiet \
    --repeats 50 >"$work/out" 2>&1 &
run_pid=$!
sleep 2
kill -INT "$run_pid" 2>/dev/null || true
rc=0
wait "$run_pid" || rc=$?
judge "run stopped by SIGINT" "0 1 130" "$rc" "$work/out"
kill "$sim_pid" 2>/dev/null || true
rc=0
wait "$sim_pid" 2>/dev/null || rc=$?
sim_pid=
# It exits 0 on SIGTERM (143: killed before its handler was set).
judge "simulator" "0 143" "$rc" "$work/sim.out"

if [ -n "${GSM8K_DIR:-}" ] && [ -f "$GSM8K_DIR/test.jsonl" ]; then
    check "demo (official set)" "0" "$bin" demo --dataset "$GSM8K_DIR/test.jsonl" \
        --out "$work/official"
else
    echo "tsan-smoke: official demo skipped: set GSM8K_DIR to the official GSM8K directory"
fi
exit $failed
