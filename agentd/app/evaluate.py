"""`agentd improve eval`: the agent as it is (or as a kept step made it) run N times on
each task, reported as pass@k, mean reward and best-of-n."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from agentd.app import killswitch
from agentd.app.adopt import lineage_of
from agentd.app.agent import AGENT, model_factory, variant_of
from agentd.app.queued import queue_executor, through
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from improver import (
    Evaluation,
    ExecutorFailed,
    Halted,
    RunResult,
    Variant,
    load_tasks,
    open_seal,
    run_eval,
    seals_of,
    write_atomic,
)


def evaluate_profile(
    home: Home,
    profile_name: str,
    tasks_file: Path,
    runs: int,
    ks: Sequence[int],
    step: str | None = None,
    concurrency: int = 8,
    on_result: Callable[[RunResult], None] | None = None,
    runs_out: Path | None = None,
    queue: str | None = None,
    on_refused: Callable[[str], None] = lambda line: None,
) -> tuple[Evaluation, str]:
    """The evaluation, and what was evaluated ("the agent as it is" or "step X"). With
    `runs_out`, every run's JSON is written there too, one line a run in the order they
    finished, once all have (whole or not at all). With `queue` (else the home's `[trials]
    queue`) the runs go to its workers, but those of the profile's sealed tasks, and
    `on_refused` hears each result refused."""
    if runs_out is not None and not os.access(runs_out.parent, os.W_OK):
        raise AgentdError(f"cannot write the runs to {runs_out}: its folder does not exist or is not writable")
    profile = load_profile(home, profile_name)
    taskset = load_tasks(tasks_file)
    if taskset.profile != profile.name:
        raise AgentdError(f"{tasks_file} holds tasks of profile {taskset.profile!r}, not {profile.name!r}")
    if step is None:
        variant, what = variant_of(profile), "the agent as it is"
    else:
        line = lineage_of(home, profile.name).step(step)
        variant, what = Variant.from_json(line["after"]), f"step {line['step']}"
    finished: list[RunResult] = []

    def kept(run: RunResult) -> None:
        finished.append(run)
        if on_result is not None:
            on_result(run)

    halted = partial(killswitch.halted, home)
    executor = queue_executor(home, queue, profile.dir, _sealed(home, profile.name), halted, on_refused)
    result = partial(
        run_eval,
        variant,
        taskset.tasks,
        AGENT,
        model_factory(home, profile.dir),
        runs,
        ks,
        limits=profile.limits,
        concurrency=concurrency,
        on_result=kept,
        executor=executor,
    )
    try:
        evaluation = asyncio.run(through(executor, result))
    except (ExecutorFailed, Halted) as exc:
        raise AgentdError(str(exc)) from None
    if runs_out is not None:
        write_atomic(runs_out, "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in finished))
    return evaluation, what


def _sealed(home: Home, profile: str) -> frozenset[str]:
    """The digests of the profile's sealed tasks held here: runs of them stay off the queue."""
    seals = (open_seal(path) for path in seals_of(home.routes, profile))
    return frozenset(t.digest for seal in seals if seal.held_here for t in seal.sealed.tasks)
