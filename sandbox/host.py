"""Trusted commands run on the host: the operator's own tools and checks.

A profile's command tools and the `--verify` check of a live session are written by
the operator, not by a model, and must reach what the operator's own commands reach
(the network, the operator's files), so no sandbox is made for them. They run here, in
the one package that starts processes, with only the environment the caller allows (no
key or passphrase of agentd's) and a time limit that kills the process when it is
passed. Anything a model wrote goes through a `Runner` instead, never through this.
"""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass
from pathlib import Path


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
    try:
        done = subprocess.run(command, shell=True, env=env, timeout=timeout, capture_output=True)
    except subprocess.TimeoutExpired:
        return HostResult(None)
    return HostResult(done.returncode, done.stdout, done.stderr)


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
