"""Real processes for the worker's crash and shutdown tests: the mock Kafka cluster, the APNs
simulator and `apns-worker run`, plus a Kafka client (confluent-kafka) to produce events and read
outcomes and committed offsets. Every wait is bounded; every process is stopped by `close()`.
"""
import hashlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

from confluent_kafka import Consumer, Producer, TopicPartition

BIN = os.environ.get("APNS_WORKER_BIN", "apns-worker")
BUNDLE_ID = "com.example.chat"
KEY_ID = "CRASHKEY01"
TEAM_ID = "CRASHTEAM1"
REQUESTS = "push.requests"
OUTCOMES = "push.outcomes"
OTHER_TOPICS = "push.outcomes:4,push.invalid-tokens:2,push.dlq:1,push.retry:2"

RULES = """\
version: 1
defaults:
  app: "{{ event.app }}"
rules:
  - id: all
    match:
      type: [{exists: true}]
    alert:
      body: "{{ event.type }}"
"""


class Deadline:
    """A point in time a wait must not pass."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())

    def passed(self):
        return time.monotonic() >= self.end


class LineCollector:
    """Reads a process's pipe on a thread of its own (so the process never blocks on a full pipe)."""

    def __init__(self, process, stream):
        self.process = process
        self.lines = []
        self.closed = False
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    def wait_for_prefixes(self, wanted, seconds):
        """Waits until a line starting with each prefix in `wanted` was printed; returns {prefix: rest}."""
        deadline = Deadline(seconds)
        with self.changed:
            while True:
                found = {prefix: line[len(prefix):].strip()
                         for line in self.lines for prefix in wanted if line.startswith(prefix)}
                if len(found) == len(wanted):
                    return found
                if self.closed:
                    raise RuntimeError(f"{self.process.args[:2]} exited before printing {wanted}: {self.lines}")
                if deadline.passed():
                    raise TimeoutError(f"{self.process.args[:2]} printed no {wanted} in {seconds} s: {self.lines}")
                self.changed.wait(deadline.left())

    def all_lines(self, seconds=10):
        """Every line, once the pipe closed (the process exited)."""
        self.thread.join(seconds)
        with self.changed:
            return list(self.lines)


def wait_until(condition, seconds, what, worker):
    """Polls `condition` until it returns something true (which is returned); fails at once, with the
    worker's log, if the worker exits meanwhile, and after `seconds` otherwise."""
    deadline = Deadline(seconds)
    while True:
        value = condition()
        if value:
            return value
        if worker.process.poll() is not None:
            raise RuntimeError(f"worker exited ({worker.process.returncode}) waiting for {what}:\n{worker.tail()}")
        if deadline.passed():
            raise TimeoutError(f"{what} not seen in {seconds} s:\n{worker.tail()}")
        time.sleep(0.1)


