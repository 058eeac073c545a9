"""The kill switch: while it is on, no session, proposal or run of a trial starts.

It is a file in the home, made with O_CREAT|O_EXCL|O_NOFOLLOW: never written through a
link someone put in its place. Anything at its path, a link included, counts as on:
a switch that cannot be read is not taken to be off.
"""

from __future__ import annotations

import errno
import os

from agentd.errors import AgentdError
from agentd.home import PRIVATE_FILE, Home
from improver import utc_now


def is_on(home: Home) -> bool:
    return os.path.lexists(home.kill_switch_path)


def turn_on(home: Home, reason: str = "") -> None:
    """Turns it on; when it is on already, it stays as it was turned on."""
    path = home.kill_switch_path
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE)
    except FileExistsError:
        return
    except OSError as exc:
        raise AgentdError(f"cannot turn the kill switch on: {_why(exc, home)}") from None
    with os.fdopen(fd, "w") as f:
        f.write(f"{utc_now()} {reason}".rstrip() + "\n")


def turn_off(home: Home) -> None:
    try:
        home.kill_switch_path.unlink(missing_ok=True)  # unlink removes a link, never what it points to
    except OSError as exc:
        raise AgentdError(f"cannot turn the kill switch off: {_why(exc, home)}") from None


def since(home: Home) -> str:
    """When it was turned on and why, as written when it was."""
    if not is_on(home):
        return ""
    try:
        fd = os.open(home.kill_switch_path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return f"unknown: {home.kill_switch_path} is not a file agentd wrote"
    with os.fdopen(fd, errors="replace") as f:
        return f.read(1000).strip()


def halted(home: Home) -> str | None:
    """Why a step about to start must not (the switch is on), or None: asked before each run."""
    return f"the kill switch is on (since {since(home)})" if is_on(home) else None


def refuse_if_on(home: Home, what: str) -> None:
    """Called before every session, proposal and run of a trial."""
    if is_on(home):
        raise AgentdError(
            f"the kill switch is on (since {since(home)}): no {what} starts; turn it off with: agentd kill-switch off"
        )


def _why(exc: OSError, home: Home) -> str:
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"the home {home.root} is read-only here ({exc.strerror})"
    return f"{home.kill_switch_path}: {exc.strerror}"
