"""The client under the APNs simulator's faults: 503 storms, GOAWAY every few streams, a small stream limit.

`apns-worker bench send --attempts N` drives the real client (pool, retry policy, fresh apns-ids) against
`apns-worker simulator`; the simulator's stats (printed on SIGTERM) show what the server saw.
"""
import json
import os
import re
import signal
import subprocess

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")


class Simulator:
    def __init__(self, *args):
        self.process = subprocess.Popen([BIN, "simulator", "--port", "0", *args], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.url = self.ca_file = None
        for _ in range(20):
            line = self.process.stdout.readline()
            if match := re.search(r"listening on (https://\S+)", line):
                self.url = match.group(1)
            if match := re.search(r"ca-file: (\S+)", line):
                self.ca_file = match.group(1)
            if self.url and self.ca_file:
                return
        self.process.kill()
        raise RuntimeError("the simulator did not print its address: " + self.process.stderr.read())

    def stop(self):
        """SIGTERM, then the `stats: {...}` line it prints on the way out."""
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=20)
        line = next(line for line in out.splitlines() if line.startswith("stats: "))
        return json.loads(line[len("stats: "):])


def bench(simulator, *args):
    result = subprocess.run([BIN, "bench", "send", "--endpoint", simulator.url, "--ca-file", simulator.ca_file,
                             "--json", *args], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def accepted(stats):
    return sum(count for kind, count in stats["responses"].items() if kind.startswith("200"))


def test_503_storm_and_goaways_end_with_every_notification_accepted_once_within_the_stream_limit():
    simulator = Simulator("--fail-rate", "0.3", "--fail-status", "503", "--go-away-after", "40",
                          "--max-concurrent-streams", "8", "--seed", "7")
    try:
        report = bench(simulator, "--count", "1500", "--connections", "2", "--streams", "50", "--attempts", "10",
                       "--warm-up", "0")
    finally:
        stats = simulator.stop()
    assert report["failed"] == 0
    assert report["retried_notifications"] > 0
    assert report["attempts_total"] > 1500
    assert accepted(stats) == 1500, "each notification accepted exactly once"
    assert stats["goAwaysSent"] > 0
    assert stats["connectionsAccepted"] > 2, "GOAWAY'd connections were replaced"
    peaks = stats["peakConcurrentStreams"].values()
    assert peaks and max(peaks) <= 8, f"never more streams than the server allows: {stats['peakConcurrentStreams']}"


def test_429_with_retry_after_is_honoured():
    simulator = Simulator("--fail-rate", "0.2", "--fail-status", "429", "--retry-after", "1", "--seed", "3")
    try:
        report = bench(simulator, "--count", "200", "--streams", "20", "--attempts", "10", "--warm-up", "0")
    finally:
        stats = simulator.stop()
    assert report["failed"] == 0
    assert report["retried_notifications"] > 0
    # A notification answered 429 waits at least one second before its next attempt.
    assert report["p99_ms"] >= 1000
    assert accepted(stats) == 200


def test_without_retries_a_storm_fails_some_notifications():
    simulator = Simulator("--fail-rate", "0.5", "--fail-status", "500", "--seed", "5")
    try:
        result = subprocess.run([BIN, "bench", "send", "--endpoint", simulator.url, "--ca-file", simulator.ca_file,
                                 "--count", "300", "--streams", "10", "--warm-up", "0", "--json"],
                                capture_output=True, text=True, timeout=120)
    finally:
        simulator.stop()
    assert result.returncode == 1
    report = json.loads(result.stdout.splitlines()[-1])
    assert 0 < report["failed"] < 300
    assert "InternalServerError" in result.stdout
