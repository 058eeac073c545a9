"""The challenger: variants of the tasks a change newly passes, to catch a change that
only fits the tasks it was chosen on.

A change can pass the tasks to choose on by fitting them alone: a rule naming the payee
of the very tasks the agent failed passes them, and nothing else. After screening, a
model (`--challenger`) is shown each task the change newly passes (one the agent as it
is failed in some run and the change passes), up to `tasks` of them, the change itself
and what the operator tells the agent, and writes `variants` variants of it with
`write_task` (improver.loop.writing): the same kind of request, changed where a change that
fits the task alone would go wrong. It is shown tasks to choose on, never a sealed one;
a variant is kept only when its solution and failures bear it out and it repeats no task
(a sealed one word for word or by a run of eight words included), and a canary's code
word in anything it says stops the loop. The loop then runs the agent as it is and as
changed on the variants that held up and judges them with improver.decide.decision's rule for
the `CHALLENGE` part.

A challenger that errors through every retry says nothing about the change: the change
is not judged on it and goes on, and the loop says so.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from improver.base.protocol import Completion, Model, ProviderError, TokenUsage
from improver.decide.stats import Tally
from improver.loop.practice import task_shown
from improver.loop.writing import REPEATS_WRITTEN, TOOL_NAME, TURNS, Brief, write_tasks
from improver.tasks.task import Task

TASKS = 4  # the most tasks a change newly passes that get variants
VARIANTS = 2  # variants of each
INSTRUCTIONS = (
    "You challenge a change made to an agent. The change made the agent pass the task you are shown, which it "
    "failed before. A change can pass a task by fitting that task alone, not what it stands for. Write variants "
    "of the task with the write_task tool: the same kind of request, changed where a change that fits this task "
    "alone would go wrong and one that fixes what the agent got wrong would not. Each comes with a solution "
    "that passes every check and failures, wrong runs, that must each fail a check."
)


@dataclass(frozen=True)
class Challenger:
    """How a change is challenged: the model that writes variants, and how many."""

    model: Model
    tasks: int = TASKS
    variants: int = VARIANTS
    turns: int = TURNS


@dataclass
class Variants:
    """What the challenger wrote of the tasks a change newly passes."""

    of: list[str]  # the tasks to choose on it varied
    tasks: list[Task] = field(default_factory=list)  # the variants that held up, named variant-1, ...
    written: int = 0  # write_task calls read
    left_out: Counter[str] = field(default_factory=Counter)  # every variant not kept, by reason
    errors: list[str] = field(default_factory=list)  # one for each task whose writing errored through every retry
    calls: int = 0  # model calls made
    usage: TokenUsage = TokenUsage()

    @property
    def failed(self) -> bool:
        """The challenger errored on every task it was given: it said nothing of the change."""
        return bool(self.of) and len(self.errors) == len(self.of)


def newly_passed(
    tasks: Sequence[Task], change: Mapping[str, Tally], current: Mapping[str, Tally], most: int
) -> list[Task]:
    """Up to `most` tasks the agent as it is failed in some run and the change passes (in
    more than half its runs, more often than the agent), those it gains most on first, in
    their own order among equals."""

    def gain(task: Task) -> float:
        mine, now = change.get(task.name), current.get(task.name)
        if not mine or not now or now.passed == now.runs or 2 * mine.passed <= mine.runs:
            return 0.0
        return mine.passed / mine.runs - now.passed / now.runs

    return sorted((t for t in tasks if gain(t) > 0), key=lambda t: -gain(t))[:most]


def messages_for(operator: str, change: str, task: Task, how: str, count: int) -> list[dict[str, Any]]:
    """What the challenger is shown of one task to choose on: nothing sealed is given here."""
    parts = [
        "What the operator tells the agent:",
        textwrap.indent(operator.strip() or "(empty)", "    "),
        f"The change: {change}",
        "The task it now passes:",
        task_shown(task, how),
        f"Write {count} variants of this task with {TOOL_NAME}, each different from the task and from each other.",
    ]
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "\n\n".join(parts)}]


class _Counted:
    """The challenger, its calls and tokens counted whether or not they succeed."""

    def __init__(self, model: Model, variants: Variants) -> None:
        self.model, self.name, self.variants = model, model.name, variants

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        self.variants.calls += 1
        completion = await self.model.complete(messages, tools, max_tokens)
        self.variants.usage = self.variants.usage + completion.usage
        return completion


@dataclass(frozen=True)
class Shown:
    """What a challenge is given besides the tasks to vary: the rest comes from the seal."""

    profile: str
    operator: str
    change: str  # how the operator's lines name the change
    chosen: Sequence[Task]  # every task to choose on (a variant repeating one is left out)
    sealed: Sequence[Task]  # the real sealed tasks, held against what it writes, never shown
    canary_in: Callable[[str], str | None]


async def write_variants(
    challenge: Challenger,
    shown: Shown,
    varied: Sequence[Task],
    how: Callable[[Task], str],
    left: Callable[[], int | None] = lambda: None,
) -> Variants:
    """Has the challenger write variants of each task in `varied`, one conversation a
    task; `how` says how the agent and the change did on it, `left` what a token budget
    leaves. Raises improver.loop.writing.SealReached on a canary's code word."""
    variants = Variants([t.name for t in varied])
    model = _Counted(challenge.model, variants)
    seen: set[str] = set()
    for task in varied:
        brief = Brief(
            messages=messages_for(shown.operator, shown.change, task, how(task), challenge.variants),
            count=challenge.variants,
            profile=shown.profile,
            operator=shown.operator,
            shown=[task],
            chosen=shown.chosen,
            sealed=shown.sealed,
            canary_in=shown.canary_in,
            source={"challenger": challenge.model.name, "of": task.name},
            turns=challenge.turns,
            max_tokens=_less(left(), variants.usage.total),
        )
        try:
            writing = await write_tasks(model, brief)
        except ProviderError as exc:
            variants.errors.append(f"{task.name}: {exc}")
            continue
        variants.written += len(writing.attempts)
        variants.left_out += writing.left_out()
        for written in writing.kept:
            if written.content_key in seen:  # the same variant written for two tasks
                variants.left_out[REPEATS_WRITTEN] += 1
                continue
            seen.add(written.content_key)
            variants.tasks.append(replace(written, name=f"variant-{len(variants.tasks) + 1}"))
    return variants


def _less(left: int | None, used: int) -> int | None:
    """What a budget leaves once this challenge's own calls so far are counted."""
    return None if left is None else left - used
