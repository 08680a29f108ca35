"""What a crash makes the group redo, with the release binary against `apns-worker kafka-mock` and the
APNs simulator: events arrive at a steady rate while the worker is SIGKILLed mid-stream, restarted,
SIGKILLed again soon after its first outcome (while it works through the backlog the outage left, at
several times the input rate), and restarted to finish. With only librdkafka's auto-commit (every second)
the second kill left ~2,000 finished records uncommitted; the worker's own commits (kafka.commit_interval,
kafka.commit_after_records) bound that window by time and by count.

Redone after kill k is what the next worker must do again: the pushes the killed worker had sent and not
finished (the simulator's requests in that phase less the outcomes it published) and the records it had
finished at or past the group's committed offset at the kill (its outcomes whose source offset is at or
past that offset: the next owner starts there). Every event has one device, so records and (event,
device) pairs are the same count, and the bound is the in-flight cap (`pipeline.max_in_flight_records`)
plus 10 %, at both kills. Nothing may be missing, and the duplicates a reader of push.outcomes sees are
exactly the finished records past the committed offsets.

The simulator is restarted on its port between phases (the worker is dead meanwhile), so that its request
count is per phase.
"""
import json
import os
import signal
import threading
import time
from datetime import datetime

import pytest

from worker_process_support import (
    BUNDLE_ID, REQUESTS, Deadline, Simulator, Stack, device_token, expected_pairs)

CAP = 1000
EVENTS = 10_000
RATE = 500  # events per second
LATENCY_MS = "20-60"
# The second kill comes this long after the restarted worker's first outcome: inside the second that
# librdkafka's auto-commit timer (auto.commit.interval.ms, 1 s in the worker) may take to fire.
SECOND_KILL_AFTER = 0.6


def single_device_events(count, prefix):
    return [{"id": f"{prefix}-{number:06d}", "type": "chat.message", "app": BUNDLE_ID,
             "recipient": {"user_id": f"u{number % 97}"},
             "devices": [{"token": device_token(f"{prefix}-{number:06d}", 0), "environment": "production"}],
             "data": {"text": f"message {number}"}} for number in range(count)]


class PacedProducer:
    """Produces events to push.requests at `rate` per second on a thread of its own."""

    def __init__(self, bootstrap, events, rate):
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.events = events
        self.rate = rate
        self.placed = {}
        self.failures = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, error, message):
        if error is not None:
            self.failures.append(error)
        else:
            self.placed[json.loads(message.value())["id"]] = (message.partition(), message.offset())

    def _run(self):
        started = time.monotonic()
        for index, event in enumerate(self.events):
            due = started + index / self.rate
            while time.monotonic() < due:
                self.producer.poll(max(0.0, min(0.01, due - time.monotonic())))
            self.producer.produce(REQUESTS, key=event["recipient"]["user_id"], value=json.dumps(event),
                                  on_delivery=self._delivered)
        self.producer.flush(30)
        self.done.set()

    def wait(self, seconds):
        assert self.done.wait(seconds), "the producer did not finish"
        assert not self.failures and len(self.placed) == len(self.events), self.failures[:3]
        return self.placed


@pytest.fixture
def stack(tmp_path):
    stack = Stack(str(tmp_path), "redo", latency_ms=LATENCY_MS, max_in_flight=CAP, drain_timeout=10)
    # The worker's own commit settings, not the faster auto-commit the other crash tests configure.
    with open(stack.config) as file:
        config = json.load(file)
    config["kafka"]["properties"].pop("auto.commit.interval.ms")
    with open(stack.config, "w") as file:
        json.dump(config, file, indent=2)
    yield stack
    stack.close()


class Phases:
    """Splits the run at each kill: the outcomes read, the simulator's requests, and the committed offsets."""

    def __init__(self, stack):
        self.stack = stack
        self.start = 0
        self.records = []

    def kill(self, worker):
        assert worker.kill() == -signal.SIGKILL
        killed = time.monotonic()
        self.stack.reader.poll_until_quiet(quiet=0.5)
        self.end_phase(self.stack.committed())
        return killed

    def end_phase(self, committed):
        stats = self.stack.simulator.close()
        outcomes = self.stack.reader.outcomes[self.start:]
        self.start = len(self.stack.reader.outcomes)
        past = sum(1 for outcome in outcomes
                   if outcome["source"]["offset"] >= committed.get(outcome["source"]["partition"], -1))
        self.records.append({"requests": stats["requests"], "outcomes": len(outcomes), "finished_past_commit": past,
                             "in_flight_sent": stats["requests"] - len(outcomes), "committed": committed})
        port = int(self.stack.simulator.url.rsplit(":", 1)[1])
        directory = self.stack.directory
        self.stack.simulator = Simulator(directory, os.path.join(directory, "key.pub"), LATENCY_MS, port=port)
        self.stack.closers.append(self.stack.simulator.close)

    def redone(self, index):
        record = self.records[index]
        return record["finished_past_commit"] + record["in_flight_sent"]


