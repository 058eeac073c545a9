"""The ledger rule of kept improvers (agent.improver/v1): its body checked, each
confirmation of a set of held-out problems claimed once, at the level they allow."""

from __future__ import annotations

from typing import Any

import pytest

from improver.base.digests import digest
from improver.decide import levels
from improver.seals.claims import register
from improver.seals.settings import Settings
from ledger import Entry, RuleSet, RuleViolation, State, Wallet

WALLET = Wallet.generate()
BEFORE, AFTER = Settings(), Settings(instructions=Settings().instructions + "\n\nWrite one lesson per failure.")
HELD_OUT = ["c" * 64]
COMPARISON = {
    "test": "newcombe",
    "level": 0.025,
    "tasks": 4,
    "change": [16, 16],
    "current": [8, 16],
    "interval": [0.16, 0.74],
}


def body(confirmation: int = 1, **changed: Any) -> dict[str, Any]:
    held = digest(sorted(HELD_OUT))
    return {
        "profile": "invoices",
        "change": 'its instructions, adding "Write one lesson per failure."',
        "follows": None,
        "before": BEFORE.to_json(),
        "after": AFTER.to_json(),
        "improver": AFTER.id,
        "problems": ["a" * 64, "b" * 64],
        "held_out": HELD_OUT,
        "held_out_digest": held,
        "choose": COMPARISON,
        "held": COMPARISON,
        "confirmation": confirmation,
        "confirmations": 4,
        "level": levels.confirmation_level(4),
        "test": "newcombe",
        "step": digest({"improver": AFTER.id, "held_out": held, "confirmation": confirmation})[:16],
        **changed,
    }


def apply(state: State, claim: dict[str, Any], seq: int = 1) -> Entry:
    rules = RuleSet()
    register(rules)
    entry = Entry.create(WALLET, "agent.improver/v1", claim, log="test.example/log", seq=seq)
    rules.apply(state, entry)
    return entry


def test_a_kept_improver_is_claimed_and_the_next_may_follow_it() -> None:
    state = State(size=1)
    first = apply(state, body())
    apply(state, body(2, follows=first.claim_id), seq=2)


@pytest.mark.parametrize(
    "changed, expected",
    [
        ({"level": 0.05}, "level must be 0.05/4"),
        ({"confirmation": 5}, "confirmation must be a count from 1 to confirmations"),
        ({"improver": "0" * 16}, "improver must be the id of after"),
        ({"after": BEFORE.to_json(), "improver": BEFORE.id}, "a change from before"),
        ({"after": {"instructions": ""}}, "before and after must be improvers"),
        ({"problems": HELD_OUT}, "a held-out problem cannot be a problem to choose on"),
        ({"held_out_digest": "d" * 64}, "held_out_digest must be the digest of held_out"),
        ({"step": "0" * 16}, "step must be the id"),
        ({"follows": "e" * 64}, "follows must name an earlier improver claim"),
        ({"test": ["newcombe"]}, "test must be one of"),
    ],
)
def test_an_improver_claim_that_does_not_hold_together_is_refused(changed: dict[str, Any], expected: str) -> None:
    with pytest.raises(RuleViolation, match=expected):
        apply(State(size=1), body(**changed))


def test_a_confirmation_of_the_held_out_problems_is_claimed_once() -> None:
    state = State(size=1)
    apply(state, body(2))
    with pytest.raises(RuleViolation, match="confirmation 1 of those held-out problems was already claimed"):
        apply(state, body(1), seq=2)


def test_a_claim_without_its_fields_is_refused() -> None:
    with pytest.raises(RuleViolation, match="an improver claim needs"):
        apply(State(size=1), {"profile": "invoices"})


def test_the_held_out_problems_keep_the_confirmations_they_were_first_claimed_with() -> None:
    state = State(size=1)
    apply(state, body(1))
    changed = body(2, confirmations=8, level=levels.confirmation_level(8))
    with pytest.raises(RuleViolation, match="those held-out problems allow 4 confirmations, as first claimed, not 8"):
        apply(state, changed, seq=2)
