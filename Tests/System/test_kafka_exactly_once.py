"""kafka.exactly_once with the release binary: events arrive at a steady rate while the worker is SIGKILLed
mid-stream, restarted, SIGKILLed again soon after its first outcome, and restarted to finish (then SIGTERM).
A read_committed reader of push.outcomes counts outcomes per (event, device).

What each broker can show (probed at the start of each run, see `broker_transactions`):
- Neither librdkafka's mock cluster (2.0.2 and 2.16) nor Tansu 0.6.0 hides the records of aborted or
  unfinished transactions from a read_committed reader: they serve every record. So the reader here sees
  the results of the transaction a SIGKILL left open too, which a real Kafka broker would hide.
- Tansu commits offsets sent in a transaction when the transaction commits (not when it aborts) and fences
  an older producer with the same transactional.id. The mock accepts TxnOffsetCommit but stores nothing, so
  on the mock every restart starts from the beginning of push.requests again.

So each copy of an outcome is classified by where it stands against the group's committed offset at the kill
that ended its worker: a result is only ever produced in the transaction that commits an offset past its
record, so a copy at or past the committed offset was in a transaction that never committed (the one open at
the kill): `uncommitted`, invisible to read_committed readers of a real broker. Every other copy, and every
copy of the last worker (stopped with SIGTERM after everything was committed), is `committed`. The run then
asserts: 0 pairs missing; exactly one committed copy per pair (0 duplicates, 0 missing for a read_committed
reader of a broker that filters); every duplicate the reader saw is an uncommitted copy; and, on a broker
that does filter aborted records, no uncommitted copy at all. No transaction may abort in these runs (an
aborted transaction's copies would be counted as committed ones on a broker that does not filter).
"""
import os
import time
import uuid
from datetime import datetime

import pytest

import test_kafka_redo as redo
import test_tansu as tansu
from worker_process_support import (
    OUTCOMES, REQUESTS, Deadline, Simulator, Stack, expected_pairs, http_get, make_events, metric_series,
    metric_value)

CAP = 1000
EVENTS = 10_000
RATE = 400  # events per second
LATENCY_MS = "20-60"
SECOND_KILL_AFTER = 0.6
ABORTED = "kafka transaction aborted; its results are produced again in the next one: "


def broker_transactions(bootstrap):
    """What the broker does with transactions: {"filters_aborted": a read_committed reader skips an aborted
    transaction's record, "stores_offsets": offsets sent in a committed transaction become the group's}."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic, group = "push.dlq", "probe-" + uuid.uuid4().hex[:8]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": group})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    producer.flush(10)
    producer.abort_transaction(30)
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    producer.begin_transaction()
    producer.produce(topic, b"committed", partition=0)
    producer.send_offsets_to_transaction([TopicPartition(REQUESTS, 0, 1)], member.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    stored = member.committed([TopicPartition(REQUESTS, 0)], timeout=10)[0].offset == 1
    member.close()
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group + "-reader", "enable.auto.commit": False,
                       "isolation.level": "read_committed"})
    reader.assign([TopicPartition(topic, 0, 0)])
    seen = []
    deadline = Deadline(20)
    while b"committed" not in seen and not deadline.passed():
        message = reader.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(message.value())
    reader.close()
    assert b"committed" in seen, f"the probe's committed record never arrived: {seen}"
    return {"filters_aborted": b"aborted" not in seen, "stores_offsets": stored}


def read_committed(stack):
    """The stack's outcome reader, made read_committed explicitly (librdkafka's default, said here)."""
    from confluent_kafka import Consumer, TopicPartition
    reader = stack.reader
    reader.consumer.close()
    reader.consumer = Consumer({"bootstrap.servers": stack.cluster.bootstrap, "group.id": "pytest-outcome-reader",
                                "enable.auto.commit": False, "enable.partition.eof": False,
                                "isolation.level": "read_committed"})
    partitions = reader.consumer.list_topics(OUTCOMES, timeout=10).topics[OUTCOMES].partitions
    reader.consumer.assign([TopicPartition(OUTCOMES, p, 0) for p in partitions])


class Phases:
    """The run split at each kill: the outcome copies each worker wrote (by their completed_at: the workers
    never overlap), its APNs requests, and the group's committed offsets after it was killed.

    A copy is assigned to its worker by time, not by when the reader saw it: a broker that holds back an open
    transaction's records until it ends (the restarted producer's init_transactions aborts it) serves them
    during the next worker's phase."""

    def __init__(self, stack):
        self.stack = stack
        self.records = []

    def end(self, worker, committed, final=False):
        stats = self.stack.simulator.close()
        aborts = len(worker.find_prefix(ABORTED))
        self.records.append({"ended": time.time(), "requests": stats["requests"], "committed": committed,
                             "final": final, "aborts": aborts})
        port = int(self.stack.simulator.url.rsplit(":", 1)[1])
        directory = self.stack.directory
        self.stack.simulator = Simulator(directory, os.path.join(directory, "key.pub"), LATENCY_MS, port=port)
        self.stack.closers.append(self.stack.simulator.close)

    def kill(self, worker):
        assert worker.kill() == -9
        self.stack.reader.poll_until_quiet(quiet=0.5)
        self.end(worker, self.stack.committed())

    def phase_of(self, outcome):
        completed = datetime.fromisoformat(outcome["completed_at"]).timestamp()
        return next((index for index, phase in enumerate(self.records) if completed < phase["ended"]),
                    len(self.records) - 1)

    def classified(self):
        """{pair: [committed copies, uncommitted copies]} over every phase, and uncommitted copies per kill."""
        copies = {}
        per_kill = [0] * len(self.records)
        for outcome in self.stack.reader.outcomes:
            index = self.phase_of(outcome)
            phase = self.records[index]
            source = outcome["source"]
            uncommitted = not phase["final"] and source["offset"] >= phase["committed"].get(source["partition"], -1)
            per_kill[index] += uncommitted
            copies.setdefault((outcome["event_id"], outcome["device_token"]), [0, 0])[1 if uncommitted else 0] += 1
        return copies, per_kill[:-1]


