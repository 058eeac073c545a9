"""`agentd serve`: the daemon that runs each profile's schedule and serves the ledger,
session intake and status over HTTP (see agentd/server/api.py for the routes)."""
