"""Opening the home's ledger: its store URL, its rules, and the log's own key."""

from __future__ import annotations

from agentd.home import Home
from agentd.rules import rule_set
from agentd.wallets import log_key
from ledger import Ledger


def open_ledger(home: Home, *, check: bool = True) -> Ledger:
    """The ledger `home.ledger_url` names. `check=False` skips the start-up check, for
    `agentd ledger verify`, which must open a damaged store to say what is wrong."""
    home.ensure()
    return Ledger.open(home.ledger_url, rule_set(), log_key(home), check=check)
