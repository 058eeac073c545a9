"""Tasks a model writes: the `write_task` tool, and what makes a written task count.

Every writer (practice tasks now, a challenger's variants later) calls one tool,
`write_task`, with a task in the task file's format (what is asked, its stand-ins, its
checks, and its tools unless they are those of the tasks it was shown), a solution (a
run that passes every check) and failures (runs like it that must each fail a check).
Both are played against the task's own stand-ins (improver.episodes.validate) before the task
is kept. A task refused so (not in the format, no run passes it, a careless run passes
it) is answered at once with why, and the writer may mend it, within a bounded number
of turns. A task borne out is still left out when it repeats a task to choose on,
another task the writer wrote, or a sealed task (word for word, or by a run of eight
words no task it was shown holds: improver.loop.gates); the writer is not told which sealed
task, nor that a sealed task was the reason. Every reason is counted.

A writer is shown only what its caller gives it (tasks to choose on, never sealed
ones); a canary's code word in anything it says stops everything: the sealed tasks have
reached it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from improver.base.errors import ImproverError
from improver.base.nesting import loads_bounded
from improver.base.protocol import Model, TokenUsage
from improver.decide import codewords
from improver.episodes.validate import CARELESS_RUN_PASSES, NO_RUN_PASSES, refusal
from improver.loop.gates import SealedText
from improver.tasks import twins
from improver.tasks.task import Task, build_task

TOOL_NAME = "write_task"
TURNS = 3  # the writer's first answer and two more to mend what was refused
WRITTEN_FIELDS = ("task", "tools", "standins", "checks", "solution", "failures")

# Why a written task is left out, beyond the two kinds of improver.episodes.validate.
MALFORMED = "not in the task file's format"
REPEATS_CHOSEN = "the same as a task to choose on"
REPEATS_WRITTEN = "the same as another task it wrote"
REPEATS_SEALED = "a sealed task word for word"
SHARES_SEALED = "shares a run of eight words with a sealed task"
REFUSED = (MALFORMED, NO_RUN_PASSES, CARELESS_RUN_PASSES)  # what the writer is told, to mend

_RUN: dict[str, Any] = {
    "type": "object",
    "properties": {
        "calls": {"type": "array", "items": {"type": "object"}, "description": "Each {tool, arguments}, in order."},
        "answer": {"type": "string", "description": "The run's last words."},
        "ended": {"type": "string", "enum": ["done", "asked", "limit"]},
    },
}
WRITE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Write one task for the agent, with a solution that passes every check and failures "
        "(runs like it that are wrong) that must each fail a check. Both are played against the task's "
        "stand-ins before it is kept; you are told at once if it is refused, and why.",
        "parameters": {
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "What the agent is asked."},
                "tools": {
                    "type": "array",
                    "items": {"type": "object"},
                    "description": "The tools offered ({name, description, parameters, changes}); "
                    "leave out for the tools of the tasks you were shown.",
                },
                "standins": {
                    "type": "array",
                    "items": {"type": "object"},
                    "description": "What each tool answers, by its exact input: {tool, arguments, answer}.",
                },
                "checks": {
                    "type": "array",
                    "items": {"type": "object"},
                    "description": "What a run must do: {check: finishes|asks|makes|calls|no_other_changes|"
                    "avoids|says|not_says, ...} as in the tasks you were shown.",
                },
                "solution": {**_RUN, "description": "A run that passes every check."},
                "failures": {
                    "type": "array",
                    "items": {**_RUN, "properties": {**_RUN["properties"], "why": {"type": "string"}}},
                    "description": "Wrong runs, each with why it is wrong; each must fail a check.",
                },
            },
            "required": ["task", "standins", "checks", "solution", "failures"],
        },
    },
}


class SealReached(ImproverError):
    """A writer said a canary's code word: the sealed tasks reached it; nothing it wrote counts."""


@dataclass(frozen=True)
class Attempt:
    """One write_task call, and what became of it."""

    turn: int
    task: Task | None  # None when it was not in the task file's format
    reason: str = ""  # why it was left out (a REFUSED kind or a repeat); "" when kept
    told: str = ""  # what the writer was told when it was refused

    @property
    def borne_out(self) -> bool:
        return self.reason not in REFUSED


@dataclass(frozen=True)
class Brief:
    """What a writer works from: its messages (made by the caller, holding only tasks to
    choose on), how many tasks are wanted, and what its tasks must not repeat."""

    messages: list[dict[str, Any]]
    count: int
    profile: str
    operator: str
    shown: Sequence[Task]  # the tasks the writer was shown; their tools are the default
    chosen: Sequence[Task]  # every task to choose on
    sealed: Sequence[Task]  # the real sealed tasks, held against what it writes
    canary_in: Callable[[str], str | None]  # the canary whose code word a text holds
    source: dict[str, Any] = field(default_factory=dict)  # what every written task records of its origin
    turns: int = TURNS
    max_tokens: int | None = None  # the most all its turns may cost together (what a token budget leaves)


@dataclass
class Writing:
    writer: str
    attempts: list[Attempt] = field(default_factory=list)
    turns: int = 0
    usage: TokenUsage = TokenUsage()

    @property
    def kept(self) -> list[Task]:
        return [a.task for a in self.attempts if not a.reason and a.task is not None]

    @property
    def borne_out(self) -> int:
        return sum(1 for a in self.attempts if a.borne_out)

    @property
    def refusals(self) -> list[str]:
        return [a.told for a in self.attempts if a.told]

    def left_out(self) -> Counter[str]:
        return Counter(a.reason for a in self.attempts if a.reason)


