"""`agentd improve eval`: the agent as it is (or as a kept step made it) run N times on
each task, reported as pass@k, mean reward and best-of-n."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from agentd.app.adopt import lineage_of
from agentd.app.agent import AGENT, model_factory, variant_of
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from improver import Evaluation, RunResult, Variant, load_tasks, run_eval, write_atomic


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
) -> tuple[Evaluation, str]:
    """The evaluation, and what was evaluated ("the agent as it is" or "step X"). With
    `runs_out`, every run's JSON is written there too, one line a run in the order they
    finished, once all have (whole or not at all)."""
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

    result = run_eval(
        variant,
        taskset.tasks,
        AGENT,
        model_factory(home, profile.dir),
        runs,
        ks,
        limits=profile.limits,
        concurrency=concurrency,
        on_result=kept,
    )
    evaluation = asyncio.run(result)
    if runs_out is not None:
        write_atomic(runs_out, "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in finished))
    return evaluation, what
