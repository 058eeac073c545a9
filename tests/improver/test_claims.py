"""The ledger rules of seals, improvements, releases and attestations refuse a field of the
wrong kind, never crash; an attestation is never its publisher's, and a bonded one needs
the attester's own bond under the adjudicator it names."""

from __future__ import annotations

from typing import Any

import pytest

from improver.code.release import release_id
from improver.decide import levels
from improver.seals.claims import ATTESTATION, attestation_of, register, release_claim_of
from ledger import (
    BOND_POST,
    BOND_WITHDRAW,
    MINT,
    Entry,
    RuleSet,
    RuleViolation,
    State,
    Wallet,
    bonds_in,
    register_bonds,
    register_funds,
)

WALLET = Wallet.generate()
SEAL = {
    "seal": "0123456789abcdef",
    "profile": "invoices",
    "set_digest": "a" * 64,
    "train_digest": "b" * 64,
    "sealed_digest": "c" * 64,
    "confirmations": 4,
    "level": levels.confirmation_level(4),
    "test": "newcombe",
}


def rules() -> RuleSet:
    made = RuleSet()
    register(made)
    return made


def apply(state: State, kind: str, body: dict[str, Any]) -> Entry:
    entry = Entry.create(WALLET, kind, body, log="test.example/log", seq=1)
    rules().apply(state, entry)
    return entry


def published() -> tuple[State, str]:
    state = State(size=1)
    return state, apply(state, "agent.seal/v1", SEAL).claim_id


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("seal", ["0123456789abcdef"], "seal must be the seal's id"),
        ("profile", {"name": "invoices"}, "profile must be named"),
        ("set_digest", ["a" * 64], "set_digest must be a SHA-256"),
        ("confirmations", [4], "confirmations must be a count"),
        ("level", [0.0125], "level must be 0.05/4"),
        ("test", ["newcombe"], "test must be one of"),
        ("contents", "d" * 64, "contents must be a list"),
        ("contents", ["not hex"], "contents must be a list"),
        ("shown", "d" * 64, "shown must be a list"),
        ("shown", [7], "shown must be a list"),
    ],
)
def test_a_seal_claim_with_a_field_of_the_wrong_kind_is_refused(field: str, value: Any, expected: str) -> None:
    with pytest.raises(RuleViolation, match=expected):
        apply(State(size=1), "agent.seal/v1", {**SEAL, field: value})


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"seal_claim": ["x"]}, "seal_claim must name a seal's claim"),
        ({"seal_claim": {"claim": "x"}}, "seal_claim must name a seal's claim"),
        ({"follows": ["x"]}, "follows must be an earlier improvement's claim id"),
        ({"follows": {"x": 1}}, "follows must be an earlier improvement's claim id"),
        ({"confirmation": [1]}, "confirmation must be a number"),
        ({"profile": ["invoices"]}, "profile must be named"),
    ],
)
def test_an_improvement_with_a_field_of_the_wrong_kind_is_refused(changes: dict[str, Any], expected: str) -> None:
    state, seal_claim = published()
    body = {"seal_claim": seal_claim, "confirmation": 1, "follows": None, "profile": "invoices", **changes}
    with pytest.raises(RuleViolation, match=expected):
        apply(state, "agent.improvement/v1", body)


def test_an_improvement_that_names_its_seal_and_follows_an_earlier_one_gets_in() -> None:
    state, seal_claim = published()
    first = apply(
        state,
        "agent.improvement/v1",
        {"seal_claim": seal_claim, "confirmation": 1, "follows": None, "profile": "invoices"},
    )
    apply(
        state,
        "agent.improvement/v1",
        {"seal_claim": seal_claim, "confirmation": 3, "follows": first.claim_id, "profile": "invoices"},
    )
    assert state.ns("seals")[seal_claim]["spent"] == 3
    with pytest.raises(RuleViolation, match="already claimed"):
        apply(state, "agent.improvement/v1", {"seal_claim": seal_claim, "confirmation": 2, "follows": None})


COMMIT, PATCH = "d" * 40, "e" * 64


