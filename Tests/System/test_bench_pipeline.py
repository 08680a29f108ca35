"""`apns-worker bench pipeline` end to end, small: every pre-filled event is finished, every notification
the simulator saw is counted, and each figure the report promises is there and plausible. Speed itself
is not asserted (benchmarks are run, not timed in tests)."""
import os
import re
import subprocess

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")


def number(pattern, text):
    match = re.search(pattern, text)
    assert match, f"no match for {pattern!r} in:\n{text}"
    return [float(group) for group in match.groups()]


def test_bench_pipeline_reports_throughput_cpu_by_part_latency_and_memory():
    events = 1500
    run = subprocess.run([BIN, "bench", "pipeline", "-n", str(events), "--latency-seconds", "1",
                          "--idle-seconds", "1"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    # The executable links jemalloc so that it, not glibc, serves every malloc (the bench measures with it).
    assert re.search(r"bench pipeline: memory allocator jemalloc \d+\.\d+", out), out
    finished, notifications, seconds, events_rate, notification_rate = number(
        r"phase 1 \(backlog\): (\d+) events, (\d+) notifications in ([\d.]+) s: (\d+) events/s, (\d+) notifications/s",
        out)
    assert finished == events
    # The dev generator gives each event one to three devices.
    assert events <= notifications <= 3 * events
    # Rates come from the unrounded time, which the printed seconds (two decimals) give only to within
    # 0.005 s: a short run's rate can sit several percent from count / printed seconds.
    def consistent(rate, count):
        return count / (seconds + 0.005) - 1 <= rate <= count / max(seconds - 0.005, 1e-9) + 1
    assert consistent(events_rate, events), (events_rate, events, seconds)
    assert consistent(notification_rate, notifications), (notification_rate, notifications, seconds)
    cpu_seconds, per_notification = number(r"CPU ([\d.]+) s = ([\d.]+) µs per notification", out)
    # The printed CPU seconds have two decimals.
    assert per_notification > 0 and abs(cpu_seconds * 1e6 / notifications - per_notification) <= 0.006e6 / notifications + 0.1
    worker, simulator, brokers = number(
        r"by part, µs per notification: worker ([\d.]+), APNs simulator ([\d.]+), mock Kafka brokers ([\d.]+)", out)
    # The simulator's threads name themselves; its share cannot be zero when it answered every push.
    assert worker > 0 and simulator > 0
    assert worker + simulator + brokers <= per_notification * 1.05 + 1
    loops, kafka_clients, other = number(
        r"the worker's part by thread: event loops ([\d.]+), Kafka clients ([\d.]+), other (-?[\d.]+)", out)
    # Records are processed on the event loops, and the consumer and producer run on Kafka client threads
    # (each thread's CPU is read from its own clock, to the nanosecond, so no share rounds down to 0).
    assert loops > 0 and kafka_clients > 0
    assert abs(loops + kafka_clients + other - worker) <= 0.3
    # The same parts over the simulator's, the yardstick that compares builds across runs: ratios of the
    # printed µs (one decimal each, so within their rounding).
    ratio, loops_ratio, kafka_ratio = number(
        r"worker ÷ simulator CPU: ([\d.]+) \(event loops ([\d.]+), Kafka clients ([\d.]+)\)", out)
    for printed, part in ((ratio, worker), (loops_ratio, loops), (kafka_ratio, kafka_clients)):
        assert (part - 0.05) / (simulator + 0.05) - 0.005 <= printed <= (part + 0.05) / (simulator - 0.05) + 0.005
    # The same parts over the steady state's window only (the steady rate's records): a share of the phase's
    # notifications, each part's CPU counted from its own threads' clocks. Printed whenever the window is (a
    # loaded machine's progress poll can see a short backlog start and finish at once: no window, no line).
    assert bool(re.search(r"steady state \(records", out)) == bool(re.search(r"steady state's CPU", out)), out
    if re.search(r"steady state \(records", out):
        steady_worker, steady_loops, steady_kafka, steady_simulator, steady_notifications = number(
            r"steady state's CPU, µs per notification: worker ([\d.]+) \(event loops ([\d.]+), Kafka clients "
            r"([\d.]+)\), APNs simulator ([\d.]+), over (\d+) notifications", out)
        assert 0 < steady_notifications <= notifications
        # Counted as the steady rate counts them: the window's records at the backlog's notifications per event
        # (a count of the simulator's requests found none when a short backlog's all went out before the window).
        window_start, window_end = number(r"steady state \(records (\d+)-(\d+) finishing", out)
        assert abs(steady_notifications - (window_end - window_start) * notifications / events) <= 1
        # The window is records finishing, that is acknowledged by Kafka, and the results producer lingers 20 ms:
        # in a short backlog the window can be one batch of acknowledgements, for pushes the loops and the
        # simulator finished before it began (CI27 printed a 0.0). Only the acknowledgements surely ran in it.
        assert steady_worker > 0 and min(steady_loops, steady_kafka, steady_simulator) >= 0
        assert steady_loops + steady_kafka <= steady_worker + 0.1
    p50, p99 = number(r"event → outcome p50 ([\d.]+) ms, p99 ([\d.]+) ms", out)
    assert 0 < p50 <= p99 < 30_000
    (rss,) = number(r"peak RSS (\d+) MB \(max_in_flight_records 12000\)", out)
    assert 0 < rss < 256
    idle, rss_idle = number(r"RSS after (\d+) s idle: (\d+) MB", out)
    assert idle == 1 and 0 < rss_idle <= rss
    # What followed the load: connections within apns.connections..max_connections, a cap within its bound.
    connections, pools, initial, ceiling, cap, in_flight, bound = number(
        r"APNs connections at most (\d+) across (\d+) pools \(each: apns.connections (\d+), max_connections (\d+)\); "
        r"in-flight cap at most (\d+), records in flight at most (\d+) \(max_in_flight_records (\d+)\)", out)
    assert (initial, ceiling, bound) == (2, 24, 12000)
    (reached,) = number(r"the pools reached (\d+) connections [\d.]+ s into the backlog, TLS handshakes not held", out)
    assert reached == connections
    # The dev stack's devices are in both environments: a pool each, each within its own limits.
    assert pools >= 1 and initial <= connections <= ceiling * pools
    assert 256 <= cap <= bound and 0 < in_flight <= cap


def test_bench_pipeline_prints_the_rate_apns_latency_allows():
    """With --apns-latency-ms the report prints Little's-law bounds from the run's own figures: the pool's
    streams (the most connections it reached × the simulator's 1,000) and the in-flight cap it reached
    (records × notifications per event), each over the mean latency, and the measured rate as a fraction
    of the lower."""
    events = 1500
    run = subprocess.run([BIN, "bench", "pipeline", "--count", str(events), "--latency-seconds", "1",
                          "--idle-seconds", "0", "--max-in-flight", "1000", "--apns-latency-ms", "40-60",
                          "--timeline-ms", "100"],
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    _, notifications, _, _, notification_rate = number(
        r"phase 1 \(backlog\): (\d+) events, (\d+) notifications in ([\d.]+) s: (\d+) events/s, (\d+) notifications/s",
        out)
    latency, streams_bound, connections, streams, inflight_bound, records, per_event, fraction = number(
        r"at ([\d.]+) ms mean APNs latency: streams bound (\d+)/s \((\d+) connections × (\d+) streams\), "
        r"in-flight bound (\d+)/s \((\d+) records × ([\d.]+) notifications\); measured ([\d.]+) of the lower", out)
    assert latency == 50.0  # uniform 40-60 ms
    (pools,) = number(r"APNs connections at most \d+ across (\d+) pools", out)
    assert 2 <= connections <= 24 * pools and streams == 1000 and 256 <= records <= 1000
    # Each new connection's handshake is held two round trips of the latency's fixed part (40 ms), and the
    # report says when the pools first had the most connections it counts.
    reached, at, handshake = number(
        r"the pools reached (\d+) connections ([\d.]+) s into the backlog, each TLS handshake held (\d+) ms "
        r"\(--apns-handshake-ms\)", out)
    assert reached == connections and handshake == 80 and at >= 0.08
    assert abs(streams_bound - connections * streams / 0.050) <= 1
    assert abs(per_event - notifications / events) <= 0.005
    assert abs(inflight_bound - records * per_event / 0.050) <= records / 0.050 * 0.005 + 1
    # The fraction is of the steady state's rate (the whole run's also counts the first round trip, in which
    # nothing can finish, and the drain). Rates are rounded to whole notifications a second, the fraction to
    # two decimals.
    first, last, steady_events, steady_notifications = number(
        r"steady state \(records (\d+)-(\d+) finishing, without the first round trip and the drain\): "
        r"(\d+) events/s, (\d+) notifications/s", out)
    assert events // 10 <= first < last and events - events // 10 <= last <= events
    # Notifications at the backlog's own notifications per event. Both rates are printed rounded to whole
    # numbers: the events' half a unit of rounding, times the notifications per event, plus the notifications'
    # own half (CI once saw 12823 events/s × 1.79 = 22953.2 against a printed 22952).
    per_event_rate = notifications / events
    assert steady_events > 0
    assert abs(steady_notifications - steady_events * per_event_rate) <= 0.5 * per_event_rate + 0.5 + 1e-6
    assert abs(fraction - steady_notifications / min(streams_bound, inflight_bound)) <= 0.006
    # The timeline: records finished only grow, never past the backlog; in flight stays within the cap.
    timeline = [tuple(int(value) for value in match.groups()) for match in re.finditer(
        r"^ +[\d.]+ s: +(\d+) records finished, +(\d+) in flight \(cap +(\d+)\), +(\d+) notifications answered, "
        r"+(\d+) connections, +(\d+) streams in flight, +(\d+) requests queued, +(\d+) results unacknowledged$",
        out, re.MULTILINE)]
    assert timeline, out
    finished = [line[0] for line in timeline]
    assert finished == sorted(finished) and finished[-1] <= events
    assert all(in_flight <= 1000 and cap <= 1000 and answered <= notifications and 0 <= open_ <= 24 * pools
               and streams <= open_ * 1000 for _, in_flight, cap, answered, open_, streams, _, _ in timeline)
    # The latency reaches the live phase: no outcome can come back sooner than the simulator answers.
    p50, _ = number(r"event → outcome p50 ([\d.]+) ms, p99 ([\d.]+) ms", out)
    assert p50 >= 40


def test_bench_pipeline_compares_the_workers_cpu_with_h2loads_in_the_same_run():
    """--compare-h2load runs h2load three times between the phases as `bench send --compare-h2load` does by
    default, and prints the worker's CPU per notification over h2load's per request in the median run: the
    ratio a CPU target is judged by, with both sides from one run instead of two runs minutes apart."""
    run = subprocess.run([BIN, "bench", "pipeline", "--count", "1500", "--latency-seconds", "1", "--idle-seconds",
                          "0", "--compare-h2load"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    (worker,) = number(r"by part, µs per notification: worker ([\d.]+),", out)
    connections, streams, payload, h2load, requests = number(
        r"h2load as `bench send --compare-h2load` runs it \(h2o, (\d+) connection × (\d+) streams, (\d+)-byte "
        r"payload\): ([\d.]+) µs CPU per request over (\d+) requests", out)
    # bench send's defaults, every request answered.
    assert (connections, streams, payload, requests) == (1, 100, 200, 100_000)
    assert h2load > 0
    # Three runs, and the ratio is taken over their median.
    runs = [float(value) for value in re.search(
        r"over \d+ requests \(the median of 3 runs: ([\d.]+), ([\d.]+), ([\d.]+)\)", out).groups()]
    assert sorted(runs)[1] == h2load, out
    ratio, ratio_worker, ratio_h2load = number(
        r"worker ÷ h2load CPU: ([\d.]+) \(([\d.]+) µs per notification over ([\d.]+) µs per request, in this run\)",
        out)
    assert (ratio_worker, ratio_h2load) == (worker, h2load)
    # The ratio of the printed figures, within their rounding (one and two decimals).
    assert (worker - 0.05) / (h2load + 0.005) - 0.005 <= ratio <= (worker + 0.05) / (h2load - 0.005) + 0.005
    # And over the steady state's window, against the same h2load runs (when the run had a window).
    assert bool(re.search(r"steady state's CPU", out)) == bool(re.search(r"CPU in the steady state", out)), out
    if re.search(r"steady state's CPU", out):
        (steady_worker,) = number(r"steady state's CPU, µs per notification: worker ([\d.]+) ", out)
        steady_ratio, steady_ratio_worker, steady_ratio_h2load = number(
            r"worker ÷ h2load CPU in the steady state: ([\d.]+) \(([\d.]+) µs per notification over ([\d.]+) µs "
            r"per request\)", out)
        assert (steady_ratio_worker, steady_ratio_h2load) == (steady_worker, h2load)
        assert (steady_worker - 0.05) / (h2load + 0.005) - 0.005 <= steady_ratio \
            <= (steady_worker + 0.05) / (h2load - 0.005) + 0.005
    # The live phase still runs after it.
    assert re.search(r"event → outcome p50 [\d.]+ ms", out), out


def test_bench_pipeline_runs_the_worker_on_the_event_loops_threads_asks_for():
    run = subprocess.run([BIN, "bench", "pipeline", "--count", "300", "--latency-seconds", "1", "--idle-seconds", "0",
                          "--threads", "1"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^  event loops 1 \(pipeline.threads 1\)$", run.stdout, re.MULTILINE), run.stdout
    (finished,) = number(r"phase 1 \(backlog\): (\d+) events", run.stdout)
    assert finished == 300


def test_bench_pipeline_keeps_each_pool_within_max_connections():
    """--max-connections sets apns.max_connections: a latency that would grow the pools (2,000 records at
    100 ms want more streams than 2 connections' first burst) leaves each at that many."""
    run = subprocess.run([BIN, "bench", "pipeline", "--count", "3000", "--latency-seconds", "1", "--idle-seconds",
                          "0", "--apns-latency-ms", "100", "--max-connections", "3"],
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    connections, pools, initial, ceiling = number(
        r"APNs connections at most (\d+) across (\d+) pools \(each: apns.connections (\d+), max_connections (\d+)\)",
        run.stdout)
    assert (initial, ceiling) == (2, 3)
    assert initial <= connections <= 3 * pools
    (finished,) = number(r"phase 1 \(backlog\): (\d+) events", run.stdout)
    assert finished == 3000


def test_bench_pipeline_refuses_a_malformed_latency_naming_its_option():
    run = subprocess.run([BIN, "bench", "pipeline", "--apns-latency-ms", "fast"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode != 0
    assert "--apns-latency-ms takes FIXED, MIN-MAX, exp:MEAN or FIXED+exp:MEAN (milliseconds), got 'fast'" in \
        run.stdout + run.stderr
