"""A task as an episode for a trainer: the policy being trained gives the model's turns.

The agent runtime runs the task as in any trial, its stand-ins answering the calls and
its checks scoring the run, but each model turn goes out as a line and comes back from
the policy (-> written here, <- by the policy):

    -> {"request": {"messages": [...], "tools": [...], "max_tokens": 4096}}
    <- {"message": {"role": "assistant", "content": null, "tool_calls": [...]}}
    -> {"request": {"messages": [..., {"role": "tool", ...}], ...}}
    <- {"message": {"role": "assistant", "content": "Paid."}}
    -> {"done": {"case": "work-3", "reward": 1.0, "passed": true, "failures": [],
                 "calls": 1, "ended": {"how": "done", "answer": "Paid.", "reason": ""},
                 "user": [], "user_tokens": {"in": 0, "out": 0}}}

`reward` is the share of the task's checks that held, `failures` the checks that did
not, `calls` how many tool calls the run made. A conversation's simulated user is not the
policy: its model is made by the `users` factory the caller injects, and its replies go
to the agent as they would in a trial (improver.tasks.simuser); `user` in the done line is
each `{"answer", "reply"}`: the agent's answer and the simulated user's reply to it, in
order, and `user_tokens` what the simulated user's model used (not the policy's). An
episode whose simulated user leaked ends as errored, `"leaked": true` in the error line
(which never carries the leaked reply). A line from the policy that is not such
a message ends the episode with `{"error": {"kind": "policy", "message": ...}}`; an
episode the harness could not run (not the policy's doing) ends with `{"error": {"kind":
"errored", ...}}`, so a trainer drops it rather than scoring it.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import replace
from itertools import chain
from typing import Any, BinaryIO

from improver.base.errors import ImproverError
from improver.base.protocol import (
    DEFAULT_MAX_TOKENS,
    Agent,
    Completion,
    EpisodeLimits,
    Model,
    TokenUsage,
    decode_line,
    encode_line,
)
from improver.base.variant import Variant
from improver.episodes.harness import EpisodeAborted, ModelFactory, RunResult, run_task
from improver.tasks.task import Task

POLICY = "policy"
POLICY_GRACE = 1.0  # seconds


class LineReader:
    """Reads the policy's lines on a daemon thread, so an episode that ends while the
    policy is silent never waits on it to exit. The thread reads the file descriptor
    itself when there is one: a daemon thread blocked inside a buffered reader would
    hold its lock when the interpreter shuts down, which aborts the process. It reads a
    duplicate it owns: the caller may close the reader once the episode is over, and the
    number of a closed descriptor is soon given to another file, which the thread would
    then read from (another episode's policy, in one process running several)."""

    def __init__(self, reader: BinaryIO) -> None:
        self.reader = reader
        self.queue: asyncio.Queue[bytes] | None = None

    async def readline(self) -> bytes:
        if self.queue is None:
            self.queue = asyncio.Queue()
            loop, queue = asyncio.get_running_loop(), self.queue

            def pump() -> None:
                try:
                    for line in chain(_lines(self.reader), [b""]):
                        loop.call_soon_threadsafe(queue.put_nowait, line)
                except (OSError, ValueError, RuntimeError):
                    return  # the input was closed, or the episode is over and its loop gone

            threading.Thread(target=pump, name="policy-lines", daemon=True).start()
        return await self.queue.get()


def _lines(reader: BinaryIO) -> Iterator[bytes]:
    try:
        fd = os.dup(reader.fileno())
    except (OSError, ValueError):  # an in-memory stream: it never blocks
        yield from iter(reader.readline, b"")
        return
    try:
        pending = b""
        while chunk := os.read(fd, 65536):
            *lines, pending = (pending + chunk).split(b"\n")
            yield from (line + b"\n" for line in lines)
        if pending:
            yield pending
    finally:
        os.close(fd)


class PolicyModel:
    """The model, as the policy answers it a line at a time."""

    name = POLICY

    def __init__(self, reader: BinaryIO, writer: BinaryIO, timeout: float) -> None:
        self.lines = LineReader(reader)
        self.writer = writer
        self.turn = 0
        self.timeout = timeout  # a policy slower than this on a turn is the policy's doing

    def send(self, kind: str, payload: dict[str, Any]) -> None:
        try:
            self.writer.write(encode_line(kind, payload))
            self.writer.flush()
        except (BrokenPipeError, ConnectionResetError):
            raise EpisodeAborted("the policy stopped reading before the episode ended") from None

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        self.turn += 1
        self.send("request", {"messages": messages, "tools": tools, "max_tokens": max_tokens or DEFAULT_MAX_TOKENS})
        try:
            line = await asyncio.wait_for(self.lines.readline(), self.timeout)
        except TimeoutError:
            raise EpisodeAborted(
                f"turn {self.turn}: the policy did not answer within {self.timeout:g} seconds"
            ) from None
        if not line:
            raise EpisodeAborted("the policy closed its input before the episode ended")
        return Completion(assistant_message(line, self.turn), TokenUsage(), POLICY)


def assistant_message(line: bytes, turn: int) -> dict[str, Any]:
    """The policy's line as an assistant message; EpisodeAborted saying what is wrong."""
    try:
        kind, message = decode_line(line)
    except ValueError as exc:
        raise EpisodeAborted(f'turn {turn}: {exc}; send {{"message": {{"role": "assistant", ...}}}}') from None
    if kind != "message":
        raise EpisodeAborted(f'turn {turn}: expected {{"message": ...}}, got {kind!r}')
    return checked_message(message, turn)


def checked_message(message: dict[str, Any], turn: int) -> dict[str, Any]:
    """The policy's message as the runtime is given it; EpisodeAborted saying what is wrong."""
    if message.get("role", "assistant") != "assistant":
        raise EpisodeAborted(f'turn {turn}: the message\'s role must be "assistant", not {message.get("role")!r}')
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise EpisodeAborted(f"turn {turn}: the message's content must be text or null")
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise EpisodeAborted(f"turn {turn}: tool_calls must be a list")
    kept: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        kept["tool_calls"] = [_tool_call(c, turn, i) for i, c in enumerate(calls, 1)]
    return kept


def _tool_call(call: Any, turn: int, index: int) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise EpisodeAborted(f'turn {turn}: tool call {index} needs {{"function": {{"name": ..., "arguments": ...}}}}')
    arguments = fn.get("arguments", "{}")
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments, ensure_ascii=False)
    if not isinstance(arguments, str):
        raise EpisodeAborted(f"turn {turn}: tool call {index}: arguments must be JSON text or an object")
    call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else f"call_{turn}_{index}"
    return {"id": call_id, "type": "function", "function": {"name": fn["name"], "arguments": arguments}}


