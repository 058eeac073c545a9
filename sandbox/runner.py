"""The runner interface: what a sandboxed run is asked for and what comes back.

A `Runner` starts one program (an argv) in a sandbox made for that run: a read-only
source tree, extra read-only paths (the Python installation, a toolchain), a writable
scratch directory, an environment made only of what the request names, no network
unless the run asks for loopback, and limits. The started `Process` is talked to over
its stdin and stdout a line at a time (a JSON-lines conversation), or given its input
whole (`run`). Either way the run comes back as a `Result`: the exit status, the
outputs (capped), the resources used, and why it ended.
"""

from __future__ import annotations

import asyncio
import os
import signal as signals
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

MiB = 1 << 20
SCRATCH = "/tmp"  # where the writable scratch directory is, inside the sandbox
SEARCH_PATH = "/usr/local/bin:/usr/bin:/bin"

# Why a run ended: it exited on its own (or was killed by a signal it was sent from
# inside), or the sandbox ended it at one of its limits, or the caller stopped it.
Why = Literal["exited", "wall", "cpu", "memory", "output", "file size", "stopped"]
WHY: dict[str, str] = {
    "exited": "it exited",
    "wall": "it reached its wall time",
    "cpu": "it reached its CPU time limit",
    "memory": "it reached its memory limit",
    "output": "it printed past its output limit",
    "file size": "it wrote past its file-size limit",
    "stopped": "it was stopped",
}


class SandboxError(Exception):
    """A run could not be made (the runner's fault or the machine's, never the program's)."""


class SandboxUnavailable(SandboxError):
    """No sandbox works here; the message says what to install."""


class OutputLimit(Exception):
    """The program printed past its output limit; it has been killed."""


@dataclass(frozen=True)
class Limits:
    """What one run may use. The defaults suit a candidate speaking the episode protocol
    in Python; builds and tests usually want more wall and CPU time."""

    wall_seconds: float = 300.0  # start to exit, real time
    cpu_seconds: int = 300  # CPU time of each process
    memory_bytes: int = 2048 * MiB  # address space of each process (bwrap), the whole container (Docker)
    processes: int = 64  # processes and threads at once
    file_bytes: int = 64 * MiB  # largest file it may write
    open_files: int = 256
    output_bytes: int = 4 * MiB  # of stdout, and of stderr, each
    scratch_bytes: int = 64 * MiB  # the size of the scratch tmpfs

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"sandbox limit {name} must be a positive number, not {value!r}")


def environment(**extra: str) -> dict[str, str]:
    """The whole environment a sandboxed program gets unless a request names another:
    a search path, a UTF-8 locale, and the scratch directory as home and for temporary
    files. Nothing is taken from the caller's environment."""
    return {"PATH": SEARCH_PATH, "LANG": "C.UTF-8", "HOME": SCRATCH, "TMPDIR": SCRATCH, **extra}


@dataclass(frozen=True)
class Request:
    """One program to run.

    Every host path is mounted at its own path inside the sandbox, read-only unless
    named as `writable`; nothing else of the host is there but the runner's minimal
    root (/usr and its links). `cwd` defaults to the tree, else the scratch directory.
    """

    argv: tuple[str, ...]
    tree: Path | None = None  # the source tree, read-only
    readable: tuple[Path, ...] = ()  # more read-only paths: an interpreter, a toolchain
    writable: Path | None = None  # a host directory the run may write (a build's output)
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=environment)  # the whole environment
    limits: Limits | None = None  # None: the runner's own
    loopback: bool = False  # a network of its own holding only a loopback interface

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a sandboxed run needs a program to run")
        for path in self.mounts():
            if not path.is_absolute():
                raise ValueError(f"sandbox paths must be absolute: {path}")

    def mounts(self) -> tuple[Path, ...]:
        return (*((self.tree,) if self.tree else ()), *self.readable, *((self.writable,) if self.writable else ()))

    @property
    def workdir(self) -> str:
        return self.cwd or (str(self.tree) if self.tree else SCRATCH)


@dataclass(frozen=True)
class Usage:
    wall_seconds: float
    cpu_seconds: float | None = None  # of the whole tree; None where the runner cannot tell
    max_rss_bytes: int | None = None  # of the largest process


@dataclass(frozen=True)
class Result:
    status: int  # the exit status; 128+N when a signal N ended it
    why: Why
    stdout: bytes  # at most the output limit
    stderr: bytes
    usage: Usage

    @property
    def signal(self) -> int | None:
        return self.status - 128 if self.status > 128 else None

    @property
    def ok(self) -> bool:
        return self.why == "exited" and self.status == 0

    def tail(self, lines: int) -> list[str]:
        """The last `lines` lines of what it wrote (stdout, then stderr) that hold anything,
        each stripped, with every control character written as an escape (`\\x1b`): they
        are printed on an operator's terminal, which a program's escape sequences must
        never drive."""
        text = (self.stdout + self.stderr).decode(errors="replace")
        kept = [_printable(line.strip()) for line in text.splitlines()]
        return [line for line in kept if line][-lines:]

    def describe(self) -> str:
        """One line: how the run ended."""
        if self.why != "exited":
            return WHY[self.why]
        try:
            return f"it was killed by {signals.Signals(self.signal or 0).name}"
        except ValueError:  # no signal, or a status above 128 that names none
            return f"it exited with status {self.status}"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class Process(Protocol):
    """A program started in a sandbox. Lines go in with `send`, come out with `readline`;
    `finish` waits for it to end (killing the whole tree past `grace`), `kill` ends it
    now. Either returns the `Result`; `async with` kills it if it is still running."""

    async def send(self, data: bytes) -> bool:
        """Writes to its stdin; False when it no longer reads it."""
        ...

    async def readline(self) -> bytes:
        """Its next line of stdout (b"" at the end); raises OutputLimit past the limit."""
        ...

    def close_input(self) -> None: ...

    async def finish(self, grace: float | None = None) -> Result: ...

    async def kill(self) -> Result: ...

    async def __aenter__(self) -> Process: ...

    async def __aexit__(self, *exc: object) -> None: ...


class Runner(Protocol):
    name: str
    limits: Limits  # what a request that names none gets

    async def start(self, request: Request) -> Process:
        """Starts the program; SandboxError when the sandbox cannot be made."""
        ...


def preflight(request: Request) -> None:
    """SandboxError for a run that could not start for the caller's reasons (a path to
    mount or the program missing), so that it is never taken for the program's doing."""
    for path in request.mounts():
        if not path.exists():
            raise SandboxError(f"cannot make the sandbox: {path} does not exist")
    program = request.argv[0]
    roots = [Path("/usr"), *(p.resolve() for p in request.mounts())]
    if "/" in program:
        candidates = [Path(request.workdir, program)]
    else:
        candidates = [Path(d, program) for d in request.env.get("PATH", "").split(":") if d.startswith("/")]
    for found in candidates:
        real = found.resolve()
        if any(real.is_relative_to(root) for root in roots) and os.access(real, os.X_OK) and real.is_file():
            return
    raise SandboxError(f"cannot start {program!r}: the sandbox holds no such program")


async def run(runner: Runner, request: Request, stdin: bytes = b"") -> Result:
    """Runs `request` to its end with `stdin` as its whole input."""
    process = await runner.start(request)
    async with process:
        await process.send(stdin)
        process.close_input()
        return await process.finish()


def run_blocking(runner: Runner, request: Request, stdin: bytes = b"") -> Result:
    """`run` for callers that are not in an event loop (builds, tests, checks)."""
    return asyncio.run(run(runner, request, stdin))
