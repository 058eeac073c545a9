"""Bonds, challenges and rulings on a home's ledger: `agentd bond`, `agentd challenge`
and `agentd rule` as library calls.

The ledger's own rules (ledger/bonds.py) decide what is allowed; what is checked here
first is only said in the user's words (a name for an id, the amount in USD), and the
rule still holds on append.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentd.app.ledger import open_ledger
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from agentd.wallets import load_wallet, wallet_id_of
from improver import ATTESTATION, EXAMINATION, recipe_for
from ledger import (
    BOND_CHALLENGE,
    BOND_POST,
    BOND_RULING,
    BOND_WITHDRAW,
    Bond,
    Bonds,
    Challenge,
    Entry,
    Ledger,
    LedgerError,
    bonds_in,
)

# What may be challenged on a bond, by kind: the claims a bond backs.
CHALLENGED = {ATTESTATION: "attestation", EXAMINATION: "examination"}


@dataclass(frozen=True)
class Written:
    """An entry a command appended, and the bond it bears on as it now stands."""

    entry: Entry
    bond: Bond


def post_bond(home: Home, wallet: str, cents: int, adjudicator: str, memo: str = "") -> Written:
    owner = load_wallet(home, wallet)
    judge = wallet_id_of(home, adjudicator)
    with open_ledger(home) as ledger:
        affords(ledger, owner.id, wallet, cents, "post a bond of")
        entry = ledger.append(
            owner, BOND_POST, {"cents": cents, "adjudicator": judge, **({"memo": memo} if memo else {})}
        )
        return Written(entry, _bond(ledger, entry.claim_id))


def withdraw_bond(home: Home, wallet: str, bond_ref: str) -> Written:
    owner = load_wallet(home, wallet)
    with open_ledger(home) as ledger:
        bond = _bond(ledger, bond_ref)
        if bond.open_challenges:
            raise AgentdError(
                f"bond {bond.id[:16]} has an open challenge ({bond.open_challenges[0][:16]}): it cannot be withdrawn "
                "until its adjudicator rules on it (agentd rule)"
            )
        entry = ledger.append(owner, BOND_WITHDRAW, {"bond": bond.id})
        return Written(entry, _bond(ledger, bond.id))


def bonds(home: Home, owner: str | None = None) -> list[Bond]:
    wanted = wallet_id_of(home, owner) if owner else None
    with open_ledger(home, read_only=True) as ledger:
        found = bonds_in(ledger.state()).all()
    return [b for b in found if wanted is None or b.owner == wanted]


def bond_with_challenges(home: Home, bond_ref: str) -> tuple[Bond, list[Challenge]]:
    with open_ledger(home, read_only=True) as ledger:
        held = bonds_in(ledger.state())
        bond = _bond(ledger, bond_ref, held)
        return bond, [c for c in held.challenges() if c.bond == bond.id]


def challenge(
    home: Home, wallet: str, claim_ref: str, bond_ref: str, cents: int, evidence: str, recipe: bool = False
) -> Written:
    """Challenges attestation or examination `claim_ref` on bond `bond_ref` with a deposit
    of `cents`; for an attestation, `recipe` carries what an adjudicator needs to rebuild
    and score the release again (an examination is rerun from its revealed seal)."""
    challenger = load_wallet(home, wallet)
    if not evidence.strip():
        raise WrongValue(
            "--evidence is empty: say what you found on rebuilding the release or rerunning the examination"
        )
    with open_ledger(home) as ledger:
        bond = _bond(ledger, bond_ref)
        claim = _entry(ledger, claim_ref, "claim")
        what = CHALLENGED.get(claim.kind)
        if what is None:
            raise AgentdError(
                f"claim {claim.claim_id[:16]} is a {claim.kind} entry, not an attestation or an examination: only "
                "those, issued on a bond, can be challenged"
            )
        if claim.claim_id not in bond.claims:
            raise AgentdError(
                f"{what} {claim.claim_id[:16]} is not issued on bond {bond.id[:16]}: challenge it on its own bond"
            )
        if recipe and claim.kind != ATTESTATION:
            raise WrongValue(
                "--recipe carries a release's rebuild: an examination is rerun from its revealed seal instead"
            )
        affords(ledger, challenger.id, wallet, cents, "deposit")
        body: dict[str, Any] = {"bond": bond.id, "claim": claim.claim_id, "cents": cents, "evidence": evidence}
        if recipe:
            body["recipe"] = recipe_for(
                ledger.find(claim.body["release_claim"]).body, claim.body["tasks"], claim.body["runs"]
            )
        entry = ledger.append(challenger, BOND_CHALLENGE, body)
        return Written(entry, _bond(ledger, bond.id))


def rule(home: Home, wallet: str, challenge_ref: str, uphold: bool, note: str = "") -> Written:
    judge = load_wallet(home, wallet)
    with open_ledger(home) as ledger:
        held = bonds_in(ledger.state())
        found = challenge_of(ledger, challenge_ref, held)
        bond = _bond(ledger, found.bond, held)
        if judge.id != bond.adjudicator:
            raise AgentdError(
                f"{wallet} is not the adjudicator of bond {bond.id[:16]} ({bond.adjudicator}): only it rules on the challenge"
            )
        if found.status != "open":
            raise AgentdError(
                f"challenge {found.id[:16]} was {found.status} already, by ruling {str(found.ruling)[:16]}"
            )
        body: dict[str, Any] = {"challenge": found.id, "uphold": uphold, **({"note": note} if note else {})}
        entry = ledger.append(judge, BOND_RULING, body)
        return Written(entry, _bond(ledger, bond.id))


def challenge_of(ledger: Ledger, ref: str, held: Bonds | None = None) -> Challenge:
    """Challenge `ref` (a claim id or a prefix of one) as `held` records it, else as the ledger does now."""
    entry = _entry(ledger, ref, "challenge")
    found = (held if held is not None else bonds_in(ledger.state())).challenge(entry.claim_id)
    if found is None:
        raise WrongValue(f"claim {entry.claim_id[:16]} is a {entry.kind} entry, not a challenge ({BOND_CHALLENGE})")
    return found


def _bond(ledger: Ledger, ref: str, held: Bonds | None = None) -> Bond:
    """Bond `ref` (a claim id or a prefix of one) as `held` records it, else as the ledger does now."""
    entry = _entry(ledger, ref, "bond")
    found = (held if held is not None else bonds_in(ledger.state())).bond(entry.claim_id)
    if found is None:
        raise WrongValue(f"claim {entry.claim_id[:16]} is a {entry.kind} entry, not a bond ({BOND_POST})")
    return found


def _entry(ledger: Ledger, ref: str, what: str) -> Entry:
    try:
        return ledger.find(ref)
    except LedgerError as exc:
        raise WrongValue(f"{what} {ref}: {exc}") from None


def affords(ledger: Ledger, wallet_id: str, name: str, cents: int, what: str) -> None:
    """AgentdError unless wallet `name` holds `cents` to `what` them (said in USD, with how to fund it)."""
    held = ledger.balance(wallet_id)
    if cents > held:
        raise AgentdError(
            f"{name} holds {held / 100:.2f} USD and cannot {what} {cents / 100:.2f} USD; fund it first (agentd wallet fund {name} USD)"
        )
