"""The one error the CLI turns into `agentd: error: ...` without a traceback."""


class AgentdError(Exception):
    """A user-facing failure: its message says what is wrong and what to do."""