def run_with_two_kills(stack, finished):
    """The two kills and the final worker; `finished()` says when the final worker is done. Returns Phases."""
    events = redo.single_device_events(EVENTS, "eos")
    producer = redo.PacedProducer(stack.cluster.bootstrap, events, RATE)
    phases = Phases(stack)

    first = stack.start_worker("first")
    first.wait_for_log("kafka transactions ready (exactly-once results)", 30)
    stack.reader.wait_for(lambda: len(stack.reader.outcomes) >= 2000, 90, "2,000 outcomes")
    phases.kill(first)

    second = stack.start_worker("second")
    redo.first_new_outcome(stack, len(stack.reader.outcomes), 90)
    deadline = Deadline(SECOND_KILL_AFTER)
    while not deadline.passed():
        stack.reader.poll(deadline.left())
    assert len(stack.reader.per_pair) < EVENTS, "the worker finished before the second kill"
    phases.kill(second)

    third = stack.start_worker("third")
    placed = producer.wait(120)
    assert len(placed) == EVENTS
    stack.reader.wait_for(lambda: finished(phases, placed), 180, "the last worker finished every record")
    _, metrics = http_get(third.metrics_url() + "/metrics")
    committed_transactions = metric_series(metrics, "apns_worker_kafka_transactions_total").get('result="committed"')
    assert committed_transactions, "the last worker committed transactions"
    assert metric_value(metrics, "apns_worker_results_held") == 0
    code, _ = third.terminate(30)
    assert code == 0, third.tail(30)
    stack.reader.poll_until_quiet()
    phases.end(third, stack.committed(), final=True)
    return phases, expected_pairs(events), committed_transactions


def report(broker, capabilities, phases, pairs, committed_transactions):
    copies, per_kill = phases.classified()
    seen = {pair: sum(counts) for pair, counts in copies.items()}
    missing = pairs - set(seen)
    duplicates = sum(count - 1 for count in seen.values())
    committed_duplicates = sum(max(0, counts[0] - 1) for counts in copies.values())
    committed_missing = sum(1 for pair in pairs if copies.get(pair, [0, 0])[0] == 0)
    uncommitted = sum(counts[1] for counts in copies.values())
    requests = sum(p["requests"] for p in phases.records)
    aborts = sum(p["aborts"] for p in phases.records)
    print(f"\n{broker}: {EVENTS} events at {RATE}/s, cap {CAP}, two SIGKILLs; broker {capabilities}; "
          f"read_committed reader saw {len(seen)} pairs, {duplicates} duplicates, {len(missing)} missing; "
          f"committed copies: {committed_duplicates} duplicates, {committed_missing} missing; uncommitted copies "
          f"(a filtering broker hides them) {uncommitted}, per kill {per_kill}; transactions aborted {aborts}; "
          f"the last worker's committed transactions {committed_transactions}; APNs requests {requests} for "
          f"{len(pairs)} pairs (pushes sent twice: {requests - len(pairs)}, at-least-once)")
    assert not missing
    assert aborts == 0, "an aborted transaction's copies would be miscounted on a broker that does not filter"
    assert committed_duplicates == 0 and committed_missing == 0
    assert duplicates == uncommitted, "every duplicate the reader saw was in a transaction that never committed"
    if capabilities["filters_aborted"]:
        assert uncommitted == 0 and duplicates == 0


