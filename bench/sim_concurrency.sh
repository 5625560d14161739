#!/usr/bin/env bash
# Benchmark: the simulator and the client at low and high concurrency. A
# figure to read, never a pass/fail test.
#
# Starts `diffeval sim` pinned to one core and runs `diffeval run` pinned to
# the other, once per concurrency (interleaved ROUNDS times), and prints per
# run: wall time, the client's and the simulator's CPU per request
# (user+sys: GNU time for the client, /proc for the simulator), and the p50/p99 request latency stored in the
# database. Usage:
#   bench/sim_concurrency.sh [BIN] [SIM_BIN]
# BIN defaults to build/diffeval and SIM_BIN to BIN (give an older binary to
# compare); DATASET defaults to the official test set when GSM8K_DIR is set.
set -euo pipefail

bin=${1:-build/diffeval}
sim_bin=${2:-$bin}
rounds=${ROUNDS:-3}
levels=${LEVELS:-"64 1024"}
if [ -n "${DATASET:-}" ]; then
    dataset=$DATASET
elif [ -n "${GSM8K_DIR:-}" ]; then
    dataset=$GSM8K_DIR/test.jsonl
else
    dataset=sample
fi
work=$(mktemp -d)
trap 'kill "$sim_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
# shellcheck source=../scripts/sim-listening.sh
. "$(dirname "$0")/../scripts/sim-listening.sh"

# user+sys clock ticks of process $1
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

taskset -c 0 "$sim_bin" sim --port 0 --dataset "$dataset" >"$work/sim.out" 2>&1 &
sim_pid=$!
url=$(wait_listening "$work/sim.out")

printf '%-12s %8s %10s %14s %14s %9s %9s\n' concurrency requests wall_s client_us/req \
    sim_us/req p50_ms p99_ms
for round in $(seq "$rounds"); do
    for c in $levels; do
        db="$work/c$c-$round.sqlite"
        s0=$(ticks "$sim_pid")
        taskset -c 1 /usr/bin/time -f '%e %U %S' -o "$db.time" "$bin" run --server s="$url" \
            --dataset "$dataset" --framing raw,chat --max-tokens 256,1024 --concurrency "$c" \
            --db "$db" --quiet >/dev/null || true
        s1=$(ticks "$sim_pid")
        read -r wall user sys <"$db.time"
        n=$(sqlite3 "$db" "SELECT count(*) FROM responses")
        read -r p50 p99 < <(sqlite3 -separator ' ' "$db" "
            WITH l AS (SELECT latency_ms FROM responses ORDER BY latency_ms)
            SELECT (SELECT latency_ms FROM l LIMIT 1 OFFSET (SELECT count(*) * 50 / 100 FROM l)),
                   (SELECT latency_ms FROM l LIMIT 1 OFFSET (SELECT count(*) * 99 / 100 FROM l))")
        printf '%-12s %8s %10.2f %14.1f %14.1f %9.1f %9.1f\n' "$c" "$n" "$wall" \
            "$(echo "($user + $sys) * 1000000 / $n" | bc -l)" \
            "$(echo "($s1 - $s0) * 1000000 / $hz / $n" | bc -l)" "$p50" "$p99"
    done
done
