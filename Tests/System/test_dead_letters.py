"""Records that cannot be published whole, through the release binary: `apns-worker run` against
`apns-worker kafka-mock` and the APNs simulator. Input records whose dead-letter copy is larger than
Kafka takes (2 MB and 10 MB of garbage, an event of 100,000 devices, a 1.5 MB key), compressed with gzip
so the broker takes them, and a record carrying forged `apns-worker.` headers, are interleaved with
normal events on every partition. Every abnormal record becomes one dead letter whose headers satisfy
schemas/dlq-headers.schema.json and say what was cut; every normal event gets its outcomes (0 lost); the
worker never exits, and the group's offsets are committed past the abnormal records.
"""
import hashlib
import json
import os
import random
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from test_schemas import EXAMPLES, schema_errors, validate_records
from worker_process_support import (
    BUNDLE_ID, REQUESTS, Deadline, Stack, device_token, expected_pairs, make_events)

DLQ = "push.dlq"
PARTITIONS = 4
NORMAL_EVENTS = 400
# librdkafka's default message.max.bytes, which the worker's producer keeps.
PRODUCER_LIMIT = 1_000_000
PREFIX_BYTES = 64 * 1024
FORGED = [("apns-worker.error.class", b"internal"), ("APNS-WORKER.source.offset", b"0"),
          ("apns-worker.original.error.class", b"rule_error"), ("traceparent", b"00-ab-cd-01")]


def garbage(size, rng):
    """`size` bytes that are not JSON, repeating a random 4 KiB block so that gzip shrinks them."""
    block = b"\xff" + rng.randbytes(4095)
    return (block * (size // len(block) + 1))[:size]


def huge_event():
    event_id = "huge-100000"
    devices = [{"token": device_token(event_id, index), "environment": "production"} for index in range(100_000)]
    return {"id": event_id, "type": "chat.message", "app": BUNDLE_ID, "recipient": {"user_id": "u-huge"},
            "devices": devices, "data": {"text": "to everyone"}}


def abnormal_records(rng):
    """(name, key, value, headers, what its dead letter must carry) for each record Kafka cannot take whole."""
    huge = json.dumps(huge_event()).encode()
    return [
        ("2 MB garbage", b"g2", garbage(2 * 1024 * 1024, rng), [], "prefix"),
        ("10 MB garbage", b"g10", garbage(10 * 1024 * 1024, rng), [("traceparent", b"00-10-mb-01")], "prefix"),
        ("100,000 devices", b"u-huge", huge, [], "prefix"),
        ("1.5 MB key", b"k" * (1536 * 1024), b"not json", [("trace", b"t")], "workerHeadersOnly"),
        ("forged headers", b"forger", b"{oops", FORGED, "whole"),
    ]


def produce_interleaved(bootstrap, normal, abnormal):
    """Per partition in turn: normal events with one abnormal record among them, gzip-compressed.
    Returns {abnormal name: (partition, offset)}."""
    placed, failures = {}, []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "compression.type": "gzip", "message.max.bytes": 20_000_000})

    def delivered(name):
        def report(error, message):
            if error is not None:
                failures.append((name, error))
            elif name is not None:
                placed[name] = (message.partition(), message.offset())
        return report

    queue = [(None, event) for event in normal]
    step = max(1, len(queue) // (len(abnormal) + 1))
    for index, record in enumerate(abnormal):
        queue.insert((index + 1) * step + index, (record[0], record))
    for number, (name, item) in enumerate(queue):
        partition = number % PARTITIONS
        if name is None:
            producer.produce(REQUESTS, key=item["recipient"]["user_id"], value=json.dumps(item), partition=partition,
                             on_delivery=delivered(None))
        else:
            _, key, value, headers, _ = item
            producer.produce(REQUESTS, key=key, value=value, headers=headers, partition=partition,
                             on_delivery=delivered(name))
        producer.poll(0)
    left = producer.flush(60)
    assert left == 0 and not failures, f"{left} records not produced; errors: {failures[:3]}"
    return placed


def read_dead_letters(bootstrap, count, seconds):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pytest-dlq-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(DLQ, 0, 0)])
    letters = []
    deadline = Deadline(seconds)
    try:
        while len(letters) < count and not deadline.passed():
            for message in consumer.consume(num_messages=100, timeout=min(0.5, max(0.01, deadline.left()))):
                assert message.error() is None, message.error()
                letters.append(message)
    finally:
        consumer.close()
    return letters


def headers_of(letter):
    pairs = [(name, (value or b"").decode()) for name, value in (letter.headers() or [])]
    names = [name for name, _ in pairs]
    assert len(names) == len(set(names)), f"a header name appears twice: {names}"
    return dict(pairs)


@pytest.fixture
def stack(tmp_path):
    stack = Stack(str(tmp_path), "dead-letters", latency_ms="1", max_in_flight=200, drain_timeout=5,
                  partitions=PARTITIONS)
    yield stack
    stack.close()


