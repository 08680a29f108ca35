"""README's "Try it locally", run exactly as printed: its ```sh blocks, in order, with only the binary's
directory put first on PATH (APNS_WORKER_BIN's). A block headed `# terminal N (keeps running; ready when it
prints TEXT)` is started as its own process and waited for until it prints TEXT; any other block runs to
its end, each command line under `bash -e -o pipefail`, and must exit 0. The outcomes and the invalid-token event that kcat
prints must be the example's (one delivered, one rejected Unregistered) and valid by their schemas; the
worker must exit 0 on SIGTERM.
"""
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess

import pytest

from test_schemas import schema_errors
from worker_process_support import Deadline, LineCollector

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")
WORK = "/tmp/apns-dev"
PORTS = [39092, 38443, 39090]
LONG_RUNNING = re.compile(r"^# terminal (\d+) \(keeps running; ready when it prints (.+)\)$")


def walkthrough_blocks():
    """The ```sh blocks of README's "## Try it locally" section, in order."""
    with open(os.path.join(ROOT, "README.md")) as file:
        text = file.read()
    start = text.index("\n## Try it locally\n")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```sh\n(.*?)```", text[start:end], re.S)


def commands_of(block):
    """A block's commands, one per line as a reader types them (a trailing backslash continues a line)."""
    commands, pending = [], ""
    for line in block.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        commands.append(pending + line)
        pending = ""
    assert not pending, f"a block ends inside a continued line: {block}"
    return commands


def environment():
    """PATH with the binary's directory first; no APNS_WORKER_* (the worker reads them as overrides)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("APNS_WORKER_")}
    directory = os.path.dirname(os.path.abspath(BIN)) if os.sep in BIN else None
    if directory:
        assert os.path.basename(BIN) == "apns-worker", f"APNS_WORKER_BIN must name a file called apns-worker: {BIN}"
        env["PATH"] = directory + os.pathsep + env.get("PATH", "")
    return env


def port_in_use(port):
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def clean_work_directory():
    if shutil.which("kcat") is None:
        pytest.fail("kcat is not installed (apt-get install kcat; scripts/setup.sh --test installs it)")
    busy = [port for port in PORTS if port_in_use(port)]
    assert not busy, f"the walkthrough's ports {busy} are taken by another process; free them and run again"
    shutil.rmtree(WORK, ignore_errors=True)
    yield
    shutil.rmtree(WORK, ignore_errors=True)


def test_the_walkthrough_runs_as_printed(clean_work_directory):
    blocks = walkthrough_blocks()
    assert len(blocks) >= 5, f"README's walkthrough has only {len(blocks)} sh blocks"
    env = environment()
    running = {}  # terminal number -> (process, output)
    outputs = []
    try:
        for block in blocks:
            lines = block.strip().splitlines()
            marker = LONG_RUNNING.match(lines[0])
            if marker:
                commands = [line for line in lines[1:] if line.strip() and not line.startswith("#")]
                assert len(commands) == 1, f"a long-running block is one command: {block}"
                process = subprocess.Popen(shlex.split(commands[0]), cwd=ROOT, env=env, text=True,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                output = LineCollector(process, process.stdout)
                running[int(marker.group(1))] = (process, output)
                ready = marker.group(2)
                deadline = Deadline(60)
                with output.changed:
                    while not any(ready in line for line in output.lines):
                        assert not output.closed, f"'{commands[0]}' exited before printing '{ready}':\n" + \
                            "\n".join(output.lines)
                        assert not deadline.passed(), f"'{commands[0]}' did not print '{ready}' in 60 s:\n" + \
                            "\n".join(output.lines[-30:])
                        output.changed.wait(deadline.left())
            else:
                for command in commands_of(block):
                    finished = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=ROOT, env=env,
                                              capture_output=True, text=True, timeout=120)
                    assert finished.returncode == 0, \
                        f"failed ({finished.returncode}):\n{command}\n{finished.stdout}\n{finished.stderr}"
                    outputs.append((command, finished.stdout))

        # What kcat printed: the two outcomes and the invalid-token event, valid by their schemas.
        printed = {}
        for command, out in outputs:
            if command.startswith("kcat -C"):
                printed[command.split(" -t ")[1].split()[0]] = out
            if command.startswith("curl") and "/metrics" in command:
                printed["metrics"] = out
        outcomes = [json.loads(line) for line in printed["push.outcomes"].splitlines() if line.strip()]
        invalid = [json.loads(line) for line in printed["push.invalid-tokens"].splitlines() if line.strip()]
        for outcome in outcomes:
            assert not schema_errors("push-outcome", outcome), (outcome, schema_errors("push-outcome", outcome))
        for event in invalid:
            assert not schema_errors("invalid-token", event), (event, schema_errors("invalid-token", event))
        with open(os.path.join(ROOT, "examples/try-it-event.json")) as file:
            event = json.load(file)
        tokens = [device["token"] for device in event["devices"]]
        by_token = {outcome["device_token"]: outcome for outcome in outcomes}
        assert sorted(by_token) == sorted(tokens), outcomes
        assert by_token[tokens[0]]["status"] == "delivered", by_token[tokens[0]]
        assert (by_token[tokens[1]]["status"], by_token[tokens[1]]["reason"]) == ("rejected", "Unregistered")
        assert [(e["device_token"], e["reason"]) for e in invalid] == [(tokens[1], "Unregistered")]
        assert 'apns_worker_outcomes_total{status="delivered"} 1' in printed["metrics"], printed["metrics"]

        # SIGTERM: the worker drains, commits and exits 0.
        worker, worker_output = running[3]
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=60)
        assert code == 0, "\n".join(worker_output.all_lines()[-30:])
    finally:
        for process, _ in reversed(list(running.values())):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)


def test_generated_key_signs_tokens_that_verify_and_is_never_overwritten(tmp_path):
    import jwt
    key, public = tmp_path / "AuthKey_SIMKEY0001.p8", tmp_path / "sim-key.pub"
    made = subprocess.run([BIN, "credentials", "generate-key", "--key-file", str(key), "--public-key-file", str(public)],
                          capture_output=True, text=True, timeout=30, env=environment())
    assert made.returncode == 0, made.stderr
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert "BEGIN PRIVATE KEY" not in made.stdout + made.stderr, "the key is a secret: never printed"
    token = subprocess.run([BIN, "token", "--key-file", str(key), "--key-id", "SIMKEY0001", "--team-id", "SIMTEAM001"],
                           capture_output=True, text=True, timeout=30, env=environment())
    assert token.returncode == 0, token.stderr
    claims = jwt.decode(token.stdout.strip(), public.read_bytes(), algorithms=["ES256"])
    assert claims["iss"] == "SIMTEAM001"
    before = key.read_bytes()
    again = subprocess.run([BIN, "credentials", "generate-key", "--key-file", str(key),
                            "--public-key-file", str(tmp_path / "other.pub")],
                           capture_output=True, text=True, timeout=30, env=environment())
    assert again.returncode == 1 and "File exists" in again.stderr and str(key) in again.stderr, again.stderr
    assert key.read_bytes() == before


def test_kafka_mock_port_that_is_taken_is_an_error_naming_it():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        result = subprocess.run([BIN, "kafka-mock", "--brokers", "1", "--port", str(port)], capture_output=True,
                                text=True, timeout=30, env=environment())
    assert result.returncode == 1, result
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "choose another --port" in result.stderr, \
        result.stderr
    assert "bootstrap.servers" not in result.stdout
