"""Events that target broadcast channels, through `apns-worker run` against kafka-mock and the simulator:
a channel made with `apns-worker channels create` gets a broadcast (one outcome with channel_id, beside
the device's outcome with device_token), and a channel deleted since is reported in its outcome with
Apple's reason and produces no invalid-token event. Every outcome validates against the schema.
"""
import json
import subprocess

import pytest
from confluent_kafka import Consumer, TopicPartition

from test_schemas import validate_records
from worker_process_support import (
    BIN, BUNDLE_ID, KEY_ID, TEAM_ID, Deadline, KafkaMock, Simulator, Worker, make_token_key, produce,
    write_worker_config)

DEAD_DEVICE = "cd" * 32

RULES = """\
version: 1
defaults:
  app: "{{ event.app }}"
rules:
  - id: score
    match: {type: game.score}
    push_type: liveactivity
    live_activity:
      event: update
      content_state: {score: "{{ event.data.score }}"}
"""


def channels(verb, simulator, key_file, *args):
    result = subprocess.run(
        [BIN, "channels", verb, "--app", BUNDLE_ID, "--environment", "production", "--endpoint", simulator.url,
         "--ca-file", simulator.ca_file, "--key-file", key_file, "--key-id", KEY_ID, "--team-id", TEAM_ID, *args],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def read_topic(bootstrap, topic, until, seconds):
    """Every record of `topic` from the start, read until `until(records)` holds (or `seconds` pass)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"pytest-{topic}", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records = []
        deadline = Deadline(seconds)
        while not until(records) and not deadline.passed():
            for message in consumer.consume(num_messages=100, timeout=0.2):
                assert message.error() is None, message.error()
                records.append(json.loads(message.value()))
        return records
    finally:
        consumer.close()


@pytest.fixture
def stack(tmp_path):
    closers = []
    try:
        cluster = KafkaMock(1)
        closers.append(cluster.close)
        key_file, public_key_file = make_token_key(str(tmp_path))
        simulator = Simulator(str(tmp_path), public_key_file, "0", devices={"unregistered": [DEAD_DEVICE]})
        closers.append(simulator.close)
        config = write_worker_config(
            str(tmp_path), bootstrap=cluster.bootstrap, group="channels", simulator=simulator, key_file=key_file,
            max_in_flight=10, drain_timeout="5s", rules_text=RULES)
        yield cluster, simulator, key_file, config, str(tmp_path)
    finally:
        for close in reversed(closers):
            close()


def test_an_event_reaches_its_channel_and_its_device_and_a_deleted_channel_is_reported(stack):
    cluster, simulator, key_file, config, directory = stack
    live = channels("create", simulator, key_file, "--storage-policy", "1")["channel_id"]
    gone = channels("create", simulator, key_file)["channel_id"]
    channels("delete", simulator, key_file, "--channel-id", gone)

    device = "ab" * 32
    events = [
        {"id": "evt-live", "type": "game.score", "app": BUNDLE_ID, "recipient": {"user_id": "u1"},
         "devices": [{"token": device, "environment": "production"}],
         "channels": [{"id": live, "environment": "production"}], "data": {"score": "1-0"}},
        # Beside the deleted channel, a device the simulator says is unregistered: its invalid-token event
        # is published with this event's outcomes, and must be the only one.
        {"id": "evt-gone", "type": "game.score", "app": BUNDLE_ID, "recipient": {"user_id": "u1"},
         "devices": [{"token": DEAD_DEVICE, "environment": "production"}],
         "channels": [{"id": gone, "environment": "production"}], "data": {"score": "2-0"}},
    ]
    worker = Worker(config, directory, "worker")
    try:
        worker.wait_for_log("worker started", 20)
        produce(cluster.bootstrap, events)
        outcomes = read_topic(cluster.bootstrap, "push.outcomes", lambda records: len(records) >= 4, 40)
        invalid = read_topic(cluster.bootstrap, "push.invalid-tokens", lambda records: len(records) >= 1, 40)
    finally:
        worker.close()

    assert len(outcomes) == 4, outcomes
    validate_records("push-outcome", outcomes)
    by_target = {(o["event_id"], o.get("device_token") or o.get("channel_id")): o for o in outcomes}
    to_device = by_target[("evt-live", device)]
    assert to_device["status"] == "delivered" and "channel_id" not in to_device
    to_channel = by_target[("evt-live", live)]
    assert to_channel["status"] == "delivered", to_channel
    assert "device_token" not in to_channel
    assert to_channel["push_type"] == "liveactivity"
    refused = by_target[("evt-gone", gone)]
    assert refused["status"] == "rejected", refused
    assert refused["http_status"] == 400
    assert refused["reason"] == "ChannelNotRegistered"
    assert len(refused["attempts"]) == 1, "a deleted channel is not retried"

    assert by_target[("evt-gone", DEAD_DEVICE)]["reason"] == "Unregistered"
    # The worker published both records of evt-gone together; the one invalid-token event is the device's.
    validate_records("invalid-token", invalid)
    assert [record["device_token"] for record in invalid] == [DEAD_DEVICE], "a deleted channel is no dead token"