async def write_tasks(writer: Model, brief: Brief) -> Writing:
    """Has `writer` write up to `brief.count` tasks; refused ones are answered with why,
    and it may mend them until its turns run out. Raises SealReached on a code word."""
    writing = Writing(writer.name)
    messages = list(brief.messages)
    for turn in range(1, brief.turns + 1):
        left = None if brief.max_tokens is None else brief.max_tokens - writing.usage.total
        if left is not None and left <= 0:
            break
        writing.turns = turn
        completion = await writer.complete(messages, [WRITE_TOOL], left)
        writing.usage = writing.usage + completion.usage
        every = completion.message.get("tool_calls") or []
        _check_canary(brief, completion.message, every)
        calls = [c for c in every if c.get("function", {}).get("name") == TOOL_NAME]
        wanted = brief.count - writing.borne_out
        made = [
            await _attempt(brief, writing.turns, len(writing.attempts) + i, c) for i, c in enumerate(calls[:wanted], 1)
        ]
        writing.attempts += made
        replies = [_reply(call, attempt) for call, attempt in zip(calls, made, strict=False)]
        replies += [_reply(call, None) for call in calls[wanted:]]
        refused = [a for a in made if a.told]
        still = brief.count - writing.borne_out
        if not refused or still <= 0 or writing.turns == brief.turns:
            break
        messages += [completion.message, *replies, _mend(refused, still, brief.turns - writing.turns)]
    _leave_out_repeats(brief, writing)
    return writing


def _check_canary(brief: Brief, message: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    # Every call counts, those past the count and other tools' too.
    said = "\n".join([str(message.get("content") or ""), *codewords.call_texts(calls)])
    canary = brief.canary_in(said)
    if canary:
        raise SealReached(
            f"a written task holds the code word of {canary}: the sealed tasks have reached the writer; seal fresh tasks"
        )


async def _attempt(brief: Brief, turn: int, number: int, call: dict[str, Any]) -> Attempt:
    try:
        task = _task(brief, call["function"].get("arguments"), number)
    except ImproverError as exc:
        return Attempt(turn, None, MALFORMED, f"refused: it is {MALFORMED}: {exc}")
    found = await refusal(task, brief.operator)
    if found:
        return Attempt(turn, task, found.kind, f"refused: {found.why}")
    return Attempt(turn, task)


def _task(brief: Brief, arguments: Any, number: int) -> Task:
    """The task a write_task call makes, every field checked as a task file's are."""
    try:
        data = loads_bounded(arguments) if isinstance(arguments, str) else arguments
    except ValueError as exc:  # not JSON, nested too deep, a number too long to read
        raise ImproverError(f"its arguments are not JSON ({getattr(exc, 'msg', exc)})") from None
    if not isinstance(data, dict):
        raise ImproverError("its arguments must be a JSON object")
    unknown = sorted(set(data) - set(WRITTEN_FIELDS))
    if unknown:
        raise ImproverError(f"unknown field {unknown[0]!r}; a written task has {', '.join(WRITTEN_FIELDS)}")
    tools = brief.shown[0].tools if brief.shown else []
    fields = {"tools": tools, **data, "name": f"written-{number}", "profile": brief.profile, "source": brief.source}
    return build_task(fields, "the task", number, brief.profile)


def _reply(call: dict[str, Any], attempt: Attempt | None) -> dict[str, Any]:
    """The tool message answering one write_task call."""
    if attempt is None:
        said = "not read: enough tasks were written"
    else:
        said = attempt.told or "borne out: its solution passes every check and each failure fails one"
    return {"role": "tool", "tool_call_id": call.get("id", ""), "content": said}


def _mend(refused: list[Attempt], still: int, turns_left: int) -> dict[str, Any]:
    text = (
        f"{len(refused)} of the tasks you wrote {'was' if len(refused) == 1 else 'were'} refused, each for the reason "
        "its answer gives. "
        f"Mend them, or write others: {still} more wanted, with {TOOL_NAME}. "
        f"You have {turns_left} more {'answer' if turns_left == 1 else 'answers'}."
    )
    return {"role": "user", "content": text}


def _leave_out_repeats(brief: Brief, writing: Writing) -> None:
    """Marks each borne-out task that repeats one to choose on, one written before it, or
    a sealed task; the writer is not told which, so no sealed task is described to it."""
    chosen = {t.content_key for t in brief.chosen}
    sealed = {t.content_key for t in brief.sealed} | {t.twin_key for t in brief.sealed}
    near_sealed = twins.Twins[str]()  # a written near-twin of a sealed task repeats it (improver.tasks.twins)
    for task in brief.sealed:
        near_sealed.add(task.sketch, task.name)
    words = SealedText.of(brief.sealed).beyond(brief.shown)
    written: set[str] = set()
    for i, attempt in enumerate(writing.attempts):
        if attempt.reason or attempt.task is None:
            continue
        key = attempt.task.content_key
        reason = (
            REPEATS_CHOSEN
            if key in chosen
            else REPEATS_SEALED
            if key in sealed or attempt.task.twin_key in sealed or near_sealed.near(attempt.task.sketch)
            else REPEATS_WRITTEN
            if key in written
            else SHARES_SEALED
            if words.in_task(attempt.task)
            else ""
        )
        written.add(key)
        if reason:
            writing.attempts[i] = replace(attempt, reason=reason)
