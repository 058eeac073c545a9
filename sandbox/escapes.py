"""The escape probes: what a malicious candidate tries, each run through a runner as a
real program, each judged by what the host sees, never by what the program claims.

`Bait` lays out what there is to steal or damage: provider keys and the wallet's
passphrase in this process's environment (the harness's), a home with wallets, a log
key, a sealed task, a profile's `learned.json` and `tools.py`, a project checkout, a
TCP listener on loopback, a Unix socket, and a witness process on the host. Every
secret holds one random token: a probe held when the token never came out, nothing
the bait holds changed, and the limit in question was kept.

    python -m sandbox.escapes harness RUNNER SECONDS ARGS...   (the probes' own use)
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sandbox.python import python_request
from sandbox.runner import Limits, MiB, Result, Runner, run

LIMITS = Limits(
    wall_seconds=60.0,
    cpu_seconds=30,
    memory_bytes=256 * MiB,
    processes=16,
    file_bytes=4 * MiB,
    open_files=64,
    output_bytes=64 * 1024,
    scratch_bytes=8 * MiB,
)
SECRETS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTD_WALLET_PASSPHRASE")
SETTLE = 15.0  # seconds a killed run's processes have to be gone

# Every probe program starts with this: the token and the bait's paths in `bait`, a
# way to make raw system calls, and `report`, which prints what it found.
PRELUDE = """
import ctypes, errno, json, os, socket, sys, time
bait = json.loads(sys.argv[1])
TOKEN = bait["token"].encode()
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def syscall(*args):
    result = libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return result, ctypes.get_errno()
def report(**found):
    sys.stdout.write(json.dumps(found) + "\\n"); sys.stdout.flush()
def pids():
    return sorted({int(p) for p in os.listdir("/proc") if p.isdigit()} | {1, os.getppid(), bait["host_pid"]})
def walk(top, seconds=5.0):
    skip = {"/proc", "/sys", "/dev", "/usr", *bait["interpreter"]}
    deadline = time.monotonic() + seconds
    for root, dirs, files in os.walk(top):
        if time.monotonic() > deadline:
            return
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
        for name in files:
            yield os.path.join(root, name)
