"""Credentials as users hold them, and one error format, through the release binary.

An encrypted .p8 works under `run` with its password from `key_password_file` or APNS_KEY_PASSWORD
(pushes delivered through the simulator); a .p12's password comes from APNS_CERT_PASSWORD. Every
problem that stops `run` or `run --check` (the config, a credential, the rules, a Kafka property, an
environment override) is one plain line on stderr, `file:line:column: key: what is wrong; what would be
right` (or `environment variable NAME: ...`), never JSON on stdout; `rules check` prints the rules'
problems in the same lines.
"""
import json
import os
import re
import subprocess
import textwrap

import pytest

from worker_process_support import (
    BIN, KEY_ID, RULES, TEAM_ID, Stack, Worker, expected_pairs, make_events, make_token_key,
    worker_environment)

KEY_PASSWORD = "key-secret-42"
P12_PASSWORD = "p12-secret-99"
# A problem line: where (a position, or the variable that set the key), then what.
PROBLEM_LINE = re.compile(r"^(\S+:\d+:\d+|environment variable APNS_[\w-]+): \S")


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def encrypt_key(directory, plain_key):
    encrypted = os.path.join(directory, "encrypted.p8")
    openssl("pkcs8", "-topk8", "-in", plain_key, "-v2", "aes-256-cbc", "-passout", f"pass:{KEY_PASSWORD}",
            "-out", encrypted, cwd=directory)
    password_file = os.path.join(directory, "key.pass")
    with open(password_file, "w") as file:
        file.write(KEY_PASSWORD + "\n")
    return encrypted, password_file


def run(*args, env=None):
    environment = worker_environment()
    environment.update(env or {})
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60, env=environment)


def assert_plain_problems(result, expected_lines, started_logging=False):
    """Exit 1, nothing on stdout, and stderr exactly the problem lines and the closing line.
    `started_logging`: the problem shows only once the worker is being built (librdkafka refuses a
    property), after its first log lines (the consumer, made first, may already try the brokers); none
    of them is about the problem."""
    assert result.returncode == 1, result.stdout + result.stderr
    if started_logging:
        levels = {json.loads(line)["level"] for line in result.stdout.splitlines()}
        assert levels <= {"info", "warning"}, result.stdout
        assert "refuses" not in result.stdout and "invalid Kafka configuration" not in result.stdout
    else:
        assert result.stdout == "", result.stdout
    lines = result.stderr.splitlines()
    count = len(expected_lines)
    assert lines[-1] == f"apns-worker run: {count} problem{'s' if count != 1 else ''}; the worker does not start"
    for line in lines[:-1]:
        assert PROBLEM_LINE.match(line), line
        assert "[redacted" not in line, line
    assert lines[:-1] == expected_lines


class Deployment:
    """worker.yaml in YAML (so positions are predictable), a real key, rules, and brokers nobody answers:
    enough for `run --check` to pass."""

    def __init__(self, directory):
        self.directory = str(directory)
        self.key_file, _ = make_token_key(self.directory)
        self.rules = os.path.join(self.directory, "rules.yaml")
        with open(self.rules, "w") as file:
            file.write(RULES)
        self.path = os.path.join(self.directory, "worker.yaml")

    def text(self, credential=None, kafka_extra="", rules=None):
        credential = credential or (f"{{type: token, key_file: {self.key_file}, key_id: {KEY_ID}, "
                                    f"team_id: {TEAM_ID}}}")
        return textwrap.dedent("""\
            kafka:
              brokers: [127.0.0.1:9]
              group: config-errors
            {kafka_extra}credentials:
              sim-key: {credential}
            apps:
              com.example.chat: {{credential: sim-key}}
            rules:
              file: {rules}
            metrics:
              listen: 127.0.0.1:0
            """).format(kafka_extra=kafka_extra, credential=credential, rules=rules or self.rules)

    def write(self, text):
        with open(self.path, "w") as file:
            file.write(text)
        return text

    def check(self, env=None):
        return run("run", "--config", self.path, "--check", env=env)


