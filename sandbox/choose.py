"""Choosing a runner: by name, or from a `[sandbox]` section of settings.

    [sandbox]
    runner = "bwrap"        # or "docker"; unset: bwrap where it works, else Docker
    wall_seconds = 300      # the limits, each optional (see sandbox.runner.Limits)
    cpu_seconds = 300
    memory_mb = 2048
    processes = 64
    file_mb = 64
    open_files = 256
    output_mb = 4
    scratch_mb = 64

There is no fallback to running unconfined: when no runner works, SandboxUnavailable
says what to install.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, Protocol

from sandbox.bubblewrap import BubblewrapRunner
from sandbox.container import DockerRunner
from sandbox.runner import Limits, MiB, Runner, SandboxUnavailable


class Checked(Runner, Protocol):
    """A runner that can tell, before anything runs, whether it works here."""

    def check(self) -> None:
        """SandboxUnavailable, saying what to install, when it cannot run here."""


RUNNERS: dict[str, Callable[[Limits], Checked]] = {"bwrap": BubblewrapRunner, "docker": DockerRunner}
IN_MB = {
    "memory_mb": "memory_bytes",
    "file_mb": "file_bytes",
    "output_mb": "output_bytes",
    "scratch_mb": "scratch_bytes",
}
SETTINGS = ("runner", *(f.name for f in fields(Limits) if not f.name.endswith("_bytes")), *IN_MB)
NOTHING_WORKS = (
    "no sandbox runner works here, and candidates are never run unconfined: install bubblewrap "
    "(apt-get install bubblewrap util-linux) or the Docker engine (apt-get install docker.io)"
)


def limits_from(settings: Mapping[str, Any]) -> Limits:
    """The limits a [sandbox] section sets, the rest at their defaults; ValueError naming
    a setting that is unknown or not a positive number."""
    values: dict[str, Any] = {}
    for key, value in settings.items():
        if key == "runner":
            continue
        if key not in SETTINGS:
            raise ValueError(f"[sandbox] has no setting {key!r}; the settings are: {', '.join(SETTINGS)}")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"[sandbox] {key} must be a positive number, not {value!r}")
        if key in IN_MB:
            values[IN_MB[key]] = int(value * MiB)
        else:
            values[key] = int(value) if key != "wall_seconds" else float(value)
    return Limits(**values)


def make_runner(name: str | None = None, limits: Limits = Limits()) -> Runner:
    """The runner named (checked to work here), or with no name the first that works."""
    if name is not None and name not in RUNNERS:
        raise ValueError(f"there is no sandbox runner {name!r}; choose one of: {', '.join(RUNNERS)}")
    for each in (name,) if name else tuple(RUNNERS):
        runner = RUNNERS[each](limits)
        try:
            runner.check()
        except SandboxUnavailable:
            if name:
                raise
            continue
        return runner
    raise SandboxUnavailable(NOTHING_WORKS)


def configured_runner(settings: Mapping[str, Any], name: str | None = None) -> Runner:
    """The runner a [sandbox] section asks for (`name` overrides its `runner`)."""
    chosen = name or settings.get("runner")
    if chosen is not None and not isinstance(chosen, str):
        raise ValueError(f"[sandbox] runner must be one of: {', '.join(RUNNERS)}")
    return make_runner(chosen, limits_from(settings))
