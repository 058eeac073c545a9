"""The limits every HTTP server a home runs holds its clients to (`agentd serve`,
`agentd examiner serve`, `agentd improve env --serve`): the server's own body cap, and
the deadlines `[serve]` in config.toml sets, in seconds:

    [serve]
    header_timeout = 10   # from a request's first byte to the end of its head
    body_timeout = 120    # from the end of its head to the end of its body
    idle_timeout = 10     # a connection with no request under way

A connection past one is closed (improver.base.serving keeps them).
"""

from __future__ import annotations

from agentd.errors import AgentdError
from agentd.home import Home
from improver import HttpLimits


def http_limits(home: Home | None, body_bytes: int | None = None) -> HttpLimits:
    """The limits of a server of `home` taking bodies of at most `body_bytes` (the
    default cap when not given): the timeouts its `[serve]` sets, the defaults where it
    sets none (or there is no home)."""
    default = HttpLimits()
    return HttpLimits(
        header_seconds=_seconds(home, "header_timeout", default.header_seconds),
        body_seconds=_seconds(home, "body_timeout", default.body_seconds),
        idle_seconds=_seconds(home, "idle_timeout", default.idle_seconds),
        body_bytes=body_bytes or default.body_bytes,
    )


def _seconds(home: Home | None, setting: str, default: float) -> float:
    value = home.setting("serve", setting) if home else None
    if home is None or value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise AgentdError(f"{home.config_path}: [serve] {setting} must be a number of seconds above 0, not {value!r}")
    return float(value)