def release_body(seal_claim: str, **changes: Any) -> dict[str, Any]:
    release = {
        "release": release_id(COMMIT, PATCH),
        "commit": COMMIT,
        "patch": PATCH,
        "summary": "s",
        "operator": "o",
        "commands": {"build": "", "test": "", "candidate": "python3 agent.py"},
    }
    after = {"operator": "o", "lessons": "", "models": ["m"], "code": {"commit": COMMIT, "patch": PATCH}}
    body = {
        "seal_claim": seal_claim,
        "confirmation": 1,
        "follows": None,
        "profile": "invoices",
        "after": after,
        "release": release,
    }
    for key, value in changes.items():
        (release if key in release else body)[key] = value
    return body


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"commit": "main"}, "release.commit must be a commit id"),
        ({"patch": ["e" * 64]}, "release.patch must be the patch's SHA-256"),
        ({"release": "0" * 16}, "release.release must be the id of its commit and patch"),
        ({"commands": {"build": "make"}}, "release.commands must give build, test and candidate"),
        (
            {"after": {"operator": "o", "lessons": "", "models": [], "code": {"commit": COMMIT, "patch": "f" * 64}}},
            "after.code must be the release's commit and patch",
        ),
        ({"confirmation": 5}, "confirmation 5 is beyond the 4 the seal allows"),
    ],
)
def test_a_release_that_does_not_hold_together_is_refused(changes: dict[str, Any], expected: str) -> None:
    state, seal_claim = published()
    with pytest.raises(RuleViolation, match=expected):
        apply(state, "agent.release/v1", release_body(seal_claim, **changes))


def test_a_release_spends_its_seals_confirmation_and_an_improvement_may_follow_it() -> None:
    state, seal_claim = published()
    release = apply(state, "agent.release/v1", release_body(seal_claim))
    with pytest.raises(RuleViolation, match="confirmation 1 of that seal was already claimed"):
        apply(state, "agent.release/v1", release_body(seal_claim))
    apply(
        state,
        "agent.improvement/v1",
        {"seal_claim": seal_claim, "confirmation": 2, "follows": release.claim_id, "profile": "invoices"},
    )


def test_a_seal_claim_naming_a_task_sealed_before_is_refused_naming_the_claim() -> None:
    state = State(size=1)
    first = apply(state, "agent.seal/v1", {**SEAL, "contents": ["d" * 64, "e" * 64]})
    with pytest.raises(RuleViolation, match=f"content key {'e' * 64} was sealed already, by claim {first.claim_id}"):
        apply(state, "agent.seal/v1", {**SEAL, "seal": "fedcba9876543210", "contents": ["f" * 64, "e" * 64]})
    apply(state, "agent.seal/v1", {**SEAL, "seal": "fedcba9876543210", "contents": ["f" * 64]})


def test_a_seal_claim_sealing_a_task_a_proposer_was_shown_is_refused_naming_the_claim_that_showed_it() -> None:
    state = State(size=1)
    first = apply(state, "agent.seal/v1", {**SEAL, "contents": ["d" * 64], "shown": ["e" * 64]})
    with pytest.raises(
        RuleViolation, match=f"content key {'e' * 64} was shown to a proposer, to choose on, by claim {first.claim_id}"
    ):
        apply(state, "agent.seal/v1", {**SEAL, "seal": "fedcba9876543210", "contents": ["e" * 64]})
    with pytest.raises(
        RuleViolation,
        match=f"content key {'d' * 64} was sealed by claim {first.claim_id}: a sealed task is never shown",
    ):
        apply(state, "agent.seal/v1", {**SEAL, "seal": "fedcba9876543210", "contents": ["f" * 64], "shown": ["d" * 64]})
    # Shown again is no harm: the proposer has seen it already.
    apply(state, "agent.seal/v1", {**SEAL, "seal": "fedcba9876543210", "contents": ["f" * 64], "shown": ["e" * 64]})


def test_seal_claims_without_shown_fold_as_they_did_before_it_was_carried() -> None:
    state = State(size=1)
    apply(state, "agent.seal/v1", {**SEAL, "contents": ["d" * 64]})
    # No namespace of its own: snapshots stored before `shown` was carried still agree with a replay.
    assert set(state.namespaces) == {"seals", "sealed_contents"}


ATTESTER, JUDGE = Wallet.generate("attester"), Wallet.generate("judge")


def bonded_rules() -> RuleSet:
    made = rules()
    register_funds(made)
    register_bonds(made)
    return made


