"""What /metrics says, checked against what the worker is doing: `apns-worker run` against
`apns-worker kafka-mock` and the APNs simulator, scraped while load runs.

- The pool gauges follow the pools: requests in flight rise under load and fall back to 0 when the
  work is done, and the pool's connection shows as open.
- An APNs attempt is counted when APNs answers it, not when its push has finished retrying.
- README's metric table names exactly the families the binary exports, and promtool accepts the text.
"""
import os
import re
import subprocess
import urllib.request
from collections import defaultdict

import pytest

from worker_process_support import BIN, Deadline, Stack, expected_pairs, make_events

# The pool label: environment/credential (worker_process_support configures credential `sim-key`).
POOL = "production/sim-key"
README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Scrape:
    """One /metrics exposition: its text, the families its TYPE lines declare, and its samples."""

    def __init__(self, text):
        self.text = text
        self.families = {}
        self.samples = defaultdict(dict)
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ", 3)
                self.families[name] = kind
            elif line and not line.startswith("#"):
                match = SAMPLE.match(line)
                assert match, f"not a sample line: {line!r}"
                name, labels, value = match.groups()
                self.samples[name][frozenset(LABEL.findall(labels or ""))] = float(value)

    def value(self, name, **labels):
        """The sample with exactly these labels; None when it is not exported."""
        return self.samples.get(name, {}).get(frozenset(labels.items()))

    def total(self, name, **labels):
        """The sum over every series of `name` that carries these labels (others free)."""
        wanted = set(labels.items())
        return sum(value for series, value in self.samples.get(name, {}).items() if wanted <= series)


def metrics_url(worker):
    return worker.wait_for_log("serving /metrics, /healthz and /readyz", 20)["fields"]["url"] + "/metrics"


def scrape(url):
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        return Scrape(response.read().decode())


def wait_for_scrape(url, condition, seconds, what):
    """Scrapes until `condition(scrape)` holds; returns that scrape."""
    deadline = Deadline(seconds)
    while True:
        current = scrape(url)
        if condition(current):
            return current
        if deadline.passed():
            raise TimeoutError(f"{what} not seen in {seconds} s:\n{current.text}")


def readme_metric_names():
    """The metric names in README's table: its rows that start with a backquoted apns_worker_ name."""
    names = set()
    with open(README) as file:
        for line in file:
            match = re.match(r"^\| `(apns_worker_[a-z0-9_]+)` \|", line)
            if match:
                names.add(match.group(1))
    assert len(names) >= 10, f"README's metric table not found in {README}"
    return names


def promtool():
    """promtool, as scripts/setup.sh --test extracts it (or $PROMTOOL)."""
    path = os.environ.get("PROMTOOL") or os.path.join(os.path.dirname(README), ".cache", "promtool", "promtool")
    assert os.access(path, os.X_OK), f"promtool not found at {path}: run scripts/setup.sh --test (or set PROMTOOL)"
    return path


def promtool_check(text):
    checked = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True,
                             timeout=30)
    return checked.returncode, checked.stdout + checked.stderr


@pytest.fixture
def make_stack(tmp_path, request):
    stacks = []

    def make(**options):
        stack = Stack(str(tmp_path), f"metrics-{request.node.name}", **options)
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.close()


def test_version_is_printed_and_exported_as_build_info(make_stack):
    printed = subprocess.run([BIN, "--version"], capture_output=True, text=True, timeout=10)
    assert printed.returncode == 0, printed.stderr
    match = re.fullmatch(r"apns-worker (\S+)\n", printed.stdout)
    assert match, printed.stdout
    version = match.group(1)

    stack = make_stack(latency_ms="5", max_in_flight=10, drain_timeout=5)
    worker = stack.start_worker("worker")
    current = scrape(metrics_url(worker))
    assert current.samples["apns_worker_build_info"] == {frozenset({("version", version)}): 1.0}
    # Stopped once a member: a stop during the group's join waits for the join (librdkafka's close), which
    # a loaded CI machine once stretched past this stack's 5 s drain timeout and its margin (exit 1).
    worker.wait_for_log("kafka partitions assigned", 60)
    code, _ = worker.terminate(15)
    assert code == 0, worker.tail()


