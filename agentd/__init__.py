"""agentd: an agent that improves itself from its own work, on a signed ledger."""

__version__ = "0.1.0"
