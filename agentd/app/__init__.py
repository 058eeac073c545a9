"""What agentd's commands do, as library calls: the CLI (agentd/cli/) words them, the tests
and the daemon call them too. Each module is one capability an operator has; see
ARCHITECTURE.md for which module holds which behaviour."""
