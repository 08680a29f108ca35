"""Broadcast channels through the real binary and the simulator: `channels create`, a broadcast with
`send --channel-id`, `channels list/get/delete`, and the broadcast to a deleted channel refused with
Apple's reason (ChannelNotRegistered), all with token authentication over TLS on loopback.
"""
import json
import os
import re
import subprocess

import pytest

from worker_process_support import stop

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")
APP = "com.example.app"
UPDATE = '{"aps":{"event":"update","timestamp":1764417600,"content-state":{"score":"1-0"}}}'


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("channels")


@pytest.fixture(scope="module")
def signing_key(workdir):
    key, public = workdir / "AuthKey_KEY1234567.p8", workdir / "key.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-out", key], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out", public], check=True, capture_output=True)
    return key, public


@pytest.fixture(scope="module")
def simulator(signing_key):
    _, public = signing_key
    process = subprocess.Popen([BIN, "simulator", "--port", "0", "--key-id", "KEY1234567",
                                "--public-key-file", str(public)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               start_new_session=True)
    try:
        url = ca = None
        while not (url and ca):
            line = process.stdout.readline()
            assert line, "the simulator stopped before printing its address"
            url = url or (re.search(r"listening on (https://\S+)", line) or [None, None])[1]
            ca = ca or (re.search(r"ca-file: (\S+)", line) or [None, None])[1]
        yield url, ca
    finally:
        # SIGTERM, so that it removes the CA file it wrote (a SIGKILL left its directory in /tmp).
        stop(process, 30)


@pytest.fixture
def common(simulator, signing_key):
    url, ca = simulator
    key, _ = signing_key
    return ["--endpoint", url, "--ca-file", ca, "--key-file", str(key), "--key-id", "KEY1234567",
            "--team-id", "TEAM123456"]


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)


def channels(verb, *args):
    result = run("channels", verb, "--app", APP, "--environment", "sandbox", *args)
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout + result.stderr
    return result, json.loads(lines[0])


def broadcast(common, channel_id, *extra):
    result = run("send", *common, "--environment", "sandbox", "--channel-id", channel_id, "--topic", APP,
                 "--payload", UPDATE, "--attempts", "1", *extra)
    return result, json.loads(result.stdout)


def test_a_channel_is_created_broadcast_on_listed_read_and_deleted(common):
    created, answer = channels("create", "--storage-policy", "1", *common)
    assert created.returncode == 0, created.stderr
    channel_id = answer["channel_id"]
    assert re.fullmatch(r"[A-Za-z0-9+/]+=*", channel_id)
    assert answer["message_storage_policy"] == 1

    sent, outcome = broadcast(common, channel_id, "--priority", "5")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert outcome["status"] == "delivered"
    assert outcome["http_status"] == 200

    listed, answer = channels("list", *common)
    assert listed.returncode == 0, listed.stderr
    assert channel_id in answer["channels"]

    read, answer = channels("get", "--channel-id", channel_id, *common)
    assert read.returncode == 0, read.stderr
    assert answer["message_storage_policy"] == 1
    assert answer["push_type"] == "LiveActivity"

    deleted, answer = channels("delete", "--channel-id", channel_id, *common)
    assert deleted.returncode == 0, deleted.stderr
    assert answer["deleted"] is True
    _, answer = channels("list", *common)
    assert channel_id not in answer["channels"]

    refused, outcome = broadcast(common, channel_id)
    assert refused.returncode == 1
    assert outcome["status"] == "rejected"
    assert outcome["reason"] == "ChannelNotRegistered"

    gone, answer = channels("get", "--channel-id", channel_id, *common)
    assert gone.returncode == 1
    assert answer["reason"] == "ChannelNotRegistered"
    assert "does not exist" in gone.stderr


def test_a_channel_without_storage_takes_no_expiration(common):
    _, answer = channels("create", "--storage-policy", "0", *common)
    refused, outcome = broadcast(common, answer["channel_id"], "--expiration", "1900000000")
    assert refused.returncode == 1
    assert outcome["reason"] == "BadExpirationDate"
    sent, outcome = broadcast(common, answer["channel_id"], "--expiration", "0")
    assert sent.returncode == 0, sent.stdout + sent.stderr


def test_a_broadcast_must_be_a_live_activity_and_name_one_target(common):
    wrong = run("send", *common, "--channel-id", "c29tZUNoYW5uZWw=", "--topic", APP, "--push-type", "alert",
                "--payload", '{"aps":{"alert":"hi"}}')
    assert wrong.returncode == 1
    assert "apns-push-type" in wrong.stderr and "liveactivity" in wrong.stderr
    both = run("send", *common, "--channel-id", "c29tZUNoYW5uZWw=", "--device-token", "ab" * 32, "--topic", APP)
    assert both.returncode == 2
    assert "not both" in both.stderr


def test_channels_refuse_a_bad_storage_policy_and_a_missing_credential(simulator):
    url, ca = simulator
    bad = run("channels", "create", "--app", APP, "--storage-policy", "2", "--endpoint", url, "--ca-file", ca)
    assert bad.returncode == 2
    assert "--storage-policy" in bad.stderr
    missing = run("channels", "list", "--app", APP, "--endpoint", url, "--ca-file", ca)
    assert missing.returncode == 2
    assert "credential" in missing.stderr
