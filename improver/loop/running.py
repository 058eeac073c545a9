"""How a loop runs its work: trials and other awaited steps, each checked before it starts.

The lesson loop, the code loop and the improver loop run through one `Trials`. Before
every step (a proposal, a batch of runs, a build) it checks for a stop request, the kill
switch and, under a token budget, whether the step could pass it. Under a budget a trial
goes in batches that fit what is left with every run at the most it may cost, so no batch
can pass it whatever its runs cost. A stop request (SIGTERM, Ctrl-C) cancels the trial or
the other work under way (a build, the coder: its sandboxed process killed). Each run's
answer is held to the seal's code words, and every token spent is counted in `used`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import takewhile
from typing import TypeVar

from improver.base.protocol import EpisodeLimits, TokenUsage
from improver.base.variant import Variant
from improver.episodes.executors import Executor, ExecutorFailed
from improver.episodes.harness import Candidate, ModelFactory, run_cost
from improver.episodes.trials import Halted, TaskTally, TrialResult, run_trials
from improver.loop.record import Record
from improver.tasks.task import Task

T = TypeVar("T")


class Stop(Exception):
    """The loop must stop now; the message says why and what to do."""


class Interrupted(Stop):
    """Asked to stop (SIGTERM, Ctrl-C): not a verdict on anything."""


class BudgetTooSmall(Stop):
    """--max-tokens is below what one run may cost: refused before anything is spent."""


class OverBudget(Stop):
    """The next step could pass --max-tokens: stopped before it."""


@dataclass
class Trials:
    """A loop's trials and steps: checked, counted, stopped when asked."""

    candidate: Callable[[Variant], Candidate]  # what runs a variant: the agent, or the program built from it
    models: ModelFactory
    limits: EpisodeLimits
    concurrency: int
    halted: Callable[[], str | None]  # why no step may start now (the kill switch), or None
    left_as: str  # what a stop leaves as it was, for its message
    max_tokens: int | None = None
    progress: Callable[[str], None] | None = None  # "trial of variant V: 40/320 runs", at most once a second
    canary_in: Callable[[str], str | None] | None = None  # the seal's code words, held against every answer
    # Whether a stop request cancels a trial under way; the improver loop's own trials run
    # to their end (the loops grading its improvers are told of the stop at once).
    cancels: bool = True
    # Where each run runs: None, here; or another executor (workers on other machines).
    executor: Executor | None = None
    used: TokenUsage = field(default_factory=TokenUsage)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    def request_stop(self) -> None:
        """Called from a signal handler: the loop stops at the next step it can."""
        self.stopping.set()

    def spend(self, usage: TokenUsage) -> None:
        self.used = self.used + usage

    def left(self) -> int | None:
        """The tokens the budget leaves, the most the next model call may be given; None without one."""
        return None if self.max_tokens is None else self.max_tokens - self.used.total

    def go(self, expected: int = 0) -> None:
        """Checked before every step; `expected` is the most the step may cost."""
        if self.stopping.is_set():
            raise Interrupted(f"interrupted; {self.left_as}")
        why = self.halted()
        if why:
            raise Stop(why)
        if self.max_tokens is not None and self.used.total + expected > self.max_tokens:
            raise OverBudget(
                f"the next step could pass the budget of {self.max_tokens} tokens ({self.used.total} used)"
            )

    async def unless_stopped(self, work: Awaitable[T], during: str) -> T:
        """`work`, unless a stop is asked for first: then it is cancelled (a sandboxed
        process it started is killed) and the loop stops, `during` saying in what."""
        task = asyncio.ensure_future(work)
        stopper = asyncio.ensure_future(self.stopping.wait())
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if task not in done:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise Interrupted(f"interrupted during {during}; {self.left_as}")
        return task.result()

    async def trial(self, variant: Variant, tasks: Sequence[Task], runs: int) -> TrialResult:
        """Runs `tasks` `runs` times each. Under a token budget, in batches that fit what is
        left with every run at the most it may cost (its own token limit, and its simulated
        user's: the harness holds each model call to what its run has left); the loop
        stops when not one more run fits."""
        if self.max_tokens is None:
            return await self.batch(variant, tasks, runs)
        per_run = max(run_cost(task, self.limits) for task in tasks)
        todo = [(task, runs) for task in tasks]  # each task and the runs of it still to go
        parts = []
        while todo:
            self.go(expected=per_run)
            fit = (self.max_tokens - self.used.total) // per_run
            first, count = todo[0]
            if fit < count:  # part of one task's runs
                parts.append(await self.batch(variant, [first], fit))
                todo[0] = (first, count - fit)
                continue
            batch = _alike(todo, fit // count)
            parts.append(await self.batch(variant, batch, count))
            todo = todo[len(batch) :]
        return combine(parts)

    async def batch(self, variant: Variant, tasks: Sequence[Task], runs: int) -> TrialResult:
        """One trial of `tasks`, `runs` each, checked before it starts."""
        self.go()
        work = run_trials(
            variant,
            tasks,
            self.candidate(variant),
            self.models,
            runs=runs,
            concurrency=self.concurrency,
            limits=self.limits,
            on_result=self._counter(f"trial of variant {variant.id}", len(tasks) * runs),
            halted=self.halted,
            executor=self.executor,
        )
        try:
            result = await (self.unless_stopped(work, "a trial") if self.cancels else work)
        except (Halted, ExecutorFailed) as exc:
            raise Stop(f"{exc}; {self.left_as}" if isinstance(exc, ExecutorFailed) else str(exc)) from None
        self.spend(result.usage)
        self._check_answers(result)
        return result

    def _counter(self, what: str, total: int) -> Callable[[object], None] | None:
        if self.progress is None:
            return None
        report, done, last = self.progress, [0], [0.0]

        def count(_: object) -> None:
            done[0] += 1
            now = time.monotonic()
            if done[0] == total or now - last[0] >= 1.0:
                last[0] = now
                report(f"{what}: {done[0]}/{total} runs")

        return count

    def _check_answers(self, result: TrialResult) -> None:
        """A code word in any run's answer, however written: the sealed answers have leaked."""
        if self.canary_in is None:
            return
        for run in result.results:
            canary = self.canary_in(run.run.answer)
            if canary:
                raise Stop(
                    f"a run's answer holds the code word of {canary}: the sealed answers reached the agent; seal fresh tasks"
                )


def check_budget(max_tokens: int | None, limits: EpisodeLimits, tasks: Iterable[Task]) -> None:
    """BudgetTooSmall when `max_tokens` is less than one run of the costliest task may cost."""
    most = max((run_cost(t, limits) for t in tasks), default=limits.max_tokens)
    if max_tokens is not None and max_tokens < most:
        # A conversation's simulated user has an allowance of its own, as large as the run's.
        users = ", twice that for a task with a simulated user" if most > limits.max_tokens else ""
        raise BudgetTooSmall(
            f"--max-tokens {max_tokens} is less than one run may cost (the profile's limit of "
            f"{limits.max_tokens} tokens a run{users}): give at least {most}"
        )


def check_proposal(canary_in: Callable[[str], str | None], said: str) -> None:
    """A code word in what a proposer or coder said: the sealed tasks have reached it."""
    canary = canary_in(said)
    if canary:
        raise Stop(
            f"a proposal holds the code word of {canary}: the sealed tasks have reached the proposer; seal fresh tasks"
        )


async def run_rounds(
    record: Record,
    trials: Trials,
    first: Callable[[], Awaitable[None]],
    each: Callable[[], Awaitable[None]],
    rounds: int,
    save: Callable[[], None] = lambda: None,
) -> Stop | None:
    """`first`, then `rounds` rounds of `each`; returns why they stopped early, if they did,
    recorded as the lineage's last line. Whatever happens, `save` keeps what is done and the
    tokens used are said."""
    try:
        await first()
        for record.round in range(1, rounds + 1):
            await each()
    except Stop as stop:
        record.stopped(str(stop))
        return stop
    finally:
        save()
        record.ended(trials.used)
    return None


def combine(parts: list[TrialResult]) -> TrialResult:
    """One result from trials of the same variant, on the same tasks or on some of them."""
    per_task: dict[str, TaskTally] = {}
    for part in parts:
        for name, tally in part.per_task.items():
            mine = per_task.setdefault(name, TaskTally())
            mine.passed += tally.passed
            mine.failed += tally.failed
            mine.errored += tally.errored
            mine.failures += [f for f in tally.failures if f not in mine.failures]
            mine.errors += [e for e in tally.errors if e not in mine.errors]
    runs = max(sum(t.passed + t.failed + t.errored for t in per_task.values()) // max(len(per_task), 1), 1)
    return TrialResult(parts[0].variant, runs, [r for part in parts for r in part.results], per_task)


def _alike(todo: list[tuple[Task, int]], most: int) -> list[Task]:
    """The first tasks of `todo`, at most `most`, that need as many more runs as the first."""
    count = todo[0][1]
    return [task for task, _ in takewhile(lambda item: item[1] == count, todo[:most])]
