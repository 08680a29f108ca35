"""Black-box tests of `apns-worker simulator` on the wire: curl --http2 and PyPI h2 (with hyperframe
for raw and invalid frames) against the binary, checking Apple's statuses and reasons, faults
(failures with Retry-After, GOAWAY, stalls, drops, latency, SETTINGS_MAX_CONCURRENT_STREAMS),
malformed frames, and a short h2load run. Provider tokens are signed by PyJWT, certificates made
with openssl, both independently of the code under test.
"""
import contextlib
import json
import os
import re
import select
import signal
import socket
import ssl
import subprocess
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import jwt
import pytest
from hyperframe.frame import DataFrame, Frame, GoAwayFrame, HeadersFrame, SettingsFrame

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")
TOKEN = "ab" * 32
KEY_ID = "ABC123DEFG"
OTHER_KEY_ID = "XYZ987WVUT"
TEAM_ID = "DEF123GHIJ"
ALERT = b'{"aps":{"alert":"hi"}}'
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class Simulator:
    """`apns-worker simulator` as a child process; `stop()` sends SIGTERM and returns its stats."""

    def __init__(self, tmp_path, *args, config=None):
        command = [BIN, "simulator", "--port", "0"]
        if config is not None:
            path = tmp_path / f"sim-{time.monotonic_ns()}.json"
            path.write_text(json.dumps(config))
            command += ["--config", str(path)]
        command += list(args)
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.port = self.ca = None
        deadline = time.monotonic() + 20
        lines = []
        while (self.port is None or self.ca is None) and time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if match := re.match(r"listening on https://127\.0\.0\.1:(\d+)", line):
                self.port = int(match.group(1))
            if line.startswith("ca-file: "):
                self.ca = line.split(": ", 1)[1].strip()
        if self.port is None or self.ca is None:
            self.process.kill()
            _, err = self.process.communicate(timeout=10)
            raise AssertionError(f"simulator did not start: {''.join(lines)} {err}")
        self.stats = None

    def stop(self):
        if self.stats is None:
            self.process.send_signal(signal.SIGTERM)
            out, err = self.process.communicate(timeout=20)
            assert self.process.returncode == 0, err
            stats_lines = [line for line in out.splitlines() if line.startswith("stats: ")]
            assert stats_lines, out
            self.stats = json.loads(stats_lines[-1][len("stats: "):])
        return self.stats


@pytest.fixture
def simulator(tmp_path):
    started = []

    def start(*args, config=None):
        sim = Simulator(tmp_path, *args, config=config)
        started.append(sim)
        return sim

    yield start
    for sim in started:
        if sim.process.poll() is None:
            sim.stop()


