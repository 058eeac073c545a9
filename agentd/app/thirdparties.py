"""What others said about this home's work, as the ledger holds it: releases, the
attestations of them (on bonds or not), bonds with their funds in USD and state,
challenges with their deposits, rulings, and examiners' examinations. Every wallet is
named as this home names it; every claim carries the Pulse its entry is at, and the
claims each one bears on, so a page can link one to the other.

Reading alone: all of it is the ledger's fold (ledger/bonds.py's bonds, the improver's
claim rules' attestations) and the entries themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentd.app.ledger import open_ledger
from agentd.home import Home
from agentd.wallets import wallet_names
from improver import ATTESTATION, EXAMINATION, RELEASE_KIND
from ledger import BOND_CHALLENGE, BOND_POST, BOND_RULING, Bonds, Challenge, Entry, bonds_in


@dataclass(frozen=True)
class Wallet:
    """A wallet by its id, and its name in this home (None: a wallet it does not hold)."""

    id: str
    name: str | None

    def __str__(self) -> str:
        return self.name or self.id[:16]


@dataclass(frozen=True)
class ReleaseView:
    claim: str
    pulse: int
    publisher: Wallet
    release: str
    profile: str
    change: str
    commit: str
    patch: str
    files: list[str]
    attestations: list[str]  # their claims


@dataclass(frozen=True)
class AttestationView:
    claim: str
    pulse: int
    attester: Wallet
    release: str
    release_claim: str | None
    holds: bool
    claimed: str  # e.g. "16/16 against 0/16 on the sealed tasks"
    why: str
    rebuilt: bool  # built and tested by the attester, not only said
    bond: str | None
    state: str  # stands on its bond, shown false, its bond slashed, expired, unbonded


@dataclass(frozen=True)
class BondView:
    id: str
    pulse: int
    owner: Wallet
    cents: int
    adjudicator: Wallet
    status: str  # open, slashed or withdrawn
    ended: int | None  # the Pulse that slashed or withdrew it
    claims: list[str]
    challenges: list[str]
    memo: str


@dataclass(frozen=True)
class RulingView:
    claim: str
    pulse: int
    judge: Wallet
    upheld: bool
    note: str


@dataclass(frozen=True)
class ChallengeView:
    id: str
    pulse: int
    bond: str
    claim: str  # the claim challenged
    challenger: Wallet
    cents: int
    evidence: str
    recipe: bool  # it carries what rebuilding takes
    status: str  # open, upheld or dismissed
    ruling: RulingView | None


@dataclass(frozen=True)
class ExaminationView:
    claim: str
    pulse: int
    examiner: Wallet
    outcome: str
    confirmation: str  # "1 of 2"
    seal_claim: str
    bond: str | None


@dataclass
class ThirdParties:
    releases: list[ReleaseView] = field(default_factory=list)
    attestations: list[AttestationView] = field(default_factory=list)
    bonds: list[BondView] = field(default_factory=list)
    challenges: list[ChallengeView] = field(default_factory=list)
    examinations: list[ExaminationView] = field(default_factory=list)
    pulses: dict[str, int] = field(default_factory=dict)  # every claim shown, by id: its entry's Pulse

    @property
    def rulings(self) -> list[RulingView]:
        return [c.ruling for c in self.challenges if c.ruling]


def third_parties(home: Home, now: datetime | None = None) -> ThirdParties:
    """Everything on the ledger that others can check, attest, back or dispute."""
    if not home.exists:
        return ThirdParties()
    names = wallet_names(home, skip=lambda _: None)  # a wallet file that cannot be read only goes unnamed

    def who(wallet_id: str) -> Wallet:
        return Wallet(wallet_id, names.get(wallet_id))

    with open_ledger(home, read_only=True) as ledger:
        held = bonds_in(ledger.state())
        found = {kind: list(ledger.entries(kind=kind)) for kind in KINDS}
        rulings = {e.body.get("challenge"): e for e in found[BOND_RULING]}
        view = ThirdParties(
            releases=[_release(e, who, found[ATTESTATION]) for e in found[RELEASE_KIND]],
            attestations=[_attestation(e, who, held, now or datetime.now(UTC)) for e in found[ATTESTATION]],
            bonds=[_bond(e, who, held) for e in found[BOND_POST] if held.bond(e.claim_id)],
            challenges=[_challenge(c, who, rulings.get(c.id)) for c in held.challenges()],
            examinations=[_examination(e, who, held) for e in found[EXAMINATION]],
        )
        view.pulses = {e.claim_id: e.pulse for entries in found.values() for e in entries if e.pulse}
    return view


KINDS = (RELEASE_KIND, ATTESTATION, BOND_POST, BOND_CHALLENGE, BOND_RULING, EXAMINATION)
Who = Callable[[str], Wallet]  # a wallet id, named as this home names it


def _release(e: Entry, who: Who, attestations: list[Entry]) -> ReleaseView:
    release = e.body.get("release") or {}
    return ReleaseView(
        e.claim_id,
        e.pulse or 0,
        who(e.author),
        str(release.get("release")),
        str(e.body.get("profile")),
        str(e.body.get("change")),
        str(release.get("commit")),
        str(release.get("patch")),
        [str(f) for f in release.get("files", [])],
        [a.claim_id for a in attestations if a.body.get("release_claim") == e.claim_id],
    )


def _attestation(e: Entry, who: Who, held: Bonds, now: datetime) -> AttestationView:
    body = e.body
    after, before = body.get("after") or {}, body.get("before") or {}
    claimed = f"{after.get('passed')}/{after.get('runs')} against {before.get('passed')}/{before.get('runs')}"
    rebuilt = body.get("rebuilt") or {}
    return AttestationView(
        e.claim_id,
        e.pulse or 0,
        who(e.author),
        str(body.get("release")),
        body.get("release_claim"),
        bool(body.get("holds")),
        f"{claimed} on the sealed tasks",
        str(body.get("why", "")),
        bool(rebuilt.get("built") and rebuilt.get("tested")),
        body.get("bond"),
        _standing(e.claim_id, body, held, now),
    )


def _standing(claim: str, body: dict[str, Any], held: Bonds, now: datetime) -> str:
    """What an attestation is worth now, as an installer counting it would find."""
    ruling = held.shown_false(claim)
    if ruling:
        return f"shown false by ruling {ruling[:16]}"
    bond = held.bond(str(body.get("bond"))) if body.get("bond") else None
    if bond is not None and not bond.stands:
        return f"its bond was {bond.status}: it stands behind nothing"
    expires = str(body.get("expires", ""))
    if expires and expires < now.strftime("%Y-%m-%dT%H:%M:%SZ"):
        return f"expired {expires}"
    return "stands on its bond" if bond else "stands, on no bond"


def _bond(e: Entry, who: Who, held: Bonds) -> BondView:
    bond = held.bond(e.claim_id)
    assert bond is not None  # only bonds the fold holds are asked for
    challenges = [c.id for c in held.challenges() if c.bond == bond.id]
    return BondView(
        bond.id,
        bond.pulse,
        who(bond.owner),
        bond.cents,
        who(bond.adjudicator),
        bond.status,
        bond.ended,
        list(bond.claims),
        challenges,
        str(e.body.get("memo", "")),
    )


def _challenge(c: Challenge, who: Who, ruling: Entry | None) -> ChallengeView:
    ruled = (
        RulingView(
            ruling.claim_id,
            ruling.pulse or 0,
            who(ruling.author),
            bool(ruling.body.get("uphold")),
            ruling.body.get("note", ""),
        )
        if ruling
        else None
    )
    return ChallengeView(
        c.id, c.pulse, c.bond, c.claim, who(c.challenger), c.cents, c.evidence, c.recipe is not None, c.status, ruled
    )


def _examination(e: Entry, who: Who, held: Bonds) -> ExaminationView:
    body = e.body
    bond = next((b.id for b in held.all() if e.claim_id in b.claims), None)
    return ExaminationView(
        e.claim_id,
        e.pulse or 0,
        who(e.author),
        str(body.get("outcome")),
        f"{body.get('confirmation')} of {body.get('confirmations')}",
        str(body.get("seal_claim")),
        bond,
    )
