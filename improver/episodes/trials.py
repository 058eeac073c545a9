"""Trials: a variant on a task set, each task run R times, a bounded number at once.

The result counts, per task and in total, the runs that passed, failed and errored.
Errored runs (a provider or harness fault, after the harness's retries) are reported as
errors and left out of the pass counts: they are never scored as failures.

Each run goes through an executor (improver.episodes.executors): by default in this
process, or handed to a worker elsewhere; the trial is the same either way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from improver.base.protocol import EpisodeLimits, Model, TokenUsage
from improver.base.variant import Variant
from improver.decide.stats import Tally
from improver.episodes.executors import Executor, LocalExecutor
from improver.episodes.harness import RETRIES, Candidate, ModelFactory, RunResult
from improver.tasks.task import Task

CONCURRENCY = 8


class Halted(Exception):
    """A run was about to start while `halted` said to stop (the kill switch); the
    message says why."""


@dataclass
class TaskTally:
    passed: int = 0
    failed: int = 0
    errored: int = 0
    failures: list[str] = field(default_factory=list)  # what went wrong, each once
    errors: list[str] = field(default_factory=list)

    @property
    def judged(self) -> int:
        """Runs that say something about the candidate: passed or failed, not errored."""
        return self.passed + self.failed

    def add(self, result: RunResult) -> None:
        if result.outcome == "passed":
            self.passed += 1
        elif result.outcome == "failed":
            self.failed += 1
            self.failures += [f for f in result.failures if f not in self.failures]
        else:
            self.errored += 1
            if result.reason not in self.errors:
                self.errors.append(result.reason)


@dataclass
class TrialResult:
    variant: Variant
    runs: int
    results: list[RunResult]
    per_task: dict[str, TaskTally]

    @property
    def passed(self) -> int:
        return sum(t.passed for t in self.per_task.values())

    def tallies(self, tasks: Sequence[Task] | None = None) -> dict[str, Tally]:
        """Per task (of `tasks`, else all): runs passed of runs judged; a task with no
        judged run has no tally."""
        names = {t.name for t in tasks} if tasks is not None else set(self.per_task)
        return {n: Tally(t.passed, t.judged) for n, t in self.per_task.items() if n in names and t.judged}

    def wrong(self) -> dict[str, list[str]]:
        """Per task that failed a run: what its failed runs got wrong."""
        return {n: t.failures for n, t in self.per_task.items() if t.failed}

    @property
    def failed(self) -> int:
        return sum(t.failed for t in self.per_task.values())

    @property
    def errored(self) -> int:
        return sum(t.errored for t in self.per_task.values())

    @property
    def judged(self) -> int:
        return self.passed + self.failed

    @property
    def usage(self) -> TokenUsage:
        """Every token the trial spent: its runs', and their simulated users' (counted
        apart in each run, but spent all the same, so a token budget counts them)."""
        total = TokenUsage()
        for r in self.results:
            total = total + r.usage + r.user_usage
        return total

    @property
    def errors(self) -> list[str]:
        seen: list[str] = []
        for tally in self.per_task.values():
            seen += [e for e in tally.errors if e not in seen]
        return seen


def memoized(models: ModelFactory) -> ModelFactory:
    """One model object per spec for a whole trial, so clients are made once."""
    made: dict[str, Model] = {}

    def factory(spec: str) -> Model:
        if spec not in made:
            made[spec] = models(spec)
        return made[spec]

    return factory


async def run_trials(
    variant: Variant,
    tasks: Sequence[Task],
    candidate: Candidate,
    models: ModelFactory,
    *,
    runs: int = 1,
    concurrency: int = CONCURRENCY,
    limits: EpisodeLimits = EpisodeLimits(),
    retries: int = RETRIES,
    on_result: Callable[[RunResult], None] | None = None,
    halted: Callable[[], str | None] = lambda: None,
    executor: Executor | None = None,
) -> TrialResult:
    """Runs every task `runs` times, at most `concurrency` at once here; results come
    back in task order, then run order, whatever order they finished in. `halted` is
    asked before each run starts: a reason from it stops the trial (Halted), the runs
    under way with it. Each run goes through `executor`; by default here, with `models`
    (and `retries`; another executor has its own, and its own models). A run the executor
    sends to another machine starts at once: that machine bounds its own."""
    if runs < 1 or concurrency < 1:
        raise ValueError("runs and concurrency must be at least 1")
    gate = asyncio.Semaphore(concurrency)
    runner = executor or LocalExecutor(memoized(models), retries)

    async def one(task: Task) -> RunResult:
        async with contextlib.nullcontext() if runner.remote(task) else gate:
            why = halted()
            if why:
                raise Halted(why)
            result = await runner.run(task, variant, candidate, limits)
        if on_result:
            on_result(result)
        return result

    jobs = [asyncio.ensure_future(one(task)) for task in tasks for _ in range(runs)]
    try:
        results = await asyncio.gather(*jobs)
    except BaseException:
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        raise
    per_task = {task.name: TaskTally() for task in tasks}
    for result in results:
        per_task[result.task].add(result)
    return TrialResult(variant, runs, list(results), per_task)
