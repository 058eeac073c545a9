"""The episode protocol: how a candidate talks to whoever answers it.

A candidate is the agent runtime (in-process) or a program speaking JSON lines on its
standard input and output. Either way it asks for a model's answer, calls tools, and
ends by saying it is done or that it would ask a person. The other side (the harness in
trials, the live shell in real sessions) answers, keeps every call and enforces the
limits, so the candidate never grades itself.

improver/ never imports agentd/: the runtime is injected as an `Agent`, and models as
`Model`s, both defined here.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from improver.base.errors import ImproverError
from improver.base.nesting import loads_bounded

if TYPE_CHECKING:
    # Only the harness's side (Budget) runs under an event loop: a candidate program that
    # speaks the protocol (agentd case --stdio) never loads asyncio, a third of its CPU.
    import asyncio

T = TypeVar("T")

# How a run ended. "errored" is a fault that is not the candidate's (a provider that
# failed through every retry or did not answer in time, a model set up wrong, a harness
# fault): it is never scored as a bad outcome.
Ended = Literal["done", "asked", "limit", "errored"]
ENDINGS: tuple[str, ...] = ("done", "asked", "limit", "errored")

# The tool the runtime offers so the model can say it would ask a person.
ASK_PERSON_TOOL = "ask_person"

# The answer's length a model call asks for when the candidate sets no cap: within what
# every provider accepts, so a run's limit is never sent as an answer's length.
DEFAULT_MAX_TOKENS = 4096


class ProviderError(Exception):
    """A model provider failed after its retries: an infrastructure fault, not a bad run."""


class RequestRefused(ProviderError):
    """The provider refused the request as it was shaped (HTTP 400, 413 or 422): a fault of
    whoever shaped it, which no retry mends. In a trial that is the candidate, whose run
    fails (improver.episodes.harness); anywhere else it is a ProviderError like any."""


class ModelMisconfigured(ImproverError):
    """The model cannot answer as it was set up (a scripted model with no rule for the
    conversation): its author's mistake, not the candidate's, and no retry mends it. A
    trial reports the run as errored at once; a live session is recorded as errored."""


class LimitReached(Exception):
    """The run reached one of its limits (turns, tokens, wall time, output)."""


@dataclass(frozen=True)
class TokenUsage:
    tokens_in: int = 0
    tokens_out: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(self.tokens_in + other.tokens_in, self.tokens_out + other.tokens_out)

    @property
    def total(self) -> int:
        return self.tokens_in + self.tokens_out


@dataclass(frozen=True)
class Completion:
    """A model's answer: one assistant message in OpenAI chat format."""

    message: dict[str, Any]
    usage: TokenUsage
    model: str


class Model(Protocol):
    """Anything that answers chat messages: a provider, a scripted model, a policy."""

    name: str

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion: ...


@dataclass(frozen=True)
class EpisodeLimits:
    max_turns: int = 20
    max_tokens: int = 100_000
    wall_seconds: float = 300.0  # the candidate's own time: waiting for the model is not counted
    max_output_bytes: int = 4_000_000
    call_tokens: int = DEFAULT_MAX_TOKENS  # the longest answer one model call may be asked for
    call_seconds: float = 300.0  # how long one model call may take before it is a provider fault