class H2Client:
    """A small HTTP/2 client over TLS built on PyPI h2, recording every event per stream."""

    def __init__(self, sim, cert=None, server_name="localhost"):
        context = ssl.create_default_context(cafile=sim.ca)
        context.set_alpn_protocols(["h2"])
        if cert:
            context.load_cert_chain(*cert)
        raw = socket.create_connection(("127.0.0.1", sim.port), timeout=10)
        self.sock = context.wrap_socket(raw, server_hostname=server_name)
        assert self.sock.selected_alpn_protocol() == "h2"
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.flush()
        self.responses = {}
        self.terminated = None
        self.settings_changes = []
        self.closed = False

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def send(self, token=TOKEN, headers=None, body=ALERT, method="POST", path=None, flush=True):
        stream = self.conn.get_next_available_stream_id()
        base = [(":method", method), (":scheme", "https"), (":authority", "localhost"),
                (":path", path if path is not None else f"/3/device/{token}")]
        extra = headers if headers is not None else [("apns-push-type", "alert"), ("apns-topic", "com.example.app")]
        self.conn.send_headers(stream, base + list(extra), end_stream=not body)
        if body:
            self.conn.send_data(stream, body, end_stream=True)
        self.responses[stream] = {"status": None, "headers": {}, "body": b"", "done": False, "at": None}
        if flush:
            self.flush()
        return stream

    def pump(self, timeout, until=None):
        """Reads and handles frames for up to `timeout` seconds; returns early when the socket closes
        or `until()` becomes true."""
        deadline = time.monotonic() + timeout
        while not self.closed and not (until and until()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if not self.sock.pending():
                ready, _, _ = select.select([self.sock], [], [], remaining)
                if not ready:
                    return
            try:
                data = self.sock.recv(65536)
            except (ConnectionResetError, ssl.SSLError, OSError):
                data = b""
            if not data:
                self.closed = True
                return
            for event in self.conn.receive_data(data):
                self.handle(event)
            self.flush()

    def handle(self, event):
        if isinstance(event, h2.events.ResponseReceived):
            entry = self.responses[event.stream_id]
            entry["headers"] = dict(event.headers)
            entry["status"] = int(entry["headers"][":status"])
        elif isinstance(event, h2.events.DataReceived):
            self.responses[event.stream_id]["body"] += event.data
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            self.responses[event.stream_id]["done"] = True
            self.responses[event.stream_id]["at"] = time.monotonic()
        elif isinstance(event, h2.events.StreamReset):
            self.responses[event.stream_id]["reset"] = event.error_code
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.terminated = event
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self.settings_changes.append(event)

    def wait(self, stream, timeout=5):
        self.pump(timeout, until=lambda: self.responses[stream]["done"])
        return self.responses[stream]

    def request(self, *args, **kwargs):
        response = self.wait(self.send(*args, **kwargs))
        assert response["done"], "no response"
        return response

    def close(self):
        with contextlib.suppress(Exception):
            self.sock.close()


def reason_of(response):
    return json.loads(response["body"])["reason"]


# --------------------------------------------------------------------------------------------------
# curl through the binary


def curl(sim, *args, token=TOKEN, host="localhost"):
    result = subprocess.run(
        ["curl", "-sS", "--http2", "--cacert", sim.ca, "-o", "-", "-D", "-", "-w", "\nversion=%{http_version}",
         *args, f"https://{host}:{sim.port}/3/device/{token}"],
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_curl_gets_200_with_apns_ids_and_a_reason_for_a_rejection(simulator):
    sim = simulator()
    ok = curl(sim, "-X", "POST", "-H", "apns-push-type: alert", "-H", "apns-topic: com.example.app",
              "-H", "apns-id: 123e4567-e89b-42d3-a456-426614174000", "-d", ALERT.decode())
    assert ok.startswith("HTTP/2 200")
    assert "apns-id: 123e4567-e89b-42d3-a456-426614174000" in ok
    unique = re.search(r"apns-unique-id: (\S+)", ok)
    assert unique and UUID.match(unique.group(1))
    assert ok.rstrip().endswith("version=2")

    rejected = curl(sim, "-X", "POST", "-H", "apns-push-type: alert", "-d", ALERT.decode(), host="127.0.0.1")
    assert rejected.startswith("HTTP/2 400")
    assert '{"reason":"MissingTopic"}' in rejected
    stats = sim.stop()
    assert stats["responses"] == {"200": 1, "400 MissingTopic": 1}
    assert stats["connectionsAccepted"] == 2


def test_curl_without_the_ca_file_does_not_trust_the_simulator(simulator):
    sim = simulator()
    result = subprocess.run(["curl", "-sS", "--http2", f"https://localhost:{sim.port}/"], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 60, result.stderr  # peer certificate cannot be authenticated


# --------------------------------------------------------------------------------------------------
# Valid requests and every validation rule, over h2


def test_valid_requests_get_200_with_echoed_or_generated_ids(simulator):
    sim = simulator()
    client = H2Client(sim)
    given = "0f9e8d7c-6b5a-4c3d-8e1f-a0b1c2d3e4f5"
    echoed = client.request(headers=[("apns-push-type", "alert"), ("apns-topic", "com.example.app"),
                                     ("apns-id", given), ("apns-priority", "5"), ("apns-expiration", "0"),
                                     ("apns-collapse-id", "c" * 64)])
    assert echoed["status"] == 200 and echoed["body"] == b""
    assert echoed["headers"]["apns-id"] == given
    assert UUID.match(echoed["headers"]["apns-unique-id"])
    generated = client.request()
    assert generated["status"] == 200
    assert UUID.match(generated["headers"]["apns-id"])
    assert generated["headers"]["apns-id"] != generated["headers"]["apns-unique-id"]
    voip = client.request(headers=[("apns-push-type", "voip"), ("apns-topic", "com.example.app.voip")],
                          body=b'{"call":"' + b"x" * (5120 - 11) + b'"}')
    assert voip["status"] == 200
    client.close()
    stats = sim.stop()
    assert stats["acceptedRecorded"] == 3 and stats["responses"] == {"200": 3}


def test_production_answers_carry_no_unique_id(simulator):
    sim = simulator("--environment", "production")
    client = H2Client(sim)
    response = client.request()
    assert response["status"] == 200 and "apns-unique-id" not in response["headers"]


VOIP = [("apns-push-type", "voip"), ("apns-topic", "com.example.app.voip")]
BASIC = [("apns-push-type", "alert"), ("apns-topic", "com.example.app")]

RULES = [
    # (name, request keyword arguments, status, reason)
    ("get", dict(method="GET", body=b""), 405, "MethodNotAllowed"),
    ("bad path", dict(path="/3/devices/" + TOKEN), 404, "BadPath"),
    ("root path", dict(path="/"), 404, "BadPath"),
    ("no token", dict(path="/3/device/"), 400, "MissingDeviceToken"),
    ("token not hex", dict(token="zz" * 32), 400, "BadDeviceToken"),
    ("token too short", dict(token="abcd"), 400, "BadDeviceToken"),
    ("duplicate header", dict(headers=BASIC + [("apns-topic", "com.example.app")]), 400, "DuplicateHeaders"),
    ("no push type", dict(headers=[("apns-topic", "com.example.app")]), 400, "InvalidPushType"),
    ("unknown push type", dict(headers=[("apns-push-type", "banner"), ("apns-topic", "com.example.app")]),
     400, "InvalidPushType"),
    ("no topic", dict(headers=[("apns-push-type", "alert")]), 400, "MissingTopic"),
    ("voip topic without suffix", dict(headers=[("apns-push-type", "voip"), ("apns-topic", "com.example.app")]),
     400, "BadTopic"),
    ("priority not a priority", dict(headers=BASIC + [("apns-priority", "7")]), 400, "BadPriority"),
    ("background at priority 10", dict(headers=[("apns-push-type", "background"), ("apns-topic", "com.example.app"),
                                                ("apns-priority", "10")],
                                       body=b'{"aps":{"content-available":1}}'), 400, "BadPriority"),
    ("pushtotalk at priority 5", dict(headers=[("apns-push-type", "pushtotalk"), ("apns-topic", "com.example.app.voip-ptt"),
                                               ("apns-priority", "5")], body=b'{"speaker":"a"}'), 400, "BadPriority"),
    ("liveactivity at priority 1", dict(headers=[("apns-push-type", "liveactivity"),
                                                 ("apns-topic", "com.example.app.push-type.liveactivity"),
                                                 ("apns-priority", "1")],
                                        body=b'{"aps":{"timestamp":1,"event":"update","content-state":{}}}'),
     400, "BadPriority"),
    ("liveactivity update without content-state", dict(headers=[("apns-push-type", "liveactivity"),
                                                                ("apns-topic", "com.example.app.push-type.liveactivity")],
                                                       body=b'{"aps":{"timestamp":1,"event":"update"}}'),
     400, "BadPayload"),
    ("expiration not a number", dict(headers=BASIC + [("apns-expiration", "tomorrow")]), 400, "BadExpirationDate"),
    ("collapse id of 65 bytes", dict(headers=BASIC + [("apns-collapse-id", "c" * 65)]), 400, "BadCollapseId"),
    ("apns-id not a uuid", dict(headers=BASIC + [("apns-id", "12345")]), 400, "BadMessageId"),
    ("empty payload", dict(body=b""), 400, "PayloadEmpty"),
    ("payload over 4096", dict(body=b'{"aps":{"alert":"' + b"x" * (4097 - 20) + b'"}}'), 413, "PayloadTooLarge"),
    ("voip payload over 5120", dict(headers=VOIP, body=b'{"call":"' + b"x" * (5121 - 11) + b'"}'),
     413, "PayloadTooLarge"),
    ("payload not json", dict(body=b"{aps"), 400, "BadPayload"),
    ("payload without aps", dict(body=b'{"data":1}'), 400, "BadPayload"),
    ("payload an array", dict(body=b"[1]"), 400, "BadPayload"),
]


@pytest.fixture(scope="module")
def shared_simulator(tmp_path_factory):
    sim = Simulator(tmp_path_factory.mktemp("shared"))
    yield sim
    sim.stop()


@pytest.mark.parametrize("name,kwargs,status,reason", RULES, ids=[rule[0] for rule in RULES])
def test_each_rule_answers_with_apples_status_and_reason(shared_simulator, name, kwargs, status, reason):
    client = H2Client(shared_simulator)
    response = client.request(**kwargs)
    client.close()
    assert response["status"] == status
    assert json.loads(response["body"]) == {"reason": reason}
    assert response["headers"]["content-type"] == "application/json"
    assert UUID.match(response["headers"]["apns-id"])


def test_device_states_from_configuration_and_rates(simulator):
    unregistered, bad, other_app = "01" * 32, "02" * 32, "03" * 32
    sim = simulator(config={"devices": {
        "unregistered": [{"token": unregistered, "timestamp": 1650000000123}], "bad": [bad],
        "owners": {other_app: "com.example.other"}, "unregisteredRate": 0.3}})
    client = H2Client(sim)
    gone = client.request(token=unregistered)
    assert gone["status"] == 410
    assert json.loads(gone["body"]) == {"reason": "Unregistered", "timestamp": 1650000000123}
    assert reason_of(client.request(token=bad)) == "BadDeviceToken"
    assert reason_of(client.request(token=other_app)) == "DeviceTokenNotForTopic"
    assert client.request(token=other_app, headers=[("apns-push-type", "alert"),
                                                     ("apns-topic", "com.example.other")])["status"] == 200
    # Rate-based: a stable share of other tokens is unregistered, the same answer every time.
    tokens = [f"{i:064x}" for i in range(1, 201)]
    first = [client.request(token=t)["status"] for t in tokens]
    assert 35 <= first.count(410) <= 85, first.count(410)
    client.close()
    again = H2Client(sim)
    assert [again.request(token=t)["status"] for t in tokens] == first


# --------------------------------------------------------------------------------------------------
# Token authentication, with tokens signed by PyJWT


@pytest.fixture(scope="module")
def signing_keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    for name in ("main", "other", "unknown"):
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.p8", cwd=d)
        openssl("pkey", "-in", f"{name}.p8", "-pubout", "-out", f"{name}.pub", cwd=d)
    return d


def bearer(keys, name="main", key_id=KEY_ID, iat=None):
    token = jwt.encode({"iss": TEAM_ID, "iat": int(time.time()) if iat is None else iat},
                       (keys / f"{name}.p8").read_bytes(), algorithm="ES256", headers={"kid": key_id})
    return "bearer " + token


def test_token_authentication_rules(simulator, signing_keys):
    sim = simulator("--key-id", KEY_ID, "--public-key-file", str(signing_keys / "main.pub"),
                    "--key-id", OTHER_KEY_ID, "--public-key-file", str(signing_keys / "other.pub"))

    def status_reason(client, authorization):
        headers = ([("authorization", authorization)] if authorization else []) + BASIC
        response = client.request(headers=headers)
        return response["status"], (reason_of(response) if response["body"] else None)

    fresh = H2Client(sim)
    assert status_reason(fresh, None) == (403, "MissingProviderToken")
    assert status_reason(fresh, bearer(signing_keys, "unknown")) == (403, "InvalidProviderToken")
    assert status_reason(fresh, bearer(signing_keys, "other", key_id=KEY_ID)) == (403, "InvalidProviderToken")
    assert status_reason(fresh, bearer(signing_keys, iat=int(time.time()) - 3700)) == (403, "ExpiredProviderToken")
    first = bearer(signing_keys)
    assert status_reason(fresh, first) == (200, None)
    assert status_reason(fresh, first) == (200, None)
    # Another token on the same connection within 20 minutes, and another key.
    assert status_reason(fresh, bearer(signing_keys, iat=int(time.time()) - 5)) == (429, "TooManyProviderTokenUpdates")
    assert status_reason(fresh, bearer(signing_keys, "other", key_id=OTHER_KEY_ID)) == (403, "UnrelatedKeyIdInToken")
    fresh.close()
    # A new connection may use the other key.
    other = H2Client(sim)
    assert status_reason(other, bearer(signing_keys, "other", key_id=OTHER_KEY_ID)) == (200, None)
    other.close()


def test_a_refused_token_throttles_its_connection_to_one_stream_until_one_is_accepted(simulator, signing_keys):
    """`faults.streamLimitAfterRefusedToken`: as APNs has been seen to, a refused provider token drops the
    connection's SETTINGS_MAX_CONCURRENT_STREAMS; its next accepted request raises it again. Other
    connections keep theirs."""
    sim = simulator("--key-id", KEY_ID, "--public-key-file", str(signing_keys / "main.pub"),
                    config={"faults": {"streamLimitAfterRefusedToken": 1}})
    code = h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS
    refused = H2Client(sim)
    bystander = H2Client(sim)
    response = refused.request(headers=[("authorization", bearer(signing_keys, "unknown"))] + BASIC)
    assert (response["status"], reason_of(response)) == (403, "InvalidProviderToken")
    refused.pump(0.3)
    assert refused.conn.remote_settings.max_concurrent_streams == 1
    assert refused.request(headers=[("authorization", bearer(signing_keys))] + BASIC)["status"] == 200
    refused.pump(0.3)
    assert refused.conn.remote_settings.max_concurrent_streams == 1000
    changes = [c.changed_settings[code].new_value for c in refused.settings_changes if code in c.changed_settings]
    assert changes == [1000, 1, 1000]
    bystander.pump(0.3)
    assert bystander.conn.remote_settings.max_concurrent_streams == 1000
    refused.close()
    bystander.close()


# --------------------------------------------------------------------------------------------------
# Certificate authentication


@pytest.fixture(scope="module")
def client_pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "rogue-ca"):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2", "-subj", f"/CN={ca}", cwd=d)
    for name, ca, subject in (("client", "ca", "/UID=com.example.app/CN=Apple Push Services: com.example.app"),
                              ("rogue", "rogue-ca", "/UID=com.example.app/CN=rogue")):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", cwd=d)
    return d


def test_certificate_authentication_requires_a_client_certificate_from_the_ca(simulator, client_pki):
    sim = simulator("--client-ca-file", str(client_pki / "ca.pem"))
    good = H2Client(sim, cert=(str(client_pki / "client.pem"), str(client_pki / "client.key")))
    assert good.request(headers=[("apns-push-type", "alert"), ("apns-topic", "com.example.app")])["status"] == 200
    # Without apns-topic the certificate's one topic is used; another app's topic is not allowed.
    assert good.request(headers=[("apns-push-type", "alert")])["status"] == 200
    other = good.request(headers=[("apns-push-type", "alert"), ("apns-topic", "com.example.other")])
    assert (other["status"], reason_of(other)) == (400, "TopicDisallowed")
    good.close()
    for cert in (None, (str(client_pki / "rogue.pem"), str(client_pki / "rogue.key"))):
        try:
            refused = H2Client(sim, cert=cert)
        except (ssl.SSLError, ConnectionError):
            continue  # TLS 1.2 style: the handshake itself fails
        # TLS 1.3: the client's handshake ends first; the server's refusal arrives on the next read or
        # write.
        try:
            stream = refused.send()
        except (ssl.SSLError, OSError):
            continue
        refused.pump(3)
        assert refused.closed and refused.responses[stream]["status"] is None
    stats = sim.stop()
    assert stats["handshakeFailures"] == 2


# --------------------------------------------------------------------------------------------------
# Faults


def test_injected_503_carries_retry_after(simulator):
    sim = simulator("--fail-rate", "1", "--fail-status", "503", "--retry-after", "7")
    client = H2Client(sim)
    response = client.request()
    assert response["status"] == 503
    assert reason_of(response) == "ServiceUnavailable"
    assert response["headers"]["retry-after"] == "7"
    stats = sim.stop()
    assert stats["responses"] == {"503 ServiceUnavailable": 1} and stats["acceptedRecorded"] == 0


def test_scripted_429_and_500_hit_only_their_requests(simulator):
    sim = simulator(config={"faults": {"script": [{"request": 2, "action": "fail", "status": 429, "retryAfter": 1},
                                                  {"request": 3, "action": "fail", "status": 500}]}})
    client = H2Client(sim)
    statuses = [client.request()["status"] for _ in range(4)]
    assert statuses == [200, 429, 500, 200]


def test_device_limit_answers_429_toomanyrequests_to_one_busy_device_only(simulator):
    """APNs' per-device limit: the third request to one token in the window is refused, another token's
    request is not, and the refusals count within the window (hammering keeps the device refused)."""
    sim = simulator(config={"faults": {"deviceLimit": {"requests": 2, "perMs": 60000}}})
    client = H2Client(sim)
    busy = [client.request() for _ in range(4)]
    assert [response["status"] for response in busy] == [200, 200, 429, 429]
    assert reason_of(busy[2]) == "TooManyRequests"
    assert client.request(token="cd" * 32)["status"] == 200


def test_goaway_after_n_streams_names_the_last_processed_stream(simulator):
    sim = simulator("--go-away-after", "3")
    client = H2Client(sim)
    streams = [client.send(flush=False) for _ in range(5)]
    client.flush()
    client.pump(2)
    assert client.terminated is not None
    assert client.terminated.error_code == 0
    assert client.terminated.last_stream_id == streams[2]
    assert json.loads(client.terminated.additional_data) == {"reason": "Shutdown"}
    assert [client.responses[s]["status"] for s in streams] == [200, 200, 200, None, None]
    assert client.closed, "the simulator closes the connection after answering the processed streams"
    stats = sim.stop()
    assert stats["goAwaysSent"] == 1


def test_goaway_mid_flight_leaves_in_flight_streams_above_last_stream_id_unprocessed(simulator):
    """Five requests in flight, answers delayed 300 ms; the third triggers GOAWAY with last-stream-id
    below it. GOAWAY comes at once; streams 1 and 3 are still answered after it, 5, 7 and 9 never.
    (Raw frames: PyPI h2 refuses any frame after GOAWAY, though RFC 9113 allows them.)"""
    sim = simulator("--latency-ms", "300",
                    config={"faults": {"script": [{"stream": 3, "action": "goaway", "processThisStream": False}]}})
    sock = raw_tls(sim)
    read_frames(sock, timeout=0.5, until=lambda fs: len(fs) >= 1)
    sock.sendall(SettingsFrame(0, flags=["ACK"]).serialize())
    encoder = h2.connection.H2Connection().encoder
    started = time.monotonic()
    sock.sendall(b"".join(raw_request(encoder, stream_id) for stream_id in (1, 3, 5, 7, 9)))
    frames = read_frames(sock, timeout=2)
    goaway = [(at, f) for at, f in frames if isinstance(f, GoAwayFrame)]
    answers = {f.stream_id: at for at, f in frames if isinstance(f, HeadersFrame)}
    assert len(goaway) == 1
    at, frame = goaway[0]
    assert (frame.last_stream_id, frame.error_code) == (3, 0)
    assert json.loads(frame.additional_data) == {"reason": "Shutdown"}
    assert at - started < 0.25, "GOAWAY goes out at once, not after the latency"
    assert sorted(answers) == [1, 3]
    assert all(answer_at > at and answer_at - started >= 0.29 for answer_at in answers.values())
    sock.close()
    stats = sim.stop()
    assert stats["unprocessedStreams"] == 1  # the stream that triggered it; later ones were never planned
    assert stats["responses"] == {"200": 2}


def test_a_stalled_stream_never_answers_while_others_do(simulator):
    sim = simulator(config={"faults": {"script": [{"request": 2, "action": "stall"}]}})
    client = H2Client(sim)
    first, stalled, third = (client.send() for _ in range(3))
    client.pump(1)
    assert client.responses[first]["status"] == 200
    assert client.responses[third]["status"] == 200
    assert client.responses[stalled]["status"] is None and not client.closed
    assert sim.stop()["stalledStreams"] == 1


def test_a_dropped_connection_closes_without_goaway_and_the_next_one_works(simulator):
    sim = simulator(config={"faults": {"script": [{"request": 2, "action": "drop"}]}})
    client = H2Client(sim)
    assert client.request()["status"] == 200
    dropped = client.send()
    client.pump(2)
    assert client.closed and client.terminated is None
    assert client.responses[dropped]["status"] is None
    assert H2Client(sim).request()["status"] == 200
    assert sim.stop()["droppedConnections"] == 1


def test_latency_delays_answers_without_serialising_streams(simulator):
    sim = simulator("--latency-ms", "250")
    client = H2Client(sim)
    client.request()  # settle the connection
    started = time.monotonic()
    streams = [client.send(flush=False) for _ in range(10)]
    client.flush()
    for stream in streams:
        client.wait(stream, timeout=5)
    elapsed = time.monotonic() - started
    assert all(client.responses[s]["status"] == 200 for s in streams)
    assert 0.24 <= elapsed < 1.0, f"10 delayed streams took {elapsed:.3f}s; they must wait in parallel"


def test_a_held_handshake_delays_each_new_connection_and_not_its_requests(simulator):
    """--handshake-ms holds every new connection's TLS handshake (what a far server's round trips cost), and
    only the handshake: the connection's requests are answered at the simulator's own pace."""
    sim = simulator("--handshake-ms", "300")
    for _ in range(2):
        started = time.monotonic()
        client = H2Client(sim)
        connected = time.monotonic() - started
        assert connected >= 0.3, f"the handshake took {connected:.3f} s"
        started = time.monotonic()
        assert client.request()["status"] == 200
        assert time.monotonic() - started < connected, "requests on a connected connection are not held"


def test_max_concurrent_streams_of_one_then_raised_mid_connection(simulator):
    sim = simulator("--max-concurrent-streams", "1",
                    config={"faults": {"script": [{"stream": 2, "action": "maxConcurrentStreams", "value": 5}]}})
    client = H2Client(sim)
    client.pump(0.3)
    assert client.conn.remote_settings.max_concurrent_streams == 1
    assert client.request()["status"] == 200
    client.send()
    with pytest.raises(h2.exceptions.TooManyStreamsError):
        client.send()  # the client library enforces the announced limit
    client.pump(1)
    assert client.conn.remote_settings.max_concurrent_streams == 5
    code = h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS
    changes = [c.changed_settings[code].new_value for c in client.settings_changes if code in c.changed_settings]
    assert changes == [1, 5]
    streams = [client.send(flush=False) for _ in range(5)]
    client.flush()
    assert all(client.wait(s)["status"] == 200 for s in streams)
    client.close()
    stats = sim.stop()
    assert 2 <= stats["peakConcurrentStreams"]["1"] <= 5


def raw_tls(sim):
    context = ssl.create_default_context(cafile=sim.ca)
    context.set_alpn_protocols(["h2"])
    sock = context.wrap_socket(socket.create_connection(("127.0.0.1", sim.port), timeout=5),
                               server_hostname="localhost")
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SettingsFrame(0).serialize())
    return sock


def read_frames(sock, timeout=3, until=None):
    """(arrival time, frame) for every frame until the server closes the connection, `timeout`
    passes, or `until(frames)` is true."""
    data, frames, deadline = b"", [], time.monotonic() + timeout
    while time.monotonic() < deadline and not (until and until(frames)):
        if not sock.pending():
            ready, _, _ = select.select([sock], [], [], deadline - time.monotonic())
            if not ready:
                break
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, ssl.SSLError, OSError):
            break
        if not chunk:
            break
        data += chunk
        while len(data) >= 9:
            frame, length = Frame.parse_frame_header(memoryview(data[:9]))
            if len(data) < 9 + length:
                break
            frame.parse_body(memoryview(data[9:9 + length]))
            frames.append((time.monotonic(), frame))
            data = data[9 + length:]
    return frames


