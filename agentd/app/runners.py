"""The sandbox runner a home's `[sandbox]` section asks for, checked to work here, and
what a command adds to a sandbox's view: further read-only paths and environment."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from sandbox import Runner, SandboxUnavailable, configured_runner


def sandbox_runner(home: Home, name: str | None = None) -> Runner:
    """The runner the home's [sandbox] section asks for (`name` overrides it), checked
    to work here; one line saying what to install when none does."""
    settings: Any = home.config.get("sandbox", {})
    if not isinstance(settings, dict):
        raise AgentdError(f"{home.config_path}: [sandbox] must be a table")
    try:
        return configured_runner(settings, name)
    except ValueError as exc:
        raise AgentdError(f"{home.config_path}: {exc}") from None
    except SandboxUnavailable as exc:
        raise AgentdError(str(exc)) from None


def sandbox_extras(readable: Iterable[Path], env: Iterable[str]) -> tuple[tuple[Path, ...], dict[str, str]]:
    """`--readable` paths and `--env VAR=VALUE` pairs as a workshop takes them; WrongValue
    naming the first pair that is not VAR=VALUE, or path that is not absolute or missing."""
    pairs: dict[str, str] = {}
    for each in env:
        name, _, value = each.partition("=")
        if "=" not in each or not name.isidentifier():
            raise WrongValue(f"--env {each!r}: give VAR=VALUE")
        pairs[name] = value
    paths = tuple(readable)
    for path in paths:
        if not path.is_absolute() or not path.exists():
            raise WrongValue(f"--readable {path}: give an absolute path that exists")
    return paths, pairs
