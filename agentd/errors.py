"""The errors the CLI turns into `agentd: error: ...` without a traceback."""


class AgentdError(Exception):
    """A user-facing failure: its message says what is wrong and what to do."""

    exit_code = 1


class WrongValue(AgentdError):
    """A value given on the command line is malformed or out of range: exit 2, like any
    other wrong option."""

    exit_code = 2