def raw_request(encoder, stream_id):
    """HEADERS + DATA bytes of a valid alert request on `stream_id`."""
    headers = HeadersFrame(stream_id, flags=["END_HEADERS"])
    headers.data = encoder.encode([(":method", "POST"), (":scheme", "https"), (":authority", "localhost"),
                                   (":path", f"/3/device/{TOKEN}"), ("apns-push-type", "alert"),
                                   ("apns-topic", "com.example.app")])
    data = DataFrame(stream_id, flags=["END_STREAM"])
    data.data = ALERT
    return headers.serialize() + data.serialize()


def test_the_server_refuses_a_stream_over_its_limit(simulator):
    """With the limit at 1 (acknowledged), a client that opens a second stream breaks the protocol:
    nghttp2 answers GOAWAY PROTOCOL_ERROR naming stream 1 as the last, and stream 3 is never served."""
    sim = simulator("--max-concurrent-streams", "1", "--latency-ms", "300")
    sock = raw_tls(sim)
    settings = [f for _, f in read_frames(sock, timeout=0.5, until=lambda fs: len(fs) >= 1)]
    assert isinstance(settings[0], SettingsFrame) and settings[0].settings == {3: 1}
    sock.sendall(SettingsFrame(0, flags=["ACK"]).serialize())
    time.sleep(0.1)
    encoder = h2.connection.H2Connection().encoder
    sock.sendall(raw_request(encoder, 1) + raw_request(encoder, 3))
    frames = [f for _, f in read_frames(sock, timeout=1.5)]
    goaways = [f for f in frames if isinstance(f, GoAwayFrame)]
    assert goaways and goaways[0].error_code == 1 and goaways[0].last_stream_id == 1
    assert not [f for f in frames if isinstance(f, HeadersFrame) and f.stream_id == 3]
    sock.close()
    stats = sim.stop()
    assert stats["peakConcurrentStreams"]["1"] == 1


