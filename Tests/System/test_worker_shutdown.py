"""Bounded shutdown and Kafka's side of /readyz, with the release binary against `apns-worker
kafka-mock` and the APNs simulator.

SIGTERM ends the worker within shutdown.drain_timeout plus the fixed margin (3 s,
ShutdownDeadline.margin) whatever Kafka is doing: mid-rebalance with the broker killed, records held
by a 30 s Retry-After (released unsent at once: the stop withdraws waiting pushes), during start-up
with the brokers unreachable. What was not finished stays uncommitted, and a restarted worker gives
every (event, device) an outcome. /readyz names kafka
while no broker answers, /healthz stays 200, and both recover when the broker is back.

Bounds allow CI_SLACK on top of drain_timeout + margin: two cores shared by several builds.
"""
import json
import signal
import socket
import time

import pytest

from worker_process_support import (
    ControlledKafkaMock, Deadline, Stack, Worker, expected_pairs, http_get, make_events, metric_series, metric_value)

DRAIN_TIMEOUT = 5
MARGIN = 3
CI_SLACK = 2
BOUND = DRAIN_TIMEOUT + MARGIN + CI_SLACK


@pytest.fixture
def make_stack(tmp_path, request):
    stacks = []

    def make(**options):
        options.setdefault("latency_ms", "1-5")
        stack = Stack(str(tmp_path), f"shutdown-{request.node.name}", max_in_flight=200,
                      drain_timeout=DRAIN_TIMEOUT, **options)
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.close()


def start_worker(stack, name, wait_for="worker started"):
    worker = Worker(stack.config, stack.directory, name)
    stack.closers.append(worker.close)
    if wait_for:
        worker.wait_for_log(wait_for, 30)
    return worker


def edit_config(stack, change):
    with open(stack.config) as file:
        config = json.load(file)
    change(config)
    with open(stack.config, "w") as file:
        json.dump(config, file, indent=2)


def exit_reasons(worker):
    """Log lines that explain a non-zero exit."""
    return [line["message"] for line in worker.log()
            if line.get("level") in ("error", "critical") and line.get("message", "").startswith("exiting with code")]


def assert_exit_explained(worker, code):
    if code != 0:
        assert exit_reasons(worker), f"exit code {code} without a log line saying why:\n{worker.tail(30)}"


def statuses(reader):
    counts = {}
    for outcome in reader.outcomes:
        counts[outcome["status"]] = counts.get(outcome["status"], 0) + 1
    return counts


def wait_until(condition, seconds, what):
    deadline = Deadline(seconds)
    while not condition():
        if deadline.passed():
            raise TimeoutError(f"{what} not reached in {seconds} s")
        time.sleep(0.05)


@pytest.mark.parametrize("broker_end", ["killed", "frozen"])
def test_sigterm_mid_rebalance_then_broker_gone_exits_within_the_bound(make_stack, broker_end):
    """`killed`: the broker's sockets are closed at once. `frozen` (SIGSTOP): they stay open and
    unanswered, as behind a network partition, so librdkafka's requests wait for their timeouts."""
    # Every push is answered after 8 s, so the first worker's revoke handler is still waiting for
    # in-flight records of the partitions it gives up when the signal and then the broker's end come.
    stack = make_stack(latency_ms="8000")
    events = make_events(400, "rebalance")
    stack.produce(events)
    first = start_worker(stack, "first")
    first.wait_for_log("kafka partitions assigned", 20)
    url = first.metrics_url()
    wait_until(lambda: (metric_value(http_get(url + "/metrics")[1], "apns_worker_records_in_flight") or 0) > 0,
               20, "records in flight")

    start_worker(stack, "second", wait_for=None)
    first.wait_for_log("kafka partitions revoked", 30)
    # The Python clients would wait for the dead broker when closed; close them while it is alive.
    for close in (stack.reader.close, stack.offsets.close):
        stack.closers.remove(close)
        close()
    started = time.monotonic()
    first.process.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    if broker_end == "killed":
        stack.cluster.process.kill()
    else:
        stack.cluster.process.send_signal(signal.SIGSTOP)
    try:
        code = first.process.wait(timeout=BOUND + 20)
    finally:
        stack.cluster.process.kill()
    took = time.monotonic() - started
    print(f"\nmid-rebalance, broker {broker_end}: exit {code} after {took:.2f} s; reasons: {exit_reasons(first)}")
    assert took < BOUND, first.tail(30)
    assert_exit_explained(first, code)
    assert code in (0, 1)
    assert first.find("shutting down")
    if code == 1:
        problems = first.find("exiting with code 1: the shutdown was not clean")[0]["fields"]["problems"]
        assert any("close was abandoned" in problem and "while " in problem for problem in problems), problems


