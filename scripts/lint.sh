#!/usr/bin/env bash
# The house rules a reviewer would otherwise check by hand: swift-format's style (.swift-format: 4 spaces,
# 120 columns), files small enough to hold one facet, librdkafka reached only through Kafka/RDKafka, and
# the module graph of ARCHITECTURE.md (the production Worker never links the simulator; every target
# declares exactly what it imports).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0

if ! swift format lint --strict --recursive --parallel Sources Tests Package.swift; then
    echo "lint.sh: swift format found the problems above; run: swift format format -i -r Sources Tests Package.swift"
    status=1
fi

oversized=$(find Sources -name '*.swift' -exec awk 'END { if (NR > 500) print FILENAME " (" NR " lines)" }' {} \;)
if [[ -n "$oversized" ]]; then
    echo "lint.sh: files over 500 lines (split them by facet, as Type+Facet.swift):"
    echo "$oversized"
    status=1
fi

outside=$(grep -rn 'rd_kafka_' Sources | grep -v '^Sources/Kafka/RDKafka/' || true)
if [[ -n "$outside" ]]; then
    echo "lint.sh: librdkafka is called outside Sources/Kafka/RDKafka/:"
    echo "$outside"
    status=1
fi

if ! swift package dump-package | python3 -c '
import json, sys
targets = {t["name"]: t for t in json.load(sys.stdin)["targets"]}
def names(target):
    return {next(iter(d.values()))[0] for d in target["dependencies"]}
problems = []
if "APNsSimulator" in names(targets["Worker"]):
    problems.append("Worker depends on APNsSimulator: the production pipeline must not link the simulator")
for name in ("JSON", "Platform"):
    if names(targets[name]):
        problems.append(f"{name} depends on {sorted(names(targets[name]))}: it sits at the bottom of the graph")
if "APNs" in names(targets["HTTP2"]):
    problems.append("HTTP2 depends on APNs: it knows HTTP/2, not APNs")
# Every target declares exactly the modules it imports, so that Package.swift shows the real graph.
import os, re
toolchain = {"Foundation", "FoundationEssentials", "Glibc", "Darwin", "Dispatch", "Synchronization", "Testing",
             "XCTest"}
for name, target in targets.items():
    if target["type"] == "system":
        continue
    path = target.get("path") or ("Tests/" if target["type"] == "test" else "Sources/") + name
    imported = set()
    for directory, _, files in os.walk(path):
        for file in files:
            if file.endswith(".swift"):
                text = open(os.path.join(directory, file)).read()
                imported |= set(re.findall(r"^(?:@testable |public |package |internal )?import (\w+)", text, re.M))
    imported -= toolchain
    if imported - names(target):
        problems.append(f"{name} imports {sorted(imported - names(target))} without declaring it in Package.swift")
    if names(target) - imported:
        problems.append(f"{name} declares {sorted(names(target) - imported)} in Package.swift but never imports it")
for problem in problems:
    print("lint.sh: " + problem)
sys.exit(1 if problems else 0)
'; then
    status=1
fi

# The system tests are Python: an unused import or an undefined name there is a bug waiting (pyflakes, from
# scripts/requirements-test.txt, installed by `scripts/setup.sh --test`).
if [[ -x .venv/bin/python ]] && .venv/bin/python -c 'import pyflakes' 2>/dev/null; then
    if ! .venv/bin/python -m pyflakes Tests/System scripts/*.py 2>/dev/null; then
        echo "lint.sh: pyflakes found the problems above in the Python tests"
        status=1
    fi
else
    echo "lint.sh: pyflakes is missing (run scripts/setup.sh --test); the Python tests were not checked"
fi

exit $status
