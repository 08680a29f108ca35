#!/usr/bin/env bash
# Counts what a notification costs in calls rather than in time: Swift allocations, retains, string retains
# (swift_bridgeObjectRetain, which passes a heap string's on to swift_retain), releases, run-time metadata
# lookups and task switches per sent record over a whole `bench pipeline` run, with perf uprobes. CPU time
# per notification on this 2-core machine moves by a quarter from run to run; these counts repeat to within
# 1%, so a change that saves copies or allocations shows even when the bench's CPU figures cannot tell the
# builds apart.
#
# "Per sent record" is per call of `Pipeline.results(of:sent:source:)`: once for each event whose pushes went
# to APNs (the bench's events carry about 1.8 notifications each). The counts are given for the whole
# process (worker, APNs simulator and mock Kafka) and for the worker's event-loop threads alone, where the
# pipeline runs; compare two builds with the same --count, never a count with a time. The uprobes slow the
# run several times over; its rates mean nothing. Needs root (uprobes), perf, and about 1 GB in /tmp.
#
# --by-site N also lists the event loops' N busiest callers of swift_retain and swift_release (the first
# caller outside the runtime, per sent record): where the copies are. It records call stacks, a second run.
# --threads PREFIXES (comma-separated thread-name prefixes) counts other threads than the event loops
# (h2-loop) in the second line and the site list: kafka-producer is the results producer's poll thread, where
# delivery reports run; kafka-consumer the consumer's.
#
# usage: scripts/bench-counts.sh [BINARY] [--count N] [--by-site N] [--threads PREFIXES]
#        (default: .build/release/apns-worker, 3000 events, no site list, h2-loop)
set -euo pipefail
cd "$(dirname "$0")/.."

binary=.build/release/apns-worker
count=3000
sites=0
threads=h2-loop
while [[ $# -gt 0 ]]; do
    case "$1" in
        --count) count="$2"; shift 2 ;;
        --by-site) sites="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        -h | --help) sed -n '2,/^#        (default/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) binary="$1"; shift ;;
    esac
done
[[ -x "$binary" ]] || { echo "bench-counts.sh: $binary is not an executable; build with: swift build -c release" >&2; exit 2; }
command -v perf >/dev/null || { echo "bench-counts.sh: perf is missing; install: apt-get install linux-perf" >&2; exit 2; }
binary=$(realpath "$binary")

# Once per sent record, and never inlined (@inline(never)). If it is ever renamed, name it here.
per_record='$s6Worker8PipelineC7results2of4sent6sourceSayAA14OutboundRecordVG7outputs_AA17PublishedOutcomesV8outcomestAC13PreparedEventV_Say4APNs14DeliveryResultVGAA06SourceH0VtF'
nm "$binary" | grep -F -- "$per_record" >/dev/null || {
    echo "bench-counts.sh: $binary has no symbol $per_record (Pipeline.results(of:sent:source:)); update per_record" >&2
    exit 2
}
runtime=$(ldd "$binary" | grep -o '/[^ ]*libswiftCore.so' | head -1)
[[ -n "$runtime" ]] || { echo "bench-counts.sh: $binary does not link libswiftCore.so" >&2; exit 2; }
concurrency=$(ldd "$binary" | grep -o '/[^ ]*libswift_Concurrency.so' | head -1)
[[ -n "$concurrency" ]] || { echo "bench-counts.sh: $binary does not link libswift_Concurrency.so" >&2; exit 2; }

# A group name of letters only: perf reads a name such as "ra:..." as a raw event number.
group=benchcounts
data=$(mktemp /tmp/bench-counts.XXXXXX)
cleanup() { perf probe -q -d "$group:*" >/dev/null 2>&1 || true; rm -f "$data"; }
trap cleanup EXIT
perf probe -q -d "$group:*" >/dev/null 2>&1 || true
perf probe -q -x "$runtime" -a "$group:alloc=swift_slowAlloc" -a "$group:retain=swift_retain" \
    -a "$group:release=swift_release" -a "$group:stringretain=swift_bridgeObjectRetain" \
    -a "$group:prespecialized=swift_getCanonicalPrespecializedGenericMetadata" \
    -a "$group:generic=swift_getGenericMetadata"