def test_pool_gauges_follow_the_load_and_the_table_matches_what_is_exported(make_stack):
    # Answers after 300 to 1000 ms: with 200 records (about 300 pushes) in flight, hundreds of
    # streams are open at any moment of the load, on the pool's one connection.
    stack = make_stack(latency_ms="300-1000", max_in_flight=200, drain_timeout=10)
    events = make_events(1200, "load")
    pairs = expected_pairs(events)
    worker = stack.start_worker("worker")
    url = metrics_url(worker)
    idle = scrape(url)
    assert idle.value("apns_worker_apns_requests_in_flight") == 0
    assert idle.value("apns_worker_apns_requests_queued") == 0

    stack.produce(events)
    scrapes_during_load = []
    while len(stack.reader.per_pair) < len(pairs):
        current = scrape(url)
        if len(stack.reader.per_pair) < len(pairs):  # scraped before the last outcome arrived
            scrapes_during_load.append(current)
        stack.reader.poll(0.2)
        assert worker.process.poll() is None, worker.tail()
    stack.wait_until_all_committed(pairs)

    busiest = max(scrapes_during_load, key=lambda s: s.value("apns_worker_apns_requests_in_flight"))
    peak_in_flight = busiest.value("apns_worker_apns_requests_in_flight")
    peak_open = max(s.value("apns_worker_apns_connections_open", pool=POOL) or 0 for s in scrapes_during_load)
    print(f"{len(scrapes_during_load)} scrapes during load; peak requests in flight {peak_in_flight}, "
          f"peak connections open {peak_open}")
    assert peak_in_flight > 0
    assert peak_in_flight <= len(pairs)
    assert peak_open >= 1
    # The attempt counter moves with the load, not in one step at its end.
    assert any(0 < s.total("apns_worker_apns_requests_total") < len(pairs) for s in scrapes_during_load)

    # Every in-flight request is answered once the work is done.
    done = wait_for_scrape(url, lambda s: s.value("apns_worker_apns_requests_in_flight") == 0, 10,
                           "requests in flight back to 0")
    assert done.value("apns_worker_apns_requests_queued") == 0
    assert done.value("apns_worker_apns_connections_open", pool=POOL) == 1
    # One attempt per push, each counted once: the counters agree with the outcomes and the simulator.
    assert done.total("apns_worker_apns_requests_total") == len(pairs)
    assert done.total("apns_worker_apns_requests_total", status="200", reason="none") == len(pairs)
    assert done.total("apns_worker_outcomes_total", status="delivered") == len(pairs)
    # Each event matched the one rule once.
    assert done.total("apns_worker_rule_matches_total", rule_id="all") == len(events)
    assert done.total("apns_worker_apns_response_duration_seconds_count", environment="production") == len(pairs)
    assert done.value("apns_worker_records_in_flight") == 0
    # The cap in force followed the pool (1,000 streams on its connection, one connection of growth, at
    # about 1.5 pushes per record) but never passed the configured bound of 200.
    assert done.value("apns_worker_records_in_flight_limit") == 200

    # README's table and the exported families are one set. Families exported only once labelled
    # (per-partition lag, per-credential certificate expiry) count by their TYPE lines, which the
    # registry writes even before the first series.
    exported = {name for name in busiest.families if name.startswith("apns_worker_")}
    documented = readme_metric_names()
    assert documented - exported == set(), "in README's table, not exported"
    assert exported - documented == set(), "exported, not in README's table"

    code, output = promtool_check(busiest.text)
    assert code == 0 and output == "", output

    code, _ = worker.terminate(25)
    assert code == 0, worker.tail()
    stats = stack.simulator.close()
    assert stats["requests"] == len(pairs)