def start_with_held_records(make_stack, held_requests, prefix, overrides=None):
    """A worker over 300 events whose pushes numbered `held_requests` (20 or more apart: one per record) APNs
    answers 503 with a 30 s Retry-After; returns (stack, events, pairs, placed, worker, metrics URL) once every
    record but the held ones has finished, those waiting out their Retry-After."""
    stack = make_stack(script=[{"request": n, "action": "fail", "status": 503, "retryAfter": 30}
                               for n in held_requests], overrides=overrides)
    events = make_events(300, prefix)
    pairs = expected_pairs(events)
    placed = stack.produce(events)
    worker = start_worker(stack, "first")
    url = worker.metrics_url()
    stack.reader.wait_for(lambda: len(stack.reader.per_pair) >= len(pairs) - 2 * len(held_requests), 60,
                          "every outcome but those of the held records")
    wait_until(lambda: metric_value(http_get(url + "/metrics")[1], "apns_worker_records_in_flight")
               == len(held_requests) == len(waiting_events(stack, events)), 30, "only the held records in flight")
    return stack, events, pairs, placed, worker, url


def waiting_events(stack, events):
    """The ids of the events with a device whose outcome the reader has not seen."""
    done = set(stack.reader.per_pair)
    return {event["id"] for event in events
            if any((event["id"], device["token"]) not in done for device in event["devices"])}