def signed(state: State, wallet: Wallet, kind: str, body: dict[str, Any]) -> Entry:
    entry = Entry.create(
        wallet, kind, body, log="test.example/log", seq=state.sequences.get(wallet.id, 0) + 1, at="2026-12-01T00:00:00Z"
    )
    entry.pulse = state.size + 1
    bonded_rules().apply(state, entry)
    state.sequences[wallet.id] = entry.seq
    return entry


def attestation_body(release: Entry, changes: dict[str, Any] | None = None) -> dict[str, Any]:
    rel = release.body["release"]
    body = {
        "release": rel["release"],
        "release_claim": release.claim_id,
        "commit": rel["commit"],
        "patch": rel["patch"],
        "holds": True,
        "why": "16/16 against 8/16",
        "tasks": "c" * 64,
        "runs": 4,
        "before": {"passed": 8, "runs": 16},
        "after": {"passed": 16, "runs": 16},
        "interval": [0.2, 0.8],
        "level": 0.0125,
        "rebuilt": {"built": True, "tested": True},
        "sandbox": "bubblewrap",
        "runner": "agentd case --stdio",
        "expires": "2027-03-01T00:00:00Z",
        "bond": None,
        "adjudicator": None,
    }
    return {**body, **(changes or {})}


def released() -> tuple[State, Entry]:
    state, seal_claim = published()
    state.sequences[WALLET.id] = 1
    return state, signed(state, WALLET, "agent.release/v1", release_body(seal_claim))


def test_an_attestation_by_someone_else_is_recorded_and_one_by_the_publisher_refused() -> None:
    state, release = released()
    with pytest.raises(RuleViolation, match="a publisher cannot attest its own release"):
        signed(state.copy(), WALLET, ATTESTATION, attestation_body(release))
    attested = signed(state, ATTESTER, ATTESTATION, attestation_body(release))
    assert attestation_of(state, attested.claim_id) == {
        "release": release.body["release"]["release"],
        "author": ATTESTER.id,
        "pulse": attested.pulse,
        "holds": True,
        "expires": "2027-03-01T00:00:00Z",
        "bond": None,
        "adjudicator": None,
    }
    assert release_claim_of(state, release.body["release"]["release"])["author"] == WALLET.id  # type: ignore[index]


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"release": "0" * 16}, "release 0000000000000000 has no agent.release/v1 claim"),
        ({"release_claim": "e" * 64}, "release_claim must be release"),
        ({"patch": "f" * 64}, "commit and patch must be release"),
        ({"holds": "yes"}, "holds must be true"),
        ({"after": {"passed": 17, "runs": 16}}, "after must be"),
        ({"expires": "2026-11-30T00:00:00Z"}, "must come after the attestation is issued"),
        ({"expires": "next year"}, "expires must be a UTC time"),
        ({"bond": "a" * 64}, "names both its bond and the bond's adjudicator"),
        ({"bond": "a" * 64, "adjudicator": JUDGE.id}, "is no bond on the log"),
    ],
)
def test_an_attestation_that_does_not_hold_together_is_refused(changes: dict[str, Any], expected: str) -> None:
    state, release = released()
    with pytest.raises(RuleViolation, match=expected):
        signed(state, ATTESTER, ATTESTATION, attestation_body(release, changes))


def test_a_bonded_attestation_needs_the_attesters_open_bond_under_that_adjudicator() -> None:
    state, release = released()
    authority = Wallet.generate("log")
    state.authority = authority.id
    signed(state, authority, MINT, {"to": ATTESTER.id, "cents": 5_000})
    bond = signed(state, ATTESTER, BOND_POST, {"cents": 2_000, "adjudicator": JUDGE.id}).claim_id
    with pytest.raises(RuleViolation, match=f"under adjudicator {JUDGE.id}, not {WALLET.id}"):
        signed(state.copy(), ATTESTER, ATTESTATION, attestation_body(release, {"bond": bond, "adjudicator": WALLET.id}))
    attested = signed(state, ATTESTER, ATTESTATION, attestation_body(release, {"bond": bond, "adjudicator": JUDGE.id}))
    assert attested.claim_id in bonds_in(state).bond(bond).claims  # type: ignore[union-attr]
    signed(state, ATTESTER, BOND_WITHDRAW, {"bond": bond})
    with pytest.raises(RuleViolation, match="was withdrawn"):
        signed(state, ATTESTER, ATTESTATION, attestation_body(release, {"bond": bond, "adjudicator": JUDGE.id}))
