"""The runners the sandbox tests run on, each made once per test module.

The Docker tests skip where no engine answers, except under AGENTD_REQUIRE_DOCKER=1
(as in CI), where an engine that does not answer fails them.
"""

from __future__ import annotations

import os

import pytest

from sandbox.choose import make_runner
from sandbox.runner import Limits, Runner, SandboxUnavailable

RUNNERS = ("bwrap", "docker")


def runner_named(name: str, limits: Limits = Limits()) -> Runner:
    try:
        return make_runner(name, limits)
    except SandboxUnavailable as exc:
        if name == "docker" and os.environ.get("AGENTD_REQUIRE_DOCKER") != "1":
            pytest.skip(f"no Docker engine here: {exc}")
        raise
