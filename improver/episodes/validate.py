"""Validation: a task is trusted only when its checks tell a right run from a wrong one.

Gold and no-op, as the best RL-environment catalogs check theirs: the task's solution,
replayed through the harness against its own stand-ins (and, for a conversation, with
the recorded person in the simulated user's seat), must pass; each of its failures
(for a harvested task that went well, a run that does nothing and finishes; for one that
went badly, the session's own run) must fail. A task that does not is left out of the
set and kept under `excluded` with the reason, so the exclusion can be audited.
Both are judged on the reward too, the rubric's when the task has one: the solution must
score 1 and every failure less.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from improver.base.errors import ImproverError
from improver.base.protocol import Agent, Case, Ending, Episode, Model
from improver.base.variant import Variant
from improver.episodes.harness import ModelFactory, RunResult, run_task
from improver.tasks.runs import Run
from improver.tasks.simuser import RecordedPerson
from improver.tasks.task import Exclusion, Task, TaskSet


@dataclass(frozen=True)
class Validation:
    taskset: TaskSet  # the tasks kept, every exclusion (earlier ones too), validated
    newly_excluded: tuple[Exclusion, ...]


def replay(run: Run) -> Agent:
    """A candidate that makes `run`'s calls, in order, then ends as `run` did. In a
    conversation it is started again on each reply of the person: it made its calls
    already, and ends as it did."""

    async def agent(case: Case, episode: Episode) -> Ending:
        for i, call in enumerate(run.calls if not case.conversation else (), 1):
            await episode.tool(f"replay_{i}", call.tool, call.text())
        return Ending(run.ended, answer=run.answer)  # type: ignore[arg-type]

    return agent


def _recorded(task: Task) -> ModelFactory:
    """A replay asks no model; a conversation's simulated user is the recorded person."""

    def models(spec: str) -> Model:
        if task.user is None or spec != task.user.model:
            raise ImproverError("a replay asks no model")
        return RecordedPerson(task.user)

    return models


async def _replayed(task: Task, run: Run, variant: Variant) -> RunResult:
    result = await run_task(task, variant, replay(run), _recorded(task), retries=0)
    if result.outcome == "errored":
        # A replay touches no provider; an error here is a fault to fix, not a verdict.
        raise ImproverError(f"task {task.name}: the replay could not run ({result.reason}); try again")
    return result


# Why a task is not borne out, by kind: what a writer is told, and what counts leave out.
NO_RUN_PASSES = "no run passes it"
CARELESS_RUN_PASSES = "a careless run passes it"


@dataclass(frozen=True)
class Refusal:
    kind: str  # NO_RUN_PASSES or CARELESS_RUN_PASSES
    why: str  # which check the solution failed, or which failure passed


async def refusal(task: Task, operator: str = "") -> Refusal | None:
    """Why `task` cannot be trusted, by kind, or None when its solution and failures bear it out."""
    if not task.checks:
        return Refusal(NO_RUN_PASSES, "it has no checks, so no run could pass or fail it")
    if not task.failures:
        return Refusal(CARELESS_RUN_PASSES, "it has no failures, so nothing shows its checks can fail")
    variant = Variant(operator, "", ())
    solution = await _replayed(task, task.solution, variant)
    if not solution.passed:
        return Refusal(NO_RUN_PASSES, f"its solution does not pass (not held: {'; '.join(solution.failures)})")
    if solution.reward < 1.0:
        return Refusal(
            NO_RUN_PASSES,
            f"its solution scores {solution.reward:g} under the rubric, not 1: its checks carry no weight",
        )
    for i, failure in enumerate(task.failures, 1):
        result = await _replayed(task, failure, variant)
        if result.passed:
            why = f"failure {i} ({failure.why}) passes it: its checks cannot tell that wrong run from a right one"
            return Refusal(CARELESS_RUN_PASSES, why)
        if result.reward >= solution.reward:
            # Under a rubric a failed check may weigh nothing: the reward is what a
            # trainer sees, so it must tell the wrong run from the right one too.
            why = f"failure {i} ({failure.why}) scores the full reward under the rubric: its reward cannot tell that wrong run from a right one"
            return Refusal(CARELESS_RUN_PASSES, why)
    return None


async def check_task(task: Task, operator: str = "") -> str | None:
    """Why `task` cannot be trusted, or None when its solution and failures bear it out."""
    found = await refusal(task, operator)
    return found.why if found else None


async def validate(taskset: TaskSet) -> Validation:
    """Checks every task of the set; those that fail go to `excluded`, with the reason."""
    reasons = await asyncio.gather(*(check_task(t, taskset.operator) for t in taskset.tasks))
    kept = tuple(t for t, why in zip(taskset.tasks, reasons, strict=False) if why is None)
    new = tuple(Exclusion(t, why) for t, why in zip(taskset.tasks, reasons, strict=False) if why is not None)
    validated = TaskSet(taskset.profile, taskset.operator, kept, taskset.excluded + new, validated=True)
    return Validation(validated, new)