def test_records_held_by_retry_after_are_released_unsent_at_a_stop_and_a_restart_loses_none(make_stack):
    held_requests = [20, 60, 100]
    stack, events, pairs, placed, first, url = start_with_held_records(make_stack, held_requests, "held")

    # The stop withdraws the held pushes rather than spend the drain waiting for their Retry-After: the
    # records are released unsent, stay uncommitted, and the drain does not run out.
    code, took = first.terminate(BOUND + 20)
    print(f"\nRetry-After 30 s, drain_timeout {DRAIN_TIMEOUT} s: exit {code} after {took:.2f} s")
    assert code == 0, first.tail(30)
    assert took < BOUND, first.tail(30)
    released = first.find("records whose pushes were waiting (for APNs, a retry or a paced device) were released "
                          "unsent; they stay uncommitted and the group's next owner sends them")
    assert len(released) == 1, first.tail(30)
    assert released[0]["fields"]["records_released"] == len(held_requests)
    partitions_left = len(released[0]["fields"]["partitions"])
    assert 1 <= partitions_left <= len(held_requests)
    assert not first.find_prefix("the drain timeout passed"), first.tail(30)
    assert first.find("worker stopped")[0]["fields"]["abandoned_records"] == len(held_requests)
    stack.reader.poll_until_quiet()
    before_restart = set(stack.reader.per_pair)
    assert len(before_restart) < len(pairs)
    assert "failed" not in statuses(stack.reader), "a held push was finished as failed"
    committed_at_stop = stack.committed()
    ends = stack.offsets.ends()
    # Partitions without a held record were finished and committed to their end before the group was left.
    assert sum(committed_at_stop[p] == ends[p] for p in ends) >= len(ends) - partitions_left

    # The simulator's script is spent: the restarted worker finds APNs healthy.
    second = start_worker(stack, "second")
    stack.wait_until_all_committed(pairs)
    code, _ = second.terminate(BOUND + 20)
    assert code == 0, second.tail(30)
    stack.reader.poll_until_quiet()
    lost = pairs - set(stack.reader.per_pair)
    duplicated = {pair for pair, count in stack.reader.per_pair.items() if count > 1}
    print(f"{len(events)} events, {len(pairs)} pairs: {len(before_restart)} had outcomes at the stop, lost "
          f"{len(lost)}, duplicated {len(duplicated)} (finished behind a held record, so not committable), "
          f"statuses {statuses(stack.reader)}")
    assert not lost
    assert statuses(stack.reader) == {"delivered": len(stack.reader.outcomes)}
    assert max(stack.reader.per_pair.values()) <= 2
    # Done twice is exactly what was finished at or past its partition's committed offset at the stop:
    # what finished below it was committed before the group was left.
    behind = {(event_id, token) for event_id, token in before_restart
              if placed[event_id][1] >= committed_at_stop[placed[event_id][0]]}
    assert duplicated == behind


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_records_held_by_retry_after_are_released_unsent_at_a_revoke_and_counted(make_stack, strategy):
    # Twelve records' pushes answered 503 with a 30 s Retry-After: their records wait. The worker's default
    # protocol (cooperative-sticky) revokes only the partitions that move; the eager one (range) all of them.
    held_requests = range(20, 260, 20)
    stack, events, pairs, placed, first, url = start_with_held_records(
        make_stack, held_requests, "revoked",
        overrides={"kafka": {"properties": {"partition.assignment.strategy": strategy}}})
    held = waiting_events(stack, events)
    released = metric_series(http_get(url + "/metrics")[1], "apns_worker_records_released_unsent_total")
    assert released == {'cause="revoke"': 0, 'cause="shutdown"': 0}

    # A second worker joins: the group revokes partitions of the first, whose revoke withdraws the held pushes
    # of those partitions instead of waiting out their Retry-After; the log and the metric say how many
    # records went to the next owner unsent.
    second = start_worker(stack, "second")
    revoked = first.wait_for_log("kafka partitions revoked", 30)["fields"]["partitions"]
    expected = sum(1 for event_id in held if "push.requests[%d]" % placed[event_id][0] in revoked)
    if strategy == "range":
        assert expected == len(held), (revoked, "an eager rebalance revokes every partition")
    assert expected > 0, (revoked, sorted(placed[event_id][0] for event_id in held))
    wait_until(lambda: first.find_prefix("revoked partitions had records whose pushes were waiting"), 30,
               "the revoke's account of the records it released")
    line = first.find_prefix("revoked partitions had records whose pushes were waiting")[0]
    assert line["fields"]["records_released_unsent"] == expected, (line, revoked)
    assert line["fields"]["records_left_running"] == 0
    metrics = http_get(url + "/metrics")[1]
    assert metric_series(metrics, "apns_worker_records_released_unsent_total")['cause="revoke"'] == expected
    assert metric_series(metrics, "apns_worker_records_left_running_total")['cause="revoke"'] == 0
    assert not first.find_prefix("rebalance handler did not return"), first.tail(30)

    # The script is spent: the second worker delivers the released records; the first, those it kept once
    # their Retry-After has passed.
    stack.wait_until_all_committed(pairs)
    for worker in (first, second):
        code, _ = worker.terminate(BOUND + 20)
        assert code == 0, worker.tail(30)
    stack.reader.poll_until_quiet()
    assert pairs <= set(stack.reader.per_pair)
    assert statuses(stack.reader) == {"delivered": len(stack.reader.outcomes)}
    print(f"\n{len(held)} records held by Retry-After, {expected} released unsent at the revoke of {revoked}")


