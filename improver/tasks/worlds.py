"""Worlds: stand-ins that answer from a database by running a domain's own tool
functions, in a sandbox, and report the state a run left the database in.

A task with a `world` (`{"kind": KIND, "domain": NAME}`) has its tools answered by a
program started for its episode in the sandbox (`sandbox.Runner`), not by recorded
answers: `WORLDS` names, for each kind, the module run there (today only τ²-bench's
domains, improver.benchmarks.tau2world). Every call reaches it and changes its
database as the domain's tools change it; when the run ends, the world's digest of
the database is the run's `state`, which an `ends_in` check compares with the state
the task's own solution leaves (improver.tasks.checks). A world that cannot be started
or stops answering is the harness's fault: the run errors, and is never scored.

Starting a world costs a second or two (the domain's code and database load), so a
`WorldPool` keeps worlds that ended cleanly and sets them back to the database as
shipped (`reset`) for the next run of the same kind and domain. A world asked nothing
for a minute exits on its own, so one left idle in a pool outlives no run; the pool
then starts another.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from typing import Any

from improver.base.errors import ImproverError
from improver.base.nesting import loads_bounded
from sandbox import Limits, Process, Runner, SandboxError, make_runner, python_request

# Kind -> the module that runs its domains in the sandbox.
WORLDS: dict[str, str] = {"tau2": "improver.benchmarks.tau2world"}
# A world answers in far less; this only ends one that hangs.
ANSWER_SECONDS = 120.0
LIMITS = Limits(wall_seconds=24 * 3600.0, cpu_seconds=24 * 3600, memory_bytes=4096 << 20)


class WorldFailed(ImproverError):
    """A world could not be started or stopped answering: the harness's fault."""


def world_problem(data: Any) -> str | None:
    """What is wrong with a task's `world` field, or None."""
    if not isinstance(data, dict) or data.get("kind") not in WORLDS or not isinstance(data.get("domain"), str):
        return f'it must be {{"kind": one of {", ".join(WORLDS)}, "domain": NAME}}'
    return None


class World:
    """One started world; requests go one at a time."""

    def __init__(self, spec: tuple[str, str], process: Process) -> None:
        self.spec = spec
        self.process = process
        self.lock = asyncio.Lock()

    async def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        async with self.lock:
            try:
                if not await self.process.send((json.dumps(request) + "\n").encode()):
                    raise WorldFailed(f"the {self._name} world stopped reading")
                async with asyncio.timeout(ANSWER_SECONDS):
                    line = await self.process.readline()
            except (TimeoutError, SandboxError) as exc:
                raise WorldFailed(f"the {self._name} world did not answer ({exc or 'timed out'})") from None
        if not line:
            result = await self.process.finish(0)
            raise WorldFailed(f"the {self._name} world ended: {result.describe()}; {' '.join(result.tail(2))}")
        try:
            reply = loads_bounded(line)
        except ValueError:  # not JSON, nested too deep, a number too long to read
            reply = None
        if not isinstance(reply, dict):
            raise WorldFailed(f"the {self._name} world answered something that is not a JSON object: {line[:80]!r}")
        if "error" in reply:
            raise WorldFailed(f"the {self._name} world: {reply['error']}")
        return reply

    @property
    def _name(self) -> str:
        return "/".join(self.spec)

    async def answer(self, tool: str, arguments: dict[str, Any] | str) -> str:
        if not isinstance(arguments, dict):
            return f"Error: {tool} takes its arguments as a JSON object"
        return str((await self.ask({"tool": tool, "arguments": arguments}))["answer"])

    async def state(self) -> str:
        return str((await self.ask({"state": True}))["state"])

    async def reset(self) -> str:
        return str((await self.ask({"reset": True}))["state"])

    async def describe(self) -> dict[str, Any]:
        return await self.ask({"describe": True})

    async def close(self) -> None:
        self.process.close_input()
        await self.process.finish(5.0)


class WorldPool:
    """Worlds to reuse, by kind and domain; each is reset before it is handed out again.
    At most `most` are alive at once (one per core by default: each holds a database),
    so many episodes at once wait for a world rather than start one each."""

    def __init__(self, runner: Runner | None = None, most: int | None = None) -> None:
        self.runner = runner
        self.idle: dict[tuple[str, str], list[World]] = {}
        self.alive = asyncio.Semaphore(most or os.cpu_count() or 1)

    async def take(self, world: dict[str, Any]) -> World:
        spec = (str(world["kind"]), str(world["domain"]))
        await self.alive.acquire()
        try:
            while self.idle.get(spec):
                kept = self.idle[spec].pop()
                try:
                    await kept.reset()
                    return kept
                except WorldFailed:
                    await kept.process.kill()
            if self._others_idle(spec):  # a world of another domain makes room for this one
                await self._drop_one()
            return await self._start(spec)
        except BaseException:
            self.alive.release()
            raise

    def _others_idle(self, spec: tuple[str, str]) -> bool:
        return any(worlds for key, worlds in self.idle.items() if key != spec)

    async def _drop_one(self) -> None:
        worlds = next(w for w in self.idle.values() if w)
        await worlds.pop().close()

    async def _start(self, spec: tuple[str, str]) -> World:
        kind, domain = spec
        try:
            runner = self.runner or make_runner()
            self.runner = runner
            request = python_request(
                ("-m", WORLDS[kind], domain), packages=("improver",), limits=LIMITS, LOGURU_LEVEL="ERROR"
            )
            process = await runner.start(request)
        except (SandboxError, ValueError) as exc:
            raise WorldFailed(f"cannot start the {kind}/{domain} world: {exc}") from None
        return World(spec, process)

    def give_back(self, world: World) -> None:
        """A world that answered to the end, kept for the next run."""
        self.idle.setdefault(world.spec, []).append(world)
        self.alive.release()

    async def discard(self, world: World) -> None:
        """A world that failed (or whose run errored): ended, never handed out again."""
        await world.process.kill()
        self.alive.release()

    async def close(self) -> None:
        for worlds in self.idle.values():
            for world in worlds:
                await world.close()
        self.idle.clear()


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WorldPool] = weakref.WeakKeyDictionary()


def pool() -> WorldPool:
    """The running event loop's pool: a world's pipes belong to the loop that started it
    (a world whose loop has ended sees its input close, and exits)."""
    loop = asyncio.get_running_loop()
    found = _POOLS.get(loop)
    if found is None:
        found = _POOLS[loop] = WorldPool()
    return found
