#!/usr/bin/env bash
# Compares two builds' CPU per notification the way docs/performance.md recommends on this machine, whose
# speed moves by a fifth from run to run: `bench pipeline --compare-h2load` with the two binaries alternated,
# pair after pair, each run's figures printed as it ends, then each build's median and range. Judge a change
# by worker ÷ simulator (the simulator in the same process is the yardstick) over the pairs, and read
# worker ÷ h2load (issue 18's target) as a range; a single run says little.
#
# Figures per run: worker ÷ h2load over the whole backlog phase and in its steady state, worker ÷ simulator,
# the worker's µs per notification and its Kafka clients' part. Nothing else may run meanwhile: a build or a
# test beside it moves the figures more than most changes do.
#
# usage: scripts/bench-pairs.sh BINARY_A BINARY_B [--pairs N] [--count N]   (default: 6 pairs of
#        60000-event runs, about a minute per pair)
set -euo pipefail

pairs=6
count=60000
binaries=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --pairs) pairs="$2"; shift 2 ;;
        --count) count="$2"; shift 2 ;;
        -h | --help) sed -n '2,/^#        60000/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) binaries+=("$1"); shift ;;
    esac
done
[[ ${#binaries[@]} -eq 2 ]] || { echo "bench-pairs.sh: give two binaries (see --help)" >&2; exit 2; }
for binary in "${binaries[@]}"; do
    [[ -x "$binary" ]] || { echo "bench-pairs.sh: $binary is not an executable" >&2; exit 2; }
done

results=$(mktemp /tmp/bench-pairs.XXXXXX)
trap 'rm -f "$results"' EXIT
for pair in $(seq 1 "$pairs"); do
    for side in 0 1; do
        binary=${binaries[$side]}
        output=$("$binary" bench pipeline --count "$count" --latency-seconds 1 --idle-seconds 0 --compare-h2load 2>&1) || {
            echo "$output" >&2
            echo "bench-pairs.sh: $binary bench pipeline failed" >&2
            exit 1
        }
        # The figures by the words the bench prints beside them.
        figure() { grep -o "$1 [0-9.]*" <<<"$output" | head -1 | grep -o '[0-9.]*$' || echo nan; }
        line="$side $(figure 'worker ÷ h2load CPU:') $(figure 'worker ÷ h2load CPU in the steady state:')"
        line+=" $(figure 'worker ÷ simulator CPU:') $(figure 'by part, µs per notification: worker')"
        line+=" $(figure 'the worker.s part by thread: event loops [0-9.]*, Kafka clients')"
        echo "$line" >>"$results"
        read -r _ whole steady simulator worker kafka <<<"$line"
        printf 'pair %d, %s: worker ÷ h2load %s (steady state %s), worker ÷ simulator %s, worker %s µs per notification (Kafka clients %s)\n' \
            "$pair" "$(basename "$binary")" "$whole" "$steady" "$simulator" "$worker" "$kafka"
    done
done

python3 - "$results" "${binaries[0]}" "${binaries[1]}" <<'PY'
import statistics, sys
path, names = sys.argv[1], sys.argv[2:]
runs = {0: [], 1: []}
for line in open(path):
    side, *values = line.split()
    runs[int(side)].append([float(value) for value in values])
columns = ["worker ÷ h2load", "steady state", "worker ÷ simulator", "worker µs", "Kafka clients µs"]
for side, name in enumerate(names):
    print(f"{name}: {len(runs[side])} runs")
    for column, label in enumerate(columns):
        values = [run[column] for run in runs[side] if run[column] == run[column]]
        if values:
            print(f"  {label:18s} median {statistics.median(values):.2f}, {min(values):.2f}-{max(values):.2f}")
PY
