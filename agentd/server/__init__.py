"""The daemon's HTTP side: the ledger's API and the dashboard, served by `agentd serve`."""
