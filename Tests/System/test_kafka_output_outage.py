"""A Kafka outage on the output side holds the work: with the release binary against `apns-worker
kafka-mock --control-stdin` and the APNs simulator.

The worker takes the events first (the consumer cannot fetch while the broker is down), the simulator
answers after 2 s, and the broker goes down meanwhile, so every result is handed to the producer while
no broker answers. The outage lasts longer than the producer's old limits (a full queue failed after
10 s; `message.timeout.ms`, set to 3 s in one case, failed every record): the worker must not exit, must
say once that results wait (log, /readyz `kafka.producer`, `apns_worker_results_unacknowledged`), and
once the broker is back every (event, device) has an outcome and every offset is committed.
SIGTERM during the outage still ends within drain_timeout + 3 s and leaves the waiting records
uncommitted, for a second worker to finish.

Each runs twice: with the broker down (connections refused: librdkafka knows at once) and with the
broker silent (every answer delayed ten minutes: connections stay up, requests are taken and go
unanswered, as behind a path that went dark; only librdkafka's timeouts can tell).

Bounds allow CI_SLACK on top of drain_timeout + margin: two cores shared by several builds.
"""
import json
import time

import pytest
from confluent_kafka import KafkaException

from worker_process_support import (
    ControlledKafkaMock, Deadline, Stack, Worker, expected_pairs, http_get, make_events, metric_value)

DRAIN_TIMEOUT = 5
MARGIN = 3
CI_SLACK = 2
BOUND = DRAIN_TIMEOUT + MARGIN + CI_SLACK
# Longer than the old 10 s enqueue limit and than the 3 s message.timeout.ms of the override case.
OUTAGE_SECONDS = 15
EVENTS = 150


@pytest.fixture
def make_stack(tmp_path, request):
    stacks = []

    def make(properties):
        stack = Stack(str(tmp_path), f"output-outage-{request.node.name}", latency_ms="2000", max_in_flight=400,
                      drain_timeout=DRAIN_TIMEOUT, cluster_class=ControlledKafkaMock)
        stacks.append(stack)
        with open(stack.config) as file:
            config = json.load(file)
        # The group keeps the member through the outage, so that the held records are finished by
        # this worker rather than abandoned to a rebalance.
        config["kafka"]["properties"]["session.timeout.ms"] = 45000
        config["kafka"]["properties"].update(properties)
        with open(stack.config, "w") as file:
            json.dump(config, file, indent=2)
        return stack

    yield make
    for stack in stacks:
        stack.close()


class BrokerDown:
    def start(self, cluster):
        cluster.down()

    def end(self, cluster):
        cluster.up()


class BrokerSilent:
    def start(self, cluster):
        cluster.delay(600_000)

    def end(self, cluster):
        cluster.delay(0)


FAULTS = {"broker-down": BrokerDown(), "broker-silent": BrokerSilent()}


def wait_until(condition, seconds, what):
    deadline = Deadline(seconds)
    while not condition():
        if deadline.passed():
            raise TimeoutError(f"{what} not reached in {seconds} s")
        time.sleep(0.05)


def readiness(url):
    status, body = http_get(url + "/readyz")
    return status, json.loads(body)


def metrics_sum(url, name):
    """The sum of every series of `name` (labelled or not)."""
    total = 0.0
    for line in http_get(url + "/metrics")[1].splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def answered(query):
    """The answer of a query to the mock cluster, asked again while it has not relearned its metadata
    after the outage (`_UNKNOWN_PARTITION` for a few hundred ms)."""
    deadline = Deadline(30)
    while True:
        try:
            return query()
        except KafkaException:
            if deadline.passed():
                raise
            time.sleep(0.2)


def wait_until_all_committed(stack, pairs, ends, seconds=90):
    """Every pair has an outcome and the group's committed offsets reached `ends`."""
    stack.reader.wait_for(lambda: len(stack.reader.per_pair) >= len(pairs) and answered(stack.committed) == ends,
                          seconds, "every outcome and every offset committed")


def start_with_results_in_flight(stack, prefix, fault):
    """Starts a worker, lets it take every event, then starts `fault` before the simulator (2 s latency)
    has answered any push. Returns (worker, url, pairs, the partitions' ends, time the fault began)."""
    worker = Worker(stack.config, stack.directory, "worker")
    stack.closers.append(worker.close)
    worker.wait_for_log("worker started", 30)
    url = worker.metrics_url()
    wait_until(lambda: readiness(url)[0] == 200, 30, "/readyz 200")
    events = make_events(EVENTS, prefix)
    pairs = expected_pairs(events)
    stack.produce(events)
    ends = stack.offsets.ends()
    wait_until(lambda: metrics_sum(url, "apns_worker_records_consumed_total") >= EVENTS, 30, "every event taken")
    assert metrics_sum(url, "apns_worker_outcomes_total") == 0, "results came before the outage"
    fault.start(stack.cluster)
    return worker, url, pairs, ends, time.monotonic()


