#!/usr/bin/env bash
# Benchmark: issue 15's figures, each printed beside its goal. Figures to
# read, never pass/fail: the machine's other work moves them, so every
# client/simulator pair is pinned to its own core (simulator on CPU 0,
# client on CPU 1) and CPU time (user+sys) is preferred to wall time.
#
# Usage: bench/goals.sh [BIN]   (BIN defaults to build/diffeval)
# Needs GSM8K_DIR (the official set); wrk for the wrk comparison
# (apt-get install wrk), strace for the first-request time, perf (linux-perf)
# for the client's CPU to the microsecond, valgrind for its instructions
# (BENCH_CALLGRIND=0 skips them); BENCH_LARGE=0 skips the 100,000-request
# plans.
set -euo pipefail

bin=$(realpath "${1:-build/diffeval}")
here=$(cd "$(dirname "$0")" && pwd)
: "${GSM8K_DIR:?set GSM8K_DIR to the official GSM8K directory}"
test_set=$GSM8K_DIR/test.jsonl
work=$(mktemp -d)
sim_pid=
cleanup() {
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=../scripts/sim-listening.sh
. "$here/../scripts/sim-listening.sh"

row() { printf '%-58s %16s   %s\n' "$1" "$2" "$3"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# Start the simulator on CPU 0 with extra flags "$@"; sets $url and $sim_pid.
start_sim() {
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null && wait "$sim_pid" 2>/dev/null || true
    # Without this the wait below could read the last simulator's address.
    rm -f "$work/sim.out"
    taskset -c 0 "$bin" sim --port 0 --dataset "$test_set" "$@" >"$work/sim.out" 2>&1 &
    sim_pid=$!
    url=$(wait_listening "$work/sim.out")
}

# Run the client on CPU 1: client DB ARGS...; leaves "wall user sys maxrss_kb" in $work/time.
client() {
    local db=$1
    shift
    taskset -c 1 /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$bin" run --server s="$url" \
        --dataset "$test_set" --db "$db" --quiet "$@" >/dev/null 2>"$work/client.err" || true
}

# client_cpu DB ARGS...: as client, for figure 1 only, leaving the run's CPU
# seconds in $cpu: the kernel's task clock through perf stat where it works
# (to the microsecond), else /usr/bin/time's user+sys (10 ms ticks, a tenth
# of what figure 1 measures). perf's own start is in neither.
if perf stat -x, -e task-clock -o /dev/null true 2>/dev/null; then
    cpu_clock="task-clock"
    client_cpu() {
        local db=$1
        shift
        taskset -c 1 perf stat -x, -e task-clock -o "$work/pstat" "$bin" run --server s="$url" \
            --dataset "$test_set" --db "$db" --quiet "$@" >/dev/null 2>"$work/client.err" || true
        cpu=$(awk -F, '/task-clock/ {printf "%.6f", $1 / 1000}' "$work/pstat")
    }
else
    cpu_clock="user+sys"
    client_cpu() {
        client "$@"
        cpu=$(awk '{printf "%.2f", $2 + $3}' "$work/time")
    }
fi

printf '%-58s %16s   %s\n' figure measured goal

# 1. Client CPU per stored response, start-up excluded: the difference between
#    a full run and a 1-question run of the same matrix, five times in turn.
#    The machine's other work moves single runs by a fifth and only ever adds
#    CPU, so the median and the least of the five are printed.
#    Then one more full run for the simulator's CPU and the wall and p99 at 64.
start_sim
matrix=(--framing raw,chat --max-tokens 256,1024)
pers=()
for _ in 1 2 3 4 5; do
    rm -f "$work"/small.sqlite* "$work"/full.sqlite*
    client_cpu "$work/small.sqlite" "${matrix[@]}" --limit 1
    small_cpu=$cpu
    small=$(sqlite3 "$work/small.sqlite" "SELECT count(*) FROM responses")
    client_cpu "$work/full.sqlite" "${matrix[@]}" --concurrency 64
    full=$(sqlite3 "$work/full.sqlite" "SELECT count(*) FROM responses")
    pers+=("$(echo "($cpu - $small_cpu) * 1000000 / ($full - $small)" | bc -l)")
done
per=$(printf '%s\n' "${pers[@]}" | sort -g | sed -n 3p)
least=$(printf '%s\n' "${pers[@]}" | sort -g | sed -n 1p)
row "client CPU per stored response (us, start-up excluded)" \
    "$(printf '%.1f, least %.1f (%s)' "$per" "$least" "$cpu_clock")" "<= 40"
# Of that, what a response costs apart from its question's work (rendering,
# hashing and storing each body, the question's row): three more repeats of
# the matrix add responses to bodies already stored, so a full run taken
# from a 4-repeat run of the same matrix leaves a further response alone.
reps=()
for _ in 1 2 3; do
    rm -f "$work"/full.sqlite* "$work"/rep4.sqlite*
    client_cpu "$work/full.sqlite" "${matrix[@]}" --concurrency 64
    full_cpu=$cpu
    client_cpu "$work/rep4.sqlite" "${matrix[@]}" --concurrency 64 --repeats 4
    rep4=$(sqlite3 "$work/rep4.sqlite" "SELECT count(*) FROM responses")
    reps+=("$(echo "($cpu - $full_cpu) * 1000000 / ($rep4 - $full)" | bc -l)")
done
rm -f "$work"/rep4.sqlite*
row "  of which a further repeat's response (us)" \
    "$(printf '%.1f' "$(printf '%s\n' "${reps[@]}" | sort -g | sed -n 2p)")" "(the rest: per question)"
# The same difference in user-space instructions (callgrind): a count the
# host's other work does not move, to tell a change of a few percent from
# noise. Under callgrind the client runs some 50 times slower, so it batches
# differently, and valgrind's CPU has no SHA extensions, so hashing counts
# several times its instructions on the machine; the figure is for comparing
# binaries, not a time.
if command -v valgrind >/dev/null && [ "${BENCH_CALLGRIND:-1}" != 0 ]; then
    irs=()
    for args in "--limit 1" "--concurrency 64"; do
        rm -f "$work"/cg.sqlite*
        # shellcheck disable=SC2086 # $args is two words on purpose
        taskset -c 1 valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$bin" run \
            --server s="$url" --dataset "$test_set" --db "$work/cg.sqlite" --quiet \
            "${matrix[@]}" $args >/dev/null 2>"$work/cg.err" || true
        irs+=("$(sed -n 's/^summary: //p' "$work/cg.out")"
              "$(sqlite3 "$work/cg.sqlite" "SELECT count(*) FROM responses")")
    done
    row "  user-space instructions per stored response (callgrind)" \
        "$(echo "(${irs[2]} - ${irs[0]}) / (${irs[3]} - ${irs[1]})" | bc)" "(to compare binaries)"
    rm -f "$work"/cg.sqlite* "$work/cg.out"
else
    row "  user-space instructions per stored response (callgrind)" "skipped" \
        "(apt-get install valgrind)"
fi
rm -f "$work"/full.sqlite*
s0=$(ticks "$sim_pid")
client "$work/full.sqlite" "${matrix[@]}" --concurrency 64
s1=$(ticks "$sim_pid")
read -r w64 _ _ _ <"$work/time"
row "simulator CPU per request (us)" \
    "$(printf %.1f "$(echo "($s1 - $s0) * 1000000 / $hz / $full" | bc -l)")" "<= 80 (half of 159)"
rate64=$(echo "$full / $w64" | bc -l)

# 2. The simulator at --concurrency 1024 against 64.
p99() {
    sqlite3 "$1" "SELECT latency_ms FROM responses ORDER BY latency_ms LIMIT 1 OFFSET
                  (SELECT count(*) * 99 / 100 FROM responses)"
}
client "$work/c1024.sqlite" "${matrix[@]}" --concurrency 1024
read -r w1024 _ _ _ <"$work/time"
row "wall at --concurrency 1024 / 64 (5,276 requests)" \
    "$(printf '%.2f / %.2f s' "$w1024" "$w64")" "1024 no slower"
# One run's p99 is its slowest 53 responses, which one scheduling hiccup of
# the shared core moves by tens of milliseconds: two more pairs of runs, in
# turn, and the median of the three of each side.
p1024=("$(p99 "$work/c1024.sqlite")")
p64=("$(p99 "$work/full.sqlite")")
for _ in 1 2; do
    rm -f "$work"/c1024.sqlite* "$work"/c64.sqlite*
    client "$work/c64.sqlite" "${matrix[@]}" --concurrency 64
    p64+=("$(p99 "$work/c64.sqlite")")
    client "$work/c1024.sqlite" "${matrix[@]}" --concurrency 1024
    p1024+=("$(p99 "$work/c1024.sqlite")")
done
rm -f "$work"/c64.sqlite*
median3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
row "p99 latency at 1024 / 64 (zero-latency profile)" \
    "$(printf '%.0f / %.0f ms' "$(median3 "${p1024[@]}")" "$(median3 "${p64[@]}")")" \
    "<= 2x (median of 3 in turn)"
# The same matrix four times over (21,104 requests): opening 1,024
# connections is a fixed cost that the run above, 5,276 requests long,
# still shows; a longer run shows whether requests go slower once they are
# open.
rm -f "$work"/r64.sqlite* "$work"/r1024.sqlite*
client "$work/r64.sqlite" "${matrix[@]}" --repeats 4 --concurrency 64
read -r wr64 _ _ _ <"$work/time"
client "$work/r1024.sqlite" "${matrix[@]}" --repeats 4 --concurrency 1024
read -r wr1024 _ _ _ <"$work/time"
row "wall at --concurrency 1024 / 64 (21,104 requests)" \
    "$(printf '%.2f / %.2f s' "$wr1024" "$wr64")" "1024 no slower"
# With a simulated latency (time to first token 200 ms, 1 ms a token) the
# server is not the bottleneck and p99 shows whether it queues connections.
start_sim --ttft-ms 200 --per-token-ms 1
client "$work/l64.sqlite" --framing raw --max-tokens 256 --limit 640 --concurrency 64
client "$work/l1024.sqlite" --framing raw --max-tokens 256 --limit 1319 --concurrency 1024
row "p99 latency at 1024 / 64 (200 ms + 1 ms/token profile)" \
    "$(printf '%.0f / %.0f ms' "$(p99 "$work/l1024.sqlite")" "$(p99 "$work/l64.sqlite")")" \
    "<= 2x"
# The simulator's own count: the most requests it held at once.
if command -v curl >/dev/null; then
    row "  requests the simulator held at once, at most" \
        "$(curl -s "$url/stats" | sed -n 's/.*"peak":\([0-9]*\).*/\1/p')" "1024"
fi

# 3. Stored responses per second against wrk on the same endpoint and bodies.
start_sim
if command -v wrk >/dev/null; then
    # Every body the run sent, each to its framing's endpoint: the simulator
    # sees the same requests from both clients.
    sqlite3 -separator ' ' "$work/full.sqlite" \
        "SELECT CASE framing WHEN 'raw' THEN '/v1/completions' ELSE '/v1/chat/completions' END,
                request_json FROM v_requests ORDER BY request_id" >"$work/bodies.txt"
    cat >"$work/post.lua" <<'LUA'
paths, bodies = {}, {}
for line in io.lines(os.getenv("BODIES")) do
    local space = line:find(" ")
    paths[#paths + 1] = line:sub(1, space - 1)
    bodies[#bodies + 1] = line:sub(space + 1)
end
local i = 0
request = function()
    i = i % #bodies + 1
    return wrk.format("POST", paths[i], {["Content-Type"] = "application/json"}, bodies[i])
end
LUA
    w0_ticks=$(ticks "$sim_pid")
    w0_ns=$(date +%s%N)
    BODIES="$work/bodies.txt" taskset -c 1 wrk -t1 -c64 -d5s --latency -s "$work/post.lua" \
        "$url" >"$work/wrk64.out"
    w1_ticks=$(ticks "$sim_pid")
    w1_ns=$(date +%s%N)
    wrk_rate=$(awk '/Requests\/sec/ {print $2}' "$work/wrk64.out")
    # Whether wrk's rate is the simulator's: its core's share busy meanwhile.
    # Near 100%, wrk measures the simulator's capacity, and a client reaches
    # 0.9 of it only by spending less than ~1.1x the simulator's CPU a request.
    row "  the simulator's core busy during wrk (c=64)" \
        "$(printf '%.0f%%' "$(echo "($w1_ticks - $w0_ticks) * 100 * 1000000000 / $hz / ($w1_ns - $w0_ns)" | bc -l)")" \
        "(100%: wrk measures the simulator)"
    # wrk's own p99 at 1,024 connections against 64: with the server answering
    # at once, any closed-loop client's latency grows with what it keeps in
    # flight (Little's law), so this is the reference for the p99 row above.
    BODIES="$work/bodies.txt" taskset -c 1 wrk -t1 -c1024 -d5s --latency -s "$work/post.lua" \
        "$url" >"$work/wrk1024.out"
    wrk_p99() { awk '$1 == "99%" {print $2}' "$1"; }
    row "wrk's own p99 at 1024 / 64 (zero-latency profile)" \
        "$(wrk_p99 "$work/wrk1024.out") / $(wrk_p99 "$work/wrk64.out")" "the reference"
    # diffeval's rate with its start-up (a 1-question run's wall) taken out,
    # from the runs at 64 connections above: one pass of the matrix (0.3 s,
    # against /usr/bin/time's 10 ms steps), and four, whose later passes send
    # bodies already stored.
    client "$work/rate0.sqlite" "${matrix[@]}" --limit 1
    read -r w0 _ _ _ <"$work/time"
    n4=$(sqlite3 "$work/r64.sqlite" "SELECT count(*) FROM responses")
    rate=$(echo "($full - 4) / ($w64 - $w0)" | bc -l)
    rate4=$(echo "($n4 - 4) / ($wr64 - $w0)" | bc -l)
    row "stored responses/s vs wrk requests/s (c=64)" \
        "$(printf '%.0f / %.0f = %.2f' "$rate" "$wrk_rate" "$(echo "$rate / $wrk_rate" | bc -l)")" \
        ">= 0.9"
    row "  the same over four passes of the matrix" \
        "$(printf '%.0f / %.0f = %.2f' "$rate4" "$wrk_rate" "$(echo "$rate4 / $wrk_rate" | bc -l)")" \
        ">= 0.9"
else
    row "stored responses/s vs wrk requests/s" "no wrk" "apt-get install wrk"
fi

# 4. Planning: peak RSS at 1,320 and 100,244 planned requests of the same
#    matrix (only the plan's length differs: 330 questions once, 1,319
#    questions 19 times), and the first request of a 100,244-request plan
#    resumed from a half-full database.
if [ "${BENCH_LARGE:-1}" != 0 ]; then
    # Three of each in turn, and the median: the allocator's arenas take
    # transparent huge pages, so a peak moves in 2 MiB steps from run to run.
    smalls=()
    larges=()
    for i in 1 2 3; do
        rm -f "$work"/p1.sqlite* "$work"/p100k.sqlite*
        client "$work/p1.sqlite" "${matrix[@]}" --limit 330
        read -r _ _ _ rss <"$work/time"
        smalls+=("$rss")
        if [ "$i" = 1 ]; then
            client "$work/p26k.sqlite" "${matrix[@]}" --repeats 5
            read -r _ _ _ rss_mid <"$work/time"
            rm -f "$work"/p26k.sqlite*
        fi
        client "$work/p100k.sqlite" "${matrix[@]}" --repeats 19
        read -r _ _ _ rss <"$work/time"
        larges+=("$rss")
    done
    mib() { printf '%.1f' "$(echo "$1 / 1024" | bc -l)"; }
    rss_small=$(median3 "${smalls[@]}")
    rss_large=$(median3 "${larges[@]}")
    row "peak RSS at 1,320 / 100,244 planned requests" \
        "$(mib "$rss_small") / $(mib "$rss_large") MiB" "within 10% (median of 3 in turn)"
    row "  each run, 1,320 / 100,244" \
        "$(mib "${smalls[0]}") $(mib "${smalls[1]}") $(mib "${smalls[2]}") / $(mib "${larges[0]}") $(mib "${larges[1]}") $(mib "${larges[2]}")" ""
    # Whether what it adds grows on with the plan or is a bounded step
    # (SQLite's 2 MiB page cache filling, the writer's batches at full size).
    row "  at 26,380 planned requests" \
        "$(printf '%.1f MiB' "$(echo "$rss_mid / 1024" | bc -l)")" "(between the two)"
    sqlite3 "$work/p100k.sqlite" "UPDATE requests SET response_id = NULL WHERE request_id % 2 = 0"
    start_sim
    if command -v strace >/dev/null; then
        # From exec to the first request's bytes on the socket, by strace's
        # clock (seccomp-bpf: only these calls stop the process; libcurl
        # sends with sendto, the plain http:// client with sendmsg).
        taskset -c 1 strace -f --seccomp-bpf -e trace=execve,sendto,sendmsg -ttt -o "$work/strace" \
            "$bin" run --server s="$url" --dataset "$test_set" --db "$work/p100k.sqlite" --quiet \
            "${matrix[@]}" --repeats 19 >/dev/null 2>&1 || true
        t0=$(grep -m1 execve "$work/strace" | awk '{print $2}')
        t1=$(grep -m1 'POST /v1' "$work/strace" | awk '{print $2}')
        if [ -n "$t0" ] && [ -n "$t1" ]; then
            first=$(printf %.0f "$(echo "($t1 - $t0) * 1000" | bc -l)")
        else
            first="no request"
        fi
    else
        first="no strace"
    fi
    row "first request of a 100,244 plan, half stored (ms)" "${first:-none}" "<= 50"
else
    row "planning figures" "skipped" "BENCH_LARGE=1"
fi

# 5. The official demo: wall time and database size.
kill "$sim_pid" 2>/dev/null || true
sim_pid=
# The databases above (a 100,000-request one among them) are deleted and
# their pages written out first, so that the kernel's writeback of earlier
# figures' files is not in the demo's time.
rm -f "$work"/*.sqlite*
sync
# The median of three runs: one run on these machines varies by a second.
demos=()
for _ in 1 2 3; do
    rm -rf "$work/demo"
    /usr/bin/time -f '%e' -o "$work/time" "$bin" demo --dataset "$test_set" --out "$work/demo" \
        >/dev/null 2>&1 || true
    demos+=("$(cat "$work/time")")
done
median=$(printf '%s\n' "${demos[@]}" | sort -n | sed -n 2p)
row "make demo on the official set (wall s, 2 cores)" \
    "$median (median of ${demos[*]})" "<= 5"
size=$(stat -c %s "$work/demo/diffeval-demo.sqlite")
# The issue's 294 MB was measured before the demo sent the probe; with the
# probe's requests the schema 8 file is 549 MB.
row "official demo database (MB)" "$(echo "$size / 1000000" | bc)" "<= 183 (a third of 549)"
# What a user runs next on it: the summary the demo suggests and a CI gate
# that requires every request answered. Both read what each run asked for
# (store::completeness), which took 9 s here while its query counted the
# questions again for every stored request.
demo_db="$work/demo/diffeval-demo.sqlite"
# (time's file ends with the wall; a gate that fails says so on a line before.)
/usr/bin/time -f '%e' -o "$work/time" "$bin" summary --db "$demo_db" >/dev/null 2>&1 || true
t_summary=$(tail -1 "$work/time")
/usr/bin/time -f '%e' -o "$work/time" "$bin" gate --db "$demo_db" --baseline default \
    --candidate deepgemm --max-drop 5 --require-complete >/dev/null 2>&1 || true
row "summary / gate --require-complete on it (wall s)" \
    "$(printf '%s / %s' "$t_summary" "$(tail -1 "$work/time")")" "(was 10.7 / 9.5)"

# The issue's own measure: the demo's matrix without the probe (three
# simulated servers, both framings, 256 and 1,024 tokens, 3 repeats).
ports=()
for profile in default deepgemm no-deepgemm; do
    "$bin" sim --port 0 --dataset "$test_set" --profile "$profile" >"$work/sim-$profile.out" 2>&1 &
    ports+=($!)
done
servers=()
for profile in default deepgemm no-deepgemm; do
    for _ in $(seq 200); do
        grep -q listening "$work/sim-$profile.out" 2>/dev/null && break
        sleep 0.05
    done
    servers+=(--server "$profile=$(sed -n 's/.* listening on //p' "$work/sim-$profile.out")")
done
"$bin" run "${servers[@]}" --dataset "$test_set" --db "$work/noprobe.sqlite" --quiet \
    --framing raw,chat --max-tokens 256,1024 --repeats 3 >/dev/null 2>&1 || true
"$bin" summary --db "$work/noprobe.sqlite" >/dev/null 2>&1 || true
kill "${ports[@]}" 2>/dev/null || true
size=$(stat -c %s "$work/noprobe.sqlite")
row "the same matrix without the probe (MB)" "$(echo "$size / 1000000" | bc)" "<= 98 (a third of 294)"
