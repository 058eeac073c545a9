"""The sandbox runner a home's `[sandbox]` section asks for, checked to work here."""

from __future__ import annotations

from typing import Any

from agentd.errors import AgentdError
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
