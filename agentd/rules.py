"""The one place that composes every package's ledger rules into the log's rule set.

Every ledger this home opens, and every audit of it, uses this set: an entry of a kind
not registered here is refused.
"""

from __future__ import annotations

from agentd import claims as agent_claims
from improver import claims as improver_claims
from ledger import RuleSet, register_funds


def rule_set() -> RuleSet:
    rules = RuleSet()
    register_funds(rules)
    agent_claims.register(rules)
    improver_claims.register(rules)
    return rules