def position(text, fragment, key=None):
    """`line:column` of `key` (or of the fragment itself) on the first line holding `fragment`."""
    for number, line in enumerate(text.splitlines(), 1):
        if fragment in line:
            return f"{number}:{line.index(key or fragment) + 1}"
    raise AssertionError(f"{fragment!r} not in the config")


@pytest.fixture
def deployment(tmp_path):
    return Deployment(tmp_path)


# Credentials as users hold them

@pytest.fixture
def make_stack(tmp_path, request):
    stacks = []

    def make(**options):
        stack = Stack(str(tmp_path), f"creds-{request.node.name}", latency_ms="1-5", max_in_flight=100,
                      drain_timeout=5, **options)
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.close()


class WorkerWithEnvironment(Worker):
    """`apns-worker run` with variables added to its environment."""

    def __init__(self, config, directory, name, env):
        self.log_path = os.path.join(directory, f"{name}.log")
        self.err_path = os.path.join(directory, f"{name}.err")
        environment = worker_environment()
        environment.update(env)
        with open(self.log_path, "w") as out, open(self.err_path, "w") as err:
            self.process = subprocess.Popen([BIN, "run", "--config", config], stdout=out, stderr=err,
                                            env=environment)


def deliver_with_encrypted_key(make_stack, tmp_path, *, use_password_file, env):
    encrypted = str(tmp_path / "encrypted.p8")
    credential = {"key_file": encrypted}
    if use_password_file:
        credential["key_password_file"] = str(tmp_path / "key.pass")
    stack = make_stack(overrides={"credentials": {"sim-key": credential}})
    # The stack made its key beside the config; the worker gets it encrypted.
    encrypt_key(str(tmp_path), os.path.join(str(tmp_path), f"AuthKey_{KEY_ID}.p8"))
    worker = WorkerWithEnvironment(stack.config, stack.directory, "worker", env)
    stack.closers.append(worker.close)
    worker.wait_for_log("worker started", 30)
    events = make_events(20, "encrypted")
    pairs = expected_pairs(events)
    stack.produce(events)
    stack.reader.wait_for(lambda: len(stack.reader.per_pair) >= len(pairs), 40, "every outcome")
    statuses = {(o["event_id"], o["device_token"]): o["status"] for o in stack.reader.outcomes}
    assert set(statuses) == pairs
    assert set(statuses.values()) == {"delivered"}, statuses
    log = open(worker.log_path).read() + worker.stderr()
    assert KEY_PASSWORD not in log
    code, _ = worker.terminate(15)
    assert code == 0, worker.tail()
    return len(pairs)


def test_an_encrypted_p8_with_key_password_file_delivers_under_run(make_stack, tmp_path):
    delivered = deliver_with_encrypted_key(make_stack, tmp_path, use_password_file=True, env={})
    print(f"\nencrypted .p8, key_password_file: {delivered} pushes delivered")


def test_an_encrypted_p8_with_apns_key_password_delivers_under_run(make_stack, tmp_path):
    delivered = deliver_with_encrypted_key(
        make_stack, tmp_path, use_password_file=False, env={"APNS_KEY_PASSWORD": KEY_PASSWORD})
    print(f"\nencrypted .p8, APNS_KEY_PASSWORD: {delivered} pushes delivered")


def test_a_wrong_key_password_names_the_key_file_its_config_position_and_the_variable(deployment):
    encrypted, _ = encrypt_key(deployment.directory, deployment.key_file)
    text = deployment.write(deployment.text(
        credential=f"{{type: token, key_file: {encrypted}, key_id: {KEY_ID}, team_id: {TEAM_ID}}}"))
    result = deployment.check(env={"APNS_KEY_PASSWORD": "not-the-secret-77"})
    assert_plain_problems(result, [
        f"{deployment.path}:{position(text, 'sim-key:', 'key_file:')}: credentials.sim-key.key_file: "
        f"'{encrypted}' does not open with the password from the environment variable APNS_KEY_PASSWORD: the "
        "password is wrong; set APNS_KEY_PASSWORD to the password the file was encrypted with"])
    assert "not-the-secret-77" not in result.stderr