# --------------------------------------------------------------------------------------------------
# Malformed frames


@pytest.mark.parametrize("name,frame,error_code", [
    ("DATA on stream 0", lambda: b"\x00\x00\x01\x00\x00\x00\x00\x00\x00" + b"x", 1),  # PROTOCOL_ERROR
    ("SETTINGS with length 3", lambda: b"\x00\x00\x03\x04\x00\x00\x00\x00\x00" + b"\x00\x01\x00", 6),  # FRAME_SIZE
], ids=["data-on-stream-0", "settings-length-3"])
def test_malformed_frames_get_goaway_while_other_connections_keep_working(simulator, name, frame, error_code):
    sim = simulator()
    bystander = H2Client(sim)
    assert bystander.request()["status"] == 200
    sock = raw_tls(sim)
    sock.sendall(frame())
    goaways = [f for _, f in read_frames(sock) if isinstance(f, GoAwayFrame)]
    assert goaways and goaways[-1].error_code == error_code, name
    sock.close()
    assert bystander.request()["status"] == 200
    assert H2Client(sim).request()["status"] == 200


def test_http1_and_missing_alpn_are_refused(simulator):
    sim = simulator()
    context = ssl.create_default_context(cafile=sim.ca)
    context.set_alpn_protocols(["http/1.1"])
    with pytest.raises((ssl.SSLError, ConnectionError)):
        context.wrap_socket(socket.create_connection(("127.0.0.1", sim.port), timeout=5),
                            server_hostname="localhost")
    assert H2Client(sim).request()["status"] == 200


