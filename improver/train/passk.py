"""pass@k and best-of-n: how often the agent solves a task within k tries.

The agent runs each task n times through the same trials the loop runs
(improver.episodes.trials: the same per-task tally of passed, failed and errored runs). Per task,
with c of its n judged runs passed, pass@k is the unbiased estimator of Chen et al.
(2021), 1 - C(n-c, k) / C(n, k): the chance that k runs drawn without replacement from
the n include a pass. The reported pass@k is its mean over the tasks.

Errored runs (a provider's or the harness's fault) are left out of n and counted apart,
never scored as failures. A task left with fewer judged runs than k has no pass@k for
that k: it is left out of that mean and counted. Best-of-n is, per task, the highest
reward among its judged runs; the figure is its mean over the tasks with one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

from improver.base.errors import ImproverError
from improver.base.protocol import EpisodeLimits
from improver.base.variant import Variant
from improver.episodes.executors import Executor
from improver.episodes.harness import RETRIES, Candidate, ModelFactory, RunResult
from improver.episodes.trials import CONCURRENCY, TrialResult, run_trials
from improver.tasks.task import Task


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al.'s unbiased estimator for n runs of which c passed; needs 1 <= k <= n.
    Computed as a product, 1 - prod(1 - k/i for i in n-c+1..n), which never forms the
    large binomials."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def parse_ks(text: str, runs: int) -> tuple[int, ...]:
    """ "1,5,10" as the ks to report, each between 1 and `runs`; ImproverError saying what
    is wrong."""
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ImproverError(f"--k must be whole numbers separated by commas, e.g. 1,5,10 (not {text!r})") from None
    if not ks:
        raise ImproverError("--k names no k: give e.g. 1,5,10")
    if ks[0] < 1:
        raise ImproverError(f"--k {ks[0]}: each k must be at least 1")
    if ks[-1] > runs:
        raise ImproverError(f"--k {ks[-1]} is larger than --runs {runs}: pass@k needs at least k runs of each task")
    return tuple(ks)


@dataclass(frozen=True)
class TaskPasses:
    task: str
    passed: int
    judged: int  # passed or failed: the n of the estimator
    errored: int  # left out of n
    best_reward: float | None  # None when no run was judged
    pass_at: dict[int, float | None]  # None when fewer than k runs were judged

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "passed": self.passed,
            "judged": self.judged,
            "errored": self.errored,
            "best_reward": self.best_reward,
            "pass_at": {str(k): v for k, v in self.pass_at.items()},
        }


@dataclass(frozen=True)
class Evaluation:
    variant: Variant
    runs: int
    ks: tuple[int, ...]
    tasks: list[TaskPasses]
    pass_at: dict[int, float | None]  # the mean over the tasks with at least k judged runs
    left_out: dict[int, int]  # per k: the tasks with fewer than k judged runs
    mean_reward: float | None  # over every judged run
    best_of_n: float | None  # the mean over the tasks of their best reward
    errored: int
    errors: list[str]

    @property
    def judged(self) -> int:
        return sum(t.judged for t in self.tasks)

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant.id,
            "runs": self.runs,
            "k": list(self.ks),
            "pass_at": {str(k): v for k, v in self.pass_at.items()},
            "left_out": {str(k): v for k, v in self.left_out.items()},
            "mean_reward": self.mean_reward,
            "best_of_n": self.best_of_n,
            "judged": self.judged,
            "errored": self.errored,
            "errors": self.errors,
            "tasks": [t.to_json() for t in self.tasks],
        }


def evaluate(result: TrialResult, ks: Sequence[int]) -> Evaluation:
    """pass@k, mean reward and best-of-n from a trial's results and per-task tallies."""
    rewards: dict[str, list[float]] = {name: [] for name in result.per_task}
    for run in result.results:
        if run.outcome != "errored":
            rewards[run.task].append(run.reward)
    tasks = []
    for name, tally in result.per_task.items():
        pass_at = {k: pass_at_k(tally.judged, tally.passed, k) if tally.judged >= k else None for k in ks}
        best = max(rewards[name], default=None)
        tasks.append(TaskPasses(name, tally.passed, tally.judged, tally.errored, best, pass_at))
    every = [r for each in rewards.values() for r in each]
    bests = [t.best_reward for t in tasks if t.best_reward is not None]
    return Evaluation(
        variant=result.variant,
        runs=result.runs,
        ks=tuple(ks),
        tasks=tasks,
        pass_at={k: _mean([p for t in tasks if (p := t.pass_at[k]) is not None]) for k in ks},
        left_out={k: sum(1 for t in tasks if t.pass_at[k] is None) for k in ks},
        mean_reward=_mean(every),
        best_of_n=_mean(bests),
        errored=result.errored,
        errors=result.errors,
    )


async def run_eval(
    variant: Variant,
    tasks: Sequence[Task],
    candidate: Candidate,
    models: ModelFactory,
    runs: int,
    ks: Sequence[int],
    *,
    limits: EpisodeLimits = EpisodeLimits(),
    concurrency: int = CONCURRENCY,
    retries: int = RETRIES,
    on_result: Callable[[RunResult], None] | None = None,
    executor: Executor | None = None,
) -> Evaluation:
    """Runs every task `runs` times as `variant` and reports pass@k for each of `ks`,
    each run through `executor` (by default here)."""
    if not tasks:
        raise ImproverError("there are no tasks to evaluate on (validation excluded them all, or none were harvested)")
    if not ks or min(ks) < 1 or max(ks) > runs:
        raise ImproverError(f"each k must be between 1 and the runs per task ({runs})")
    result = await run_trials(
        variant,
        tasks,
        candidate,
        models,
        runs=runs,
        concurrency=concurrency,
        limits=limits,
        retries=retries,
        on_result=on_result,
        executor=executor,
    )
    return evaluate(result, ks)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
