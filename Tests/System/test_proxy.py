"""Egress through an HTTP proxy, through the real binary and a real proxy from Debian (tinyproxy, started
here on a free loopback port with its own config): `send --proxy` delivered to the simulator through a
CONNECT tunnel (TLS verified end to end), the proxy's refusals named (407 without and with wrong
credentials, 403, unreachable), HTTPS_PROXY / NO_PROXY, and a worker under `run` whose proxy goes away
for longer than the retry budget: it holds, says so, and delivers every pair once the proxy is back.
"""
import json
import os
import shutil
import socket
import subprocess
import time
from collections import Counter

import pytest

from worker_process_support import (
    BIN, KEY_ID, TEAM_ID, Deadline, Simulator, Stack, expected_pairs, http_get, make_events, make_token_key,
    metric_series, metric_value, wait_until, worker_environment)

TOKEN = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
TOPIC = "com.example.chat"
POOL = "production/sim-key"
MAX_TOTAL_TIME = 3
OUTAGE_SECONDS = 3 * MAX_TOTAL_TIME
RECOVERY_SECONDS = 90

pytestmark = pytest.mark.skipif(shutil.which("tinyproxy") is None, reason="tinyproxy is not installed "
                                "(scripts/setup.sh --test installs it)")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Tinyproxy:
    """tinyproxy in the foreground on 127.0.0.1:`port`; `lines`: more of its config (BasicAuth, ConnectPort)."""

    def __init__(self, directory, name, lines=(), port=None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(directory, f"{name}.log")
        self.config = os.path.join(directory, f"{name}.conf")
        with open(self.config, "w") as file:
            file.write("\n".join([f"Port {self.port}", "Listen 127.0.0.1", "Timeout 600", "MaxClients 100",
                                  "LogLevel Info", f'LogFile "{self.log_path}"', *lines]) + "\n")
        self.process = None
        self.start()

    def start(self):
        self.process = subprocess.Popen(["tinyproxy", "-d", "-c", self.config], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = Deadline(10)
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"tinyproxy exited with {self.process.returncode}: {self.log()[-500:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if deadline.passed():
                    raise TimeoutError(f"tinyproxy does not listen on {self.port}")
                time.sleep(0.02)

    def kill(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def log(self):
        try:
            with open(self.log_path) as file:
                return file.read()
        except FileNotFoundError:
            return ""

    def connects_to(self, port):
        """How many CONNECT requests to 127.0.0.1:`port` the proxy logged."""
        return self.log().count(f"CONNECT 127.0.0.1:{port} ")


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    return str(tmp_path_factory.mktemp("proxy"))


@pytest.fixture(scope="module")
def token_key(directory):
    return make_token_key(directory)


@pytest.fixture(scope="module")
def simulator(directory, token_key):
    server = Simulator(directory, token_key[1], "1")
    yield server
    server.close()


@pytest.fixture(scope="module")
def open_proxy(directory):
    proxy = Tinyproxy(directory, "open")
    yield proxy
    proxy.kill()


@pytest.fixture(scope="module")
def auth_proxy(directory):
    proxy = Tinyproxy(directory, "auth", ["BasicAuth proxyuser s3cret-pass"])
    yield proxy
    proxy.kill()


def simulator_port(simulator):
    return int(simulator.url.rsplit(":", 1)[1])


def send(simulator, token_key, *args, ca_file=None, env=None):
    command = [BIN, "send", "--endpoint", simulator.url, "--ca-file", ca_file or simulator.ca_file,
               "--key-file", token_key[0], "--key-id", KEY_ID, "--team-id", TEAM_ID, "--device-token", TOKEN,
               "--topic", TOPIC, "--attempts", "1", "--timeout", "10", *args]
    environment = worker_environment()
    for name in ["HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"]:
        environment.pop(name, None)
    environment.update(env or {})
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=environment)
    printed = json.loads(result.stdout) if result.stdout.strip() else None
    return result, printed


def only_attempt(result, printed):
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert printed["status"] == "failed" and len(printed["attempts"]) == 1, printed
    return printed["attempts"][0]


def write(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as file:
        file.write(text)
    return path


def test_send_through_a_proxy_is_delivered_through_a_connect_tunnel(simulator, token_key, open_proxy):
    before = open_proxy.connects_to(simulator_port(simulator))
    result, printed = send(simulator, token_key, "--proxy", open_proxy.url)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert printed["status"] == "delivered" and printed["http_status"] == 200
    assert open_proxy.connects_to(simulator_port(simulator)) == before + 1, open_proxy.log()[-2000:]


def test_send_with_the_proxy_credentials_from_a_file_is_delivered(directory, simulator, token_key, auth_proxy):
    credentials = write(directory, "good-credentials", "proxyuser:s3cret-pass\n")
    result, printed = send(simulator, token_key, "--proxy", auth_proxy.url, "--proxy-credentials-file", credentials)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert printed["status"] == "delivered"
    assert auth_proxy.connects_to(simulator_port(simulator)) >= 1


def test_a_proxy_that_requires_authentication_is_named_when_no_credentials_are_given(simulator, token_key,
                                                                                    auth_proxy):
    result, printed = send(simulator, token_key, "--proxy", auth_proxy.url)
    attempt = only_attempt(result, printed)
    assert attempt["reason"] == "proxyAuthenticationRequired", attempt
    assert "requires authentication" in attempt["error"] and "proxy_credentials_file" in attempt["error"], attempt
    assert f"127.0.0.1:{auth_proxy.port}" in attempt["error"]


def test_wrong_proxy_credentials_are_named_with_their_file_and_the_password_never_shows(directory, simulator,
                                                                                      token_key, auth_proxy):
    credentials = write(directory, "wrong-credentials", "proxyuser:not-the-password-42\n")
    result, printed = send(simulator, token_key, "--proxy", auth_proxy.url, "--proxy-credentials-file", credentials)
    attempt = only_attempt(result, printed)
    assert attempt["reason"] == "proxyCredentialsRefused", attempt
    assert f"refused the credentials in {credentials}" in attempt["error"], attempt
    assert "not-the-password-42" not in result.stdout + result.stderr


def test_a_proxy_that_forbids_the_port_is_named(directory, simulator, token_key):
    proxy = Tinyproxy(directory, "forbidding", ["ConnectPort 1"])
    try:
        result, printed = send(simulator, token_key, "--proxy", proxy.url)
    finally:
        proxy.kill()
    attempt = only_attempt(result, printed)
    assert attempt["reason"] == "proxyForbidden", attempt
    assert f"forbids CONNECT to 127.0.0.1:{simulator_port(simulator)}" in attempt["error"], attempt


def test_an_unreachable_proxy_is_named_not_apns(simulator, token_key):
    port = free_port()
    result, printed = send(simulator, token_key, "--proxy", f"http://127.0.0.1:{port}")
    attempt = only_attempt(result, printed)
    assert attempt["reason"] == "proxyUnreachable", attempt
    assert f"cannot reach the proxy 127.0.0.1:{port}" in attempt["error"], attempt
    result, printed = send(simulator, token_key, "--proxy", "http://no-such-proxy.invalid:3128")
    attempt = only_attempt(result, printed)
    assert attempt["reason"] == "proxyUnreachable" and "no-such-proxy.invalid" in attempt["error"], attempt


def test_the_certificate_is_verified_end_to_end_through_the_proxy(directory, simulator, token_key, open_proxy):
    other_ca = os.path.join(directory, "other-ca.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", os.path.join(directory, "other-ca-key.pem"), "-out", other_ca, "-days", "2",
                    "-subj", "/CN=not the simulator"], check=True, capture_output=True, timeout=20)
    before = open_proxy.connects_to(simulator_port(simulator))
    result, printed = send(simulator, token_key, "--proxy", open_proxy.url, ca_file=other_ca)
    attempt = only_attempt(result, printed)
    assert attempt["reason"] == "certificateVerificationFailed", attempt
    # It was the simulator's certificate, seen through the tunnel, that failed.
    assert open_proxy.connects_to(simulator_port(simulator)) == before + 1


def test_tls_through_the_tunnel_carries_the_servers_name_as_sni(directory, token_key, open_proxy):
    """A TLS server that records the SNI it is sent: through the proxy, it is the endpoint's host name."""
    import ssl
    import threading
    cert, key = os.path.join(directory, "sni-cert.pem"), os.path.join(directory, "sni-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True, timeout=20)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2"])
    seen = []
    context.sni_callback = lambda connection, name, _: seen.append(name)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve():
        try:
            client, _ = listener.accept()
            with context.wrap_socket(client, server_side=True) as tls:
                seen.append(("alpn", tls.selected_alpn_protocol()))
        except (OSError, ssl.SSLError) as error:
            seen.append(("error", str(error)))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    server = type("Server", (), {"url": f"https://localhost:{port}", "ca_file": cert})
    try:
        send(server, token_key, "--proxy", open_proxy.url)
    finally:
        thread.join(10)
        listener.close()
    assert seen[:2] == ["localhost", ("alpn", "h2")], seen
    assert open_proxy.log().count(f"CONNECT localhost:{port} ") == 1


def test_inline_proxy_credentials_are_refused_without_showing_them(simulator, token_key):
    result, _ = send(simulator, token_key, "--proxy", "http://someone:hunter2-secret@127.0.0.1:3128")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "--proxy-credentials-file" in result.stderr and "credentials" in result.stderr
    assert "hunter2-secret" not in result.stdout + result.stderr


def test_https_proxy_from_the_environment_is_used_unless_no_proxy_exempts_the_host(simulator, token_key,
                                                                                  open_proxy):
    port = simulator_port(simulator)
    before = open_proxy.connects_to(port)
    result, printed = send(simulator, token_key, env={"HTTPS_PROXY": open_proxy.url})
    assert result.returncode == 0 and printed["status"] == "delivered", (result.stdout, result.stderr)
    assert open_proxy.connects_to(port) == before + 1
    for no_proxy in ["127.0.0.1", f"127.0.0.1:{port}", "*", "localhost, .0.0.1"]:
        result, printed = send(simulator, token_key, env={"https_proxy": open_proxy.url, "NO_PROXY": no_proxy})
        assert result.returncode == 0 and printed["status"] == "delivered", (no_proxy, result.stderr)
        assert open_proxy.connects_to(port) == before + 1, f"NO_PROXY={no_proxy} went through the proxy"
    # A NO_PROXY entry for another port does not exempt this one.
    result, printed = send(simulator, token_key, env={"HTTPS_PROXY": open_proxy.url, "NO_PROXY": "127.0.0.1:1"})
    assert result.returncode == 0, result.stderr
    assert open_proxy.connects_to(port) == before + 2


# The worker

def statuses_by_pair(reader):
    statuses = {}
    for outcome in reader.outcomes:
        statuses.setdefault((outcome["event_id"], outcome["device_token"]), Counter())[outcome["status"]] += 1
    return statuses


def visibly_down(stack, worker, metrics, cause):
    """The pool-down log line names `cause`, /readyz says 503 with it, /metrics shows the breaker open."""
    line = wait_until(lambda: worker.find_prefix(f"APNs pool {POOL} is down"), 30, "the pool-down log line",
                      worker)[0]
    assert cause in line["fields"]["cause"], line

    def not_ready():
        status, body = http_get(metrics + "/readyz")
        return (status, body) if status == 503 and cause in body else None

    readiness = wait_until(not_ready, 10, f"/readyz 503 naming {cause}", worker)

    def breaker_open():
        text = http_get(metrics + "/metrics")[1]
        states = metric_series(text, "apns_worker_apns_breaker_state")
        return text if states.get(f'pool="{POOL}",state="closed"', 1) == 0 else None

    text = wait_until(breaker_open, 10, "the breaker open in /metrics", worker)
    return line, readiness, text


@pytest.fixture
def make_stack(tmp_path, request):
    stacks = []

    def make(**options):
        stack = Stack(str(tmp_path), f"proxy-{request.node.name}", drain_timeout=10, **options)
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.close()


def test_a_worker_whose_proxy_goes_away_holds_and_delivers_every_pair_once_it_is_back(tmp_path, make_stack):
    proxy = Tinyproxy(str(tmp_path), "worker-proxy")
    try:
        stack = make_stack(latency_ms="1-5", max_in_flight=1000, overrides={
            "apns": {"proxy": proxy.url},
            "retry": {"max_attempts": 3, "max_total_time": f"{MAX_TOTAL_TIME}s"}})
        worker = stack.start_worker("worker")
        metrics = worker.metrics_url()
        first = make_events(100, "before")
        stack.produce(first)
        stack.wait_until_all_committed(expected_pairs(first), 60)
        tunnels_before = proxy.connects_to(int(stack.simulator.url.rsplit(":", 1)[1]))
        assert tunnels_before >= 1, "the worker did not go through the proxy"
        assert worker.find(f"APNs connections go through the proxy 127.0.0.1:{proxy.port} (HTTP CONNECT)")

        proxy.kill()
        gone = time.monotonic()
        second = make_events(400, "during")
        stack.produce(second)
        line, readiness, _ = visibly_down(stack, worker, metrics, "proxyUnreachable")
        deadline = Deadline(OUTAGE_SECONDS - (time.monotonic() - gone))
        while not deadline.passed():
            stack.reader.poll(min(0.5, deadline.left()))
            assert worker.process.poll() is None, worker.tail()
        during = Counter(outcome["status"] for outcome in stack.reader.outcomes
                         if outcome["event_id"].startswith("during"))
        assert during == Counter(), f"outcomes while the proxy was gone: {during}"
        outage = time.monotonic() - gone

        proxy.start()
        back = time.monotonic()
        pairs = expected_pairs(first) | expected_pairs(second)
        stack.wait_until_all_committed(pairs, RECOVERY_SECONDS)
        recovered = time.monotonic() - back
        wait_until(lambda: worker.find_prefix(f"APNs pool {POOL} is up again"), 10, "the pool-up log line", worker)
        assert http_get(metrics + "/readyz")[0] == 200
        code, _ = worker.terminate(15)
        assert code == 0, worker.tail()
        stack.reader.poll_until_quiet()
    finally:
        proxy.kill()

    statuses = statuses_by_pair(stack.reader)
    delivered = sum(1 for pair in pairs if statuses.get(pair, {}).get("delivered", 0) >= 1)
    failed = sum(1 for pair in pairs if statuses.get(pair, {}).get("failed", 0) > 0)
    lost = sum(1 for pair in pairs if pair not in statuses)
    other = Counter(status for counts in statuses.values() for status in counts if status != "delivered")
    down_lines = worker.find_prefix(f"APNs pool {POOL} is down")
    print(f"\nproxy gone {outage:.1f} s (retry.max_total_time {MAX_TOTAL_TIME} s); recovered {recovered:.1f} s "
          f"after it was back; pairs {len(pairs)}: delivered {delivered}, failed {failed}, lost {lost}, other "
          f"{dict(other)}; down lines {len(down_lines)}: {line['fields']}; readyz: {readiness[1][:200]}")
    assert outage >= OUTAGE_SECONDS
    assert set(statuses) <= pairs
    assert delivered == len(pairs) and failed == 0 and lost == 0 and other == Counter()
    assert 1 <= len(down_lines) <= 3, f"{len(down_lines)} pool-down lines"


@pytest.mark.parametrize("refusal", ["no credentials", "wrong credentials", "forbidden port"])
def test_a_worker_whose_proxy_refuses_says_why_once_in_its_log_readyz_and_metrics(tmp_path, make_stack, refusal):
    lines, overrides, cause, words = {
        "no credentials": (["BasicAuth proxyuser s3cret-pass"], {}, "proxyAuthenticationRequired",
                           "requires authentication"),
        "wrong credentials": (["BasicAuth proxyuser s3cret-pass"],
                              {"proxy_credentials_file": write(str(tmp_path), "creds", "proxyuser:wrong-pw-77\n")},
                              "proxyCredentialsRefused", "refused the credentials in"),
        "forbidden port": (["ConnectPort 1"], {}, "proxyForbidden", "forbids CONNECT to 127.0.0.1:"),
    }[refusal]
    proxy = Tinyproxy(str(tmp_path), "refusing-proxy", lines)
    try:
        stack = make_stack(latency_ms="1", max_in_flight=100, overrides={"apns": {"proxy": proxy.url, **overrides}})
        worker = stack.start_worker("worker")
        metrics = worker.metrics_url()
        stack.produce(make_events(20, "refused"))
        line, readiness, text = visibly_down(stack, worker, metrics, cause)
        assert words in line["fields"]["cause"], line
        assert metric_value(text, "apns_worker_pushes_held") is not None
        stack.reader.poll(1)
        failed = [outcome for outcome in stack.reader.outcomes if outcome["status"] == "failed"]
        assert failed == [], failed[:2]
        assert 1 <= len(worker.find_prefix(f"APNs pool {POOL} is down")) <= 3  # once, rate-limited as for APNs
        everything = open(worker.log_path).read() + worker.stderr() + readiness[1] + text
        assert "wrong-pw-77" not in everything and "s3cret-pass" not in everything
    finally:
        proxy.kill()


def test_inline_credentials_in_apns_proxy_stop_the_worker_with_a_clear_error(tmp_path, make_stack):
    stack = make_stack(latency_ms="1", max_in_flight=10,
                       overrides={"apns": {"proxy": "http://user:inline-secret-9@127.0.0.1:3128"}})
    result = subprocess.run([BIN, "run", "--config", stack.config, "--check"], capture_output=True, text=True,
                            timeout=60, env=worker_environment())
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "apns.proxy" in output and "proxy_credentials_file" in output, output
    assert "inline-secret-9" not in output
