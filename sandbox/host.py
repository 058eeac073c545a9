"""Trusted commands run on the host: the operator's own tools and checks, and agentd's
own helpers.

A profile's command tools and the `--verify` check of a live session are written by
the operator, not by a model, and must reach what the operator's own commands reach
(the network, the operator's files), so no sandbox is made for them. agentd's own
helpers (pip fetching a packaged model's wheels, the llama.cpp server of a `local:`
model) are agentd's code with fixed arguments. All of them run here, in the one package
that starts processes, with only the environment the caller allows (no key or
passphrase of agentd's) and a time limit, or, for a helper that serves, for as long as
its caller holds its stdin open. Anything a model wrote goes through a `Runner`
instead, never through this.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO


@dataclass(frozen=True)
class HostResult:
    returncode: int | None  # None when the time limit ended it
    stdout: bytes = b""
    stderr: bytes = b""

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_shell(command: str, *, env: dict[str, str], timeout: float) -> HostResult:
    """Runs the operator's shell command `command` to its end or its time limit."""
    return _run(command, shell=True, env=env, timeout=timeout)


def run_argv(argv: list[str], *, env: dict[str, str], timeout: float) -> HostResult:
    """Runs a trusted program `argv` (no shell) to its end or its time limit."""
    return _run(argv, shell=False, env=env, timeout=timeout)


def _run(args: str | list[str], *, shell: bool, env: dict[str, str], timeout: float) -> HostResult:
    try:
        done = subprocess.run(args, shell=shell, env=env, timeout=timeout, capture_output=True)
    except subprocess.TimeoutExpired:
        return HostResult(None)
    return HostResult(done.returncode, done.stdout, done.stderr)


class Helper:
    """A trusted program that serves while its caller holds its stdin open: it is told to
    end by that pipe closing, which also happens when the caller dies, however it dies.
    Its stdout is read a line at a time; its stderr goes where the caller said."""

    def __init__(self, argv: list[str], *, env: dict[str, str], log: IO[str]) -> None:
        self._process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, text=True
        )

    @property
    def pid(self) -> int:
        return self._process.pid

    def running(self) -> bool:
        return self._process.poll() is None

    def readline(self, seconds: float) -> str | None:
        """Its next line of stdout, or None when it closed it or took longer than `seconds`."""
        assert self._process.stdout is not None
        stream, got = self._process.stdout, []
        reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
        reader.start()
        reader.join(seconds)
        return got[0] if got and got[0] else None

    def stop(self, grace: float = 5.0) -> None:
        """Closes its stdin, and kills it if it has not ended within `grace` seconds."""
        if self.running():
            assert self._process.stdin is not None
            self._process.stdin.close()
        try:
            self._process.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        self._process.kill()
        self._process.wait()


async def run_program(argv: list[str], *, cwd: Path, env: dict[str, str], stdin: bytes, timeout: float) -> HostResult:
    """Runs the operator's program `argv` with `stdin`, to its end or its time limit."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return HostResult(None)
    return HostResult(proc.returncode, out, err)
