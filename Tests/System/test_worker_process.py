"""The worker as real processes: `apns-worker run` against `apns-worker kafka-mock` and the APNs
simulator, killed with SIGKILL or stopped with SIGTERM mid-stream, then restarted in the same
consumer group. At-least-once means every (event, device) gets an outcome; what is done twice is
exactly what was finished but not committed; a graceful stop leaves nothing to redo. A bad
worker.yaml is refused with its file:line:column and the fix.

To stop the worker with work certainly in flight, the simulator holds one scripted request for
seconds (`{"request": N, "action": "delay"}`): once more than N pushes are answered, that push is
still unanswered, and its record holds its partition's committed offset back.
"""
import json
import signal
import subprocess
import textwrap
import time
from collections import Counter
from datetime import datetime

import pytest

from worker_process_support import (
    BIN, RULES, Stack, expected_pairs, make_events, make_token_key, worker_environment)

MAX_IN_FLIGHT = 200
# After the pipeline pauses at its cap, the consumer's hand-off (KafkaConsumerConfiguration.bufferCapacity,
# 256) and the record its poll thread holds still reach it: the real bound on records taken at once.
HAND_OFF = 257
MAX_DEVICES = 2
# Pushes answered after 200 to 600 ms, so that hundreds are in flight at any moment of a batch.
LATENCY_MS = "200-600"
DRAIN_TIMEOUT = 10
# The worker auto-commits stored offsets every second; with the commit's own latency and the reader's
# view of the kill, work finished more than this long before a SIGKILL is committed.
AUTO_COMMIT_SLACK = 2.5


@pytest.fixture
def make_stack(tmp_path, request):
    stacks = []

    def make(**options):
        stack = Stack(str(tmp_path), f"crash-{request.node.name}", latency_ms=LATENCY_MS,
                      max_in_flight=MAX_IN_FLIGHT, drain_timeout=DRAIN_TIMEOUT, **options)
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.close()


def delayed(request, seconds):
    return [{"request": request, "action": "delay", "ms": seconds * 1000}]


def wait_for_outcomes(stack, pairs, count):
    """Waits for `count` outcomes; the worker must not have finished everything by then."""
    stack.reader.wait_for(lambda: len(stack.reader.per_pair) >= count, 40, f"{count} outcomes")
    assert len(stack.reader.per_pair) < len(pairs), "the worker finished before it could be stopped mid-stream"


def stopped_fields(worker):
    lines = worker.find("worker stopped")
    assert len(lines) == 1, worker.tail()
    return lines[0]["fields"]


def test_sigkill_mid_stream_then_restart_redoes_only_what_was_not_committed(make_stack):
    stuck = 1200
    # Held far longer than reaching stuck + 600 outcomes takes even on a loaded machine (about 1 s
    # here): were it answered before the kill, nothing need be in flight at the kill (after a resume,
    # librdkafka refetches for ~0.5 s), and the bound below could not be checked.
    stack = make_stack(script=delayed(stuck, 30))
    events = make_events(3000, "kill")
    pairs = expected_pairs(events)
    placed = stack.produce(events)
    devices = {event["id"]: len(event["devices"]) for event in events}

    first = stack.start_worker("first")
    # Some hundreds of pushes after the slow one: records behind it in its partition have finished.
    wait_for_outcomes(stack, pairs, stuck + 600)
    assert first.kill() == -signal.SIGKILL
    killed_at = time.time()
    stack.reader.poll_until_quiet()
    before_restart = set(stack.reader.per_pair)
    committed_at_kill = stack.committed()

    second = stack.start_worker("second")
    ends = stack.wait_until_all_committed(pairs)
    code, _ = second.terminate(DRAIN_TIMEOUT + 5)
    assert code == 0, second.tail()
    assert stopped_fields(second)["abandoned_records"] == 0
    stack.reader.poll_until_quiet()
    stats = stack.simulator.close()

    # Every (event, device) has an outcome, delivered; nothing else was published.
    per_pair = stack.reader.per_pair
    assert set(per_pair) == pairs
    assert {outcome["status"] for outcome in stack.reader.outcomes} == {"delivered"}
    assert stack.committed() == ends

    # Redone are exactly the events the first worker finished at or past a partition's committed
    # offset (the slow push held one partition's offset back); nothing below it, nothing twice more.
    def uncommitted(event_id):
        partition, offset = placed[event_id]
        return offset >= committed_at_kill[partition]  # -1001 (nothing committed) is below every offset

    duplicated_pairs = {pair for pair, count in per_pair.items() if count > 1}
    duplicated_events = {event_id for event_id, _ in duplicated_pairs}
    assert duplicated_events == {event_id for event_id, _ in before_restart if uncommitted(event_id)}
    assert max(per_pair.values()) <= 2
    # The slow push's partition stops fetching once it holds the cap's worth of records, so it leaves at
    # most that (and the consumer's hand-off) to redo. The other partitions go on meanwhile, and leave
    # only what they finished since their last auto-commit (every second) before the kill.
    by_partition = Counter(placed[event_id][0] for event_id in duplicated_events)
    slow_partition, redone_in_slow_partition = by_partition.most_common(1)[0] if by_partition else (None, 0)
    assert redone_in_slow_partition <= MAX_IN_FLIGHT + HAND_OFF
    first_completed = {}
    for outcome in stack.reader.outcomes:
        completed = datetime.fromisoformat(outcome["completed_at"]).timestamp()
        first_completed[outcome["event_id"]] = min(completed, first_completed.get(outcome["event_id"], completed))
    late = {event_id: round(killed_at - first_completed[event_id], 2) for event_id in duplicated_events
            if placed[event_id][0] != slow_partition and first_completed[event_id] < killed_at - AUTO_COMMIT_SLACK}
    assert not late, f"redone though finished over {AUTO_COMMIT_SLACK} s before the kill: {late}"

    # Pushes sent twice: those of the duplicated events, and those in flight at the kill (sent, never
    # answered to the first worker), which the in-flight bound limits. The slow push is one of them.
    pushes_sent_twice = stats["requests"] - len(pairs)
    in_flight_at_kill = pushes_sent_twice - sum(devices[event_id] for event_id in duplicated_events)
    assert 1 <= in_flight_at_kill <= (MAX_IN_FLIGHT + HAND_OFF) * MAX_DEVICES
    assert max(stats["peakConcurrentStreams"].values()) <= (MAX_IN_FLIGHT + HAND_OFF) * MAX_DEVICES
    print(f"\nSIGKILL: {len(events)} events, {len(pairs)} pairs; {len(before_restart)} pairs had outcomes at the "
          f"kill; duplicate outcomes: {len(duplicated_pairs)} pairs of {len(duplicated_events)} events; pushes "
          f"sent twice: {pushes_sent_twice} ({in_flight_at_kill} in flight at the kill); redone by partition "
          f"{dict(by_partition)}; peak concurrent streams "
          f"{stats['peakConcurrentStreams']}; committed at the kill {committed_at_kill}")


