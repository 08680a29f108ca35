"""Apple's rules through the real binary: `apns-worker send` against `apns-worker simulator` (priority 1,
Safari website pushes, Live Activity rules), and `apns-worker run --check` comparing each app's topics
with its certificate's topics extension (certificates generated here with Apple's push extensions).
"""
import json
import os
import re
import signal
import subprocess
import textwrap

import pytest

from push_certificates import openssl, write_extension_config

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")
TOKEN = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"


class Simulator:
    def __init__(self, *args):
        self.process = subprocess.Popen([BIN, "simulator", "--port", "0", *args], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.url = self.ca_file = None
        while not (self.url and self.ca_file):
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the simulator did not start: " + self.process.stderr.read())
            if match := re.search(r"listening on (https://\S+)", line):
                self.url = match.group(1)
            if match := re.search(r"ca-file: (\S+)", line):
                self.ca_file = match.group(1)

    def stop(self):
        """SIGTERM, then the `stats: {...}` line it prints on the way out."""
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=20)
        line = next(line for line in out.splitlines() if line.startswith("stats: "))
        return json.loads(line[len("stats: "):])


@pytest.fixture(scope="module")
def simulator():
    sim = Simulator()
    yield sim
    if sim.process.poll() is None:
        sim.stop()


@pytest.fixture(scope="module")
def signing_key(tmp_path_factory):
    path = tmp_path_factory.mktemp("key") / "AuthKey_KEY1234567.p8"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path],
                   check=True, capture_output=True)
    return path


def send(simulator, signing_key, *args):
    return subprocess.run([BIN, "send", "--endpoint", simulator.url, "--ca-file", simulator.ca_file,
                           "--key-file", str(signing_key), "--key-id", "KEY1234567", "--team-id", "TEAM123456",
                           "--environment", "sandbox", "--device-token", TOKEN, *args],
                          capture_output=True, text=True, timeout=60)


def delivered(result):
    assert result.returncode == 0, result.stdout + result.stderr
    printed = json.loads(result.stdout)
    assert printed["status"] == "delivered" and printed["http_status"] == 200, printed
    return printed


def test_priority_1_is_delivered_for_alerts_and_widgets(simulator, signing_key):
    delivered(send(simulator, signing_key, "--topic", "com.example.app", "--priority", "1"))
    delivered(send(simulator, signing_key, "--topic", "com.example.app", "--push-type", "widgets", "--priority", "1",
                   "--payload", '{"aps":{"content-changed":true}}'))


def test_priority_1_is_refused_for_a_live_activity_before_sending(simulator, signing_key):
    result = send(simulator, signing_key, "--topic", "com.example.app", "--push-type", "liveactivity",
                  "--priority", "1", "--payload", '{"aps":{"timestamp":1,"event":"update","content-state":{}}}')
    assert result.returncode == 1
    assert "apns-priority: priority 1 is not allowed for liveactivity pushes; use 10 or 5" in result.stderr


def test_a_safari_website_push_is_delivered(simulator, signing_key):
    payload = json.dumps({"aps": {"alert": {"title": "Flight A998 Now Boarding", "body": "Boarding has begun.",
                                            "action": "View"}, "url-args": ["boarding", "A998"]}})
    delivered(send(simulator, signing_key, "--topic", "web.com.example.site", "--payload", payload))


def test_a_website_push_without_url_args_is_refused_with_the_reason(simulator, signing_key):
    result = send(simulator, signing_key, "--topic", "web.com.example.site",
                  "--payload", '{"aps":{"alert":{"title":"T","body":"B"}}}')
    assert result.returncode == 1
    assert "payload.aps.url-args: Safari website pushes need \"url-args\"" in result.stderr


def test_a_live_activity_update_without_content_state_is_refused_with_the_reason(simulator, signing_key):
    result = send(simulator, signing_key, "--topic", "com.example.app", "--push-type", "liveactivity",
                  "--payload", '{"aps":{"timestamp":1,"event":"update"}}')
    assert result.returncode == 1
    assert ("payload.aps.content-state: a Live Activity update needs \"content-state\", the activity's new "
            "ContentState") in result.stderr


