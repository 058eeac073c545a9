"""Practice tasks: tasks like the agent's own work, written by a model, to choose changes on.

The writer (by default the profile's own first model, so the agent writes its own) is
shown what the operator tells the agent and up to a dozen tasks to choose on, those the
agent fails first, with how it did. A practice task is kept when its solution and
failures bear it out, it is no task to choose on, sealed task or other written task over
again (improver.loop.writing), and the agent as it is does not pass it in every run: a task
it always passes shows no change anything.

The kept tasks are ranked by learnability, 4·p·(1−p) with p the agent's pass rate on
the task: a task the agent passes about half the time teaches most (it is 1 at p = ½,
0 at p = 0 or 1), one it always fails may be out of its reach. They are saved as a plain
task set, named by its digest; `improve run --practice FILE` adds them to the tasks to
choose on, never to the sealed ones, and a kept step names the set by its digest.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from improver.base.errors import ImproverError
from improver.base.protocol import EpisodeLimits, Model, TokenUsage
from improver.base.variant import Variant
from improver.episodes.harness import Candidate, ModelFactory
from improver.episodes.trials import Halted, TaskTally, TrialResult, run_trials
from improver.loop.writing import TOOL_NAME, TURNS, Brief, Writing, write_tasks
from improver.seals.seal import Seal
from improver.tasks import twins
from improver.tasks.runs import arguments_text
from improver.tasks.task import Task, TaskSet

SHOWN = 12  # the most tasks to choose on a writer is shown
ALWAYS_PASSED = "the agent as it is passes in every run"
NOT_JUDGED = "every run of the agent on it errored"
INSTRUCTIONS = (
    "You write practice tasks for an agent: tasks like its own work, where it may go wrong, each with a "
    "solution that passes every check and failures, runs like it that are wrong, that must each fail a check. "
    "Write each with the write_task tool. Do not copy a task you are shown: change what it asks."
)


def learnability(passed: int, runs: int) -> float:
    """4·p·(1−p): 1 for a task passed half the time, 0 for one always or never passed."""
    p = passed / runs if runs else 0.0
    return 4 * p * (1 - p)


@dataclass(frozen=True)
class Ranked:
    task: Task
    passed: int
    runs: int  # judged runs: errored ones are left out

    @property
    def learnability(self) -> float:
        return learnability(self.passed, self.runs)


@dataclass(frozen=True)
class PracticeRequest:
    count: int = 4
    runs: int = 2
    turns: int = TURNS
    concurrency: int = 8


@dataclass
class Practice:
    writing: Writing
    ranked: list[Ranked]  # kept, most learnable first
    left_out: Counter[str]  # every written task not kept, by reason
    taskset: TaskSet | None  # the kept tasks as a set, or None when none was kept
    usage: TokenUsage


@dataclass(frozen=True)
class Runner:
    """How the agent as it is runs here (injected: improver never makes an agent)."""

    current: Variant
    agent: Candidate
    models: ModelFactory
    limits: EpisodeLimits = EpisodeLimits()
    halted: Callable[[], str | None] = lambda: None

    async def trial(self, tasks: Sequence[Task], runs: int, concurrency: int) -> TrialResult:
        try:
            return await run_trials(
                self.current,
                tasks,
                self.agent,
                self.models,
                runs=runs,
                concurrency=concurrency,
                limits=self.limits,
                halted=self.halted,
            )
        except Halted as exc:
            raise ImproverError(f"stopped: {exc}; nothing was written") from None


def failed_first(tasks: Sequence[Task], tallies: dict[str, TaskTally]) -> list[Task]:
    """Up to SHOWN tasks, the least often passed first (in their own order among equals)."""

    def rate(task: Task) -> float:
        tally = tallies.get(task.name)
        return tally.passed / tally.judged if tally and tally.judged else 1.0

    return sorted(tasks, key=rate)[:SHOWN]


def messages_for(
    operator: str, shown: Sequence[Task], tallies: dict[str, TaskTally], count: int
) -> list[dict[str, Any]]:
    """What the writer is shown: the operator's words and tasks to choose on, nothing sealed."""
    parts = [
        "What the operator tells the agent:",
        _block(operator),
        f"Tasks the agent was given ({len(shown)}), with how it did:",
    ]
    for task in shown:
        parts.append(_shown(task, tallies.get(task.name)))
    parts.append(f"Write {count} practice tasks like these with {TOOL_NAME}, each different from every task above.")
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "\n\n".join(parts)}]


