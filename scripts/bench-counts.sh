#!/usr/bin/env bash
# Counts what a notification costs in calls rather than in time: Swift allocations, retains, string retains
# (swift_bridgeObjectRetain, which passes a heap string's on to swift_retain), releases, run-time metadata
# lookups and task switches per outcome over a whole `bench pipeline` run, with perf uprobes. CPU time per
# notification on this 2-core machine moves by a quarter from run to run; these counts repeat to within 1%,
# so a change that saves copies or allocations shows even when the bench's CPU figures cannot tell the
# builds apart.
#
# The counts are the whole process's (worker, APNs simulator and mock Kafka): compare two builds with the
# same --count, never a count with a time. The uprobes slow the run several times over; its rates mean
# nothing. Needs root (uprobes) and perf.
#
# usage: scripts/bench-counts.sh [BINARY] [--count N]   (default: .build/release/apns-worker, 5000 events)
set -euo pipefail
cd "$(dirname "$0")/.."

binary=.build/release/apns-worker
count=5000
while [[ $# -gt 0 ]]; do
    case "$1" in
        --count) count="$2"; shift 2 ;;
        -h | --help) sed -n '2,/^# usage:/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) binary="$1"; shift ;;
    esac
done
[[ -x "$binary" ]] || { echo "bench-counts.sh: $binary is not an executable; build with: swift build -c release" >&2; exit 2; }
command -v perf >/dev/null || { echo "bench-counts.sh: perf is missing; install: apt-get install linux-perf" >&2; exit 2; }
binary=$(realpath "$binary")

# Once per outcome: the getter that writes an outcome's JSON. If the optimizer ever inlines it, name
# another function called once per outcome here.
per_outcome='$s6Worker13OutcomeRecordV9jsonBytesSays5UInt8VGvg'
nm "$binary" | grep -F -- "$per_outcome" >/dev/null || {
    echo "bench-counts.sh: $binary has no symbol $per_outcome (OutcomeRecord.jsonBytes); update per_outcome" >&2
    exit 2
}
runtime=$(ldd "$binary" | grep -o '/[^ ]*libswiftCore.so' | head -1)
[[ -n "$runtime" ]] || { echo "bench-counts.sh: $binary does not link libswiftCore.so" >&2; exit 2; }
concurrency=$(ldd "$binary" | grep -o '/[^ ]*libswift_Concurrency.so' | head -1)
[[ -n "$concurrency" ]] || { echo "bench-counts.sh: $binary does not link libswift_Concurrency.so" >&2; exit 2; }

group=benchcounts$$
cleanup() { perf probe -q -d "$group:*" >/dev/null 2>&1 || true; rm -f "$stat"; }
stat=$(mktemp)
trap cleanup EXIT
perf probe -q -x "$runtime" -a "$group:alloc=swift_slowAlloc" -a "$group:retain=swift_retain" \
    -a "$group:release=swift_release" -a "$group:stringretain=swift_bridgeObjectRetain" \
    -a "$group:prespecialized=swift_getCanonicalPrespecializedGenericMetadata" \
    -a "$group:generic=swift_getGenericMetadata"
# A metadata lookup is a hash-table search in the runtime: code that allocates through an unspecialized
# standard-library entry point makes one per call (docs/performance.md, 2026-12-05). A task switch is a hop
# back to a nonisolated caller's executor after an `await`.
perf probe -q -x "$concurrency" -a "$group:switch=swift_task_switch"
# perf complains that a release build has no debug information; the symbol is all it needs.
perf probe -q -x "$binary" -a "$group:outcome=$per_outcome" 2>/dev/null ||
    { echo "bench-counts.sh: perf could not probe $per_outcome in $binary (uprobes need root)" >&2; exit 2; }

events="alloc retain release stringretain prespecialized generic switch outcome"
perf stat -x, -o "$stat" -e "$(for event in $events; do printf '%s:%s,' "$group" "$event"; done | sed 's/,$//')" -- \
    "$binary" bench pipeline --count "$count" --latency-seconds 1 --idle-seconds 0 >/dev/null
python3 - "$stat" "$binary" "$count" <<'PY'
import sys
counts = {}
for line in open(sys.argv[1]):
    fields = line.strip().split(",")
    if len(fields) > 2 and fields[0].isdigit():
        counts[fields[2].split(":")[-1]] = int(fields[0])
outcomes = counts.get("outcome", 0)
if outcomes == 0:
    sys.exit("bench-counts.sh: no outcome was written; run the bench alone to see why")
print(f"{sys.argv[2]} (bench pipeline --count {sys.argv[3]}): {outcomes} outcomes; per outcome, whole process: "
      f"{counts['alloc'] / outcomes:.1f} Swift allocations, {counts['retain'] / outcomes:.0f} retains, "
      f"{counts['stringretain'] / outcomes:.0f} string retains, {counts['release'] / outcomes:.0f} releases, "
      f"{(counts['prespecialized'] + counts['generic']) / outcomes:.2f} metadata lookups, "
      f"{counts['switch'] / outcomes:.2f} task switches")
PY