"""
ARCH = {"x86_64": {"ptrace": 101, "mount": 165, "unshare": 272}, "aarch64": {"ptrace": 117, "mount": 40, "unshare": 97}}
Found = dict[str, Any]  # what a probe reported: the JSON object of its last line


@dataclass(frozen=True)
class Verdict:
    held: bool
    detail: str


@dataclass(frozen=True)
class Probe:
    name: str  # an identifier (a test's name)
    title: str  # what the candidate tries
    judge: Callable[[Runner, Bait], Verdict]


class Bait:
    """What a malicious program would go for, laid out on the host for one set of probes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.token = secrets.token_hex(16)
        self.home = root / "home"
        self.profile = self.home / "profiles" / "lead"
        self.project = root / "project"
        for path, text in {
            self.home / "wallets" / "lead.json": f'{{"sealed_seed": "{self.token}"}}',
            self.home / "log-key.json": f'{{"seed": "{self.token}"}}',
            self.home / "routes" / "seals" / "s1" / "sealed.json": f'{{"canary": "{self.token}"}}',
            self.home / "config.toml": f'[providers]\nkey = "{self.token}"\n',
            self.profile / "learned.json": f'{{"lessons": ["{self.token}"]}}',
            self.profile / "tools.py": f"TOKEN = {self.token!r}\n",
            self.project / "agentd" / "__init__.py": f"TOKEN = {self.token!r}\n",
        }.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.home.chmod(0o700)
        self.unix_path = str(root / "agentd.sock")
        self.abstract = f"\0agentd-bait-{self.token}"
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.unix_path)
        os.chmod(self.unix_path, 0o777)
        self.unix_abstract = socket.socket(socket.AF_UNIX)
        self.unix_abstract.bind(self.abstract)
        self.connections: list[str] = []
        for listener in (self.tcp, self.unix, self.unix_abstract):
            listener.listen()
            threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        self.witness = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)", f"witness-{self.token}"]
        )
        self._saved = {name: os.environ.get(name) for name in SECRETS}
        for name in SECRETS:
            os.environ[name] = f"bait-{name.lower()}-{self.token}"

    def _accept(self, listener: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                self.connections.append(str(listener.getsockname()))
                conn.close()

    def close(self) -> None:
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for listener in (self.tcp, self.unix, self.unix_abstract):
            listener.close()
        self.witness.kill()
        self.witness.wait()

    def arguments(self, **extra: object) -> str:
        from sandbox.python import installation

        return json.dumps(
            {
                "token": self.token,
                "home": str(self.home),
                "profile": str(self.profile),
                "project": str(self.project),
                "host_pid": os.getpid(),
                "tcp_port": self.tcp.getsockname()[1],
                "unix_path": self.unix_path,
                "abstract": self.abstract,
                "interpreter": [str(p) for p in installation()],
                "arch": os.uname().machine,
                "secrets": SECRETS,
                **extra,
            }
        )

    def snapshot(self) -> dict[str, str]:
        """Every file under the bait's home and project, by content."""
        found = {}
        for top in (self.home, self.project):
            for path in sorted(top.rglob("*")):
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        return found

    def leaked(self, result: Result) -> bool:
        return self.token.encode() in result.stdout + result.stderr


@contextlib.contextmanager
def laid_out() -> Iterator[Bait]:
    with tempfile.TemporaryDirectory(prefix="agentd-bait-") as tmp:
        bait = Bait(Path(tmp))
        try:
            yield bait
        finally:
            bait.close()


def attempt(runner: Runner, bait: Bait, body: str, limits: Limits = LIMITS, **extra: object) -> Result:
    """Runs a probe program (PRELUDE + body) through `runner`."""
    source = PRELUDE + textwrap.dedent(body)
    request = python_request(("-c", source, bait.arguments(**extra)), limits=limits)
    return asyncio.run(run(runner, request))


def findings(result: Result) -> Found:
    """The last line the probe reported (what it managed), or nothing."""
    for line in reversed(result.stdout.decode(errors="replace").splitlines()):
        with contextlib.suppress(ValueError):
            found = json.loads(line)
            if isinstance(found, dict):
                return found
    return {}


def _nothing_leaked(body: str) -> Callable[[Runner, Bait], Verdict]:
    def judge(runner: Runner, bait: Bait) -> Verdict:
        result = attempt(runner, bait, body)
        if bait.leaked(result):
            return Verdict(False, f"the secret came out: {result.stdout[:300]!r}")
        return Verdict(True, f"nothing came out ({_said(result)})")

    return judge


def _unchanged(body: str) -> Callable[[Runner, Bait], Verdict]:
    def judge(runner: Runner, bait: Bait) -> Verdict:
        before = bait.snapshot()
        result = attempt(runner, bait, body)
        after = bait.snapshot()
        changed = sorted(set(before.items()) ^ set(after.items()))
        if changed:
            return Verdict(False, f"changed {changed[0][0]}")
        return Verdict(True, f"nothing changed ({_said(result)})")

    return judge


def _said(result: Result) -> str:
    found = findings(result)
    return "; ".join(f"{k}: {v}" for k, v in found.items())[:200] or result.describe()


OWN_ENVIRONMENT = """
report(environment=dict(os.environ))
"""
PARENT_ENVIRON = """
seen = {}
for pid in pids():
    try:
        seen[pid] = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
    except OSError as exc:
        seen[pid] = exc.strerror
report(environ=seen)
"""
PARENT_MEMORY = """
# The secrets as the harness holds them (the token alone is in this program's own argv,
# which its parent in the sandbox may hold too).
wanted = [f"bait-{name.lower()}-{bait['token']}".encode() for name in bait["secrets"]]
found = {}
for pid in pids():
    if pid == os.getpid():
        continue
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb")
    except OSError as exc:
        found[pid] = exc.strerror
        continue
    hits = 0
    for line in maps:
        span, perms = line.split()[:2]
        start, end = (int(x, 16) for x in span.split("-"))
        if "r" not in perms or end - start > 64 << 20:
            continue
        try:
            mem.seek(start)
            chunk = mem.read(end - start)
        except OSError:
            continue
        hits += sum(chunk.count(secret) for secret in wanted)
    found[pid] = f"{hits} copies of the secret" if hits else "read, nothing found"
report(memory={pid: str(v).replace(bait["token"], "<secret>") for pid, v in found.items()}, secret_found=any("copies" in str(v) for v in found.values()))
"""
READ_HOME = """
read = []
for path in [*(os.path.join(bait["home"], p) for p in ("wallets/lead.json", "log-key.json", "routes/seals/s1/sealed.json",
             "profiles/lead/learned.json", "config.toml")), bait["project"] + "/agentd/__init__.py"]:
    try:
        read.append(open(path).read())
    except OSError as exc:
        pass
for path in walk("/"):
    name = os.path.basename(path)
    try:
        text = open(path, "rb").read(1 << 20)
    except OSError:
        continue
    if TOKEN in text or name in ("learned.json", "log-key.json", "sealed.json") or "wallets" in path:
        read.append(text.decode(errors="replace"))
report(read=read, looked_in=sorted({os.path.dirname(p) for p in walk("/")})[:50])
"""
WRITE = """
written = []
for top in bait["targets"]:
    for path in [os.path.join(top, "escaped.txt"), *(os.path.join(r, f) for r, _, fs in os.walk(top) for f in fs)]:
        try:
            with open(path, "a") as f:
                f.write("escaped")
            written.append(path)
        except OSError:
            pass
report(written=written)
"""
LOOPBACK_TCP = """
outcome = {}
for host in ("127.0.0.1", "localhost", "::1"):
    try:
        socket.create_connection((host, bait["tcp_port"]), timeout=3).close()
        outcome[host] = "connected"
    except OSError as exc:
        outcome[host] = exc.strerror or str(exc)
report(tcp=outcome)
"""
UNIX_SOCKETS = """
outcome = {}
for address in (bait["unix_path"], bait["abstract"]):
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(address); s.close()
        outcome[repr(address)] = "connected"
    except OSError as exc:
        outcome[repr(address)] = exc.strerror or str(exc)
report(unix=outcome)
"""
DOCKER_SOCKET = """
outcome = {}
for address in ("/var/run/docker.sock", "/run/docker.sock"):
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(address)
        s.sendall(b"GET /_ping HTTP/1.0\\r\\n\\r\\n"); outcome[address] = "connected: " + s.recv(100).decode(errors="replace")
    except OSError as exc:
        outcome[address] = exc.strerror or str(exc)
report(docker=outcome)
"""
FORK = """
made = 0
for _ in range(bait["tries"]):
    try:
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        made += 1
    except OSError as exc:
        report(forked=made, stopped_by=exc.strerror)
        break
else:
    report(forked=made, stopped_by="nothing")
"""
MEMORY = """
held, chunks = 0, []
try:
    while held < bait["tries"]:
        chunks.append(bytearray(16 << 20))  # zero-filled, so every page is touched
        held += 16 << 20
        report(held=held)
except MemoryError:
    report(held=held, stopped_by="MemoryError")
"""
FILE_SIZE = """
written = 0
try:
    with open("/tmp/big", "wb") as f:
        while written < bait["tries"]:
            f.write(b"x" * (1 << 20)); f.flush(); written += 1 << 20
except OSError as exc:
    report(stopped_by=exc.strerror)
report(size=os.path.getsize("/tmp/big"))
"""
SCRATCH = """
total = {}
for top in ("/tmp", "/dev/shm", "/dev", "/", "/run", "/var/tmp", os.getcwd(), os.environ.get("HOME", "/tmp")):
    n = 0
    try:
        while n < bait["tries"]:
            with open(os.path.join(top, f"fill-{n}"), "wb") as f:
                f.write(b"x" * (1 << 20))
            n += 1
    except OSError:
        pass
    total[top] = max(total.get(top, 0), n << 20)
report(written=sum(total.values()), where=total)
"""
OUTPUT = """
for _ in range(bait["tries"]):
    sys.stdout.write("x" * 1023 + "\\n")
sys.stdout.flush()
"""
PTRACE = """
nr = {"x86_64": 101, "aarch64": 117}[bait["arch"]]
child = os.fork()
if child == 0:
    time.sleep(30); os._exit(0)
outcome = {}
for pid in (child, os.getppid(), 1, bait["host_pid"]):
    result, err = syscall(nr, 16, pid, 0, 0)  # PTRACE_ATTACH
    outcome[pid] = "attached" if result == 0 else errno.errorcode.get(err, str(err))
os.kill(child, 9)
report(ptrace=outcome)
"""
MOUNT = """
calls = {"x86_64": (165, 272), "aarch64": (40, 97)}[bait["arch"]]
os.makedirs("/tmp/m", exist_ok=True)
outcome = {}
result, err = syscall(calls[0], b"none", b"/tmp/m", b"tmpfs", 0, 0)
outcome["mount"] = "mounted" if result == 0 else errno.errorcode.get(err, str(err))
result, err = syscall(calls[1], 0x10000000 | 0x00020000)  # unshare(CLONE_NEWUSER | CLONE_NEWNS)
outcome["unshare"] = "unshared" if result == 0 else errno.errorcode.get(err, str(err))
if result == 0:
    result, err = syscall(calls[0], b"none", b"/tmp/m", b"tmpfs", 0, 0)
    outcome["mount in a new namespace"] = "mounted" if result == 0 else errno.errorcode.get(err, str(err))
report(**outcome)
"""
HOST_PROCESSES = """
seen = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            seen.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace"))
        except OSError:
            pass
report(processes=seen, host_pid_visible=os.path.exists(f"/proc/{bait['host_pid']}") and bait["host_pid"] not in (1, os.getpid(), os.getppid()))
"""
OUTLIVE = """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "survivor-" + bait["token"]])
    os._exit(0)
time.sleep(0.5)
report(started=True)
time.sleep(600)
"""
TIOCSTI = """
import fcntl, termios
outcome = {}
try:
    fd = os.open("/dev/tty", os.O_RDWR)
    outcome["/dev/tty"] = "opened"
except OSError as exc:
    fd, outcome["/dev/tty"] = None, exc.strerror
for name, target in (("stdin", 0), ("stdout", 1), ("stderr", 2), ("/dev/tty", fd)):
    if target is None:
        continue
    try:
        fcntl.ioctl(target, termios.TIOCSTI, b"x")
        outcome["TIOCSTI " + name] = "injected"
    except OSError as exc:
        outcome["TIOCSTI " + name] = exc.strerror
report(**outcome)
"""


def _limit_probe(
    body: str, limit: str, tries: int, kept: Callable[[Result, Found], bool]
) -> Callable[[Runner, Bait], Verdict]:
    def judge(runner: Runner, bait: Bait) -> Verdict:
        result = attempt(runner, bait, body, tries=tries)
        found = findings(result)
        if not kept(result, found):
            return Verdict(False, f"past its {limit} limit: {_said(result)}")
        return Verdict(True, f"stopped at its {limit} limit: {_said(result)} ({result.describe()})")

    return judge


def _writes(*targets: str) -> Callable[[Runner, Bait], Verdict]:
    def judge(runner: Runner, bait: Bait) -> Verdict:
        before = bait.snapshot()
        result = attempt(runner, bait, WRITE, targets=[str(getattr(bait, t)) for t in targets])
        changed = sorted(set(before.items()) ^ set(bait.snapshot().items()))
        if changed or findings(result).get("written"):
            return Verdict(False, f"wrote {changed[0][0] if changed else findings(result)['written'][0]}")
        return Verdict(True, "nothing written")

    return judge


def _refused(
    body: str, key: str, success: Callable[[Found], bool], connects: bool = False
) -> Callable[[Runner, Bait], Verdict]:
    def judge(runner: Runner, bait: Bait) -> Verdict:
        heard = len(bait.connections)
        result = attempt(runner, bait, body)
        found = findings(result)
        if key not in found:
            return Verdict(False, f"the probe did not report ({result.describe()}: {result.stderr[-300:]!r})")
        if success(found) or (connects and len(bait.connections) > heard):
            return Verdict(False, f"it got through: {found[key]}")
        return Verdict(True, f"refused: {found[key]}")

    return judge


def _memory(runner: Runner, bait: Bait) -> Verdict:
    result = attempt(runner, bait, PARENT_MEMORY)
    found = findings(result)
    if bait.leaked(result) or found.get("secret_found"):
        return Verdict(False, f"found the secret in another process's memory: {found.get('memory')}")
    return Verdict(True, f"no memory of another process read: {found.get('memory', result.describe())}")


def _host_processes(runner: Runner, bait: Bait) -> Verdict:
    result = attempt(runner, bait, HOST_PROCESSES)
    found = findings(result)
    witness = [p for p in found.get("processes", []) if f"witness-{bait.token}" in p]
    if witness or found.get("host_pid_visible") or "processes" not in found:
        return Verdict(False, f"saw host processes: {witness or found}")
    return Verdict(True, f"saw only its own {len(found['processes'])} processes")


def _harnessed(runner: Runner, bait: Bait, body: str, tty: bool) -> tuple[subprocess.Popen[bytes], str]:
    """Starts a harness of its own (a process running `runner`) on a probe program, and
    waits for the program's first line; the harness can then be killed."""
    source = PRELUDE + textwrap.dedent(body)
    command = [
        sys.executable,
        "-m",
        "sandbox.escapes",
        "harness",
        runner.name,
        json.dumps(vars(LIMITS)),
        "-c",
        source,
        bait.arguments(),
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    controller: int | None = None
    terminal: int | None = None
    if tty:
        controller, terminal = os.openpty()
        env["AGENTD_PROBE_TTY"] = os.ttyname(terminal)
    # The terminal is the harness's controlling terminal: it opens it as a session leader.
    stdin = subprocess.DEVNULL if terminal is None else terminal
    harness = subprocess.Popen(command, stdin=stdin, stdout=subprocess.PIPE, env=env, start_new_session=True)
    if terminal is not None:
        os.close(terminal)
    assert harness.stdout
    line = harness.stdout.readline().decode(errors="replace")
    if controller is not None:
        os.close(controller)
    return harness, line


def _outlive(runner: Runner, bait: Bait) -> Verdict:
    harness, line = _harnessed(runner, bait, OUTLIVE, tty=False)
    marker = f"survivor-{bait.token}"
    try:
        if "started" not in line:
            return Verdict(False, f"the probe did not start: {line!r}")
        if not _running(marker):
            return Verdict(False, "the probe's grandchild never ran, so nothing was tested")
    finally:
        harness.kill()
        harness.wait()
    deadline = time.monotonic() + SETTLE
    while _running(marker):
        if time.monotonic() > deadline:
            for pid in _running(marker):
                os.kill(pid, signal.SIGKILL)
            return Verdict(
                False, f"a double-forked, setsid process was still running {SETTLE:g}s after the harness was killed"
            )
        time.sleep(0.1)
    return Verdict(True, "the harness was SIGKILLed and nothing of the run was left")


def _tiocsti(runner: Runner, bait: Bait) -> Verdict:
    harness, line = _harnessed(runner, bait, TIOCSTI, tty=True)
    harness.kill()
    harness.wait()
    try:
        found = json.loads(line.split(" ", 1)[1])
    except (IndexError, ValueError):
        return Verdict(False, f"the probe did not report: {line!r}")
    if any(v in ("injected", "opened") for v in found.values()):
        return Verdict(False, f"reached the terminal: {found}")
    return Verdict(True, f"no terminal to reach: {found}")


def _running(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in Path("/proc", entry, "cmdline").read_bytes():
                    found.append(int(entry))
    return found


def _output(result: Result, found: Found) -> bool:
    return result.why == "output" and len(result.stdout) <= LIMITS.output_bytes


PROBES: list[Probe] = [
    Probe(
        "key_in_own_environment",
        "read a provider key or the passphrase from its own environment",
        _nothing_leaked(OWN_ENVIRONMENT),
    ),
    Probe(
        "key_in_parent_environ",
        "read a provider key or the passphrase from /proc/<ppid>/environ",
        _nothing_leaked(PARENT_ENVIRON),
    ),
    Probe("key_in_parent_memory", "find a provider key in the harness's memory through /proc/<pid>/mem", _memory),
    Probe(
        "read_the_home",
        "find and read the home: wallets, the log key, sealed files, learned.json",
        _nothing_leaked(READ_HOME),
    ),
    Probe("write_the_home", "write the home", _writes("home")),
    Probe("write_the_profile", "write the profile (learned.json, tools.py)", _writes("profile")),
    Probe("write_the_project", "write the project checkout", _writes("project")),
    Probe(
        "loopback_tcp",
        "connect over loopback TCP to a listener on the host",
        _refused(LOOPBACK_TCP, "tcp", lambda f: "connected" in f["tcp"].values(), connects=True),
    ),
    Probe(
        "unix_sockets",
        "connect to a Unix socket on the host (a path and an abstract name)",
        _refused(UNIX_SOCKETS, "unix", lambda f: "connected" in f["unix"].values(), connects=True),
    ),
    Probe(
        "docker_socket",
        "connect to /var/run/docker.sock",
        _refused(DOCKER_SOCKET, "docker", lambda f: any(v.startswith("connected") for v in f["docker"].values())),
    ),
    Probe(
        "fork_past_the_process_limit",
        "fork past the process limit",
        _limit_probe(
            FORK, "process", 4 * LIMITS.processes, lambda r, f: "forked" in f and f["forked"] < LIMITS.processes
        ),
    ),
    Probe(
        "exhaust_memory",
        "exhaust memory",
        _limit_probe(
            MEMORY, "memory", 4 * LIMITS.memory_bytes, lambda r, f: "held" in f and f["held"] <= LIMITS.memory_bytes
        ),
    ),
    Probe(
        "write_past_the_file_size_limit",
        "write a file past the file-size limit",
        _limit_probe(
            FILE_SIZE, "file-size", 4 * LIMITS.file_bytes, lambda r, f: "size" in f and f["size"] <= LIMITS.file_bytes
        ),
    ),
    Probe(
        "write_past_the_scratch_limit",
        "write past the scratch limit, anywhere it can",
        _limit_probe(
            SCRATCH,
            "scratch",
            4 * LIMITS.scratch_bytes // MiB,
            lambda r, f: "written" in f and f["written"] <= LIMITS.scratch_bytes + MiB,
        ),
    ),
    Probe(
        "print_past_the_output_limit",
        "print past the output limit",
        _limit_probe(OUTPUT, "output", 4 * LIMITS.output_bytes // 1024, _output),
    ),
    Probe("outlive_the_run", "outlive the run (double fork and setsid, then the harness is SIGKILLed)", _outlive),
    Probe("tiocsti", "inject keystrokes through the terminal (TIOCSTI)", _tiocsti),
    Probe(
        "ptrace",
        "ptrace another process",
        _refused(PTRACE, "ptrace", lambda f: "attached" in f["ptrace"].values()),
    ),
    Probe(
        "mount",
        "mount a file system",
        _refused(MOUNT, "mount", lambda f: "mounted" in (f["mount"], f.get("mount in a new namespace"))),
    ),
    Probe("host_processes", "see the host's processes", _host_processes),
]


def check(runner: Runner, on_verdict: Callable[[Probe, Verdict], None] | None = None) -> list[tuple[Probe, Verdict]]:
    """Runs every probe against `runner`; each verdict as it comes."""
    verdicts = []
    with laid_out() as bait:
        for probe in PROBES:
            try:
                verdict = probe.judge(runner, bait)
            except Exception as exc:  # a probe that cannot run has shown nothing held
                verdict = Verdict(False, f"the probe could not run: {type(exc).__name__}: {exc}")
            verdicts.append((probe, verdict))
            if on_verdict:
                on_verdict(probe, verdict)
    return verdicts


def harness_main(name: str, limits: str, *args: str) -> None:
    """A harness of its own for the probes that kill one: runs the program, passes its
    first line on, then waits for the run to end or for this process to be killed."""
    from sandbox.choose import make_runner

    tty = os.environ.get("AGENTD_PROBE_TTY")
    if tty:
        os.close(os.open(tty, os.O_RDWR))  # a session leader opening a terminal takes it as its own
    runner = make_runner(name, replace(LIMITS, **json.loads(limits)))

    async def converse() -> None:
        request = python_request(args, limits=runner.limits)
        process = await runner.start(request)
        async with process:
            line = await process.readline()
            try:
                sys.stdout.write("started " + line.decode(errors="replace"))
                sys.stdout.flush()
            except BrokenPipeError:  # the check reading this line stopped (a worker told to stop as it starts)
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so exiting flushes nowhere, quietly
                return
            await process.finish()

    asyncio.run(converse())


if __name__ == "__main__":
    if sys.argv[1:2] == ["harness"]:
        harness_main(*sys.argv[2:])
