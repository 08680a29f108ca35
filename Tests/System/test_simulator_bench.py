"""Benchmark: the simulator must never be the bottleneck of our own benchmarks.

h2load (-n 20000 -c 4 -m 100, POST of a 200-byte payload with APNs headers and a provider token)
against `apns-worker simulator` and against h2o serving `Proc.new do |env| [200, {}, []] end`
(mruby), in the same run, alternating, three rounds each; the medians are compared and the
simulator must reach at least half of h2o's rate.

Timing-dependent, so pytest skips it unless APNS_BENCH=1. Run it directly for a report:
    APNS_WORKER_BIN=.build/release/apns-worker .venv/bin/python Tests/System/test_simulator_bench.py
(exit 1 when the simulator is below half of h2o).
"""
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jwt
import pytest

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")
TOKEN = "ab" * 32
KEY_ID = "ABC123DEFG"
TEAM_ID = "DEF123GHIJ"
REQUESTS, CLIENTS, STREAMS, ROUNDS = 20000, 4, 100, 3
MINIMUM_RATIO = 0.5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, process, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early with {process.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def h2load(port, body, authorization):
    result = subprocess.run(
        ["h2load", "-n", str(REQUESTS), "-c", str(CLIENTS), "-m", str(STREAMS), "-d", str(body),
         "-H", "apns-push-type: alert", "-H", "apns-topic: com.example.app", "-H", "apns-priority: 10",
         "-H", f"authorization: {authorization}", f"https://127.0.0.1:{port}/3/device/{TOKEN}"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    rate = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", result.stdout).group(1))
    succeeded = re.search(r"status codes: (\d+) 2xx", result.stdout)
    assert succeeded and int(succeeded.group(1)) == REQUESTS, result.stdout
    return rate


def prepare(directory):
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            "key.pem", "-out", "cert.pem", "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1")
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "AuthKey.p8")
    openssl("pkey", "-in", "AuthKey.p8", "-pubout", "-out", "AuthKey.pub")
    skeleton = b'{"aps":{"alert":{"title":"Hello","body":""}},"id":"evt-1"}'
    payload = skeleton.replace(b'"body":""', b'"body":"' + b"x" * (200 - len(skeleton)) + b'"')
    assert len(payload) == 200
    (directory / "body.json").write_bytes(payload)
    token = jwt.encode({"iss": TEAM_ID, "iat": int(time.time())}, (directory / "AuthKey.p8").read_bytes(),
                       algorithm="ES256", headers={"kid": KEY_ID})
    return directory / "body.json", "bearer " + token


def measure_h2o(directory, body, authorization):
    port = free_port()
    (directory / "h2o.conf").write_text(f"""
listen:
  port: {port}
  host: 127.0.0.1
  ssl:
    certificate-file: {directory}/cert.pem
    key-file: {directory}/key.pem
error-log: {directory}/h2o-error.log
hosts:
  default:
    paths:
      /:
        mruby.handler: |
          Proc.new do |env| [200, {{}}, []] end
""")
    process = subprocess.Popen(["h2o", "-c", str(directory / "h2o.conf")], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process)
        return h2load(port, body, authorization)
    finally:
        process.terminate()
        process.wait(timeout=20)


def measure_simulator(directory, body, authorization):
    process = subprocess.Popen(
        [BIN, "simulator", "--port", "0", "--cert-file", str(directory / "cert.pem"), "--key-file",
         str(directory / "key.pem"), "--key-id", KEY_ID, "--public-key-file", str(directory / "AuthKey.pub")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        port = int(re.match(r"listening on https://127\.0\.0\.1:(\d+)", line).group(1))
        return h2load(port, body, authorization)
    finally:
        process.terminate()
        process.communicate(timeout=20)


def run_benchmark():
    directory = Path(tempfile.mkdtemp(prefix="apns-sim-bench-"))
    try:
        body, authorization = prepare(directory)
        h2o_rates, simulator_rates = [], []
        for _ in range(ROUNDS):
            h2o_rates.append(measure_h2o(directory, body, authorization))
            simulator_rates.append(measure_simulator(directory, body, authorization))
        return h2o_rates, simulator_rates
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def report(h2o_rates, simulator_rates):
    h2o, simulator = statistics.median(h2o_rates), statistics.median(simulator_rates)
    ratio = simulator / h2o
    lines = [
        f"h2load -n {REQUESTS} -c {CLIENTS} -m {STREAMS}, 200-byte POST with APNs headers and a provider token",
        "h2o mruby [200,{},[]]: " + ", ".join(f"{r:,.0f}" for r in h2o_rates) + f" req/s (median {h2o:,.0f})",
        "apns-worker simulator:  " + ", ".join(f"{r:,.0f}" for r in simulator_rates)
        + f" req/s (median {simulator:,.0f})",
        f"simulator / h2o = {ratio:.2f} (must be >= {MINIMUM_RATIO})",
    ]
    return ratio, "\n".join(lines)


def tools_missing():
    return [tool for tool in ("h2o", "h2load", "openssl") if shutil.which(tool) is None]


@pytest.mark.skipif(os.environ.get("APNS_BENCH") != "1", reason="benchmark; set APNS_BENCH=1 to run")
def test_simulator_reaches_half_of_h2o_under_h2load():
    if missing := tools_missing():
        pytest.skip(f"missing {', '.join(missing)}")
    ratio, text = report(*run_benchmark())
    print("\n" + text)
    assert ratio >= MINIMUM_RATIO, text


if __name__ == "__main__":
    if missing := tools_missing():
        sys.exit(f"missing {', '.join(missing)}")
    ratio, text = report(*run_benchmark())
    print(text)
    sys.exit(0 if ratio >= MINIMUM_RATIO else 1)
