"""`agentd case --stdio`: the runtime as a candidate program, over JSON lines.

This is the only place the runtime's side of the episode protocol is spoken: a built
copy of agentd runs exactly this inside a sandbox when its own code is changed. The
harness writes the case first, then answers each request; the checks are the harness's.

A code round starts this program hundreds of times, so it loads no more than the
protocol needs (`python -m agentd case --stdio` comes here without the command line's
imports) and runs the runtime without an event loop (see `finished`).
"""

from __future__ import annotations

import sys
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any, BinaryIO, TypeVar

from agentd.runtime import run_case
from improver import (
    Case,
    Completion,
    LimitReached,
    ProviderError,
    completion_from_json,
    decode_line,
    encode_line,
)

T = TypeVar("T")


class HarnessGone(Exception):
    """The harness closed the line; there is nobody left to answer."""


class StdioEpisode:
    """The harness, as the runtime sees it, at the other end of a pair of pipes. Its
    answers are blocking reads: nothing else runs in this process while it waits."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self.reader, self.writer = reader, writer

    def send(self, kind: str, payload: dict[str, Any]) -> None:
        self.writer.write(encode_line(kind, payload))
        self.writer.flush()

    def receive(self) -> tuple[str, dict[str, Any]]:
        line = self.reader.readline()
        if not line:
            raise HarnessGone()
        kind, payload = decode_line(line)
        if kind == "error":
            message = str(payload.get("message", ""))
            raise LimitReached(message) if payload.get("kind") == "limit" else ProviderError(message)
        return kind, payload

    async def model(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        self.send("model", {"messages": messages, "tools": tools, "max_tokens": max_tokens})
        kind, payload = self.receive()
        if kind != "completion":
            raise ProviderError(f"the harness answered a model request with {kind!r}")
        return completion_from_json(payload)

    async def tool(self, call_id: str, name: str, arguments: str) -> str:
        self.send("tool", {"id": call_id, "name": name, "arguments": arguments})
        kind, payload = self.receive()
        if kind != "result":
            raise ProviderError(f"the harness answered a tool call with {kind!r}")
        return str(payload.get("content", ""))


def main() -> int:
    """The program: one case from stdin, its requests on stdout; the exit status."""
    return serve(sys.stdin.buffer, sys.stdout.buffer)


def serve(reader: BinaryIO, writer: BinaryIO) -> int:
    """Runs one case from `reader`; returns the process's exit status."""
    episode = StdioEpisode(reader, writer)
    try:
        kind, payload = episode.receive()
        if kind != "case":
            raise ValueError(f"the first line must be the case, not {kind!r}")
        case = Case.from_json(payload)
        while True:
            ending = finished(run_case(case, episode))
            if ending.ended not in ("done", "asked"):
                return 0
            episode.send(
                *(
                    ("ask", {"question": ending.answer})
                    if ending.ended == "asked"
                    else ("done", {"answer": ending.answer})
                )
            )
            reply = _person(episode)
            if reply is None:
                return 0
            from improver import continued  # here: most cases hold no conversation

            case = replace(case, conversation=continued(ending.messages, reply))
    except (HarnessGone, BrokenPipeError):  # it closed the line we read, or the one we write
        return 1
    except (ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"agentd case: {exc}\n")
        return 2


def finished(run: Coroutine[Any, Any, T]) -> T:
    """The runtime's coroutine run to its end. It awaits only the episode, whose answers
    here are blocking reads, so it never waits on an event loop and needs none: asyncio,
    which costs more CPU to import than all else an episode adds to Python's own start,
    is not loaded. A runtime that imported asyncio may await the loop's own futures, so
    it gets a loop."""
    if "asyncio" in sys.modules:
        result: T = sys.modules["asyncio"].run(run)
        return result
    try:
        while run.send(None) is None:  # a bare yield (asyncio.sleep(0)) asks for nothing
            pass
    except StopIteration as done:
        value: T = done.value
        return value
    run.close()
    raise RuntimeError("the runtime awaited an event loop's future without importing asyncio")


def _person(episode: StdioEpisode) -> str | None:
    """In a conversation the harness answers an ending with the person's reply; otherwise
    it closes the line, and the case is over."""
    try:
        kind, payload = episode.receive()
    except HarnessGone:
        return None
    if kind != "user":
        raise ValueError(f"the harness answered an ending with {kind!r}, not 'user'")
    return str(payload.get("content", ""))