def stop(process, seconds=10):
    """SIGTERM, then SIGKILL if it lingers; returns the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait(timeout=seconds)


class KafkaMock:
    """`apns-worker kafka-mock` with the worker's four topics, push.requests with `partitions`."""

    def __init__(self, partitions=4):
        self.process = subprocess.Popen(
            [BIN, "kafka-mock", "--brokers", "1", "--topics", f"{REQUESTS}:{partitions},{OTHER_TOPICS}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.output = LineCollector(self.process, self.process.stdout)
        try:
            self.bootstrap = self.output.wait_for_prefixes(["bootstrap.servers="], 20)["bootstrap.servers="]
        except BaseException:
            self.close()
            raise

    def close(self):
        stop(self.process)


class ControlledKafkaMock(KafkaMock):
    """`apns-worker kafka-mock --control-stdin`: the same cluster (same ports, topics and offsets) can
    have its brokers taken down and brought back."""

    def __init__(self, partitions=4, stderr_path=None):
        """`stderr_path`: where its standard error goes (librdkafka's assertions, a crash's backtrace)."""
        self.stderr_path = stderr_path
        with open(stderr_path or os.devnull, "w") as errors:
            self.process = subprocess.Popen(
                [BIN, "kafka-mock", "--brokers", "1", "--topics", f"{REQUESTS}:{partitions},{OTHER_TOPICS}",
                 "--control-stdin"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True)
        self.output = LineCollector(self.process, self.process.stdout)
        self.answers = 0
        try:
            self.bootstrap = self.output.wait_for_prefixes(["bootstrap.servers="], 20)["bootstrap.servers="]
        except BaseException:
            self.close()
            raise

    def command(self, line, seconds=10):
        """Sends a control command and waits for its answer line; returns it."""
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        self.answers += 1
        deadline = Deadline(seconds)
        with self.output.changed:
            while True:
                answers = [entry for entry in self.output.lines if entry.startswith(("brokers ", "error: "))]
                if len(answers) >= self.answers:
                    answer = answers[self.answers - 1]
                    assert answer.startswith("brokers "), answer
                    return answer
                if deadline.passed():
                    raise TimeoutError(f"kafka-mock did not answer '{line}' in {seconds} s: {self.output.lines}")
                self.output.changed.wait(deadline.left())

    def down(self):
        return self.command("down")

    def up(self):
        return self.command("up")

    def failed_assertion(self):
        """The librdkafka assertion the cluster died of (its process exited, and its standard error, when
        kept, names one), or None."""
        if self.process.poll() is None or not self.stderr_path:
            return None
        with open(self.stderr_path, errors="replace") as errors:
            return next((line.strip() for line in errors if "Assertion" in line), None)

    def delay(self, milliseconds):
        """Every broker answers each request `milliseconds` late (0: at once): connections stay up, requests
        are applied, answers wait, as behind a path that went dark."""
        return self.command(f"delay {milliseconds}")

    def kill(self):
        self.process.kill()
        return self.process.wait(timeout=10)


def http_get(url, seconds=5):
    """(status, body text) of a GET on loopback; an HTTP error status is returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=seconds) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def metric_value(metrics_text, name):
    """The value of an unlabelled series in Prometheus text, or None."""
    for line in metrics_text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def metric_series(metrics_text, name):
    """{labels text: value} of every series of `name` in Prometheus text, e.g. {'pool="a",state="open"': 1.0}."""
    series = {}
    for line in metrics_text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name) + 1:].rsplit("} ", 1)
            series[labels] = float(value.split()[0])
    return series


class Simulator:
    """`apns-worker simulator` trusting provider tokens of one key, answering after `latency_ms`
    (its --latency-ms syntax)."""

    def __init__(self, directory, public_key_file, latency_ms, script=(), port=0, options=(), devices=None,
                 faults=None):
        """`script`: the simulator's scripted faults, e.g. [{"request": 900, "action": "delay", "ms": 8000}];
        `faults`: more of its `faults`, e.g. {"streamLimitAfterRefusedToken": 1}.
        `port`: 0 for a free one; `options`: more of its command line, e.g. ["--go-away-after", "50"];
        `devices`: its device states, e.g. {"unregistered": ["<hex>"]}."""
        config = os.path.join(directory, "simulator.json")
        with open(config, "w") as file:
            json.dump({"faults": {"script": list(script), **(faults or {})},
                       **({"devices": devices} if devices else {})}, file)
        self.process = subprocess.Popen(
            [BIN, "simulator", "--config", config, "--port", str(port), "--environment", "production",
             "--key-id", KEY_ID, "--public-key-file", public_key_file, "--latency-ms", latency_ms,
             "--ca-out", os.path.join(directory, "simulator-ca.pem"), *options],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.output = LineCollector(self.process, self.process.stdout)
        try:
            found = self.output.wait_for_prefixes(["listening on ", "ca-file: "], 20)
        except BaseException:
            self.close()
            raise
        self.url = found["listening on "].rstrip("/")
        self.ca_file = found["ca-file: "]

    def close(self):
        """Stops the simulator (again is harmless); returns its `stats:` JSON, or None."""
        stop(self.process)
        for line in self.output.all_lines():
            if line.startswith("stats: "):
                return json.loads(line[len("stats: "):])
        return None


def make_token_key(directory):
    """A P-256 .p8 key and its public key (PEM), made with the openssl CLI."""
    key = os.path.join(directory, f"AuthKey_{KEY_ID}.p8")
    public = os.path.join(directory, "key.pub")
    generated = subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout"],
                               capture_output=True, check=True, timeout=20).stdout
    subprocess.run(["openssl", "pkcs8", "-topk8", "-nocrypt", "-out", key], input=generated,
                   capture_output=True, check=True, timeout=20)
    subprocess.run(["openssl", "ec", "-in", key, "-pubout", "-out", public], capture_output=True, check=True,
                   timeout=20)
    return key, public


def merged(base, overrides):
    """`base` with `overrides` laid over it, key by key into nested objects."""
    result = dict(base)
    for key, value in overrides.items():
        nested = isinstance(value, dict) and isinstance(base.get(key), dict)
        result[key] = merged(base[key], value) if nested else value
    return result


def write_worker_config(directory, *, bootstrap, group, simulator, key_file, max_in_flight, drain_timeout,
                        rules_text=RULES, overrides=None):
    """worker.yaml (and rules.yaml) for the mock cluster and the simulator; returns its path.
    `overrides`: settings laid over the defaults here, e.g. {"retry": {"max_attempts": 2}}."""
    rules = os.path.join(directory, "rules.yaml")
    with open(rules, "w") as file:
        file.write(rules_text)
    properties = {
        # A restarted worker takes over a SIGKILLed member's partitions within seconds, not librdkafka's 45 s.
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        # Stored offsets are committed every 100 ms instead of every 5 s, so that what a crash leaves
        # uncommitted is the work in progress rather than seconds of finished work.
        "auto.commit.interval.ms": 100,
    }
    config = {
        "kafka": {"brokers": bootstrap.split(","), "group": group, "properties": properties},
        "credentials": {"sim-key": {"type": "token", "key_file": key_file, "key_id": KEY_ID, "team_id": TEAM_ID}},
        "apps": {BUNDLE_ID: {"credential": "sim-key"}},
        "apns": {"endpoints": {"production": simulator.url, "sandbox": simulator.url},
                 "ca_file": simulator.ca_file, "connections": 1},
        "pipeline": {"max_in_flight_records": max_in_flight},
        "shutdown": {"drain_timeout": drain_timeout},
        "rules": {"file": rules},
        "metrics": {"listen": "127.0.0.1:0"},
        "log": {"level": "info"},
    }
    config = merged(config, overrides or {})
    path = os.path.join(directory, "worker.yaml")
    with open(path, "w") as file:
        json.dump(config, file, indent=2)  # JSON is YAML; it keeps the file free of quoting surprises
    return path


def device_token(event_id, index):
    return hashlib.sha256(f"{event_id}/{index}".encode()).hexdigest()


def make_events(count, prefix):
    """`count` events for the configured app, 1 or 2 production devices each (alternating)."""
    events = []
    for number in range(count):
        event_id = f"{prefix}-{number:06d}"
        devices = [{"token": device_token(event_id, index), "environment": "production"}
                   for index in range(1 + number % 2)]
        events.append({"id": event_id, "type": "chat.message", "app": BUNDLE_ID,
                       "recipient": {"user_id": f"u{number % 97}"}, "devices": devices,
                       "data": {"text": f"message {number}"}})
    return events


def expected_pairs(events):
    return {(event["id"], device["token"]) for event in events for device in event["devices"]}


def produce(bootstrap, events, seconds=30):
    """Produces the events to push.requests (keyed by user id); returns {event id: (partition, offset)}."""
    placed = {}
    failures = []

    def delivered(error, message):
        if error is not None:
            failures.append(error)
        else:
            placed[json.loads(message.value())["id"]] = (message.partition(), message.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for event in events:
        while True:
            try:
                producer.produce(REQUESTS, key=event["recipient"]["user_id"], value=json.dumps(event),
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(seconds)
    assert left == 0 and not failures, f"{left} events not produced; errors: {failures[:3]}"
    return placed


class OutcomeReader:
    """Reads push.outcomes from the beginning, without a group commit, counting outcomes per pair."""

    def __init__(self, bootstrap):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pytest-outcome-reader",
                                  "enable.auto.commit": False, "enable.partition.eof": False})
        metadata = self.consumer.list_topics(OUTCOMES, timeout=10)
        partitions = metadata.topics[OUTCOMES].partitions
        self.consumer.assign([TopicPartition(OUTCOMES, p, 0) for p in partitions])  # 0 = from the start
        self.per_pair = Counter()
        self.outcomes = []

    def poll(self, seconds=0.2):
        """Reads what has arrived (up to `seconds` of waiting); returns how many outcomes were new."""
        new = 0
        deadline = Deadline(seconds)
        while True:
            messages = self.consumer.consume(num_messages=1000, timeout=max(0.01, deadline.left()))
            for message in messages:
                assert message.error() is None, message.error()
                outcome = json.loads(message.value())
                self.outcomes.append(outcome)
                self.per_pair[(outcome["event_id"], outcome.get("device_token") or outcome.get("channel_id"))] += 1
                new += 1
            if not messages or deadline.passed():
                return new

    def poll_until_quiet(self, quiet=1.0, seconds=15):
        """Reads until nothing new arrived for `quiet` seconds (what a stopped worker sent has landed)."""
        deadline = Deadline(seconds)
        while self.poll(quiet) > 0:
            if deadline.passed():
                raise TimeoutError(f"outcomes still arriving after {seconds} s")

    def wait_for(self, condition, seconds, what):
        deadline = Deadline(seconds)
        while not condition():
            if deadline.passed():
                raise TimeoutError(f"{what} not reached in {seconds} s ({len(self.per_pair)} pairs, "
                                   f"{len(self.outcomes)} outcomes)")
            self.poll(min(0.2, deadline.left()))

    def close(self):
        self.consumer.close()


class GroupOffsets:
    """The worker group's committed offsets of push.requests, and where its partitions end. Asks the
    group coordinator without joining the group."""

    def __init__(self, bootstrap, group):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        partitions = self.consumer.list_topics(REQUESTS, timeout=10).topics[REQUESTS].partitions
        self.partitions = [TopicPartition(REQUESTS, p) for p in sorted(partitions)]

    def committed(self):
        """{partition: next offset to read}; -1001 where the group committed nothing."""
        return {tp.partition: tp.offset for tp in self.consumer.committed(self.partitions, timeout=10)}

    def starts(self):
        """{partition: low watermark}: above 0 where the mock cluster dropped its oldest records (it keeps only
        a few MB per partition), which no worker could then read."""
        return {tp.partition: self.consumer.get_watermark_offsets(tp, timeout=10)[0] for tp in self.partitions}

    def ends(self):
        """{partition: high watermark}."""
        return {tp.partition: self.consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in self.partitions}

    def close(self):
        self.consumer.close()


def allow_core_dumps():
    """In a child before exec: lets it dump core (where the kernel's core_pattern says; `core` in its
    working directory on a stock Debian)."""
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def worker_environment():
    """This environment without APNS_WORKER_* variables: the worker reads every one of them as a
    configuration override, and refuses APNS_WORKER_BIN (set for these tests) as an unknown key 'bin'."""
    return {name: value for name, value in os.environ.items() if not name.startswith("APNS_WORKER_")}


class Worker:
    """`apns-worker run --config FILE`, its JSON log lines collected from a file. With `core_dumps`, it runs
    in a directory of its own with core dumps allowed, so that `crash_frames` can say where a crash was."""

    def __init__(self, config, directory, name, core_dumps=False):
        self.log_path = os.path.join(directory, f"{name}.log")
        self.err_path = os.path.join(directory, f"{name}.err")
        self.run_directory = None
        options = {}
        if core_dumps:
            self.run_directory = os.path.join(directory, f"{name}.run")
            os.makedirs(self.run_directory, exist_ok=True)
            options = {"cwd": self.run_directory, "preexec_fn": allow_core_dumps}
        with open(self.log_path, "w") as out, open(self.err_path, "w") as err:
            self.process = subprocess.Popen([BIN, "run", "--config", config], stdout=out, stderr=err,
                                            env=worker_environment(), **options)

    def crash_frames(self, count=6):
        """The innermost `count` frames of the thread that crashed, read from the core dump with gdb (the
        worker must have been started with `core_dumps`); None when there is no core or no gdb. The core is
        removed once read: it is the size of the process."""
        crash = self.crash()
        return None if crash is None else crash["frames"][:count]

    def crash(self):
        """What the core dump says of the crash (see `crash_frames`): {"frames": every frame of the thread
        that crashed, innermost first; "fault_address": the address it faulted on, or None; "instruction":
        the faulting instruction as gdb disassembles it}. None when there is no core or no gdb."""
        if self.run_directory is None:
            return None
        cores = [os.path.join(self.run_directory, name) for name in os.listdir(self.run_directory)
                 if name == "core" or name.startswith("core.")]
        if not cores or shutil.which("gdb") is None:
            return None
        try:
            result = subprocess.run(["gdb", "-batch", "-ex", "echo @fault\\n", "-ex",
                                     "p $_siginfo._sifields._sigfault.si_addr", "-ex", "echo @instruction\\n",
                                     "-ex", "x/i $pc", "-ex", "echo @frames\\n", "-ex", "bt 64", BIN, cores[0]],
                                    capture_output=True, text=True, timeout=300)
            sections = {}
            current = None
            for line in result.stdout.splitlines():
                if line.startswith("@"):
                    current = line[1:]
                    sections[current] = []
                elif current is not None:
                    sections[current].append(line)
            fault = next((line.split()[-1] for line in sections.get("fault", []) if line.startswith("$")), None)
            instruction = next((line.split(":", 1)[1].strip() for line in sections.get("instruction", [])
                                if line.startswith("=>")), "")
            return {"frames": [line for line in sections.get("frames", []) if line.startswith("#")],
                    "fault_address": int(fault, 16) if fault and fault.startswith("0x") else None,
                    "instruction": instruction}
        finally:
            for core in cores:
                os.remove(core)

    def log(self):
        """The JSON lines written so far (a line still being written is left for later)."""
        with open(self.log_path) as file:
            return [json.loads(line) for line in file if line.endswith("\n") and line.strip()]

    def stderr(self):
        with open(self.err_path) as file:
            return file.read()

    def find(self, message):
        return [line for line in self.log() if line.get("message") == message]

    def wait_for_log(self, message, seconds):
        deadline = Deadline(seconds)
        while not self.find(message):
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited ({self.process.returncode}) before logging '{message}':\n"
                                   f"{self.stderr()}\n{self.tail()}")
            if deadline.passed():
                raise TimeoutError(f"worker logged no '{message}' in {seconds} s:\n{self.tail()}")
            time.sleep(0.05)
        return self.find(message)[0]

    def metrics_url(self, seconds=20):
        """The base URL of its /metrics, /healthz and /readyz, once it has logged it."""
        return self.wait_for_log("serving /metrics, /healthz and /readyz", seconds)["fields"]["url"]

    def find_prefix(self, prefix):
        return [line for line in self.log() if line.get("message", "").startswith(prefix)]

    def tail(self, count=15):
        with open(self.log_path) as file:
            return "".join(file.readlines()[-count:])

    def kill(self):
        self.process.kill()
        return self.process.wait(timeout=10)

    def terminate(self, seconds):
        """SIGTERM; returns (exit code, seconds it took to exit)."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=seconds)
        return code, time.monotonic() - started

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


class Stack:
    """One test's processes: the mock cluster, the simulator, an outcome reader, a worker.yaml, and the
    workers started from it. `close()` stops them all, the workers first."""

    def __init__(self, directory, group, *, latency_ms, max_in_flight, drain_timeout, script=(), partitions=4,
                 cluster_class=None, simulator_options=(), overrides=None):
        self.directory = directory
        self.closers = []
        try:
            self.cluster = (cluster_class or KafkaMock)(partitions)
            self.closers.append(self.cluster.close)
            key_file, public_key_file = make_token_key(directory)
            self.simulator = Simulator(directory, public_key_file, latency_ms, script, options=simulator_options)
            self.closers.append(self.simulator.close)
            self.reader = OutcomeReader(self.cluster.bootstrap)
            self.closers.append(self.reader.close)
            self.offsets = GroupOffsets(self.cluster.bootstrap, group)
            self.closers.append(self.offsets.close)
            self.config = write_worker_config(
                directory, bootstrap=self.cluster.bootstrap, group=group, simulator=self.simulator,
                key_file=key_file, max_in_flight=max_in_flight, drain_timeout=f"{drain_timeout}s", overrides=overrides)
        except BaseException:
            self.close()
            raise

    def start_worker(self, name):
        worker = Worker(self.config, self.directory, name)
        self.closers.append(worker.close)
        worker.wait_for_log("worker started", 20)
        return worker

    def produce(self, events):
        return produce(self.cluster.bootstrap, events)

    def committed(self):
        return self.offsets.committed()

    def wait_until_all_committed(self, pairs, seconds=40):
        """Every pair has an outcome and the group's committed offsets reached the end of push.requests."""
        ends = self.offsets.ends()
        self.reader.wait_for(lambda: len(self.reader.per_pair) >= len(pairs) and self.committed() == ends,
                             seconds, "every outcome and every offset committed")
        return ends

    def close(self):
        close_all(self.closers)


def count(reader, pairs, label):
    """Pairs sent / delivered / failed / expired / lost / duplicated (by each pair's outcomes); prints them."""
    statuses = {}
    for outcome in reader.outcomes:
        statuses.setdefault((outcome["event_id"], outcome["device_token"]), set()).add(outcome["status"])
    counts = {
        "sent": len(pairs),
        "delivered": sum(1 for pair in pairs if "delivered" in statuses.get(pair, ())),
        "failed": sum(1 for pair in pairs if "failed" in statuses.get(pair, ())),
        "expired": sum(1 for pair in pairs if "expired" in statuses.get(pair, ())),
        "lost": sum(1 for pair in pairs if pair not in statuses),
        "duplicated": sum(1 for pair in pairs if reader.per_pair[pair] > 1),
        "other": Counter(status for pair in pairs for status in statuses.get(pair, ())
                         if status not in ("delivered", "failed", "expired")),
    }
    assert set(statuses) <= pairs, "outcomes for pairs never sent"
    print(f"\n{label}: " + ", ".join(f"{name} {value}" for name, value in counts.items()))
    return counts


def free_port():
    """A loopback port nothing listens on (a simulator is started on it later, or never)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def make_server_certificate(directory):
    """A self-signed certificate for localhost and 127.0.0.1, so that successive simulators on one port
    present the same certificate the worker trusts."""
    cert, key = os.path.join(directory, "server-cert.pem"), os.path.join(directory, "server-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   capture_output=True, check=True, timeout=20)
    return cert, key


def close_all(closers):
    """Runs each closer, the last added first, all of them even when one fails; empties the list and then
    raises the first failure."""
    problems = []
    for close in reversed(closers):
        try:
            close()
        except Exception as problem:  # stop the rest all the same
            problems.append(problem)
    closers.clear()
    if problems:
        raise problems[0]