def episode_models(policy: Model, users: ModelFactory | None) -> ModelFactory:
    """The policy gives the agent's turns; `users` makes a conversation's simulated user."""

    def models(spec: str) -> Model:
        if spec == POLICY:
            return policy
        if users is None:
            raise ImproverError(f"nothing here can make {spec}, the model that plays the simulated user")
        return users(spec)

    return models


def errored_payload(result: RunResult) -> dict[str, Any]:
    """The error line of an episode the harness could not run, or whose simulated user leaked."""
    message = f"the episode could not be run (not the policy's doing): {result.reason}"
    return {"kind": "errored", "message": message, **({"leaked": True} if result.leaked else {})}


def done_payload(result: RunResult) -> dict[str, Any]:
    return {
        "case": result.task,
        "reward": result.reward,
        "passed": result.passed,
        "failures": result.failures,
        "calls": len(result.run.calls),
        "ended": {"how": result.run.ended, "answer": result.run.answer, "reason": result.reason},
        **result.conversation_json(),
    }


async def run_episode(
    task: Task,
    operator: str,
    lessons: str,
    agent: Agent,
    reader: BinaryIO,
    writer: BinaryIO,
    limits: EpisodeLimits = EpisodeLimits(),
    users: ModelFactory | None = None,
) -> RunResult | None:
    """Runs one episode over `reader`/`writer`; the result, or None when it ended in an
    error line (a malformed policy line, or a run the harness could not make)."""
    policy = PolicyModel(reader, writer, limits.wall_seconds)
    variant = Variant(operator, lessons, (POLICY,))
    # The harness allows a model call wall_seconds before calling it an infrastructure
    # fault; here the model is the policy, whose own clock (above) must run out first.
    harness_limits = replace(limits, wall_seconds=limits.wall_seconds + POLICY_GRACE)
    try:
        result = await run_task(task, variant, agent, episode_models(policy, users), harness_limits, retries=0)
    except EpisodeAborted as exc:
        _last_word(policy, "error", {"kind": "policy", "message": str(exc)})
        return None
    if result.outcome == "errored":
        _last_word(policy, "error", errored_payload(result))
        return None
    return result if _last_word(policy, "done", done_payload(result)) else None


def _last_word(policy: PolicyModel, kind: str, payload: dict[str, Any]) -> bool:
    """Sends the episode's last line; False when the policy is no longer there to read it."""
    try:
        policy.send(kind, payload)
    except EpisodeAborted:
        return False
    return True
