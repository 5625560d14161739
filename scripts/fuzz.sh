#!/usr/bin/env bash
# Runs every libFuzzer target built in BUILD_DIR (make fuzz) for SECONDS each,
# one after another at the lowest CPU priority, each seeded from the
# repository's own cases and data files. Prints executions, coverage and
# crashes per target; exits 1 if any target crashed (its input is saved in
# BUILD_DIR/crashes/).
# Usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]
set -euo pipefail
build=$1
seconds=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(sse response dataset pyjson scorers fingerprint splice redact wal framing_toml
             scorer_toml profile_toml fingerprint_toml experiment_toml)
fi

seeds_of() {
    case $1 in
    sse | response) echo "$root"/tests/fuzz/corpus/response/* ;;
    dataset) echo "$root"/datasets/sample/*.jsonl ;;
    pyjson) echo "$root"/tests/golden/*.json "$root"/tests/fuzz/corpus/response/*.json ;;
    scorers) echo "$root"/tests/fuzz/corpus/scorers/* ;;
    fingerprint) echo "$root"/tests/data/*.log ;;
    splice) echo "$root"/tests/fuzz/corpus/splice/* ;;
    redact) echo "$root"/tests/fuzz/corpus/redact/* ;;
    wal) echo "$root"/tests/fuzz/corpus/wal/* ;;
    framing_toml) echo "$root"/prompts/*.toml ;;
    scorer_toml) echo "$root"/scorers/*.toml ;;
    profile_toml) echo "$root"/harness/sim/profiles/*.toml ;;
    fingerprint_toml) echo "$root"/fingerprints/*.toml ;;
    experiment_toml) echo "$root"/tests/fuzz/corpus/experiment/* ;;
    esac
}

failed=0
mkdir -p "$build/crashes"
for t in "${targets[@]}"; do
    corpus="$build/corpus/$t"
    mkdir -p "$corpus"
    # shellcheck disable=SC2046
    cp $(seeds_of "$t") "$corpus/"
    log="$build/fuzz_$t.log"
    if nice -n 19 "$build/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 \
        -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$build/crashes/$t-" \
        "$corpus" >"$log" 2>&1; then
        status="0 crashes"
    else
        status="CRASHED: see $log and $build/crashes/"
        failed=1
    fi
    execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || echo "cov: ?")
    echo "fuzz_$t: $execs executions, $cov, $(find "$corpus" -type f | wc -l) corpus files, $status"
done
exit $failed
