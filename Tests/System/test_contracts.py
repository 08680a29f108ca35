"""Contracts that hold, through the release binary: `apns-worker run` against `apns-worker kafka-mock` and
`apns-worker simulator` is fed hostile records beside normal events, and EVERY record it writes is
validated against its schema in schemas/ with jsonschema: outcomes (push-outcome), invalid tokens
(invalid-token), dead letters' headers (dlq-headers) and parked records on the retry topic (their value is
the event again: push-request). Every input is accounted for by the one rule README's "Dead letters"
states: a record that is not a valid event is exactly one dead letter (naming the JSON path of what is
wrong), a valid event gets exactly one outcome per device (rejected where its rule or APNs refuses it),
or, for an app whose credential APNs refuses, its devices are parked on the retry topic.
"""
import json
import os
import subprocess
from collections import Counter

from confluent_kafka import Consumer, Producer, TopicPartition

from test_schemas import schema_errors
from worker_process_support import (
    BIN, BUNDLE_ID, KEY_ID, REQUESTS, Deadline, KafkaMock, LineCollector, Worker, device_token, make_token_key,
    stop, write_worker_config)

REFUSED_APP = "com.example.refused"
TOPICS = {"outcomes": "push.outcomes", "invalid": "push.invalid-tokens", "dlq": "push.dlq", "retry": "push.retry"}
RULES = """\
version: 1
defaults:
  app: "{{ event.app }}"
rules:
  - id: render-fails
    match:
      type: render.fails
    alert:
      body: "{{ event.data.missing }}"
  - id: expiring
    match:
      type: expiring
    ttl: 1h
    alert:
      body: "old news"
  - id: all
    match:
      type: [{exists: true}]
    alert:
      body: "{{ event.type }}"
"""


def token(name, index=0):
    return device_token(name, index)


UNREGISTERED = token("unregistered")
BAD = token("bad")


def event(event_id, devices=None, **fields):
    """A valid event of the configured app, its devices' tokens made from its id unless given."""
    devices = devices if devices is not None else [{"token": token(event_id), "environment": "production"}]
    return {"id": event_id, "type": "chat.message", "app": BUNDLE_ID, "recipient": {"user_id": "u1"},
            "devices": devices, "data": {"text": "hi"}, **fields}


def without(document, key):
    return {name: value for name, value in document.items() if name != key}


