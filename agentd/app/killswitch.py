"""The kill switch: while it is on, no session or loop step starts."""

from __future__ import annotations

from agentd.errors import AgentdError
from agentd.home import Home
from improver import utc_now


def is_on(home: Home) -> bool:
    return home.kill_switch_path.exists()


def turn_on(home: Home, reason: str = "") -> None:
    home.root.mkdir(parents=True, exist_ok=True)
    home.kill_switch_path.write_text(f"{utc_now()} {reason}".rstrip() + "\n")


def turn_off(home: Home) -> None:
    home.kill_switch_path.unlink(missing_ok=True)


def since(home: Home) -> str:
    return home.kill_switch_path.read_text().strip() if is_on(home) else ""


def refuse_if_on(home: Home, what: str) -> None:
    """Called before every session, proposal and trial."""
    if is_on(home):
        raise AgentdError(f"the kill switch is on (since {since(home)}): no {what} starts; turn it off with: agentd kill-switch off")