@pytest.fixture
def tansu_stack(tmp_path, monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", tansu.librdkafka_216(str(tmp_path)))
    stack = Stack(str(tmp_path), "eos-tansu", latency_ms=LATENCY_MS, max_in_flight=CAP, drain_timeout=10,
                  cluster_class=tansu.Tansu, overrides={"kafka": {"exactly_once": True}})
    read_committed(stack)
    yield stack
    stack.close()


@pytest.fixture
def mock_stack(tmp_path):
    stack = Stack(str(tmp_path), "eos-mock", latency_ms=LATENCY_MS, max_in_flight=CAP, drain_timeout=10,
                  overrides={"kafka": {"exactly_once": True}})
    read_committed(stack)
    yield stack
    stack.close()


def test_two_sigkills_leave_exactly_one_committed_outcome_per_pair_on_tansu(tansu_stack):
    stack = tansu_stack
    capabilities = broker_transactions(stack.cluster.bootstrap)
    assert capabilities["stores_offsets"], "Tansu commits offsets sent in a transaction"

    def finished(phases, placed):
        ends = tansu.acknowledged_ends(placed)
        committed = stack.committed()
        return all(committed.get(p, -1) >= end for p, end in ends.items())
    phases, pairs, transactions = run_with_two_kills(stack, finished)
    report("Tansu 0.6.0, librdkafka 2.16", capabilities, phases, pairs, transactions)


def test_two_sigkills_lose_nothing_on_the_mock_cluster(mock_stack):
    """The mock stores no offsets sent in transactions: each restart redoes push.requests from the start, so
    the last worker alone must produce exactly one outcome per pair, and every earlier copy is uncommitted."""
    stack = mock_stack
    capabilities = broker_transactions(stack.cluster.bootstrap)

    def finished(phases, placed):
        if capabilities["stores_offsets"]:
            return stack.committed() == stack.offsets.ends()
        started = phases.records[-1]["ended"]
        final = {(o["event_id"], o["device_token"]) for o in stack.reader.outcomes
                 if datetime.fromisoformat(o["completed_at"]).timestamp() >= started}
        return len(final) >= len(placed)
    phases, pairs, transactions = run_with_two_kills(stack, finished)
    library = "librdkafka 2.16" if "2.16" in os.environ.get("LD_LIBRARY_PATH", "") else "librdkafka (system)"
    report(f"kafka-mock, {library}", capabilities, phases, pairs, transactions)


def test_a_worker_fenced_by_a_newer_producer_stops_without_committing_on_tansu(tansu_stack):
    """A producer that registers the worker's transactional.id again (what a second instance with the same
    id does) fences the worker: its next transaction fails fatally, it commits nothing more and exits 1,
    saying why."""
    from confluent_kafka import Producer
    stack = tansu_stack
    stack.produce(make_events(200, "before-fence"))
    worker = stack.start_worker("fenced")
    ready = worker.wait_for_log("kafka transactions ready (exactly-once results)", 30)
    stack.reader.wait_for(lambda: len(stack.reader.per_pair) > 0, 60, "the first outcomes")
    newer = Producer({"bootstrap.servers": stack.cluster.bootstrap,
                      "transactional.id": ready["fields"]["transactional_id"]})
    newer.init_transactions(30)
    committed_at_fence = stack.committed()
    # Work for another transaction, which the fenced producer cannot commit.
    stack.produce(make_events(200, "after-fence"))
    assert worker.process.wait(timeout=60) == 1, worker.tail(30)
    stopped = worker.find("results could not be published; stopping without committing past them")
    assert len(stopped) == 1, worker.tail(30)
    reason = stopped[0]["fields"]["error"]
    assert reason.startswith("Kafka transactions stopped for good: ") and "fenced" in reason.lower(), reason
    assert stack.committed() == committed_at_fence, "nothing was committed after the fence"
    print(f"\nfenced worker: exit 1, {reason}")