def hostile_records():
    """(name, value bytes or None, dead-letter class, what its error message must name)."""
    device = {"token": token("x"), "environment": "production"}
    big = event("too-large", [{"token": token("too-large", i), "environment": "production"} for i in range(1001)])
    big["data"] = {"text": "x" * 1_500_000}
    as_json = lambda document: json.dumps(document).encode()
    return [
        ("token abc", as_json(event("h-abc", [{"token": "abc", "environment": "production"}])),
         "invalid_event", "$.devices[0].token"),
        ("token of the wrong length", as_json(event("h-short", [{"token": "ab" * 31, "environment": "production"}])),
         "invalid_event", "$.devices[0].token"),
        ("token of odd length", as_json(event("h-odd", [device, {"token": "a" * 65, "environment": "sandbox"}])),
         "invalid_event", "$.devices[1].token"),
        ("missing app", as_json(without(event("h-no-app"), "app")), "invalid_event", "app is missing at $"),
        ("app not a bundle id", as_json(event("h-app", app="chat")), "invalid_event", "$.app"),
        ("app without a credential", as_json(event("h-unknown-app", app="com.example.unknown")),
         "invalid_event", "com.example.unknown"),
        ("unknown key inside apns", as_json(event("h-apns-key", apns={"priority": 5, "bogus": 1})),
         "invalid_event", "$.apns.bogus"),
        ("duplicate keys", b'{"id":"h-dup","type":"chat.message","app":"' + BUNDLE_ID.encode()
         + b'","devices":[{"token":"' + token("dup").encode() + b'","environment":"production","token":"'
         + token("dup", 1).encode() + b'"}]}', "invalid_event", "duplicate key 'token' at $.devices[0]"),
        ("an event far too large", as_json(big), "invalid_event", "$.devices"),
        ("not UTF-8", b'{"id":"h-utf8","type":"chat.message\xff\xfe"}', "undecodable", "UTF-8"),
        ("not JSON", b"{oops", "undecodable", "not valid JSON"),
        ("no value", None, "undecodable", "no value"),
        ("an array", b"[1, 2]", "invalid_event", "must be a JSON object at $"),
        ("id a number", as_json(event(5)), "invalid_event", "$.id"),
        ("type an array", as_json(event("h-type", type=["chat"])), "invalid_event", "$.type"),
        ("devices a string", as_json(event("h-devices", "all")), "invalid_event", "$.devices"),
        ("no devices", as_json(event("h-no-devices", [])), "invalid_event", "$.devices"),
        ("device a string", as_json(event("h-device", ["x"])), "invalid_event", "$.devices[0]"),
        ("token a number", as_json(event("h-token-number", [{"token": 7, "environment": "production"}])),
         "invalid_event", "$.devices[0].token"),
        ("data a string", as_json(event("h-data", data="x")), "invalid_event", "$.data"),
        ("recipient a list", as_json(event("h-recipient", recipient=["u1"])), "invalid_event", "$.recipient"),
        ("locale a number", as_json(event("h-locale", recipient={"locale": 5})), "invalid_event",
         "$.recipient.locale"),
        ("priority a word", as_json(event("h-priority", apns={"priority": "high"})), "invalid_event",
         "$.apns.priority"),
        ("badge below zero", as_json(event("h-badge", apns={"badge": -1})), "invalid_event", "$.apns.badge"),
        ("apns a list", as_json(event("h-apns", apns=[5])), "invalid_event", "$.apns"),
        ("occurred_at a number", as_json(event("h-time", occurred_at=1700000000)), "invalid_event",
         "$.occurred_at"),
        ("unknown environment", as_json(event("h-env", [{"token": token("env"), "environment": "staging"}])),
         "invalid_event", "$.devices[0].environment"),
        ("no environment", as_json(event("h-no-env", [{"token": token("no-env")}])), "invalid_event",
         "$.devices[0]"),
    ]


def valid_events():
    """(event, {device token: (status, reason)} expected, devices parked)."""
    normal = [event(f"ok-{n}", [{"token": token(f"ok-{n}", i), "environment": "production"} for i in range(1 + n % 3)])
              for n in range(20)]
    cases = [(e, {d["token"]: ("delivered", None) for d in e["devices"]}, 0) for e in normal]
    cases.append((event("extra-fields", later_field={"a": 1}, apns={"priority": 5}),
                   {token("extra-fields"): ("delivered", None)}, 0))
    renders = event("render", [{"token": token("render", i), "environment": "production"} for i in range(2)],
                    type="render.fails")
    cases.append((renders, {d["token"]: ("rejected", "TemplateError") for d in renders["devices"]}, 0))
    mixed = event("mixed", [{"token": token("mixed"), "environment": "production"},
                            {"token": UNREGISTERED, "environment": "production"},
                            {"token": BAD, "environment": "sandbox"}])
    cases.append((mixed, {token("mixed"): ("delivered", None), UNREGISTERED: ("rejected", "Unregistered"),
                          BAD: ("rejected", "BadDeviceToken")}, 0))
    expiring = event("expiring", type="expiring", occurred_at="2020-01-01T00:00:00Z")
    cases.append((expiring, {token("expiring"): ("skipped", "expired")}, 0))
    refused = event("refused", [{"token": token("refused", i), "environment": "production"} for i in range(2)],
                    app=REFUSED_APP)
    cases.append((refused, {}, 2))
    return cases


class TopicReader:
    """Every record of the worker's output topics from the beginning, with headers."""

    def __init__(self, bootstrap):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pytest-contracts",
                                  "enable.auto.commit": False, "enable.partition.eof": False})
        assignment = []
        for topic in TOPICS.values():
            partitions = self.consumer.list_topics(topic, timeout=10).topics[topic].partitions
            assignment += [TopicPartition(topic, p, 0) for p in partitions]
        self.consumer.assign(assignment)
        self.records = {topic: [] for topic in TOPICS.values()}

    def poll(self, seconds):
        for message in self.consumer.consume(num_messages=1000, timeout=seconds):
            assert message.error() is None, message.error()
            self.records[message.topic()].append(message)

    def wait_for(self, condition, seconds):
        """Reads until `condition(records)` holds or `seconds` pass; then what is missing is for the checks
        to name, record by record."""
        deadline = Deadline(seconds)
        while not condition(self.records) and not deadline.passed():
            self.poll(min(0.5, deadline.left()))

    def close(self):
        self.consumer.close()