def wait_for_results_waiting(worker, url):
    """The worker says once that results wait: log line, /readyz kafka.producer, the gauge."""
    wait_until(lambda: worker.find_prefix("results wait for Kafka: "), 30, "'results wait for Kafka' logged")
    status, body = readiness(url)
    assert status == 503
    assert "kafka.producer" in body["not_ready"], body
    reason = next(entry["reason"] for entry in body["conditions"] if entry["name"] == "kafka.producer")
    assert reason.startswith("results wait for Kafka: "), reason
    unacknowledged = metric_value(http_get(url + "/metrics")[1], "apns_worker_results_unacknowledged")
    assert unacknowledged and unacknowledged > 0
    return unacknowledged


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("properties", [{}, {"message.timeout.ms": 3000}], ids=["default", "message-timeout-3s"])
def test_results_wait_through_a_broker_outage_and_are_all_delivered(make_stack, properties, fault):
    stack = make_stack(properties)
    worker, url, pairs, ends, went_down = start_with_results_in_flight(stack, "hold", FAULTS[fault])
    unacknowledged = wait_for_results_waiting(worker, url)
    noticed = time.monotonic() - went_down

    # Past the old limits the worker still runs and still holds every result.
    wait_until(lambda: time.monotonic() - went_down >= OUTAGE_SECONDS or worker.process.poll() is not None,
               OUTAGE_SECONDS + 5, "the outage's end")
    assert worker.process.poll() is None, f"the worker exited during the outage:\n{worker.tail(30)}"
    assert readiness(url)[0] == 503
    FAULTS[fault].end(stack.cluster)
    came_back = time.monotonic()

    wait_until_all_committed(stack, pairs, ends)
    delivered = time.monotonic() - came_back
    wait_until(lambda: readiness(url)[0] == 200, 30, "/readyz 200 again")
    assert metric_value(http_get(url + "/metrics")[1], "apns_worker_results_unacknowledged") == 0
    assert worker.process.poll() is None, worker.tail(30)
    code, _ = worker.terminate(BOUND + 20)
    assert code == 0, worker.tail(30)

    stack.reader.poll_until_quiet()
    assert set(stack.reader.per_pair) == pairs
    statuses = {outcome["status"] for outcome in stack.reader.outcomes}
    assert statuses == {"delivered"}, statuses
    waits = worker.find_prefix("results wait for Kafka: ")
    assert len(waits) == 1, [line["message"] for line in waits]
    assert len(worker.find("results acknowledged again")) == 1
    assert not worker.find_prefix("exiting with code 1")
    print(f"\n{fault}, {properties or 'default'}: {len(pairs)} pairs held through a {OUTAGE_SECONDS} s outage; "
          f"'{waits[0]['message']}' after {noticed:.1f} s, {unacknowledged:.0f} unacknowledged; all committed "
          f"{delivered:.1f} s after the broker came back; {len(stack.reader.outcomes)} outcomes")


@pytest.mark.parametrize("fault", FAULTS)
def test_sigterm_while_results_wait_ends_in_time_and_leaves_them_uncommitted(make_stack, fault):
    stack = make_stack({})
    worker, url, pairs, ends, _ = start_with_results_in_flight(stack, "sigterm", FAULTS[fault])
    unacknowledged = wait_for_results_waiting(worker, url)

    code, took = worker.terminate(BOUND + 20)
    assert took <= BOUND, f"exit after {took:.1f} s:\n{worker.tail(30)}"
    shutdown = worker.find("results unacknowledged by Kafka at shutdown: their input records stay uncommitted "
                           "and the group's next owner processes them again")
    assert len(shutdown) == 1, worker.tail(30)
    assert shutdown[0]["fields"]["results_unacknowledged"] > 0
    # A consumer close abandoned with the broker gone may make the exit 1 (logged); the producer's close
    # must not: it purges at once instead of flushing towards brokers that are away.
    unclean = worker.find("exiting with code 1: the shutdown was not clean")
    assert code == 0 or unclean, worker.tail(30)
    problems = unclean[0]["fields"]["problems"] if unclean else []
    assert not [problem for problem in problems if "producer" in problem], problems

    FAULTS[fault].end(stack.cluster)
    committed = answered(stack.committed)
    assert sum(max(0, offset) for offset in committed.values()) < sum(ends.values()), (committed, ends)

    second = Worker(stack.config, stack.directory, "second")
    stack.closers.append(second.close)
    wait_until_all_committed(stack, pairs, ends)
    assert second.terminate(BOUND + 20)[0] == 0, second.tail(30)
    stack.reader.poll_until_quiet()
    assert set(stack.reader.per_pair) == pairs
    print(f"\nSIGTERM with {unacknowledged:.0f} results unacknowledged: exit {code} after {took:.1f} s "
          f"(bound {BOUND} s); committed {committed} of {ends}; a second worker finished all {len(pairs)} pairs")
