"""`agentd improve eval`: the agent as it is (or as a kept step made it) run N times on
each task, reported as pass@k, mean reward and best-of-n."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable, Sequence

from agentd.app.adopt import lineage_of
from agentd.app.agent import AGENT, model_factory, variant_of
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from improver import Evaluation, RunResult, Variant, load_tasks, run_eval


def evaluate_profile(
    home: Home,
    profile_name: str,
    tasks_file: Path,
    runs: int,
    ks: Sequence[int],
    step: str | None = None,
    concurrency: int = 8,
    on_result: Callable[[RunResult], None] | None = None,
) -> tuple[Evaluation, str]:
    """The evaluation, and what was evaluated ("the agent as it is" or "step X")."""
    profile = load_profile(home, profile_name)
    taskset = load_tasks(tasks_file)
    if taskset.profile != profile.name:
        raise AgentdError(f"{tasks_file} holds tasks of profile {taskset.profile!r}, not {profile.name!r}")
    if step is None:
        variant, what = variant_of(profile), "the agent as it is"
    else:
        line = lineage_of(home, profile.name).step(step)
        variant, what = Variant.from_json(line["after"]), f"step {line['step']}"
    result = run_eval(
        variant,
        taskset.tasks,
        AGENT,
        model_factory(home, profile.dir),
        runs,
        ks,
        limits=profile.limits,
        concurrency=concurrency,
        on_result=on_result,
    )
    return asyncio.run(result), what