def produce_all(bootstrap, values):
    """Produces each value (bytes or None) to push.requests, gzip-compressed so that the broker takes the large
    one; returns the (partition, offset) of each, in order."""
    placed = [None] * len(values)
    failures = []

    def delivered(index):
        def report(error, message):
            if error is not None:
                failures.append(error)
            else:
                placed[index] = (message.partition(), message.offset())
        return report

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "gzip",
                         "message.max.bytes": 10_000_000})
    for index, value in enumerate(values):
        producer.produce(REQUESTS, key=f"k{index}", value=value, on_delivery=delivered(index))
        producer.poll(0)
    assert producer.flush(30) == 0 and not failures, failures[:3]
    return placed


def start_simulator(directory, public_key_file):
    """The simulator trusting only KEY_ID's tokens, answering UNREGISTERED 410 and BAD 400 BadDeviceToken."""
    config = os.path.join(directory, "simulator-devices.json")
    with open(config, "w") as file:
        json.dump({"devices": {"unregistered": [UNREGISTERED], "bad": [BAD]}}, file)
    process = subprocess.Popen(
        [BIN, "simulator", "--config", config, "--port", "0", "--environment", "production", "--key-id", KEY_ID,
         "--public-key-file", public_key_file, "--ca-out", os.path.join(directory, "simulator-ca.pem")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    output = LineCollector(process, process.stdout)
    found = output.wait_for_prefixes(["listening on ", "ca-file: "], 20)
    process.url = found["listening on "].rstrip("/")
    process.ca_file = found["ca-file: "]
    return process


def headers_of(message):
    return {name: (value or b"").decode() for name, value in (message.headers() or [])}


def test_every_record_the_worker_writes_satisfies_its_schema_and_every_input_is_accounted_for(tmp_path):
    directory = str(tmp_path)
    cluster = KafkaMock(partitions=3)
    closers = [cluster.close]
    try:
        key_file, public_key_file = make_token_key(directory)
        # A second key the simulator does not trust: APNs' 403 InvalidProviderToken for its app.
        refused_key = os.path.join(directory, "refused")
        os.mkdir(refused_key)
        refused_key_file, _ = make_token_key(refused_key)
        simulator = start_simulator(directory, public_key_file)
        closers.append(lambda: stop(simulator))
        config = write_worker_config(
            directory, bootstrap=cluster.bootstrap, group="contracts", simulator=simulator, key_file=key_file,
            max_in_flight=1000, drain_timeout="5s", rules_text=RULES,
            overrides={"credentials": {"refused-key": {"type": "token", "key_file": refused_key_file,
                                                       "key_id": "REFUSEDK01", "team_id": "CRASHTEAM1"}},
                       "apps": {REFUSED_APP: {"credential": "refused-key"}},
                       "retry": {"park_delay": "1s"}})
        worker = Worker(config, directory, "worker")
        closers.append(worker.close)
        worker.wait_for_log("worker started", 30)

        hostile = hostile_records()
        cases = valid_events()
        values = [value for _, value, _, _ in hostile] + [json.dumps(e).encode() for e, _, _ in cases]
        placed = produce_all(cluster.bootstrap, values)
        hostile_at = {placed[index]: hostile[index] for index in range(len(hostile))}
        expected_pairs = {(e["id"], t): verdict for e, verdicts, _ in cases for t, verdict in verdicts.items()}
        expected_invalid = {UNREGISTERED: "Unregistered", BAD: "BadDeviceToken"}

        reader = TopicReader(cluster.bootstrap)
        closers.append(reader.close)
        reader.wait_for(
            lambda r: len(r[TOPICS["outcomes"]]) >= len(expected_pairs) and len(r[TOPICS["dlq"]]) >= len(hostile)
            and len(r[TOPICS["invalid"]]) >= len(expected_invalid) and len(r[TOPICS["retry"]]) >= 2,
            60)

        problems = []
        # Outcomes: valid, exactly one per (event, device), with the expected verdict.
        per_pair = Counter()
        for message in reader.records[TOPICS["outcomes"]]:
            outcome = json.loads(message.value())
            problems += [f"outcome {outcome.get('event_id')}: {e}" for e in schema_errors("push-outcome", outcome)]
            pair = (outcome["event_id"], outcome["device_token"])
            per_pair[pair] += 1
            if pair in expected_pairs and (outcome["status"], outcome["reason"]) != expected_pairs[pair]:
                problems.append(f"outcome {pair}: {outcome['status']}/{outcome['reason']}, "
                                f"expected {expected_pairs[pair]}")
        problems += [f"{pair}: {count} outcomes" for pair, count in per_pair.items() if count != 1]
        problems += [f"{pair}: no outcome" for pair in expected_pairs if pair not in per_pair]
        problems += [f"{pair}: an outcome nobody expected" for pair in per_pair if pair not in expected_pairs]

        # Invalid tokens: valid, one per token APNs proved invalid.
        invalid = [json.loads(m.value()) for m in reader.records[TOPICS["invalid"]]]
        for record in invalid:
            problems += [f"invalid token {record.get('device_token')}: {e}"
                         for e in schema_errors("invalid-token", record)]
        if sorted((r["device_token"], r["reason"]) for r in invalid) != sorted(expected_invalid.items()):
            problems.append(f"invalid tokens {[(r['device_token'], r['reason']) for r in invalid]}")

        # Dead letters: headers valid, exactly one per hostile record, of its class, naming where it is wrong.
        seen_sources = Counter()
        for message in reader.records[TOPICS["dlq"]]:
            headers = headers_of(message)
            problems += [f"dead letter {headers.get('apns-worker.source.offset')}: {e}"
                         for e in schema_errors("dlq-headers", headers)]
            source = (int(headers["apns-worker.source.partition"]), int(headers["apns-worker.source.offset"]))
            seen_sources[source] += 1
            if source not in hostile_at:
                problems.append(f"a dead letter for a valid event at {source}: {headers}")
                continue
            name, _, error_class, detail = hostile_at[source]
            if headers["apns-worker.error.class"] != error_class or detail not in headers["apns-worker.error.message"]:
                problems.append(f"{name}: dead letter says {headers['apns-worker.error.class']}: "
                                f"{headers['apns-worker.error.message']!r}; expected {error_class} naming {detail!r}")
        problems += [f"{hostile_at[s][0]}: {n} dead letters" for s, n in seen_sources.items() if n != 1]
        problems += [f"{name}: no dead letter" for at, (name, *_) in hostile_at.items() if at not in seen_sources]

        # Parked records: the event again (valid by push-request), narrowed to the refused devices.
        refused_devices = set()
        for message in reader.records[TOPICS["retry"]]:
            parked = json.loads(message.value())
            headers = headers_of(message)
            problems += [f"parked {parked.get('id')}: {e}" for e in schema_errors("push-request", parked)]
            if parked["app"] != REFUSED_APP or headers.get("apns-worker.park.app") != REFUSED_APP:
                problems.append(f"parked record of another app: {parked['app']}, {headers}")
            for name in ["apns-worker.park.reason", "apns-worker.park.count", "apns-worker.park.not-before"]:
                if name not in headers:
                    problems.append(f"parked {parked['id']} without {name}: {headers}")
            refused_devices |= {(parked["id"], d["token"]) for d in parked["devices"]}
        wanted_parked = {(e["id"], d["token"]) for e, _, parked in cases if parked for d in e["devices"]}
        if refused_devices != wanted_parked:
            problems.append(f"parked devices {sorted(refused_devices)}, expected {sorted(wanted_parked)}")

        assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:60])
        assert worker.process.poll() is None, worker.stderr()
        code, _ = worker.terminate(30)
        assert code == 0, worker.tail()
    finally:
        for close in reversed(closers):
            try:
                close()
            except Exception:
                pass