def test_what_a_crash_leaves_to_redo_stays_within_the_in_flight_cap_when_one_push_is_slow(make_stack):
    """Duplicates after a crash are the records finished past the committed offset (the SIGKILL test
    proves the restart redoes exactly those), so they are counted here at the kill."""
    stuck = 300
    stack = make_stack(script=delayed(stuck, 30), partitions=1)
    events = make_events(2000, "slow")
    pairs = expected_pairs(events)
    placed = stack.produce(events)

    first = stack.start_worker("first")
    wait_for_outcomes(stack, pairs, stuck + 1500)
    first.kill()
    stack.reader.poll_until_quiet()
    committed = stack.committed()[0]
    left_to_redo = {event_id for event_id, _ in stack.reader.per_pair if placed[event_id][1] >= committed}
    print(f"\nslow push: {len(left_to_redo)} finished events past committed offset {committed} at the kill")
    assert len(left_to_redo) <= MAX_IN_FLIGHT + HAND_OFF


def test_sigterm_mid_stream_drains_and_commits_so_a_restart_redoes_nothing(make_stack):
    stuck = 600
    stack = make_stack(script=delayed(stuck, 4))
    events = make_events(2000, "term")
    pairs = expected_pairs(events)
    placed = stack.produce(events)
    reader = stack.reader

    first = stack.start_worker("first")
    wait_for_outcomes(stack, pairs, stuck + 100)
    before_stop = len(reader.outcomes)
    code, drain_took = first.terminate(DRAIN_TIMEOUT + 5)
    assert code == 0, first.tail()
    assert drain_took < DRAIN_TIMEOUT
    assert stopped_fields(first)["abandoned_records"] == 0
    reader.poll_until_quiet()
    finished_while_draining = len(reader.outcomes) - before_stop
    assert finished_while_draining >= 1  # at least the slow push's

    # The drain finished everything taken and committed exactly that: below each partition's committed
    # offset every event has its outcomes, from it on none has.
    committed = stack.committed()
    for event in events:
        partition, offset = placed[event["id"]]
        has_outcomes = {(event["id"], device["token"]) in reader.per_pair for device in event["devices"]}
        assert has_outcomes == {offset < committed[partition]}, (event["id"], partition, offset, committed)

    second = stack.start_worker("second")
    stack.wait_until_all_committed(pairs)
    code, took = second.terminate(DRAIN_TIMEOUT + 5)
    assert code == 0 and took < DRAIN_TIMEOUT, second.tail()
    reader.poll_until_quiet()
    assert set(reader.per_pair) == pairs
    assert max(reader.per_pair.values()) == 1, "a gracefully stopped worker left work to redo"

    # A third worker finds nothing to redo: it handles only an event produced after it started.
    third = stack.start_worker("third")
    sentinel = make_events(1, "after")[0]
    stack.produce([sentinel])
    sentinel_pairs = expected_pairs([sentinel])
    reader.wait_for(lambda: sentinel_pairs <= set(reader.per_pair), 30, "the outcome of the new event")
    reader.poll_until_quiet()
    code, _ = third.terminate(DRAIN_TIMEOUT + 5)
    assert code == 0, third.tail()
    assert len(reader.outcomes) == len(pairs) + len(sentinel_pairs)
    assert stopped_fields(third)["records_finished"] == 1
    assert stack.simulator.close()["requests"] == len(pairs) + len(sentinel_pairs), "a push was sent twice"
    print(f"\nSIGTERM: {len(events)} events, {len(pairs)} pairs; {finished_while_draining} outcomes published while "
          f"draining ({drain_took:.2f} s to exit); no push sent twice")