def test_pools_grow_and_the_in_flight_cap_follows_them_under_a_long_round_trip(make_stack):
    """A simulator that allows 200 streams per connection, answers after 200-300 ms and holds each TLS
    handshake 500 ms: one connection cannot carry the pushes the cap lets in, so the pool opens more (never
    more than max_connections, 24), several connecting at once (the connecting gauge shows them), and the
    in-flight cap rises with the streams they bring, from its floor of 256 with no pool connected, and never
    past max_in_flight_records. Every push is delivered once, and no connection is left connecting."""
    stack = make_stack(latency_ms="200-300", max_in_flight=5000, drain_timeout=10,
                       simulator_options=["--max-concurrent-streams", "200", "--handshake-ms", "500"])
    events = make_events(4000, "grow")
    pairs = expected_pairs(events)
    worker = stack.start_worker("worker")
    url = metrics_url(worker)
    assert scrape(url).value("apns_worker_records_in_flight_limit") == 256

    stack.produce(events)
    peak_open, peak_limit, peak_connecting = 0, 0, 0
    while len(stack.reader.per_pair) < len(pairs):
        current = scrape(url)
        peak_open = max(peak_open, current.value("apns_worker_apns_connections_open", pool=POOL) or 0)
        peak_connecting = max(peak_connecting,
                              current.value("apns_worker_apns_connections_connecting", pool=POOL) or 0)
        peak_limit = max(peak_limit, current.value("apns_worker_records_in_flight_limit"))
        stack.reader.poll(0.2)
        assert worker.process.poll() is None, worker.tail()
    stack.wait_until_all_committed(pairs)
    print(f"peak connections open {peak_open}, connecting {peak_connecting}, peak in-flight cap {peak_limit}")
    assert 1 < peak_open <= 24
    assert 1 < peak_connecting <= 24, "a growing pool connects several at once"
    assert scrape(url).value("apns_worker_apns_connections_connecting", pool=POOL) == 0
    assert 256 < peak_limit <= 5000
    assert {outcome["status"] for outcome in stack.reader.outcomes} == {"delivered"}
    assert all(count == 1 for count in stack.reader.per_pair.values())
    code, _ = worker.terminate(25)
    assert code == 0, worker.tail()
    assert stack.simulator.close()["requests"] == len(pairs)


def test_an_attempt_is_counted_when_answered_not_when_its_push_finishes(make_stack):
    # The first request is refused 503 with Retry-After: 3; the worker retries it 3 s later.
    script = [{"request": 1, "action": "fail", "status": 503, "retryAfter": 3}]
    # One partition: an empty one would never have an offset committed.
    stack = make_stack(latency_ms="5", max_in_flight=10, drain_timeout=10, script=script, partitions=1)
    events = make_events(1, "retry")
    pairs = expected_pairs(events)
    assert len(pairs) == 1
    worker = stack.start_worker("worker")
    url = metrics_url(worker)
    stack.produce(events)

    # The attempt's counter and its response-time histogram are two series, updated one after the other:
    # a scrape may fall between them, so wait for both.
    refused = wait_for_scrape(
        url, lambda s: s.total("apns_worker_apns_requests_total", status="503", reason="ServiceUnavailable") == 1
        and s.total("apns_worker_apns_response_duration_seconds_count") == 1,
        20, "the 503 attempt counted")
    # Seen while the push still waits out its Retry-After: not retried, no outcome yet.
    assert refused.total("apns_worker_apns_requests_total", status="200") == 0
    assert refused.total("apns_worker_outcomes_total") == 0
    assert stack.reader.poll(0.1) == 0 and not stack.reader.outcomes
    assert refused.total("apns_worker_apns_response_duration_seconds_count") == 1

    stack.wait_until_all_committed(pairs)
    (outcome,) = stack.reader.outcomes
    assert outcome["status"] == "delivered"
    assert [attempt["http_status"] for attempt in outcome["attempts"]] == [503, 200]
    done = scrape(url)
    assert done.total("apns_worker_apns_requests_total", status="200", reason="none") == 1
    assert done.total("apns_worker_apns_requests_total") == 2
    assert done.total("apns_worker_retries_total", reason="ServiceUnavailable") == 1
    assert done.total("apns_worker_outcomes_total", status="delivered") == 1
    code, _ = worker.terminate(25)
    assert code == 0, worker.tail()