def test_an_encrypted_key_without_a_password_says_where_to_give_it(deployment):
    encrypted, _ = encrypt_key(deployment.directory, deployment.key_file)
    text = deployment.write(deployment.text(
        credential=f"{{type: token, key_file: {encrypted}, key_id: {KEY_ID}, team_id: {TEAM_ID}}}"))
    assert_plain_problems(deployment.check(), [
        f"{deployment.path}:{position(text, 'sim-key:', 'key_file:')}: credentials.sim-key.key_file: "
        f"'{encrypted}' is encrypted and no password was given; name a file holding its password with "
        "key_password_file (or set APNS_KEY_PASSWORD), or decrypt the key once with "
        "'openssl pkey -in KEY -out KEY.decrypted'"])


def test_a_p12_password_comes_from_the_environment(deployment):
    directory = deployment.directory
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            "push.key", "-out", "push.pem", "-days", "30", "-subj",
            "/UID=com.example.chat/CN=Apple Push Services: com.example.chat", cwd=directory)
    openssl("pkcs12", "-export", "-in", "push.pem", "-inkey", "push.key", "-passout", f"pass:{P12_PASSWORD}",
            "-out", "push.p12", cwd=directory)
    archive = os.path.join(directory, "push.p12")
    text = deployment.write(deployment.text(credential=f"{{type: certificate, cert_file: {archive}}}"))

    passing = deployment.check(env={"APNS_CERT_PASSWORD": P12_PASSWORD})
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "configuration, rules and credentials are valid" in passing.stdout
    assert P12_PASSWORD not in passing.stdout + passing.stderr

    assert_plain_problems(deployment.check(), [
        f"{deployment.path}:{position(text, 'sim-key:', 'cert_file:')}: credentials.sim-key.cert_file: "
        f"'{archive}' is encrypted and no password was given; name a file holding its password with "
        "password_file (or set APNS_CERT_PASSWORD)"])


# One error format

def test_a_config_typo(deployment):
    text = deployment.write(deployment.text().replace("group:", "gruop:"))
    assert_plain_problems(deployment.check(), [
        f"{deployment.path}:{position(text, 'gruop:')}: kafka.gruop: unknown key 'gruop'; did you mean 'group'?"])


def test_a_file_that_is_no_key_is_reported_whole(deployment):
    notes = os.path.join(deployment.directory, "notes.txt")
    with open(notes, "w") as file:
        file.write("these are notes, not a key\n")
    text = deployment.write(deployment.text(
        credential=f"{{type: token, key_file: {notes}, key_id: {KEY_ID}, team_id: {TEAM_ID}}}"))
    assert_plain_problems(deployment.check(), [
        f"{deployment.path}:{position(text, 'sim-key:', 'key_file:')}: credentials.sim-key.key_file: '{notes}' is "
        "not PEM: no '-----BEGIN PRIVATE KEY-----' line found; check that this is the right file"])


def test_an_inline_secret_is_refused_without_offering_it_as_a_known_key(deployment):
    text = deployment.write(deployment.text(
        credential=f"{{type: token, key_file: {deployment.key_file}, key_id: {KEY_ID}, team_id: {TEAM_ID}, "
                   "password: hunter2, colour: blue}"))
    result = deployment.check()
    assert_plain_problems(result, [
        f"{deployment.path}:{position(text, 'sim-key:', 'colour:')}: credentials.sim-key.colour: unknown key "
        "'colour'; known keys: type, key_file, key_id, team_id, key_password_file",
        f"{deployment.path}:{position(text, 'sim-key:', 'password:')}: credentials.sim-key.password: secrets are "
        "never written inline; put the secret in a file and name it with key_file or key_password_file"])
    assert "hunter2" not in result.stderr


