#!/usr/bin/env bash
# Prints a folder whose librdkafka.so.1 is librdkafka 2.16 from the venv's confluent-kafka wheel, for
# LD_LIBRARY_PATH: programs linked against Debian's 2.0.2 (same SONAME, ABI-compatible) then run on 2.16.
# The wheel's file name is mangled, so LD_LIBRARY_PATH to its own folder finds nothing; a symlink does.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
site=$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
shopt -s nullglob
libraries=("$site"/confluent_kafka.libs/librdkafka-*.so.1)
if [[ ${#libraries[@]} -ne 1 ]]; then
    echo "librdkafka-2.16.sh: expected one librdkafka in $site/confluent_kafka.libs (pip install confluent-kafka)" >&2
    exit 1
fi
folder="$PWD/.build/librdkafka-2.16"
mkdir -p "$folder"
ln -sf "${libraries[0]}" "$folder/librdkafka.so.1"
echo "$folder"
