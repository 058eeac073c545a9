"""`agentd init`: the home and the log's own key, which starts the ledger and signs its checkpoints."""

from __future__ import annotations

from agentd.home import Home
from agentd.wallets import log_key, log_key_path


def initialise(home: Home) -> list[str]:
    """Sets up `home`; returns what it did, one line each."""
    fresh = not home.root.exists()
    home.ensure()
    had_key = log_key_path(home).exists()
    key = log_key(home)
    return [
        f"home: {home.root} ({'created' if fresh else 'already there'})",
        f"log key: {log_key_path(home)} (id {key.id}, {'already there' if had_key else 'created'})",
        f"ledger: {home.ledger_url}",
    ]