def _shown(task: Task, tally: TaskTally | None) -> str:
    how = f"passed {tally.passed} of {tally.judged} runs" if tally and tally.judged else "not judged"
    wrong = f"; went wrong: {'; '.join(tally.failures)}" if tally and tally.failures else ""
    return task_shown(task, f"the agent {how}{wrong}")


def task_shown(task: Task, how: str) -> str:
    """A task to choose on as a writer is shown it: what is asked, how it went, its stand-ins and checks."""
    standins = "\n".join(
        f"  {s['tool']} {arguments_text(s['arguments'])} answers {json.dumps(s['answer'])}" for s in task.standins
    )
    checks = json.dumps(task.checks, ensure_ascii=False)
    return f"- {task.task}\n  {how}\n  stand-ins:\n{standins}\n  checks: {checks}"


def _block(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.strip().splitlines()) or "    (empty)"


async def write_practice(profile: str, seal: Seal, writer: Model, runner: Runner, request: PracticeRequest) -> Practice:
    """Shows the writer the tasks to choose on the agent fails first, has it write, and
    keeps what is borne out, no repeat, and not passed by the agent in every run."""
    if min(request.count, request.runs, request.turns, request.concurrency) < 1:
        raise ImproverError("--count, --runs and the writer's turns must each be at least 1")
    chosen = seal.train()
    now = await runner.trial(chosen.tasks, request.runs, request.concurrency)
    shown = failed_first(chosen.tasks, now.per_task)
    brief = Brief(
        messages=messages_for(chosen.operator, shown, now.per_task, request.count),
        count=request.count,
        profile=profile,
        operator=chosen.operator,
        shown=shown,
        chosen=chosen.tasks,
        sealed=seal.real_tasks,
        canary_in=seal.canary_in,
        source={"practice": True, "writer": writer.name},
        turns=request.turns,
    )
    writing = await write_tasks(writer, brief)
    left_out = writing.left_out()
    usage = now.usage + writing.usage
    candidates = writing.kept
    ranked: list[Ranked] = []
    if candidates:
        tried = await runner.trial(candidates, request.runs, request.concurrency)
        usage = usage + tried.usage
        for task in candidates:
            tally = tried.per_task[task.name]
            if not tally.judged:
                left_out[NOT_JUDGED] += 1
            elif tally.passed == tally.judged:
                left_out[ALWAYS_PASSED] += 1
            else:
                ranked.append(Ranked(task, tally.passed, tally.judged))
    ranked = _named(sorted(ranked, key=lambda r: -r.learnability))
    taskset = TaskSet(profile, chosen.operator, tuple(r.task for r in ranked), validated=True) if ranked else None
    return Practice(writing, ranked, left_out, taskset, usage)


def _named(ranked: list[Ranked]) -> list[Ranked]:
    """practice-1, practice-2, ... in rank order, with the agent's pass rate in each source."""
    return [
        replace(r, task=replace(r.task, name=f"practice-{i}", source={**r.task.source, "passed": [r.passed, r.runs]}))
        for i, r in enumerate(ranked, 1)
    ]


def with_practice(seal: Seal, practice: TaskSet | None) -> TaskSet:
    """The seal's tasks to choose on and the practice tasks, as one set; the sealed tasks
    stay the seal's alone, and a practice set holding one of them is refused."""
    chosen = seal.train()
    if practice is None:
        return chosen
    if practice.profile != chosen.profile:
        raise ImproverError(f"the practice tasks are profile {practice.profile}'s, not {chosen.profile}'s")
    sealed = twins.Twins[str]()
    keys = {}
    for task in seal.real_tasks:
        sealed.add(task.sketch, task.name)
        keys.update({task.content_key: task.name, task.twin_key: task.name})
    for task in practice.tasks:
        twin = keys.get(task.content_key) or keys.get(task.twin_key) or sealed.near(task.sketch)
        if twin:
            raise ImproverError(
                f"practice task {task.name} is a sealed task or its twin (of {twin}): the practice set cannot be "
                f"used with seal {seal.id}"
            )
    taken = {t.name for t in chosen.tasks} & {t.name for t in practice.tasks}
    if taken:
        raise ImproverError(
            f"practice task {sorted(taken)[0]} has the name of a task to choose on; rename it in the practice set"
        )
    return TaskSet(chosen.profile, chosen.operator, chosen.tasks + practice.tasks, validated=True)