def run_worker(config_path, *extra, environment=None):
    return subprocess.run([BIN, "run", "--config", str(config_path), *extra], capture_output=True, text=True,
                          timeout=30, env=environment or worker_environment())


def config_text(tmp_path, key_file):
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    return textwrap.dedent(f"""\
        kafka:
          brokers: [127.0.0.1:9]
          group: bad-config
        credentials:
          sim-key:
            type: token
            key_file: {key_file}
            key_id: CRASHKEY01
            team_id: CRASHTEAM1
        apps:
          com.example.chat:
            credential: sim-key
        pipeline:
          max_in_flight_records: 200
        rules:
          file: {rules}
        metrics:
          listen: 127.0.0.1:0
        """)


def line_of(text, fragment):
    return next(number for number, line in enumerate(text.splitlines(), 1) if fragment in line)


def test_a_typo_in_worker_yaml_is_refused_with_file_line_column_and_the_fix(tmp_path):
    text = config_text(tmp_path, tmp_path / "missing" / "AuthKey_CRASHKEY01.p8")
    text = text.replace("max_in_flight_records:", "max_in_flight_record:")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)

    result = run_worker(bad)
    assert result.returncode == 1
    assert (f"{bad}:{line_of(text, 'max_in_flight_record:')}:3: pipeline.max_in_flight_record: unknown key "
            "'max_in_flight_record'; did you mean 'max_in_flight_records'?") in result.stderr
    assert "worker started" not in result.stdout


def test_a_missing_credential_file_stops_the_worker_naming_the_credential_and_the_path(tmp_path):
    missing = tmp_path / "missing" / "AuthKey_CRASHKEY01.p8"
    config = tmp_path / "worker.yaml"
    config.write_text(config_text(tmp_path, missing))

    result = run_worker(config)
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "credentials.sim-key" in output
    assert f"file not found at '{missing}'; check the path" in output
    assert "worker started" not in output


def test_a_missing_credential_file_is_reported_at_its_line_with_the_other_problems(tmp_path):
    text = config_text(tmp_path, tmp_path / "missing" / "AuthKey_CRASHKEY01.p8")
    text = text.replace("max_in_flight_records:", "max_in_flight_record:")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)

    result = run_worker(bad)
    assert result.returncode == 1
    assert "unknown key 'max_in_flight_record'" in result.stderr
    assert f"{bad}:{line_of(text, 'key_file:')}:5: credentials.sim-key.key_file: file not found" in result.stderr


def test_kubernetes_service_link_variables_do_not_stop_the_worker(tmp_path):
    key_file, _ = make_token_key(str(tmp_path))
    config = tmp_path / "worker.yaml"
    config.write_text(config_text(tmp_path, key_file))
    environment = worker_environment()
    # What the kubelet gives every pod of a namespace with a Service named apns-worker-metrics (the
    # chart's metrics Service for a release named apns-worker).
    environment.update({"APNS_WORKER_METRICS_SERVICE_HOST": "10.96.0.12", "APNS_WORKER_METRICS_SERVICE_PORT": "9090",
                        "APNS_WORKER_METRICS_PORT": "tcp://10.96.0.12:9090"})

    result = run_worker(config, "--check", environment=environment)
    assert result.returncode == 0, result.stderr


def test_an_override_naming_no_section_stops_the_check_and_names_the_variable(tmp_path):
    key_file, _ = make_token_key(str(tmp_path))
    config = tmp_path / "worker.yaml"
    config.write_text(config_text(tmp_path, key_file))
    environment = worker_environment()
    environment["APNS_WORKER_KAFAK__GROUP"] = "push"

    result = run_worker(config, "--check", environment=environment)
    assert result.returncode == 1, result.stderr
    assert ("environment variable APNS_WORKER_KAFAK__GROUP: overrides 'kafak.group', but 'kafak' is no section of "
            "the configuration (did you mean 'kafka'?)") in result.stderr



def test_a_passing_check_says_what_it_did_not_check(tmp_path):
    key_file, _ = make_token_key(str(tmp_path))
    config = tmp_path / "worker.yaml"
    config.write_text(config_text(tmp_path, key_file))

    result = run_worker(config, "--check", environment=worker_environment())
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in (result.stdout + result.stderr).splitlines() if line.startswith("{")]
    valid = [line for line in lines if line.get("message") == "configuration, rules and credentials are valid"]
    assert len(valid) == 1, lines
    assert valid[0]["fields"]["not_checked"] == [
        "that the Kafka brokers are reachable and the topics exist",
        "that APNs accepts the credentials (a revoked key or certificate shows only when sending)",
    ]
