"""`agentd case --stdio`: the runtime as a candidate program, over JSON lines.

This is the only place the runtime's side of the episode protocol is spoken: a built
copy of agentd runs exactly this inside a sandbox when its own code is changed. The
harness writes the case first, then answers each request; the checks are the harness's.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from typing import Any, BinaryIO

from agentd.runtime import run_case
from improver import (
    Case,
    Completion,
    LimitReached,
    ProviderError,
    completion_from_json,
    continued,
    decode_line,
    encode_line,
)


class HarnessGone(Exception):
    """The harness closed the line; there is nobody left to answer."""


class StdioEpisode:
    """The harness, as the runtime sees it, at the other end of a pair of pipes."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self.reader, self.writer = reader, writer

    def send(self, kind: str, payload: dict[str, Any]) -> None:
        self.writer.write(encode_line(kind, payload))
        self.writer.flush()

    async def receive(self) -> tuple[str, dict[str, Any]]:
        line = await asyncio.to_thread(self.reader.readline)
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
        kind, payload = await self.receive()
        if kind != "completion":
            raise ProviderError(f"the harness answered a model request with {kind!r}")
        return completion_from_json(payload)

    async def tool(self, call_id: str, name: str, arguments: str) -> str:
        self.send("tool", {"id": call_id, "name": name, "arguments": arguments})
        kind, payload = await self.receive()
        if kind != "result":
            raise ProviderError(f"the harness answered a tool call with {kind!r}")
        return str(payload.get("content", ""))


async def serve(reader: BinaryIO, writer: BinaryIO) -> int:
    """Runs one case from `reader`; returns the process's exit status."""
    episode = StdioEpisode(reader, writer)
    try:
        kind, payload = await episode.receive()
        if kind != "case":
            raise ValueError(f"the first line must be the case, not {kind!r}")
        case = Case.from_json(payload)
        while True:
            ending = await run_case(case, episode)
            if ending.ended not in ("done", "asked"):
                return 0
            episode.send(
                *(
                    ("ask", {"question": ending.answer})
                    if ending.ended == "asked"
                    else ("done", {"answer": ending.answer})
                )
            )
            reply = await _person(episode)
            if reply is None:
                return 0
            case = replace(case, conversation=continued(ending.messages, reply))
    except HarnessGone:
        return 1
    except (ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"agentd case: {exc}\n")
        return 2


async def _person(episode: StdioEpisode) -> str | None:
    """In a conversation the harness answers an ending with the person's reply; otherwise
    it closes the line, and the case is over."""
    try:
        kind, payload = await episode.receive()
    except HarnessGone:
        return None
    if kind != "user":
        raise ValueError(f"the harness answered an ending with {kind!r}, not 'user'")
    return str(payload.get("content", ""))
