#!/usr/bin/env bash
# Installs what apns-worker needs on Debian (as root): the C libraries it builds against, the
# programs its tests talk to, and a pinned Python venv of test tools. Installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

build_packages=(pkg-config librdkafka-dev libnghttp2-dev libssl-dev libyaml-dev libmicrohttpd-dev libjemalloc-dev)
# gdb: the storm test reads a crashed worker's core dump to tell librdkafka's known assignor crash from ours.
test_packages=(nghttp2-client nghttp2-server h2o curl openssl python3-venv debootstrap tinyproxy kcat gdb)

want=("${build_packages[@]}")
if [[ "${1:-}" == "--test" ]]; then want+=("${test_packages[@]}"); fi

missing=()
for package in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # policy-rc.d keeps h2o and friends from starting system daemons during the install.
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ "${1:-}" == "--test" ]]; then
    venv=.venv
    if [[ ! -x "$venv/bin/pytest" ]] || ! cmp -s scripts/requirements-test.txt "$venv/requirements.txt"; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check -r scripts/requirements-test.txt
        cp scripts/requirements-test.txt "$venv/requirements.txt"
    fi

    # promtool lints the live /metrics exposition in the tests. Only the binary is taken from Debian's
    # prometheus package: installing the package pulls ~37 packages and starts a server on :9090.
    promtool=.cache/promtool/promtool
    if [[ ! -x "$promtool" ]]; then
        echo "setup: extracting promtool from Debian's prometheus package into .cache/promtool" >&2
        download=$(mktemp -d)
        chmod 755 "$download"   # lets apt's sandbox user write the download
        if ! (cd "$download" && apt-get download -qq prometheus 2>/dev/null); then
            apt-get update -qq
            (cd "$download" && apt-get download -qq prometheus)
        fi
        dpkg-deb -x "$download"/prometheus_*.deb "$download/root"
        mkdir -p "$(dirname "$promtool")"
        cp "$download/root/usr/bin/promtool" "$promtool"
        rm -rf "$download"
    fi
fi
