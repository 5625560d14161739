#!/usr/bin/env bash
# Installs the Debian 12 packages diffeval builds and tests with, when any is
# missing. Safe to run repeatedly: it asks apt only when something is absent.
# Usage: scripts/install-deps.sh [--browser] [--fuzz]; exit 1 when packages are
# missing and it is not root, 2 for an unknown option.
set -euo pipefail

packages=(
    g++ cmake make pkg-config sqlite3
    libcurl4-openssl-dev nettle-dev nlohmann-json3-dev libsimdjson-dev libcli11-dev libfmt-dev
    libsqlite3-dev libre2-dev libcpp-httplib-dev libtomlplusplus-dev libyaml-cpp-dev libboost-dev
    libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
    libjemalloc-dev # the executable's allocator (CMakeLists.txt)
    libssl-dev      # OpenSSL's headers, which cpp-httplib's (the tests' client) includes
    debootstrap # the real-engine chroot of the engine tests (scripts/engine-chroot.sh)
)
# Extras, any of them together: --browser (the report's browser tests),
# --fuzz (clang: the sanitized suite and the fuzz targets).
for extra in "$@"; do
    case $extra in
    --browser) packages+=(chromium) ;;
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    *)
        echo "diffeval: install-deps.sh: unknown option '$extra'; use --browser and/or --fuzz" >&2
        exit 2
        ;;
    esac
done

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "diffeval: missing packages: ${missing[*]}; run 'sudo $0' or install them with apt-get" >&2
    exit 1
fi
echo "diffeval: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