def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("phase", ["brokers-unreachable", "brokers-down", "joining"])
def test_sigterm_during_start_up_exits_within_the_bound(make_stack, phase):
    stack = make_stack(cluster_class=ControlledKafkaMock)
    if phase == "brokers-unreachable":
        port = closed_port()
        edit_config(stack, lambda config: config["kafka"].update(brokers=[f"127.0.0.1:{port}"]))
    elif phase == "brokers-down":
        stack.cluster.down()
    worker = start_worker(stack, "worker", wait_for=None)
    if phase == "joining":
        # Before the group has handed out partitions (the join takes a few hundred ms to seconds).
        worker.wait_for_log("worker started", 30)
    else:
        worker.metrics_url()
        time.sleep(0.5)  # into the topic lookup, which the brokers do not answer
    code, took = worker.terminate(BOUND + 20)
    print(f"\nSIGTERM during start-up ({phase}): exit {code} after {took:.2f} s; reasons: {exit_reasons(worker)}")
    assert took < BOUND, worker.tail(30)
    assert_exit_explained(worker, code)
    assert worker.find("shutting down")
    assert not worker.stderr().strip(), worker.stderr()
    if phase == "brokers-down":
        stack.cluster.up()  # so that the test's own Kafka clients close


def readiness(url):
    status, body = http_get(url + "/readyz")
    return status, json.loads(body)


def test_readyz_names_kafka_while_the_broker_is_down_and_recovers_with_it(make_stack):
    stack = make_stack(cluster_class=ControlledKafkaMock)
    worker = start_worker(stack, "worker")
    url = worker.metrics_url()
    wait_until(lambda: readiness(url)[0] == 200, 30, "/readyz 200")
    metrics = http_get(url + "/metrics")[1]
    assert metric_value(metrics, "apns_worker_kafka_brokers_up") >= 1
    assert metric_value(metrics, "apns_worker_partitions_assigned") == 6  # push.requests 4, push.retry 2

    events = make_events(200, "outage")
    pairs = expected_pairs(events)
    stack.produce(events[:100])

    stack.cluster.down()
    went_down = time.monotonic()
    wait_until(lambda: "kafka.brokers" in readiness(url)[1]["not_ready"], 20, "/readyz naming kafka.brokers")
    noticed = time.monotonic() - went_down
    status, body = readiness(url)
    assert status == 503
    reason = next(entry["reason"] for entry in body["conditions"] if entry["name"] == "kafka.brokers")
    assert reason.startswith("no Kafka broker answers: "), reason
    assert http_get(url + "/healthz")[0] == 200
    assert metric_value(http_get(url + "/metrics")[1], "apns_worker_kafka_brokers_up") == 0

    # Past the session timeout (6 s) the group moves on without the member: kafka.group as well.
    wait_until(lambda: "kafka.group" in readiness(url)[1]["not_ready"], 30, "/readyz naming kafka.group")
    assert http_get(url + "/healthz")[0] == 200

    stack.cluster.up()
    came_back = time.monotonic()
    wait_until(lambda: readiness(url)[0] == 200, 60, "/readyz 200 again")
    recovered = time.monotonic() - came_back
    metrics = http_get(url + "/metrics")[1]
    assert metric_value(metrics, "apns_worker_kafka_brokers_up") >= 1
    assert metric_value(metrics, "apns_worker_partitions_assigned") == 6  # push.requests 4, push.retry 2

    stack.produce(events[100:])
    stack.wait_until_all_committed(pairs, seconds=60)
    code, _ = worker.terminate(BOUND + 20)
    assert code == 0, worker.tail(30)
    stack.reader.poll_until_quiet()
    assert set(stack.reader.per_pair) == pairs

    # Each change logged once, with its cause.
    unreachable = worker.find_prefix("kafka brokers unreachable: ")
    assert len(unreachable) == 1, [line["message"] for line in unreachable]
    assert len(worker.find("kafka brokers reachable again")) == 1
    lost = worker.find_prefix("kafka consumer group membership lost: ")
    assert len(lost) == 1, [line["message"] for line in lost]
    assert len(worker.find("kafka consumer group membership regained")) == 1
    print(f"\nbroker down: /readyz 503 after {noticed:.2f} s; broker up: /readyz 200 after {recovered:.2f} s; "
          f"{len(pairs)} pairs, {len(stack.reader.outcomes)} outcomes; '{unreachable[0]['message']}'; "
          f"'{lost[0]['message']}'")
