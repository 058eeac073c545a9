from tests.homekit import agentd, agentd_process, home  # noqa: F401  (fixtures)