def test_a_rules_syntax_error_reads_the_same_in_rules_check_and_in_run_check(deployment):
    bad_rules = os.path.join(deployment.directory, "bad-rules.yaml")
    with open(bad_rules, "w") as file:
        file.write("version: 1\nrules:\n  - id: a\n    alert: {body: [unclosed\n")
    deployment.write(deployment.text(rules=bad_rules))

    checked = run("rules", "check", "--rules", bad_rules)
    assert checked.returncode == 1 and checked.stdout == ""
    rule_lines = checked.stderr.splitlines()
    assert rule_lines[-1] == f"1 problem in {bad_rules}"
    assert len(rule_lines) == 2 and rule_lines[0].startswith(f"{bad_rules}:"), rule_lines
    assert PROBLEM_LINE.match(rule_lines[0])

    assert_plain_problems(deployment.check(), rule_lines[:1])
    # Without --check the same: the worker never starts.
    assert_plain_problems(run("run", "--config", deployment.path), rule_lines[:1])


def test_a_rules_problem_and_a_credential_problem_are_reported_together(deployment):
    bad_rules = os.path.join(deployment.directory, "bad-rules.yaml")
    with open(bad_rules, "w") as file:
        file.write("version: 1\nrules:\n  - id: a\n    match: {}\n    alert: {body: hi}\n    thred_id: t\n")
    notes = os.path.join(deployment.directory, "notes.txt")
    with open(notes, "w") as file:
        file.write("not a key\n")
    text = deployment.write(deployment.text(
        credential=f"{{type: token, key_file: {notes}, key_id: {KEY_ID}, team_id: {TEAM_ID}}}", rules=bad_rules))
    assert_plain_problems(deployment.check(), [
        f"{bad_rules}:6:5: rule 'a': unknown key 'thred_id' in a rule; did you mean 'thread_id'?",
        f"{deployment.path}:{position(text, 'sim-key:', 'key_file:')}: credentials.sim-key.key_file: '{notes}' is "
        "not PEM: no '-----BEGIN PRIVATE KEY-----' line found; check that this is the right file"])


def test_a_kafka_property_librdkafka_refuses_is_placed_at_its_key(deployment):
    text = deployment.write(deployment.text(kafka_extra="  properties:\n    linger.ms: soon\n"))
    result = deployment.check()
    where = f"{deployment.path}:{position(text, 'linger.ms:')}"
    assert_plain_problems(result, [
        f"{where}: kafka.properties.linger.ms: librdkafka refuses it: Invalid value for configuration "
        "property \"queue.buffering.max.ms\"; see librdkafka's CONFIGURATION.md for the properties and their values"],
        started_logging=True)


def test_an_environment_override_is_named_instead_of_a_position(deployment):
    deployment.write(deployment.text())
    result = deployment.check(env={"APNS_WORKER_KAFKA__PROPERTIES__SASL_PASSWORD": "hunter2",
                                   "APNS_WORKER_APNS__CONNECTIONS": "0"})
    assert_plain_problems(result, [
        "environment variable APNS_WORKER_KAFKA__PROPERTIES__SASL_PASSWORD: kafka.properties.sasl.password: secrets "
        "are never written in the config; put the value in a file and name it under kafka.property_files",
        "environment variable APNS_WORKER_APNS__CONNECTIONS: apns.connections: must be between 1 and 64, found 0"])
    assert "hunter2" not in result.stderr


def test_a_key_file_set_by_an_override_is_blamed_on_the_variable(deployment):
    notes = os.path.join(deployment.directory, "notes.txt")
    with open(notes, "w") as file:
        file.write("not a key\n")
    deployment.write(deployment.text())
    assert_plain_problems(deployment.check(env={"APNS_WORKER_CREDENTIALS__SIM-KEY__KEY_FILE": notes}), [
        f"environment variable APNS_WORKER_CREDENTIALS__SIM-KEY__KEY_FILE: credentials.sim-key.key_file: '{notes}' "
        "is not PEM: no '-----BEGIN PRIVATE KEY-----' line found; check that this is the right file"])
