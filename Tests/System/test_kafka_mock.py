"""Black-box tests of `apns-worker kafka-mock`: librdkafka's mock cluster as its own process.

It must print its bootstrap servers, answer the Kafka protocol on each of them, stop cleanly on
SIGTERM and SIGINT, and reject bad --topics entries with a usage error.
"""
import os
import signal
import socket
import struct
import subprocess

import pytest

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")


def start(*args):
    process = subprocess.Popen(
        [BIN, "kafka-mock", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    line = process.stdout.readline().strip()
    return process, line


def api_versions(host, port):
    """Sends a Kafka ApiVersions v0 request; returns (correlation id, error code, api count)."""
    client_id = b"pytest"
    body = struct.pack(">hhih", 18, 0, 4242, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", recv_exactly(sock, 4))[0]
        response = recv_exactly(sock, size)
    correlation, error, count = struct.unpack(">ihi", response[:10])
    return correlation, error, count


def recv_exactly(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("connection closed early")
        data += chunk
    return data


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_prints_bootstrap_servers_speaks_kafka_and_stops_on_signal(stop_signal):
    process, line = start("--brokers", "3", "--topics", "push.requests:12,push.outcomes:6")
    try:
        assert line.startswith("bootstrap.servers="), line
        servers = line.split("=", 1)[1].split(",")
        assert len(servers) == 3
        for server in servers:
            host, port = server.rsplit(":", 1)
            assert host == "127.0.0.1"
            correlation, error, count = api_versions(host, int(port))
            assert correlation == 4242
            assert error == 0
            assert count > 10
        process.send_signal(stop_signal)
        assert process.wait(timeout=10) == 0
        assert "stopped" in process.stderr.read()
        for server in servers:
            host, port = server.rsplit(":", 1)
            with pytest.raises(OSError):
                socket.create_connection((host, int(port)), timeout=2).close()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize(
    "arguments, complaint",
    [
        (["--topics", "push.requests"], "must be NAME:PARTITIONS"),
        (["--topics", "push.requests:0"], "partitions must be 1 to 10000"),
        (["--topics", "bad/name:3"], "a topic name is 1 to 249 characters"),
        (["--topics", "a:1,a:2"], "names 'a' more than once"),
        (["--brokers", "0"], "--brokers must be between 1 and 64"),
        (["--brokers", "2", "--replication-factor", "3"], "between 1 and 2"),
    ],
)
def test_bad_arguments_are_usage_errors(arguments, complaint):
    result = subprocess.run([BIN, "kafka-mock", *arguments], capture_output=True, text=True, timeout=10)
    assert result.returncode == 2
    assert complaint in result.stderr
    assert result.stdout == ""
