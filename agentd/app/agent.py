"""What the improver needs injected to run episodes here: the agent runtime, models made
from a home's providers, the variant a profile runs as, and `agentd improve env`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import BinaryIO

from agentd.home import Home
from agentd.profiles import Profile, list_profiles, load_profile
from agentd.providers import make_model
from agentd.runtime import run_case
from improver import Agent, EpisodeLimits, Model, ModelFactory, Variant, load_tasks, run_episode

# The in-process candidate: the runtime itself (`agentd case --stdio` speaks it over stdio).
AGENT: Agent = run_case


def model_factory(home: Home, base_dir: Path | None = None) -> ModelFactory:
    """Makes each model a variant names from this home's providers; `script:` paths are
    taken from `base_dir` (a profile's folder)."""

    def make(spec: str) -> Model:
        return make_model(spec, home, base_dir=base_dir)

    return make


def variant_of(profile: Profile) -> Variant:
    """The agent as the profile runs it now."""
    return Variant(profile.operator, profile.learned.lessons, tuple(profile.run_models))


def run_env(home: Home | None, tasks_file: Path, case: str, reader: BinaryIO, writer: BinaryIO) -> int:
    """One task as an episode over `reader`/`writer`; 0 when it ended with `done`. The
    profile's lessons and limits are used when `home` holds it."""
    taskset = load_tasks(tasks_file)
    task = taskset.get(case)
    lessons, limits = episode_settings(home, taskset.profile)
    users = users_factory(home, taskset.profile)
    result = asyncio.run(run_episode(task, taskset.operator, lessons, AGENT, reader, writer, limits, users))
    return 0 if result is not None else 1


def users_factory(home: Home | None, profile_name: str) -> ModelFactory | None:
    """What makes a conversation's simulated user in a trainer's episode: this home's
    providers (`script:` paths from the profile's folder when it holds the profile), or
    nothing without a home, and such an episode ends as errored."""
    if home is None:
        return None
    held = profile_name in list_profiles(home)
    return model_factory(home, load_profile(home, profile_name).dir if held else None)


def episode_settings(home: Home | None, profile_name: str) -> tuple[str, EpisodeLimits]:
    """The lessons and limits a trainer's episodes run with: the profile's when `home`
    holds it, else none and the defaults (a task file needs no home)."""
    if home is None or profile_name not in list_profiles(home):
        return "", EpisodeLimits()
    profile = load_profile(home, profile_name)
    return profile.learned.lessons, profile.limits
