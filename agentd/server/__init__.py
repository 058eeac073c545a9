"""`agentd serve`: the daemon that runs each profile's schedule and serves the ledger,
session intake, status and the dashboard over HTTP (agentd/server/api.py has the routes)."""
