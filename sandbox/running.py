"""What every runner's started program shares: capped outputs read as lines, the wall
time, and why the run ended. A runner supplies how to write its stdin, kill its whole
tree and wait for its exit (`Started`'s abstract methods).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

from sandbox.runner import Limits, OutputLimit, Result, Usage, Why

SETTLE = 5.0  # seconds the outputs have to close once the tree is dead


class Output:
    """One output stream: kept up to the cap, read a line at a time. Past the cap the
    rest is dropped and `over` is called once."""

    def __init__(self, cap: int, over: Callable[[], None]) -> None:
        self.cap = cap
        self.over = over
        self.data = bytearray()
        self.read_at = 0
        self.closed = False
        self.overflowed = False
        self._changed = asyncio.Event()

    def feed(self, chunk: bytes) -> None:
        if self.overflowed:
            return
        room = self.cap - len(self.data)
        self.data += chunk[:room]
        if len(chunk) > room:
            self.overflowed = True
            self.over()
        self._changed.set()

    def close(self) -> None:
        self.closed = True
        self._changed.set()

    async def readline(self) -> bytes:
        while True:
            end = self.data.find(b"\n", self.read_at)
            if end >= 0:
                line = bytes(self.data[self.read_at : end + 1])
                self.read_at = end + 1
                return line
            if self.overflowed:
                raise OutputLimit(f"more than {self.cap} bytes of output")
            if self.closed:
                rest = bytes(self.data[self.read_at :])
                self.read_at = len(self.data)
                return rest
            self._changed.clear()
            await self._changed.wait()

    async def closing(self) -> None:
        while not self.closed:
            self._changed.clear()
            await self._changed.wait()


class Started(ABC):
    """A started program (see runner.Process)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.began = time.monotonic()
        self.why: Why | None = None  # set when the sandbox or the caller ends the run
        self.stdout = Output(limits.output_bytes, lambda: self._end("output"))
        self.stderr = Output(limits.output_bytes, lambda: self._end("output"))
        self._wall = asyncio.get_running_loop().call_later(limits.wall_seconds, self._end, "wall")
        self._result: Result | None = None
        self._finishing: asyncio.Task[Result] | None = None

    # What a runner supplies

    @abstractmethod
    async def write(self, data: bytes) -> None:
        """Writes to stdin; raises ConnectionError (or BrokenPipeError) once it is closed."""

    @abstractmethod
    def close_input(self) -> None: ...

    @abstractmethod
    def kill_tree(self) -> None:
        """Kills every process of the run now (may return before they are gone)."""

    @abstractmethod
    async def exited(self) -> tuple[int, Usage]:
        """Waits for the run to end: its exit status (128+N for signal N) and usage."""

    def classify(self, status: int, usage: Usage) -> Why:
        """Why a run that the sandbox did not stop itself ended: a limit the kernel or
        the engine enforced, or its own exit."""
        return "exited"

    # The Process interface

    async def send(self, data: bytes) -> bool:
        if not data:
            return self._result is None
        try:
            await self.write(data)
        except (ConnectionError, OSError):
            return False
        return True

    async def readline(self) -> bytes:
        return await self.stdout.readline()

    async def finish(self, grace: float | None = None) -> Result:
        """Waits for the run to end; past `grace` seconds (None: its wall time) it is stopped."""
        if self._finishing is None:
            self._finishing = asyncio.ensure_future(self._finish(grace))
        return await asyncio.shield(self._finishing)

    async def kill(self) -> Result:
        self._end("stopped")
        return await self.finish()

    async def __aenter__(self) -> Started:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._result is None:
            await self.kill()

    # How it ends

    def _end(self, why: Why) -> None:
        if self.why is None and self._result is None:
            self.why = why
            self.kill_tree()

    async def _finish(self, grace: float | None) -> Result:
        waiting = asyncio.ensure_future(self.exited())
        if grace is not None:
            done, _ = await asyncio.wait([waiting], timeout=grace)
            if not done:
                self._end("stopped")
        status, usage = await waiting
        self._wall.cancel()
        # The tree is dead, so its outputs close; a pipe held open by something else
        # must not hold the run.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(self.stdout.closing(), self.stderr.closing()), SETTLE)
        why = self.why or self.classify(status, usage)
        self._result = Result(status, why, bytes(self.stdout.data), bytes(self.stderr.data), usage)
        return self._result

    def elapsed(self) -> float:
        return time.monotonic() - self.began
