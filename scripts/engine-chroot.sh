#!/usr/bin/env bash
# Provisions the real-engine chroot: a minimal Debian sid with llama.cpp's
# server (llama.cpp-tools) and gguf-py (python3-gguf, python3-numpy). Debian 12
# cannot run these packages (they need a newer libc), so they live in a chroot
# kept outside the source tree and reused between runs.
#
#   scripts/engine-chroot.sh [DIR]     DIR defaults to $DIFFEVAL_ENGINE_CHROOT,
#                                      else /var/cache/diffeval/engine-chroot
#
# It also builds the tiny test models (scripts/tiny_models.py, run inside the
# chroot) into DIR/opt/diffeval/models: outcomes.gguf and random.gguf, again
# whenever the builder changes. About 2 minutes the first time (debootstrap,
# then 33 MB of packages).
#
# Idempotent: a chroot that is already complete is checked in well under a
# second. The mirror comes from this machine's own apt sources. On success the
# last line of stdout is the chroot directory; when the chroot cannot be built
# (not root, no debootstrap, no network) it prints one line starting with
# "diffeval: engine chroot unavailable:" on stderr and exits 2, so callers can
# skip visibly.
set -euo pipefail

dir="${1:-${DIFFEVAL_ENGINE_CHROOT:-/var/cache/diffeval/engine-chroot}}"
packages=(llama.cpp-tools python3-gguf python3-numpy)
stamp="$dir/.diffeval-engine-ready"

unavailable() {
    echo "diffeval: engine chroot unavailable: $*" >&2
    exit 2
}

here="$(cd "$(dirname "$0")" && pwd)"

# The tiny models (scripts/tiny_models.py) in DIR/opt/diffeval/models, built
# again only when the builder changed.
build_models() {
    local models="$dir/opt/diffeval/models" want have
    want="$(sha256sum "$here/tiny_models.py" | cut -d' ' -f1)"
    have="$(cat "$models/.builder-sha256" 2>/dev/null || true)"
    if [ "$want" != "$have" ] || [ ! -f "$models/outcomes.gguf" ]; then
        mkdir -p "$models"
        cp "$here/tiny_models.py" "$dir/opt/diffeval/tiny_models.py"
        chroot "$dir" python3 /opt/diffeval/tiny_models.py /opt/diffeval/models ||
            unavailable "building the tiny models in $dir failed"
        echo "$want" >"$models/.builder-sha256"
    fi
}

# A complete chroot (the stamp is written only after every package installed)
# with current models: nothing to do.
if [ -f "$stamp" ] && [ -x "$dir/usr/bin/llama-server" ] &&
    [ "$(sha256sum "$here/tiny_models.py" | cut -d' ' -f1)" = \
        "$(cat "$dir/opt/diffeval/models/.builder-sha256" 2>/dev/null)" ]; then
    echo "$dir"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || unavailable "building it needs root (debootstrap and chroot); run 'sudo $0'"
# Tests started in parallel provision once: the others wait here, then find
# the stamp.
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
if [ -f "$stamp" ] && [ -x "$dir/usr/bin/llama-server" ]; then
    build_models
    echo "$dir"
    exit 0
fi

# The first Debian archive (not security, not updates) in this machine's apt
# sources, in either the one-line or the deb822 format.
find_mirror() {
    local files=()
    [ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    [ ${#files[@]} -gt 0 ] || return 1
    # One-line: "deb [options] URI suite components".
    awk '$1 == "deb" {
            uri = ($2 ~ /^\[/) ? "" : $2
            for (i = 2; i <= NF && uri == ""; i++) if ($i ~ /\]$/) uri = $(i + 1)
            if (uri ~ /\/debian\/?$/) { print uri; exit }
        }' "${files[@]}" | head -n1 | grep . && return 0
    # deb822: "URIs: ..." fields.
    awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }' \
        "${files[@]}" | head -n1 | grep .
}
mirror="$(find_mirror)" || unavailable "no Debian archive found in /etc/apt/sources.list or /etc/apt/sources.list.d/"

if ! command -v debootstrap >/dev/null; then
    echo "diffeval: installing debootstrap" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends debootstrap >/dev/null; } ||
        unavailable "debootstrap is not installed and apt-get could not install it"
fi

mkdir -p "$dir"
log="$dir.log"
start=$(date +%s)
if [ ! -x "$dir/usr/bin/apt-get" ] || [ ! -f "$dir/.diffeval-base-ready" ]; then
    echo "diffeval: building the engine chroot in $dir from $mirror (about a minute; log $log)" >&2
    # A half-built tree from an interrupted run is started again.
    rm -rf "${dir:?}"/* "${dir:?}"/.diffeval-* 2>/dev/null || true
    debootstrap --variant=minbase sid "$dir" "$mirror" >"$log" 2>&1 ||
        unavailable "debootstrap of sid from $mirror failed (network?); see $log"
    touch "$dir/.diffeval-base-ready"
fi

# Follow the host's apt in what it accepts: a machine whose mirror is a
# snapshot turns off the Release file expiry check, and so must the chroot.
if apt-config dump Acquire::Check-Valid-Until 2>/dev/null | grep -qi '"false"'; then
    echo 'Acquire::Check-Valid-Until "false";' >"$dir/etc/apt/apt.conf.d/99diffeval-host"
fi
echo "diffeval: installing ${packages[*]} in the engine chroot" >&2
export DEBIAN_FRONTEND=noninteractive
{ chroot "$dir" apt-get update -qq &&
    chroot "$dir" apt-get install -y -qq --no-install-recommends "${packages[@]}"; } >>"$log" 2>&1 ||
    unavailable "apt-get install ${packages[*]} in $dir failed (network?); see $log"
chroot "$dir" apt-get clean >/dev/null 2>&1 || true
chroot "$dir" dpkg-query -W -f='${Version}' llama.cpp-tools >"$dir/.diffeval-llama-version" 2>/dev/null || true
touch "$stamp"
build_models
echo "diffeval: engine chroot ready in $(($(date +%s) - start)) s (llama.cpp-tools $(cat "$dir/.diffeval-llama-version"))" >&2
echo "$dir"