def test_a_live_activity_relevance_score_of_50_is_delivered(simulator, signing_key):
    payload = '{"aps":{"timestamp":1,"event":"update","relevance-score":50,"content-state":{"eta":3}}}'
    delivered(send(simulator, signing_key, "--topic", "com.example.app", "--push-type", "liveactivity",
                   "--payload", payload))


def test_a_refused_push_never_reaches_the_server(signing_key):
    sim = Simulator()
    try:
        delivered(send(sim, signing_key, "--topic", "com.example.app", "--priority", "1"))
        send(sim, signing_key, "--topic", "com.example.app", "--push-type", "liveactivity",
             "--payload", '{"aps":{"timestamp":1,"event":"update"}}')
    finally:
        stats = sim.stop()
    assert sum(stats["responses"].values()) == 1, stats


# run --check and certificate topics

def push_certificate(directory, topics):
    """A .p12 whose leaf carries Apple's sandbox marker and topics extension (1.2.840.113635.100.6.3.6)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_extension_config(directory / "ext.cnf", topics)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "root.key", "-out", "root.pem", "-days", "10", "-subj", "/CN=Root",
            "-config", "ext.cnf", "-extensions", "ca", cwd=directory)
    openssl("req", "-new", *ec, "-keyout", "leaf.key", "-out", "leaf.csr",
            "-subj", f"/UID={topics[0]}/CN=Apple Development IOS Push Services: {topics[0]}", cwd=directory)
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "root.pem", "-CAkey", "root.key", "-set_serial", "3",
            "-days", "10", "-extfile", "ext.cnf", "-extensions", "push", "-out", "leaf.pem", cwd=directory)
    openssl("pkcs12", "-export", "-in", "leaf.pem", "-inkey", "leaf.key", "-certfile", "root.pem",
            "-passout", "pass:p12-secret-99", "-out", "push.p12", cwd=directory)
    (directory / "p12.pass").write_text("p12-secret-99\n")
    return directory / "push.p12", directory / "p12.pass"


RULES = textwrap.dedent("""\
    version: 1
    rules:
      - id: call
        match: {type: call}
        app: com.example.app
        push_type: voip
        custom: {call: "{{ event.id }}"}
      - id: chat
        match: {}
        alert: "{{ event.data.text }}"
    """)


def check(tmp_path, topics):
    certificate, password = push_certificate(tmp_path / "pki", topics)
    (tmp_path / "rules.yaml").write_text(RULES)
    text = textwrap.dedent(f"""\
        kafka:
          brokers: [127.0.0.1:9]
        credentials:
          push-cert:
            type: certificate
            cert_file: {certificate}
            password_file: {password}
        apps:
          com.example.app:
            credential: push-cert
        rules:
          file: {tmp_path / "rules.yaml"}
        metrics:
          listen: 127.0.0.1:0
        """)
    config = tmp_path / "worker.yaml"
    config.write_text(text)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("APNS_WORKER_")}
    result = subprocess.run([BIN, "run", "--config", str(config), "--check"], capture_output=True, text=True,
                            timeout=60, env=environment)
    return result, config, text


def test_check_passes_when_the_certificate_lists_every_topic_the_rules_need(tmp_path):
    result, _, _ = check(tmp_path, ["com.example.app", "com.example.app.voip"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "configuration, rules and credentials are valid" in result.stdout + result.stderr


def test_check_fails_naming_the_missing_topic_and_the_certificates_topics(tmp_path):
    result, config, text = check(tmp_path, ["com.example.app"])
    assert result.returncode == 1, result.stdout + result.stderr
    # A problem found by --check reads like every other configuration problem: plain, on stderr.
    output = result.stderr
    line = next(number for number, row in enumerate(text.splitlines(), 1) if "credential: push-cert" in row)
    assert (f"{config}:{line}:5: apps.com.example.app.credential: credential 'push-cert' is a certificate for the "
            "topics com.example.app; app com.example.app needs com.example.app.voip (for its alert, voip pushes)"
            ) in output
    assert "TopicDisallowed" in output
    assert "configuration, rules and credentials are valid" not in output


def test_check_fails_for_a_certificate_of_another_app(tmp_path):
    result, _, _ = check(tmp_path, ["com.example.other", "com.example.other.voip"])
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "is a certificate for the topics com.example.other, com.example.other.voip" in output
    assert "needs com.example.app, com.example.app.voip" in output