def test_an_oversized_header_block_resets_only_its_stream(simulator):
    sim = simulator()
    client = H2Client(sim)
    huge = client.send(headers=BASIC + [(f"x-filler-{i}", "v" * 1000) for i in range(20)])
    client.pump(2, until=lambda: "reset" in client.responses[huge])
    assert client.responses[huge].get("reset") == 2  # RST_STREAM INTERNAL_ERROR
    assert client.responses[huge]["status"] is None
    assert client.request()["status"] == 200


def test_stopping_sends_goaway_shutdown_to_open_connections(simulator):
    sim = simulator()
    client = H2Client(sim)
    assert client.request()["status"] == 200
    stats = sim.stop()
    client.pump(3)
    assert client.terminated is not None and client.terminated.error_code == 0
    assert json.loads(client.terminated.additional_data) == {"reason": "Shutdown"}
    assert client.closed
    assert stats["goAwaysSent"] == 1 and stats["connectionsOpen"] == 0


# --------------------------------------------------------------------------------------------------
# Command line


def run_worker(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("args,message", [
    (["--fail-status", "502"], "--fail-status must be 429, 500 or 503"),
    (["--fail-rate", "2"], "--fail-rate needs a number between 0 and 1"),
    (["--latency-ms", "fast"], "--latency-ms takes FIXED"),
    (["--handshake-ms", "-1"], "--handshake-ms"),
    (["--device-limit", "5"], "--device-limit takes N/MS (requests per window in milliseconds, e.g. 5/1000), got '5'"),
    (["--device-limit", "0/100"], "--device-limit takes N/MS"),
    (["--key-id", KEY_ID], "one --public-key-file per --key-id"),
    (["--cert-file", "x.pem"], "both --cert-file and --key-file"),
    (["--prot", "1"], "did you mean --port?"),
])
def test_bad_options_exit_2_saying_what_is_wrong(args, message):
    result = run_worker("simulator", *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_a_bad_config_file_names_the_key(tmp_path):
    path = tmp_path / "sim.json"
    path.write_text('{"faults": {"failRate": 0.1, "latnecy": {"fixedMs": 1}}}')
    result = run_worker("simulator", "--config", str(path))
    assert result.returncode == 2
    assert "faults.latnecy" in result.stderr and "did you mean latency?" in result.stderr


def test_help_shows_the_config_format():
    result = run_worker("simulator", "--help")
    assert result.returncode == 0
    assert "--max-concurrent-streams" in result.stdout and '"goAwayAfterStreams"' in result.stdout


# --------------------------------------------------------------------------------------------------
# Load: a short h2load run (no rate assertion here; see test_simulator_bench.py for the comparison)


def test_h2load_requests_all_succeed(simulator, tmp_path):
    sim = simulator()
    body = tmp_path / "body.json"
    body.write_bytes(b'{"aps":{"alert":{"title":"Hello","body":"' + b"x" * 150 + b'"}},"id":"e1"}')
    result = subprocess.run(
        ["h2load", "-n", "2000", "-c", "2", "-m", "20", "-d", str(body), "-H", "apns-push-type: alert",
         "-H", "apns-topic: com.example.app", f"https://127.0.0.1:{sim.port}/3/device/{TOKEN}"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "2000 succeeded" in result.stdout and "2000 2xx" in result.stdout
    print(next(line for line in result.stdout.splitlines() if line.startswith("finished in")))
    stats = sim.stop()
    assert stats["responses"] == {"200": 2000}
    assert max(stats["peakConcurrentStreams"].values()) <= 20
