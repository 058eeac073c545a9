"""The errors the CLI turns into `agentd: error: ...` without a traceback, and the one
way a name agentd does not know is answered."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AgentdError(Exception):
    """A user-facing failure: its message says what is wrong and what to do."""

    exit_code = 1


class WrongValue(AgentdError):
    """A value given on the command line is malformed or out of range: exit 2, like any
    other wrong option."""

    exit_code = 2


class NotFound(AgentdError):
    """A name this home does not have. Its message is for the person at the command line
    (where the home keeps such things, the nearest name, how to make one); `public` says
    only what is not there, for a client of the daemon's HTTP API, who can neither see the
    home nor run agentd in it."""

    def __init__(self, message: str, public: str) -> None:
        super().__init__(message)
        self.public = public

    def __reduce__(self) -> tuple[type[NotFound], tuple[str, str]]:
        return NotFound, (str(self), self.public)  # both, wherever it is pickled to


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """The suggestion "did you mean 'X'?" when `name` is close to one of `known` (a typo),
    else None: one rule wherever a name is unknown (a profile, a wallet, an example...)."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {close[0]!r}?" if close else None