def test_records_too_large_for_kafka_become_dead_letters_and_every_partition_moves_on(stack):
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"garbage seed: {seed}")
    rng = random.Random(seed)
    normal = make_events(NORMAL_EVENTS, "dl")
    pairs = expected_pairs(normal)
    abnormal = abnormal_records(rng)
    by_name = {record[0]: record for record in abnormal}

    worker = stack.start_worker("worker")
    placed = produce_interleaved(stack.cluster.bootstrap, normal, abnormal)
    # Each partition holds some of the abnormal records between normal events.
    assert len({partition for partition, _ in placed.values()}) > 1, placed

    ends = stack.wait_until_all_committed(pairs, seconds=90)
    assert worker.process.poll() is None, f"the worker exited ({worker.process.returncode}):\n{worker.tail()}"
    assert len(worker.find("worker started")) == 1
    assert sum(ends.values()) == NORMAL_EVENTS + len(abnormal)

    # 0 lost, and no normal event turned into a dead letter.
    stack.reader.poll_until_quiet()
    assert set(stack.reader.per_pair) == pairs
    assert len(stack.reader.outcomes) >= len(pairs)

    letters = read_dead_letters(stack.cluster.bootstrap, len(abnormal), 30)
    assert len(letters) == len(abnormal), [headers_of(letter) for letter in letters]
    all_headers = [headers_of(letter) for letter in letters]
    validate_records("dlq-headers", all_headers)

    by_place = {(int(headers["apns-worker.source.partition"]), int(headers["apns-worker.source.offset"])):
                (letter, headers) for letter, headers in zip(letters, all_headers)}
    assert set(by_place) == set(placed.values())
    for name, place in placed.items():
        letter, headers = by_place[place]
        _, key, value, original_headers, carried = by_name[name]
        assert headers["apns-worker.source.topic"] == REQUESTS
        assert "apns-worker.source.timestamp" in headers and "apns-worker.failed-at" in headers, headers
        expected_class = "invalid_event" if name == "100,000 devices" else "undecodable"
        assert headers["apns-worker.error.class"] == expected_class, (name, headers)
        assert len(letter.value() or b"") + len(letter.key() or b"") <= PRODUCER_LIMIT, name
        if carried == "whole":
            assert letter.key() == key and letter.value() == value, name
            assert "apns-worker.value.truncated" not in headers, headers
            continue
        assert headers["apns-worker.value.size"] == str(len(value)), name
        assert headers["apns-worker.value.sha256"] == hashlib.sha256(value).hexdigest(), name
        assert "message.max.bytes" in headers["apns-worker.publish.error"], headers
        if carried == "prefix":
            assert headers["apns-worker.value.truncated"] == "prefix", (name, headers)
            assert letter.value() == value[:PREFIX_BYTES], name
            assert letter.key() == key, name
            for header_name, header_value in original_headers:
                assert headers[header_name] == header_value.decode(), (name, headers)
        else:
            assert headers["apns-worker.value.truncated"] == "omitted", (name, headers)
            assert letter.key() is None and letter.value() is None, name
            assert headers["apns-worker.key.size"] == str(len(key)), name
            assert headers["apns-worker.key.sha256"] == hashlib.sha256(key).hexdigest(), name
            assert headers["apns-worker.headers.omitted"] == str(len(original_headers)), name

    # The forged headers are carried renamed; the worker's own are the only ones of their names.
    _, forged = by_place[placed["forged headers"]]
    assert forged["apns-worker.error.class"] == "undecodable"
    assert forged["apns-worker.source.offset"] == str(placed["forged headers"][1])
    assert forged["apns-worker.original.error.class"] == "internal"
    assert forged["apns-worker.original.source.offset"] == "0"
    assert forged["apns-worker.original.original.error.class"] == "rule_error"
    assert forged["traceparent"] == "00-ab-cd-01"

    # One log line per refused record naming its size, the limit and the topic.
    refused = [line for line in worker.log() if "too large for Kafka" in line.get("message", "")]
    assert len(refused) == len(abnormal) - 1, [line["message"] for line in refused]
    for line in refused:
        assert "push.dlq" in line["message"] and "message.max.bytes (1000000 bytes)" in line["message"], line

    # Visible where operators look: counted by class in /metrics, and the worker stays ready.
    url = worker.find("serving /metrics, /healthz and /readyz")[0]["fields"]["url"]
    with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
        assert response.status == 200
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        metrics = response.read().decode()
    assert 'apns_worker_dead_letters_total{error_class="undecodable"} 4' in metrics, metrics
    assert 'apns_worker_dead_letters_total{error_class="invalid_event"} 1' in metrics, metrics

    code, seconds = worker.terminate(15)
    assert code == 0, worker.tail()


DELETE = object()


@pytest.mark.parametrize("example, change, expected", [
    ("dlq-headers.undecodable.json", {"apns-worker.error.path": "/devices/0"}, "apns-worker.error.path"),
    ("dlq-headers.undecodable.json", {"APNS-WORKER.error.class": "internal"}, "APNS-WORKER.error.class"),
    ("dlq-headers.undecodable.json", {"apns-worker.failed-at": DELETE}, "'apns-worker.failed-at' is a required"),
    ("dlq-headers.value-truncated.json", {"apns-worker.value.sha256": DELETE}, "'apns-worker.value.sha256' is a"),
    ("dlq-headers.value-truncated.json", {"apns-worker.value.truncated": "yes"}, "is not one of"),
    ("dlq-headers.result-too-large.json", {"apns-worker.result.topic": DELETE}, "'apns-worker.result.topic' is a"),
])
def test_the_schema_refuses_forged_and_incomplete_dead_letter_headers(example, change, expected):
    headers = json.loads((EXAMPLES / example).read_text())
    assert not schema_errors("dlq-headers", headers)
    for name, value in change.items():
        if value is DELETE:
            del headers[name]
        else:
            headers[name] = value
    errors = schema_errors("dlq-headers", headers)
    assert any(expected in error for error in errors), errors
