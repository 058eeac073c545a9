"""The home's ledger: its store URL, the rules every entry is held to, and the log's key.

Every ledger this home opens, and every audit of it, uses `rule_set()`: an entry of a
kind not registered there is refused.
"""

from __future__ import annotations

from agentd import claims as agent_claims
from agentd.home import Home
from agentd.wallets import log_key
from improver import register_claims
from ledger import Ledger, RuleSet, register_funds


def rule_set() -> RuleSet:
    rules = RuleSet()
    register_funds(rules)
    agent_claims.register(rules)
    register_claims(rules)
    return rules


def open_ledger(home: Home, *, check: bool = True) -> Ledger:
    """The ledger `home.ledger_url` names. `check=False` skips the start-up check, for
    `agentd ledger verify`, which must open a damaged store to say what is wrong."""
    home.ensure()
    return Ledger.open(home.ledger_url, rule_set(), log_key(home), check=check)
