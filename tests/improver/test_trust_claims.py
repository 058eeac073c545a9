"""Whose claims a seal takes: only its publisher's, on a real SQLite ledger, on append and on
replay. A wallet that names another's seal, claims another's held-out problems or
republishes another's release as its own is refused with one reason, and nothing of it is
recorded; the owner's own claim then gets in, and the log verifies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from improver.base.digests import digest
from improver.code.release import release_id
from improver.seals.claims import IMPROVEMENT, IMPROVER, RELEASE, SEAL, register, release_claim_of, seal_publisher
from ledger import Entry, Ledger, RuleSet, RuleViolation, Wallet
from tests.improver.test_claims import SEAL as SEAL_BODY, release_body
from tests.improver.test_improver_claims import body as improver_body

OPERATOR, STRANGER = Wallet.generate("operator"), Wallet.generate("stranger")


def rules() -> RuleSet:
    made = RuleSet()
    register(made)
    return made


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", rules(), Wallet.generate("log")) as opened:
        yield opened


def improvement(seal: Entry, confirmation: int) -> dict[str, Any]:
    return {"seal_claim": seal.claim_id, "confirmation": confirmation, "follows": None, "profile": "invoices"}


def kinds(ledger: Ledger) -> list[tuple[str, str]]:
    return [(e.kind, e.author) for e in ledger.entries()]


def test_a_stranger_naming_the_operators_seal_is_refused_and_the_operator_claims_it_after(ledger: Ledger) -> None:
    seal = ledger.append(OPERATOR, SEAL, SEAL_BODY)
    assert seal_publisher(ledger.state(), seal.claim_id) == OPERATOR.id
    before = kinds(ledger)
    for kind, body in ((IMPROVEMENT, improvement(seal, 4)), (RELEASE, release_body(seal.claim_id, confirmation=4))):
        with pytest.raises(RuleViolation) as refused:
            ledger.append(STRANGER, kind, body)
        assert str(refused.value) == (
            f"seal claim {seal.claim_id[:16]} was published by wallet {OPERATOR.id}, not {STRANGER.id}: only the "
            "wallet that published a seal claims changes on it"
        )
    assert kinds(ledger) == before and ledger.state().ns("seals")[seal.claim_id]["spent"] == 0
    ledger.append(OPERATOR, IMPROVEMENT, improvement(seal, 1))
    ledger.append(OPERATOR, RELEASE, release_body(seal.claim_id, confirmation=2))
    assert ledger.state().ns("seals")[seal.claim_id]["spent"] == 2
    assert ledger.verify().ok


def test_a_claim_signed_elsewhere_on_the_operators_seal_is_refused_and_nothing_recorded(ledger: Ledger) -> None:
    """As `POST /v1/entries` takes it: bytes a wallet the log does not know signed."""
    seal = ledger.append(OPERATOR, SEAL, SEAL_BODY)
    before = kinds(ledger)
    raw = Entry.create(STRANGER, IMPROVEMENT, improvement(seal, 4), log=ledger.origin, seq=1).raw
    with pytest.raises(RuleViolation, match="only the wallet that published a seal claims changes on it"):
        ledger.append_raw([raw])
    assert kinds(ledger) == before
    ledger.append(OPERATOR, IMPROVEMENT, improvement(seal, 1))
    assert ledger.verify().ok


def test_a_stranger_cannot_republish_the_operators_release_on_a_seal_of_its_own(ledger: Ledger) -> None:
    """The same commit and patch are the same release id: published again by another
    wallet, installers and attesters would read the stranger as its publisher."""
    mine = ledger.append(OPERATOR, SEAL, SEAL_BODY)
    ledger.append(OPERATOR, RELEASE, release_body(mine.claim_id))
    theirs = ledger.append(STRANGER, SEAL, {**SEAL_BODY, "seal": "fedcba9876543210"})
    before = kinds(ledger)
    rid = release_id("d" * 40, "e" * 64)
    with pytest.raises(RuleViolation, match=f"release {rid} was published by wallet {OPERATOR.id}"):
        ledger.append(STRANGER, RELEASE, release_body(theirs.claim_id))
    assert kinds(ledger) == before and release_claim_of(ledger.state(), rid)["author"] == OPERATOR.id
    ledger.append(OPERATOR, RELEASE, release_body(mine.claim_id, confirmation=2))  # its own publisher may
    assert ledger.verify().ok


def test_a_stranger_cannot_spend_the_confirmations_of_the_operators_held_out_problems(ledger: Ledger) -> None:
    ledger.append(OPERATOR, IMPROVER, improver_body(1))
    before = kinds(ledger)
    held = f"invoices/{digest(sorted(improver_body()['held_out']))}"
    with pytest.raises(RuleViolation, match=f"first claimed by wallet {OPERATOR.id}, not {STRANGER.id}"):
        ledger.append(STRANGER, IMPROVER, improver_body(4))
    assert kinds(ledger) == before and ledger.state().ns("improver_confirmations")[held][0] == 1
    ledger.append(OPERATOR, IMPROVER, improver_body(2))
    assert ledger.verify().ok
