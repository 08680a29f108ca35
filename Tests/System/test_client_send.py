"""Black-box tests of `apns-worker send` (sending for real) and `apns-worker bench send`, against h2o and
`openssl s_server` on loopback with generated certificates and a generated .p8 key.

send: exit 0 delivered, 1 rejected or failed (one JSON object on stdout either way), 2 usage.
"""
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from worker_process_support import stop

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")
TOKEN = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
DEAD_TOKEN = "ff" * 32
APNS_ID = "123e4567-e89b-42d3-a456-426614174000"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, process, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {port}")


def make_certificate(directory, name):
    cert, key = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("client")


@pytest.fixture(scope="module")
def signing_key(workdir):
    path = workdir / "AuthKey_KEY1234567.p8"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-out", path], check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def h2o_server(workdir):
    """h2o answering like APNs: 410 Unregistered for DEAD_TOKEN, else 200 echoing apns-id."""
    cert, key = make_certificate(workdir, "h2o")
    port = free_port()
    config = workdir / "h2o.conf"
    config.write_text(f"""listen:
  host: 127.0.0.1
  port: {port}
  ssl:
    certificate-file: {cert}
    key-file: {key}
num-threads: 1
hosts:
  default:
    paths:
      /:
        mruby.handler: |
          Proc.new do |env|
            if env["PATH_INFO"].end_with?("{DEAD_TOKEN}")
              [410, {{"content-type" => "application/json", "apns-id" => env["HTTP_APNS_ID"]}},
               ['{{"reason":"Unregistered","timestamp":1700000000000}}']]
            else
              [200, {{"apns-id" => env["HTTP_APNS_ID"].upcase}}, []]
            end
          end
""")
    process = subprocess.Popen(["h2o", "--mode", "worker", "--conf", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port, process)
        yield {"url": f"https://127.0.0.1:{port}", "ca": cert}
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def send(*args, timeout=30):
    return subprocess.run([BIN, "send", *args], capture_output=True, text=True, timeout=timeout)


def token_auth(signing_key):
    return ["--key-file", str(signing_key), "--key-id", "KEY1234567", "--team-id", "TEAM123456"]


def test_send_delivers_and_prints_the_result_as_json(h2o_server, signing_key):
    result = send("--endpoint", h2o_server["url"], "--ca-file", str(h2o_server["ca"]), *token_auth(signing_key),
                  "--device-token", TOKEN, "--topic", "com.example.app", "--apns-id", APNS_ID)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    printed = json.loads(lines[0])
    assert printed["status"] == "delivered"
    assert printed["http_status"] == 200
    assert printed["apns_id"] == APNS_ID
    assert printed["reason"] is None
    assert len(printed["attempts"]) == 1
    attempt = printed["attempts"][0]
    assert attempt["apns_id"] == APNS_ID and attempt["http_status"] == 200
    assert attempt["latency_ms"] > 0
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", attempt["started_at"])
    # The provider token never reaches the output.
    assert "bearer" not in result.stdout and "eyJ" not in result.stdout


def test_send_to_an_unregistered_token_is_rejected_with_the_timestamp(h2o_server, signing_key):
    result = send("--endpoint", h2o_server["url"], "--ca-file", str(h2o_server["ca"]), *token_auth(signing_key),
                  "--device-token", DEAD_TOKEN, "--topic", "com.example.app")
    assert result.returncode == 1
    printed = json.loads(result.stdout)
    assert printed["status"] == "rejected"
    assert printed["http_status"] == 410
    assert printed["reason"] == "Unregistered"
    assert printed["timestamp"] == 1700000000000
    assert len(printed["attempts"]) == 1, "an invalid token is not retried"


def test_send_with_the_wrong_ca_fails_and_says_why(h2o_server, signing_key, workdir):
    other_cert, _ = make_certificate(workdir, "other")
    result = send("--endpoint", h2o_server["url"], "--ca-file", str(other_cert), *token_auth(signing_key),
                  "--device-token", TOKEN, "--topic", "com.example.app", "--attempts", "1")
    assert result.returncode == 1
    printed = json.loads(result.stdout)
    assert printed["status"] == "failed"
    assert printed["http_status"] is None
    assert "certificate" in printed["summary"]
    assert printed["attempts"][0]["reason"] == "certificateVerificationFailed"


def test_send_to_a_server_without_http2_fails_with_an_alpn_error(signing_key, workdir):
    cert, key = make_certificate(workdir, "plain")
    port = free_port()
    server = subprocess.Popen(["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert", cert, "-key", key,
                               "-alpn", "http/1.1", "-www", "-quiet"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port, server)
        result = send("--endpoint", f"https://127.0.0.1:{port}", "--ca-file", str(cert), *token_auth(signing_key),
                      "--device-token", TOKEN, "--topic", "com.example.app", "--attempts", "1")
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    assert result.returncode == 1
    printed = json.loads(result.stdout)
    assert printed["attempts"][0]["reason"] == "http2NotNegotiated"
    assert "h2" in printed["summary"]


def test_send_to_a_closed_port_fails_after_its_attempts(signing_key, h2o_server):
    result = send("--endpoint", f"https://127.0.0.1:{free_port()}", "--ca-file", str(h2o_server["ca"]),
                  *token_auth(signing_key), "--device-token", TOKEN, "--topic", "com.example.app",
                  "--attempts", "2", "--timeout", "2")
    assert result.returncode == 1
    printed = json.loads(result.stdout)
    assert printed["status"] == "failed"
    assert [a["reason"] for a in printed["attempts"]] == ["connectFailed", "connectFailed"]
    assert len({a["apns_id"] for a in printed["attempts"]}) == 2, "each attempt has a fresh apns-id"


def test_send_without_a_credential_is_a_usage_error():
    result = send("--device-token", TOKEN, "--topic", "com.example.app", "--endpoint", "https://127.0.0.1:9")
    assert result.returncode == 2
    assert "--key-file" in result.stderr and "--cert-file" in result.stderr


def test_send_with_a_bad_endpoint_is_a_usage_error(signing_key):
    result = send("--device-token", TOKEN, "--topic", "com.example.app", "--endpoint", "http://127.0.0.1:9",
                  *token_auth(signing_key))
    assert result.returncode == 2
    assert "https://host[:port]" in result.stderr


def bench(*args, timeout=240):
    return subprocess.run([BIN, "bench", "send", *args], capture_output=True, text=True, timeout=timeout)


def test_bench_send_starts_its_own_h2o_and_reports_the_figures():
    result = bench("--count", "3000", "--streams", "20", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["count"] == 3000 and report["failed"] == 0
    assert report["notifications_per_second"] > 0
    assert report["cpu_us_per_notification"] > 0
    assert 0 < report["p50_ms"] <= report["p99_ms"]
    assert report["peak_rss_mib"] > 0
    assert set(report["rss_kib_by_percent"]) >= {"10", "100"}
    endpoint = re.search(r"to https://127\.0\.0\.1:(\d+)", result.stdout)
    assert endpoint, result.stdout
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(endpoint.group(1))), timeout=0.5).close()


def test_bench_send_compares_with_h2load_on_the_same_server():
    result = bench("--count", "3000", "--connections", "2", "--streams", "10", "--compare-h2load", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["h2load"]["requests_per_second"] > 0
    assert report["h2load"]["failed"] == 0
    assert report["throughput_ratio"] > 0 and report["cpu_ratio"] > 0
    assert "h2load" in result.stdout and "ratio" in result.stdout


@pytest.mark.parametrize("executor", ["default", "loop"])
def test_bench_send_transport_layer_runs_too(executor):
    # On both executors: a stale incremental build once called the pool with the old calling convention
    # and crashed on the loop executor only.
    result = bench("--count", "2000", "--layer", "transport", "--executor", executor, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["failed"] == 0


def test_bench_send_rejects_bad_options():
    result = bench("--count", "0")
    assert result.returncode == 2
    assert "--count" in result.stderr
    result = bench("--layer", "wire")
    assert result.returncode == 2
    assert "client, transport or render" in result.stderr


@pytest.fixture(scope="module")
def client_pki(workdir):
    """A CA and a push-style client certificate (UID = bundle id) it signed."""
    run = lambda *args: subprocess.run(args, check=True, capture_output=True)
    ca, ca_key = workdir / "clients-ca.pem", workdir / "clients-ca-key.pem"
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=Test Push CA")
    key, csr, cert = workdir / "client-key.pem", workdir / "client.csr", workdir / "client.pem"
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
        "-out", csr, "-subj", "/UID=com.example.app/CN=Apple Push Services: com.example.app")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
        "-days", "2")
    return {"ca": ca, "cert": cert, "key": key}


def test_send_with_a_client_certificate_uses_mutual_tls(client_pki, signing_key):
    simulator = subprocess.Popen([BIN, "simulator", "--port", "0", "--client-ca-file", str(client_pki["ca"])],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                 start_new_session=True)
    try:
        url = ca = None
        while not (url and ca):
            line = simulator.stdout.readline()
            assert line, "the simulator stopped before printing its address"
            url = url or (re.search(r"listening on (https://\S+)", line) or [None, None])[1]
            ca = ca or (re.search(r"ca-file: (\S+)", line) or [None, None])[1]
        common = ["--endpoint", url, "--ca-file", ca, "--device-token", TOKEN, "--topic", "com.example.app",
                  "--attempts", "1"]
        with_certificate = send(*common, "--cert-file", str(client_pki["cert"]), "--key-file", str(client_pki["key"]))
        without_certificate = send(*common, *token_auth(signing_key))
    finally:
        # SIGTERM, as an operator stops it: the simulator then removes the CA file it wrote (a SIGKILL left
        # one directory in /tmp per run).
        code = stop(simulator, 30)
    assert code == 0, f"the simulator exited {code} on SIGTERM"
    assert not os.path.exists(ca), f"the simulator left its CA file {ca} behind"
    assert with_certificate.returncode == 0, with_certificate.stdout + with_certificate.stderr
    assert json.loads(with_certificate.stdout)["status"] == "delivered"
    assert without_certificate.returncode == 1
    refused = json.loads(without_certificate.stdout)
    assert refused["status"] == "failed"
    assert "certificate" in refused["summary"]