@dataclass(frozen=True)
class Case:
    """What a candidate is given at the start of a run: the first line over stdio."""

    name: str
    task: str
    tools: list[dict[str, Any]]
    operator: str = ""
    lessons: str = ""
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    # A conversation goes on: every message after the task's, the last the person's reply.
    conversation: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        # Not asdict, which deep-copies the tools' schemas and the conversation for a line
        # written out at once: 0.09 ms a run against 0.005 with the invoices' four tools.
        return {
            "name": self.name,
            "task": self.task,
            "tools": self.tools,
            "operator": self.operator,
            "lessons": self.lessons,
            "limits": asdict(self.limits),
            "conversation": self.conversation,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Case:
        return cls(
            name=str(data["name"]),
            task=str(data["task"]),
            tools=list(data.get("tools") or []),
            operator=str(data.get("operator") or ""),
            lessons=str(data.get("lessons") or ""),
            limits=EpisodeLimits(**(data.get("limits") or {})),
            conversation=list(data.get("conversation") or []),
        )


@dataclass(frozen=True)
class Ending:
    """How a run ended, as the candidate tells it. The harness scores what it answered."""

    ended: Ended
    answer: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


class Episode(Protocol):
    """The side that answers a candidate: live tools and providers, or stand-ins."""

    async def model(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        """Raises ProviderError (after retries) or LimitReached."""
        ...

    async def tool(self, call_id: str, name: str, arguments: str) -> str:
        """Runs (or stands in for) one tool call; returns its answer as text."""
        ...


# The agent runtime as the improver sees it: runs a case against an episode.
Agent = Callable[[Case, Episode], Awaitable[Ending]]


class Budget:
    """Counts turns, tokens and wall time against a case's limits; every episode side uses it.

    The wall time is the candidate's own: time spent waiting for the model's answers
    (`wait_for_model`) does not count against it, so a slow or rate-limited provider
    never runs a candidate out of time. Each answer has a deadline of its own
    (`call_seconds`) and a length of its own (`call_tokens`); a model that takes longer
    raises ProviderError, an infrastructure fault, never the candidate's.
    """

    def __init__(self, limits: EpisodeLimits) -> None:
        self.limits = limits
        self.turns = 0
        self.usage = TokenUsage()
        self.started = time.monotonic()
        self.model_seconds = 0.0  # time spent waiting for the model, none of it the candidate's
        self._waiting = 0  # model calls in flight: concurrent ones share their wait
        self._since = 0.0  # when the first call in flight began
        self._timer: asyncio.Timeout | None = None

    def elapsed(self) -> float:
        """The candidate's own seconds so far: the run's time less the model's."""
        now = time.monotonic()
        waiting = now - self._since if self._waiting else 0.0
        return now - self.started - self.model_seconds - waiting

    def check_time(self) -> None:
        if self.elapsed() > self.limits.wall_seconds:
            raise LimitReached(f"the run reached its limit of {self.limits.wall_seconds:g} seconds")

    def start_turn(self) -> None:
        self.check_time()
        if self.turns >= self.limits.max_turns:
            raise LimitReached(f"the run reached its limit of {self.limits.max_turns} turns")
        if self.usage.total >= self.limits.max_tokens:
            raise LimitReached(f"the run reached its limit of {self.limits.max_tokens} tokens")
        self.turns += 1

    def allowance(self, asked: int | None) -> int:
        """The `max_tokens` a model call is given: what the candidate asked, never more
        than the call's own cap (`call_tokens`, also what it gets when it asks nothing)
        nor than the run has left of its token limit, so a model that keeps within it
        cannot carry the run past that limit, and one slow model call cannot take it all."""
        left = self.limits.max_tokens - self.usage.total
        cap = self.limits.call_tokens
        return min(cap if asked is None else min(asked, cap), left)

    def spend(self, usage: TokenUsage) -> None:
        self.usage = self.usage + usage

    def enforce(self, timer: asyncio.Timeout) -> None:
        """Keeps `timer`, the `asyncio.timeout` the run is under, due when the candidate's
        own time runs out: it is off while the model is waited for, and put back after."""
        self._timer = timer
        self._reschedule()

    async def wait_for_model(self, answer: Awaitable[T]) -> T:
        """Awaits a model's `answer` on the model's time; ProviderError when it takes
        longer than `call_seconds`."""
        import asyncio  # loaded by whatever runs this under a loop (see the top)

        if not self._waiting:
            self._since = time.monotonic()
        self._waiting += 1
        self._reschedule()
        deadline = asyncio.timeout(self.limits.call_seconds)
        try:
            async with deadline:
                return await answer
        except TimeoutError:
            if not deadline.expired():
                raise  # the model's own time-out, not this one
            raise ProviderError(
                f"the model did not answer within {self.limits.call_seconds:g} seconds (the call's limit, call_seconds)"
            ) from None
        finally:
            self._waiting -= 1
            if not self._waiting:
                self.model_seconds += time.monotonic() - self._since
            self._reschedule()

    def _reschedule(self) -> None:
        if self._timer is None or self._timer.expired():
            return
        if self._waiting:
            self._timer.reschedule(None)
        else:
            import asyncio  # loaded by whatever runs this under a loop (see the top)

            left = self.limits.wall_seconds - self.elapsed()
            self._timer.reschedule(asyncio.get_running_loop().time() + left)


# JSON lines. Candidate -> harness: {"model": {...}}, {"tool": {...}}, {"done": {...}},
# {"ask": {...}}. Harness -> candidate: {"case": {...}} first, then {"completion": {...}},
# {"result": {...}} or {"error": {"kind": "provider"|"limit", "message": ...}}. In a
# conversation the harness may answer "done" or "ask" with {"user": {"content": ...}}:
# the person's reply, and the candidate goes on; otherwise it closes the candidate's input.


def encode_line(kind: str, payload: dict[str, Any]) -> bytes:
    return (json.dumps({kind: payload}, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def decode_line(line: bytes | str) -> tuple[str, dict[str, Any]]:
    """Parses one protocol line into (kind, payload); ValueError with the reason for any
    other line: not JSON, not UTF-8, nested too deep, a number too long to read, a lone
    surrogate, or not an object of one key holding an object."""
    try:
        data = loads_bounded(line)
    except ValueError as exc:
        raise ValueError(f"not a JSON line: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    if (isinstance(line, str) or _SURROGATE.search(line)) and not _is_text(data):
        raise ValueError("not a JSON line: it holds a lone surrogate (\\ud800 to \\udfff), which is no text")
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError("a protocol line must be a JSON object with exactly one key")
    ((kind, payload),) = data.items()
    if not isinstance(payload, dict):
        raise ValueError(f"the value of {kind!r} must be a JSON object")
    return kind, payload


# A lone surrogate, escaped, parses as JSON, but nothing written as UTF-8 can hold it: a
# run that kept one would fail wherever it is written. Bytes (UTF-8 holds no surrogate)
# are checked only when they hold such an escape; paired surrogates, one character, pass.
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def _is_text(data: Any) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def completion_to_json(c: Completion) -> dict[str, Any]:
    return {"message": c.message, "usage": {"in": c.usage.tokens_in, "out": c.usage.tokens_out}, "model": c.model}


def completion_from_json(data: dict[str, Any]) -> Completion:
    usage = data.get("usage") or {}
    return Completion(
        message=dict(data["message"]),
        usage=TokenUsage(int(usage.get("in", 0)), int(usage.get("out", 0))),
        model=str(data.get("model", "")),
    )
