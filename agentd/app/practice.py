"""`agentd improve practice`: a model writes practice tasks for a profile, on its current
seal's tasks to choose on, and the kept ones are saved as a task set named by its digest."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from agentd.app import killswitch
from agentd.app.agent import AGENT, model_factory, variant_of
from agentd.app.seals import settle_seals
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.providers import make_model
from improver import (
    ImproverError,
    Model,
    Practice,
    PracticeRequest,
    PracticeRunner,
    SealReached,
    TaskSet,
    current_seal,
    load_tasks,
    write_practice,
)


@dataclass(frozen=True)
class Practiced:
    practice: Practice
    writer: str
    path: Path | None  # where the kept tasks were written; None when none was kept


def practise(
    home: Home,
    profile_name: str,
    request: PracticeRequest,
    writer_spec: str | None = None,
    out: Path | None = None,
    writer: Model | None = None,
) -> Practiced:
    """Has the writer (by default the profile's first model) write practice tasks; writes
    the kept ones to `out` or the routes folder. `writer` stands in for the one named."""
    killswitch.refuse_if_on(home, "practice")
    home.ensure()
    settle_seals(home)
    profile = load_profile(home, profile_name)
    if not profile.models:
        raise AgentdError(f"profile {profile_name} has no model to write with; name one with --writer")
    spec = writer_spec or profile.models[0]
    seal = current_seal(home.routes, profile_name)
    runner = PracticeRunner(
        variant_of(profile), AGENT, model_factory(home, profile.dir), profile.limits, lambda: killswitch.halted(home)
    )
    model = writer or make_model(spec, home, base_dir=profile.dir)
    try:
        practice = asyncio.run(write_practice(profile_name, seal, model, runner, request))
    except SealReached as exc:
        raise AgentdError(f"stopped: {exc}") from None
    path = None
    if practice.taskset is not None:
        path = out or home.routes.practice(profile_name, practice.taskset.digest)
        practice.taskset.save(path)
    return Practiced(practice, spec, path)


def load_practice(path: Path, profile: str) -> TaskSet:
    """A practice set for `improve run --practice`: it must be the profile's, whole and validated."""
    taskset = load_tasks(path)
    if taskset.profile != profile:
        raise ImproverError(f"{path}: practice tasks of profile {taskset.profile}, not {profile}")
    if not taskset.validated:
        raise ImproverError(f"{path}: not a validated set; make practice tasks with agentd improve practice {profile}")
    return taskset
