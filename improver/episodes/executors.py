"""Executors: where a trial's runs run. One protocol, so a distributed engine can take
them across machines without the loop above knowing.

An executor runs one run of a candidate on a task (`run`), the harness's retries of an
errored run included, and gives back its `RunResult`; cancelling the call cancels the run
wherever it is. A run it hands to another machine (`remote`) is not counted in the
trial's concurrency, which bounds the sandboxes of this one: the machine that runs it
bounds its own. `LocalExecutor`, the default, runs it here with `run_task`. Another
backend (agentd's PostgreSQL queue) hands it to a worker elsewhere and gets the result
back as JSON: `result_to_json` and `result_from_json` carry every field of a
`RunResult`, so what comes back is exactly what the worker's harness made.

An executor that cannot go on (its database down) raises `ExecutorFailed`: the trial
stops with that one line, never a run scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from improver.base.errors import ImproverError
from improver.base.protocol import EpisodeLimits, TokenUsage
from improver.base.variant import Variant
from improver.episodes.harness import RETRIES, Candidate, ModelFactory, RunResult, run_task
from improver.tasks.runs import Call, Run
from improver.tasks.task import Task


class ExecutorFailed(ImproverError):
    """The executor cannot run anything more (its queue unreachable); the message says
    why and what to do. No run is scored for it."""


class Executor(Protocol):
    """Runs one run of `candidate` on `task` as `variant` configures it, within `limits`."""

    async def run(self, task: Task, variant: Variant, candidate: Candidate, limits: EpisodeLimits) -> RunResult: ...

    def remote(self, task: Task) -> bool:
        """Whether a run of `task` runs on another machine, which bounds its own runs at once."""
        ...


@dataclass(frozen=True)
class LocalExecutor:
    """The run in this process (a command candidate in this machine's sandbox)."""

    models: ModelFactory
    retries: int = RETRIES

    async def run(self, task: Task, variant: Variant, candidate: Candidate, limits: EpisodeLimits) -> RunResult:
        return await run_task(task, variant, candidate, self.models, limits, self.retries)

    def remote(self, task: Task) -> bool:
        return False


def result_to_json(result: RunResult) -> dict[str, Any]:
    """Every field of `result`, as `result_from_json` reads it back (the report's own
    `RunResult.to_json` leaves out what only the harness uses)."""
    return {
        "task": result.task,
        "outcome": result.outcome,
        "reward": result.reward,
        "failures": list(result.failures),
        "run": {**result.run.to_json(), "why": result.run.why, "state": result.run.state},
        "reason": result.reason,
        "usage": [result.usage.tokens_in, result.usage.tokens_out],
        "turns": result.turns,
        "attempts": result.attempts,
        "retryable": result.retryable,
        "leaked": result.leaked,
        "user": [list(pair) for pair in result.user],
        "user_usage": [result.user_usage.tokens_in, result.user_usage.tokens_out],
    }


def result_from_json(data: Any) -> RunResult:
    """The `RunResult` `result_to_json` gave; ImproverError naming what is missing or wrong."""
    try:
        run = data["run"]
        outcome = data["outcome"]
        if outcome not in ("passed", "failed", "errored"):
            raise ValueError(f"outcome {outcome!r}")
        return RunResult(
            task=_text(data["task"]),
            outcome=outcome,
            reward=float(data["reward"]),
            failures=[_text(f) for f in data["failures"]],
            run=Run(
                tuple(Call(_text(c["tool"]), _arguments(c["arguments"])) for c in run["calls"]),
                _text(run["answer"]),
                _text(run["ended"]),
                _text(run["why"]),
                _text(run["state"]),
            ),
            reason=_text(data["reason"]),
            usage=TokenUsage(*map(_count, data["usage"])),
            turns=_count(data["turns"]),
            attempts=_count(data["attempts"]),
            retryable=bool(data["retryable"]),
            leaked=bool(data["leaked"]),
            user=tuple((_text(a), _text(r)) for a, r in data["user"]),
            user_usage=TokenUsage(*map(_count, data["user_usage"])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ImproverError(f"not a run's result: missing or malformed {exc}") from None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} where text belongs")
    return value


def _arguments(value: Any) -> dict[str, Any] | str:
    if not isinstance(value, dict | str):
        raise TypeError(f"{value!r} where a call's arguments belong")
    return value


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{value!r} where a count belongs")
    return value
