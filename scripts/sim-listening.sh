# Sourced by the scripts that start `diffeval sim` in the background.
# wait_listening FILE: waits up to 10 s for the simulator's "listening on URL"
# line in FILE (its output) and prints the URL; nothing if it never came.
wait_listening() {
    for _ in $(seq 200); do
        grep -q listening "$1" 2>/dev/null && break
        sleep 0.05
    done
    sed -n 's/.* listening on //p' "$1"
}
