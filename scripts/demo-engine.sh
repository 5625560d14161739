#!/usr/bin/env bash
# The optional real-engine demo: the same GGUF served twice by llama.cpp's
# llama-server (in the engine chroot), once with the default f16 KV cache and
# once with a q4_0 K cache, run as one diffeval experiment; prints the
# questions whose answers flipped and writes the reports.
#
#   scripts/demo-engine.sh BUILD_DIR [MODEL.gguf]
#
# MODEL defaults to shared/models/tiny-gsm8k.gguf beside the checkout (or
# beside its parent, for a git worktree) when present, else to the
# random-weights model scripts/tiny_models.py builds. The questions are
# GSM8K's test set from GSM8K_DIR or shared/datasets/gsm8k found the same way,
# else the built-in sample.
# LIMIT (default 40) questions, MAX_TOKENS (default 256), OUT (default
# BUILD_DIR/demo-engine) may be set in the environment.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
build="$(cd "${1:?usage: $0 BUILD_DIR [MODEL.gguf]}" && pwd)"
model="${2:-}"
limit="${LIMIT:-40}"
max_tokens="${MAX_TOKENS:-256}"
out="${OUT:-$build/demo-engine}"
bin="$build/diffeval"

# 1. The chroot with llama-server and the tiny models.
root="$("$here/engine-chroot.sh" | tail -n1)" || {
    echo "diffeval: demo-engine needs the engine chroot (see above)" >&2
    exit 2
}

# 2. The model, copied into the chroot when it lives outside it.
shared=""
for base in "$repo/.." "$repo/../.."; do
    if [ -d "$base/shared" ]; then
        shared="$(cd "$base/shared" && pwd)"
        break
    fi
done
if [ -z "$model" ] && [ -n "$shared" ] && [ -f "$shared/models/tiny-gsm8k.gguf" ]; then
    model="$shared/models/tiny-gsm8k.gguf"
fi
if [ -z "$model" ]; then
    inside=/opt/diffeval/models/random.gguf
    echo "diffeval: no MODEL and no ../shared/models/tiny-gsm8k.gguf: serving the random-weights" \
        "model (its texts mean nothing; flips are still flips)" >&2
else
    [ -f "$model" ] || { echo "diffeval: MODEL $model does not exist" >&2; exit 2; }
    mkdir -p "$root/opt/diffeval/models/user"
    inside="/opt/diffeval/models/user/$(basename "$model")"
    cmp -s "$model" "$root$inside" 2>/dev/null || cp "$model" "$root$inside"
fi

# 3. The questions: the official GSM8K test set when it is at hand (the tiny
#    model learned GSM8K's train split), else the built-in sample.
dataset=sample
gsm8k="${GSM8K_DIR:-$shared/datasets/gsm8k}"
if [ -f "$gsm8k/test.jsonl" ] && [ -f "$gsm8k/train.jsonl" ]; then
    dataset="$(cd "$gsm8k" && pwd)/test.jsonl"
fi

# 4. One experiment, two servers (-t 1 -tb 1 each: they share the cores;
#    -lv 4 so their logs state the KV-cache types the report compares).
mkdir -p "$out"
rm -rf "$out/demo.sqlite" "$out/demo.sqlite-wal" "$out/demo.sqlite-shm" "$out/demo-logs"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port_a=$(free_port)
port_b=$(free_port)
server() { # name port extra-args...
    local name=$1 port=$2
    shift 2
    printf '\n[[servers]]\nname = "%s"\nurl = "http://127.0.0.1:%s"\nready_timeout = 120\n' "$name" "$port"
    printf 'launch = ["chroot", "%s", "llama-server", "-m", "%s", "--host", "127.0.0.1", "--port", "%s", "-t", "1", "-tb", "1", "-np", "1", "-c", "4096", "-lv", "4"' \
        "$root" "$inside" "$port"
    for a in "$@"; do printf ', "%s"' "$a"; done
    printf ']\n'
}
{
    printf 'version = 1\nframings = ["raw", "chat"]\nmax_tokens = [%s]\nlimit = %s\n' "$max_tokens" "$limit"
    printf 'dataset = "%s"\nconcurrency = "auto"\n' "$dataset"
    server kv-f16 "$port_a"
    server kv-q4_0 "$port_b" -ctk q4_0
} >"$out/experiment.toml"

echo "diffeval: serving $(basename "$inside") twice (KV cache f16 and q4_0), $limit questions" \
    "in both framings; $out/experiment.toml" >&2
"$bin" run --config "$out/experiment.toml" --db "$out/demo.sqlite" || [ $? -eq 1 ]

# 5. What changed, and the reports.
"$bin" diff --db "$out/demo.sqlite" kv-f16/raw kv-q4_0/raw
"$bin" diff --db "$out/demo.sqlite" kv-f16/chat kv-q4_0/chat
"$bin" report --db "$out/demo.sqlite" --out "$out/report" --baseline kv-f16
echo "diffeval: reports in $out/report (report.md, report.html, summary.json)" >&2