def first_new_outcome(stack, seen, seconds):
    """Waits for an outcome beyond the `seen` already read; returns when it was read."""
    stack.reader.wait_for(lambda: len(stack.reader.outcomes) > seen, seconds, "the restarted worker's first outcome")
    return time.monotonic()


def test_a_sigkill_redoes_at_most_the_in_flight_cap_even_right_after_a_restart(stack):
    events = single_device_events(EVENTS, "redo")
    pairs = expected_pairs(events)
    producer = PacedProducer(stack.cluster.bootstrap, events, RATE)
    phases = Phases(stack)

    first = stack.start_worker("first")
    stack.reader.wait_for(lambda: len(stack.reader.outcomes) >= 2500, 60, "2,500 outcomes")
    killed = phases.kill(first)

    second = stack.start_worker("second")
    restarted = first_new_outcome(stack, len(stack.reader.outcomes), 60)
    deadline = Deadline(SECOND_KILL_AFTER)
    while not deadline.passed():
        stack.reader.poll(deadline.left())
    assert len(stack.reader.per_pair) < len(pairs), "the worker finished before the second kill"
    phases.kill(second)

    third = stack.start_worker("third")
    placed = producer.wait(120)
    assert len(placed) == EVENTS
    stack.wait_until_all_committed(pairs, seconds=120)
    code, _ = third.terminate(20)
    assert code == 0, third.tail(30)
    stack.reader.poll_until_quiet()
    phases.end_phase(stack.committed())

    missing = pairs - set(stack.reader.per_pair)
    duplicates = sum(count - 1 for count in stack.reader.per_pair.values())
    redone = [phases.redone(0), phases.redone(1)]
    print(f"\n{EVENTS} events at {RATE}/s, cap {CAP}, simulator latency {LATENCY_MS} ms; kill -> first outcome of "
          f"the restart {restarted - killed:.1f} s; redone per kill {redone} (finished past the committed offset "
          f"+ sent in flight: {[(p['finished_past_commit'], p['in_flight_sent']) for p in phases.records[:2]]}); "
          f"duplicate outcomes {duplicates}; missing {len(missing)}; phases {phases.records}")
    assert not missing
    # Every finished record past a committed offset was done again by a later worker, and nothing else.
    assert duplicates == phases.records[0]["finished_past_commit"] + phases.records[1]["finished_past_commit"]
    for kill, count in enumerate(redone, start=1):
        assert count <= CAP * 1.1, f"kill {kill} left {count} records to redo: {phases.records[kill - 1]}"


def restart_after_sigkill(stack, membership, ends_of, events=3000):
    """Kills a worker mid-stream and starts another at once, with `membership` "static" (the same
    kafka.group_instance_id for both) or "dynamic"; returns seconds from the kill to the first outcome the
    restarted worker finished. Waits until every pair has an outcome and `ends_of(placed)` is committed."""
    if membership == "static":
        with open(stack.config) as file:
            config = json.load(file)
        config["kafka"]["group_instance_id"] = "apns-worker-0"
        with open(stack.config, "w") as file:
            json.dump(config, file, indent=2)
    batch = single_device_events(events, f"restart-{membership}")
    pairs = expected_pairs(batch)
    producer = PacedProducer(stack.cluster.bootstrap, batch, RATE)
    first = stack.start_worker("first")
    stack.reader.wait_for(lambda: len(stack.reader.outcomes) >= 500, 60, "500 outcomes")
    first.kill()
    killed, killed_wall = time.monotonic(), time.time()
    stack.start_worker("second")

    def restarted_outcome():
        return any(datetime.fromisoformat(outcome["completed_at"]).timestamp() > killed_wall
                   for outcome in stack.reader.outcomes[-200:])
    stack.reader.wait_for(restarted_outcome, 90, "the restarted worker's first outcome")
    took = time.monotonic() - killed
    ends = ends_of(producer.wait(60))

    def done():
        committed = stack.committed()
        return len(stack.reader.per_pair) >= len(pairs) and all(committed[p] >= end for p, end in ends.items())
    stack.reader.wait_for(done, 120, "every outcome and every offset committed")
    assert not pairs - set(stack.reader.per_pair)
    return took


@pytest.mark.parametrize("membership", ["dynamic", "static"])
def test_kill_to_first_outcome_of_the_restarted_worker(tmp_path, membership):
    stack = Stack(str(tmp_path), f"restart-{membership}", latency_ms=LATENCY_MS, max_in_flight=CAP, drain_timeout=10)
    try:
        took = restart_after_sigkill(stack, membership, lambda placed: stack.offsets.ends())
    finally:
        stack.close()
    print(f"\nkafka-mock, {membership} membership (session.timeout.ms 6000): kill -> first outcome of the "
          f"restarted worker {took:.1f} s")
