"""Bonds as a fold over the log: funds locked and returned, challenges and their deposits,
rulings only by the adjudicator, once, and what an upheld ruling breaks. Every refusal
writes nothing, and a fresh reader and an audit replay to the same state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import (
    BOND_CHALLENGE,
    BOND_POST,
    BOND_RULING,
    BOND_WITHDRAW,
    MINT,
    Entry,
    Ledger,
    RuleSet,
    RuleViolation,
    State,
    Wallet,
    back,
    bonds_in,
    register_bonds,
    register_funds,
)

CLAIM = "test.bonded-claim/v1"  # a stand-in for a kind whose claims a bond backs


def _bonded_claim(state: State, entry: Entry) -> None:
    back(state, entry.body["bond"], entry.claim_id, entry.author, entry.body["adjudicator"])


def _rules() -> RuleSet:
    rules = RuleSet()
    register_funds(rules)
    register_bonds(rules)
    rules.register(CLAIM, _bonded_claim)
    return rules


class World:
    def __init__(self, ledger: Ledger, log_key: Wallet) -> None:
        self.ledger = ledger
        self.attester, self.challenger, self.judge, self.other = (
            Wallet.generate(n) for n in ("att", "ch", "judge", "x")
        )
        for wallet in (self.attester, self.challenger, self.other):
            ledger.append(log_key, MINT, {"to": wallet.id, "cents": 10_000})

    def post(self, cents: int = 5_000, adjudicator: Wallet | None = None, owner: Wallet | None = None) -> str:
        body = {"cents": cents, "adjudicator": (adjudicator or self.judge).id}
        return self.ledger.append(owner or self.attester, BOND_POST, body).claim_id

    def claim(self, bond: str, adjudicator: Wallet | None = None) -> str:
        body = {"bond": bond, "adjudicator": (adjudicator or self.judge).id}
        return self.ledger.append(self.attester, CLAIM, body).claim_id

    def challenge(self, bond: str, claim: str, cents: int = 1_000, by: Wallet | None = None) -> str:
        body = {"bond": bond, "claim": claim, "cents": cents, "evidence": "rebuilt it: 0/4 against 0/4"}
        return self.ledger.append(by or self.challenger, BOND_CHALLENGE, body).claim_id

    def rule(self, challenge: str, uphold: bool, by: Wallet | None = None) -> str:
        body = {"challenge": challenge, "uphold": uphold, "note": "reran the recipe"}
        return self.ledger.append(by or self.judge, BOND_RULING, body).claim_id

    def balance(self, wallet: Wallet) -> int:
        return self.ledger.state().balance(wallet.id)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    log_key = Wallet.generate("log")
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", _rules(), log_key) as ledger:
        yield World(ledger, log_key)


def _refused(world: World, match: str, append: Any) -> None:
    size, state = world.ledger.size, world.ledger.state()
    with pytest.raises(RuleViolation, match=match):
        append()
    assert world.ledger.size == size
    assert world.ledger.state().namespaces == state.namespaces and world.ledger.state().balances == state.balances


def test_a_posted_bond_locks_its_funds_and_a_withdrawal_returns_them(world: World) -> None:
    bond = world.post(5_000)
    assert world.balance(world.attester) == 5_000
    found = bonds_in(world.ledger.state()).bond(bond)
    assert found is not None and found.stands and found.cents == 5_000 and found.adjudicator == world.judge.id
    world.ledger.append(world.attester, BOND_WITHDRAW, {"bond": bond})
    assert world.balance(world.attester) == 10_000
    withdrawn = bonds_in(world.ledger.state()).bond(bond)
    assert withdrawn is not None and withdrawn.status == "withdrawn" and not withdrawn.stands


def test_bad_posts_and_withdrawals_are_refused(world: World) -> None:
    _refused(world, "overdraft.*cannot post a bond of 20000", lambda: world.post(20_000))
    _refused(world, "cannot adjudicate its own bond", lambda: world.post(100, adjudicator=world.attester))
    _refused(world, "body is", lambda: world.ledger.append(world.attester, BOND_POST, {"cents": 100}))
    bond = world.post()
    _refused(
        world, "only its owner withdraws it", lambda: world.ledger.append(world.other, BOND_WITHDRAW, {"bond": bond})
    )
    _refused(
        world, "no bond on the log", lambda: world.ledger.append(world.attester, BOND_WITHDRAW, {"bond": "ab" * 32})
    )


def test_a_claim_is_issued_only_on_the_authors_open_bond_under_its_adjudicator(world: World) -> None:
    _refused(world, "no bond on the log", lambda: world.claim("cd" * 32))
    bond = world.post()
    _refused(world, f"under adjudicator {world.judge.id}, not {world.other.id}", lambda: world.claim(bond, world.other))
    others = world.post(owner=world.other)
    _refused(world, "not the author's", lambda: world.claim(others))
    world.ledger.append(world.attester, BOND_WITHDRAW, {"bond": bond})
    _refused(world, "was withdrawn", lambda: world.claim(bond))


def test_a_bond_and_a_claim_on_it_go_in_one_batch_or_neither_does(world: World) -> None:
    judge = world.judge.id

    def on_the_bond(adjudicator: str):  # the claim names the bond signed before it in the batch
        return lambda signed: {"bond": signed[0].claim_id, "adjudicator": adjudicator}

    post = (world.attester, BOND_POST, {"cents": 2_000, "adjudicator": judge})
    bond, claim = world.ledger.append_many([post, (world.attester, CLAIM, on_the_bond(judge))])
    assert claim.pulse == bond.pulse + 1 and claim.body["bond"] == bond.claim_id
    found = bonds_in(world.ledger.state()).bond(bond.claim_id)
    assert found is not None and found.claims == (claim.claim_id,) and world.balance(world.attester) == 8_000
    # The claim breaks its rule (another adjudicator than the bond's), and the bond it came with is not posted either.
    _refused(
        world,
        f"entry 2 of 2 \\({CLAIM}\\): .*under adjudicator {judge}, not {world.other.id}",
        lambda: world.ledger.append_many([post, (world.attester, CLAIM, on_the_bond(world.other.id))]),
    )
    assert len(bonds_in(world.ledger.state()).all()) == 1 and world.balance(world.attester) == 8_000


def test_challenges_that_break_a_rule_are_refused(world: World) -> None:
    bond = world.post()
    claim = world.claim(bond)
    other_bond = world.post(1_000)
    _refused(world, "not issued on bond", lambda: world.challenge(other_bond, claim))
    _refused(world, "not issued on bond", lambda: world.challenge(bond, bond))  # the post is no claim on it
    _refused(world, "its own bond", lambda: world.challenge(bond, claim, by=world.attester))
    _refused(world, "cannot deposit 20000", lambda: world.challenge(bond, claim, cents=20_000))
    body = {"bond": bond, "claim": claim, "cents": 100, "evidence": " "}
    _refused(world, "evidence must be non-empty", lambda: world.ledger.append(world.challenger, BOND_CHALLENGE, body))


def test_an_upheld_challenge_shows_the_claim_false_and_slashes_the_bond(world: World) -> None:
    bond = world.post(5_000)
    claim = world.claim(bond)
    challenge = world.challenge(bond, claim, 1_000)
    assert world.balance(world.challenger) == 9_000
    _refused(world, "open challenge", lambda: world.ledger.append(world.attester, BOND_WITHDRAW, {"bond": bond}))
    _refused(
        world,
        f"only the bond's adjudicator \\({world.judge.id}\\)",
        lambda: world.rule(challenge, True, by=world.other),
    )
    ruling = world.rule(challenge, True)
    _refused(world, "was upheld already", lambda: world.rule(challenge, False))

    bonds = bonds_in(world.ledger.state())
    assert world.balance(world.challenger) == 10_000 + 5_000  # the deposit back, and the bond
    assert world.balance(world.attester) == 5_000
    assert bonds.shown_false(claim) == ruling
    broken = bonds.bond(bond)
    assert broken is not None and broken.status == "slashed" and not broken.stands
    later = world.claim(bond)  # recorded, but the broken bond stands behind nothing
    assert later in bonds_in(world.ledger.state()).bond(bond).claims  # type: ignore[union-attr]
    _refused(
        world, "nothing is left to withdraw", lambda: world.ledger.append(world.attester, BOND_WITHDRAW, {"bond": bond})
    )
    _refused(world, "shown false already", lambda: world.challenge(bond, claim))


def test_a_dismissed_challenge_pays_the_deposit_to_the_bonds_owner(world: World) -> None:
    bond = world.post(5_000)
    challenge = world.challenge(bond, world.claim(bond), 1_000)
    world.rule(challenge, False)
    state = world.ledger.state()
    assert state.balance(world.attester.id) == 5_000 + 1_000 and state.balance(world.challenger.id) == 9_000
    found = bonds_in(state).challenge(challenge)
    assert found is not None and found.status == "dismissed"
    assert bonds_in(state).bond(bond).stands  # type: ignore[union-attr]
    world.ledger.append(world.attester, BOND_WITHDRAW, {"bond": bond})
    assert world.balance(world.attester) == 11_000


def test_a_reader_and_an_audit_replay_the_same_bonds(world: World, tmp_path: Path) -> None:
    bond = world.post()
    claim = world.claim(bond)
    world.rule(world.challenge(bond, claim), True)
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", _rules(), None) as reader:
        assert reader.state().namespaces == world.ledger.state().namespaces
        assert reader.verify().ok