# A metadata lookup is a hash-table search in the runtime: code that allocates through an unspecialized
# standard-library entry point makes one per call (docs/performance.md, 2026-12-05). A task switch is a hop
# back to a nonisolated caller's executor after an `await`.
perf probe -q -x "$concurrency" -a "$group:switch=swift_task_switch"
# perf complains that a release build has no debug information; the symbol is all it needs.
perf probe -q -x "$binary" -a "$group:record=$per_record" 2>/dev/null ||
    { echo "bench-counts.sh: perf could not probe $per_record in $binary (uprobes need root)" >&2; exit 2; }


events="alloc retain release stringretain prespecialized generic switch record"
# Recorded, not counted (`perf stat` cannot split a command's counts by thread): one line per call.
perf record -q -o "$data" -e "$(for event in $events; do printf '%s:%s,' "$group" "$event"; done | sed 's/,$//')" \
    -- "$binary" bench pipeline --count "$count" --latency-seconds 1 --idle-seconds 0 >/dev/null
# Python on stdin's neighbour (fd 3): stdin carries perf's lines.
perf script -i "$data" -F comm,event 2>/dev/null | python3 /dev/fd/3 "$binary" "$count" "$threads" 3<<'PY'
import collections, sys
binary, count, threads = sys.argv[1], sys.argv[2], tuple(sys.argv[3].split(","))
label = "event loops" if threads == ("h2-loop",) else "threads " + ", ".join(threads)
process, loops = collections.Counter(), collections.Counter()
for line in sys.stdin:
    fields = line.split()
    if len(fields) < 2:
        continue
    event = fields[-1].rstrip(":").split(":")[-1]
    process[event] += 1
    if fields[0].startswith(threads):
        loops[event] += 1
records = process["record"]
if records == 0:
    sys.exit("bench-counts.sh: no record was sent; run the bench alone to see why")
def line(what, counts):
    return (f"{what}: {counts['alloc'] / records:.1f} Swift allocations, {counts['retain'] / records:.0f} retains, "
            f"{counts['stringretain'] / records:.0f} string retains, {counts['release'] / records:.0f} releases")
print(f"{binary} (bench pipeline --count {count}): {records} sent records; per sent record,")
print("  " + line("whole process", process) + f", {(process['prespecialized'] + process['generic']) / records:.2f} "
      f"metadata lookups, {process['switch'] / records:.2f} task switches")
print("  " + line(label, loops))
PY

[[ "$sites" -gt 0 ]] || exit 0
perf record -q -o "$data" -e "$group:retain,$group:release,$group:record" --call-graph=fp \
    -- "$binary" bench pipeline --count "$count" --latency-seconds 1 --idle-seconds 0 >/dev/null
perf script -i "$data" -F comm,event,ip,sym 2>/dev/null | python3 /dev/fd/3 "$sites" "$threads" 3<<'PY'
import collections, subprocess, sys
limit, threads = int(sys.argv[1]), tuple(sys.argv[2].split(","))
label = "event loops" if threads == ("h2-loop",) else "threads " + ", ".join(threads)
sites, records = collections.Counter(), 0
def flush(event, thread, frames):
    global records
    if event == "record":
        records += 1
    elif thread.startswith(threads):
        callers = [f for f in frames if not f.startswith("swift_") and "RefCounts" not in f and f != "[unknown]"]
        sites[(event, callers[0] if callers else "?")] += 1
event, thread, frames = None, "", []
for line in sys.stdin:
    if not line.strip():
        if event:
            flush(event, thread, frames)
        event, frames = None, []
    elif not line.startswith((" ", "\t")):
        names = [field for field in line.split() if field.startswith("benchcounts:")]
        event = names[0].rstrip(":").split(":")[-1] if names else None
        thread = line.split()[0]
    else:
        parts = line.strip().split(None, 1)
        if len(parts) > 1:
            frames.append(parts[1].rsplit(" (", 1)[0])
if event:
    flush(event, thread, frames)
symbols = sorted({symbol for _, symbol in sites})
readable = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(symbols), capture_output=True,
                          text=True).stdout.split("\n")
names = dict(zip(symbols, readable))
print(f"{label}, per sent record, by the first caller outside the runtime ({records} sent records):")
for (event, symbol), calls in sites.most_common(limit):
    print(f"  {calls / max(records, 1):7.2f} {event:8s} {names.get(symbol, symbol)[:110]}")
PY
