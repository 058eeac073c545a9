"""Bonds: funds a wallet locks behind its claims, which an adjudicator it names can slash.

A wallet posts a bond under an adjudicator; claims issued on the bond (another kind's
rule calls `back`) are what the bond stands behind. Anyone but the bond's owner may
challenge such a claim with a deposit; only the adjudicator the bond names rules on the
challenge, once. Upheld, the claim is shown false and the bond is slashed: the challenger
gets its deposit back and the bond's funds, and the bond stands behind nothing from then
on. Dismissed, the deposit goes to the bond's owner. A bond is withdrawn by its owner,
its funds returned, unless a challenge on it is still open.

All of it is a fold over the log: the rules below run on append and on replay, and
`bonds_in` reads what they recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.entry import Entry
from ledger.errors import RuleViolation
from ledger.rules import MAX_CENTS, RuleSet, State, credited, debit, wallet_id_shaped

BOND_POST = "bond.post/v1"
BOND_WITHDRAW = "bond.withdraw/v1"
BOND_CHALLENGE = "bond.challenge/v1"
BOND_RULING = "bond.ruling/v1"
MAX_EVIDENCE = 4000
MAX_NOTE = 500
OPEN, WITHDRAWN, SLASHED = "open", "withdrawn", "slashed"
UPHELD, DISMISSED = "upheld", "dismissed"


@dataclass(frozen=True)
class Bond:
    id: str
    owner: str
    cents: int
    adjudicator: str
    pulse: int
    status: str  # open, withdrawn or slashed
    ended: int | None  # the Pulse that withdrew or slashed it
    claims: tuple[str, ...]  # the claims issued on it
    open_challenges: tuple[str, ...]

    @property
    def stands(self) -> bool:
        """Whether the bond stands behind anything: once broken or withdrawn, never again."""
        return self.status == OPEN


@dataclass(frozen=True)
class Challenge:
    id: str
    bond: str
    claim: str
    challenger: str
    cents: int
    pulse: int
    evidence: str
    recipe: dict[str, Any] | None
    status: str  # open, upheld or dismissed
    ruling: str | None


class Bonds:
    """What the bond rules recorded in a state (a read-only view)."""

    def __init__(self, state: State) -> None:
        self._bonds: dict[str, Any] = state.namespaces.get("bonds", {})
        self._challenges: dict[str, Any] = state.namespaces.get("challenges", {})
        self._false: dict[str, str] = state.namespaces.get("shown_false", {})

    def bond(self, bond_id: str) -> Bond | None:
        raw = self._bonds.get(bond_id)
        if raw is None:
            return None
        return Bond(
            bond_id,
            raw["owner"],
            raw["cents"],
            raw["adjudicator"],
            raw["pulse"],
            raw["status"],
            raw["ended"],
            tuple(raw["claims"]),
            tuple(raw["open"]),
        )

    def challenge(self, challenge_id: str) -> Challenge | None:
        raw = self._challenges.get(challenge_id)
        if raw is None:
            return None
        return Challenge(
            challenge_id,
            raw["bond"],
            raw["claim"],
            raw["challenger"],
            raw["cents"],
            raw["pulse"],
            raw["evidence"],
            raw["recipe"],
            raw["status"],
            raw["ruling"],
        )

    def shown_false(self, claim: str) -> str | None:
        """The ruling that showed `claim` false, or None."""
        return self._false.get(claim)

    def all(self) -> list[Bond]:
        return [b for b in map(self.bond, self._bonds) if b is not None]

    def of_owner(self, wallet: str) -> list[Bond]:
        return [b for b in self.all() if b.owner == wallet]

    def challenges(self) -> list[Challenge]:
        return [c for c in map(self.challenge, self._challenges) if c is not None]


def bonds_in(state: State) -> Bonds:
    return Bonds(state)


def register_bonds(rules: RuleSet) -> None:
    rules.register(BOND_POST, _post)
    rules.register(BOND_WITHDRAW, _withdraw)
    rules.register(BOND_CHALLENGE, _challenge)
    rules.register(BOND_RULING, _ruling)


def back(state: State, bond_id: Any, claim: str, author: str, adjudicator: Any) -> None:
    """Records that `claim`, by `author`, is issued on bond `bond_id` under `adjudicator`,
    or raises RuleViolation. A slashed bond may still be named: the claim is recorded, and
    the bond stands behind it no more than behind anything else."""
    bond = _bond(state, bond_id, "bond")
    if bond["owner"] != author:
        raise RuleViolation(f"bond {bond_id} is not the author's: a claim is issued only on its author's own bond")
    if bond["adjudicator"] != adjudicator:
        raise RuleViolation(f"bond {bond_id} is under adjudicator {bond['adjudicator']}, not {adjudicator}")
    if bond["status"] == WITHDRAWN:
        raise RuleViolation(f"bond {bond_id} was withdrawn at Pulse {bond['ended']}: it backs no claim")
    bond["claims"].append(claim)


def _post(state: State, entry: Entry) -> None:
    body = entry.body
    _keys(entry, {"cents", "adjudicator"}, {"memo"}, '{"cents": <int>, "adjudicator": <wallet id>, "memo"?: <text>}')
    cents, adjudicator = _cents(entry, body["cents"]), body["adjudicator"]
    if not isinstance(adjudicator, str) or not wallet_id_shaped(adjudicator):
        raise RuleViolation(f"{entry.kind}: adjudicator must be a wallet id (32 lowercase hex digits)")
    if adjudicator == entry.author:
        raise RuleViolation(f"{entry.kind}: a wallet cannot adjudicate its own bond")
    _text(entry, body.get("memo", ""), "memo", MAX_NOTE)
    debit(state, entry.author, cents, "post a bond of")
    state.ns("bonds")[entry.claim_id] = {
        "owner": entry.author,
        "cents": cents,
        "adjudicator": adjudicator,
        "pulse": entry.pulse,
        "status": OPEN,
        "ended": None,
        "claims": [],
        "open": [],
    }


def _withdraw(state: State, entry: Entry) -> None:
    _keys(entry, {"bond"}, set(), '{"bond": <bond claim id>}')
    bond_id = entry.body["bond"]
    bond = _bond(state, bond_id, "bond")
    if bond["owner"] != entry.author:
        raise RuleViolation(f"bond {bond_id} is {bond['owner']}'s: only its owner withdraws it")
    if bond["status"] != OPEN:
        raise RuleViolation(
            f"bond {bond_id} was {bond['status']} at Pulse {bond['ended']}: nothing is left to withdraw"
        )
    if bond["open"]:
        raise RuleViolation(
            f"bond {bond_id} has an open challenge ({bond['open'][0]}): it stays until that is ruled on"
        )
    state.balances[entry.author] = credited(state, entry.author, bond["cents"], entry.kind)
    bond["status"], bond["ended"] = WITHDRAWN, entry.pulse


def _challenge(state: State, entry: Entry) -> None:
    body = entry.body
    _keys(
        entry,
        {"bond", "claim", "cents", "evidence"},
        {"recipe"},
        '{"bond": <bond claim id>, "claim": <claim id>, "cents": <int>, "evidence": <text>, "recipe"?: <object>}',
    )
    bond_id, claim = body["bond"], body["claim"]
    bond = _bond(state, bond_id, "bond")
    if not isinstance(claim, str) or claim not in bond["claims"]:
        raise RuleViolation(
            f"claim {claim} is not issued on bond {bond_id}: only a claim a bond backs is challenged on it"
        )
    if bond["status"] == WITHDRAWN:
        raise RuleViolation(f"bond {bond_id} was withdrawn at Pulse {bond['ended']}: it backs nothing to challenge")
    if bond["owner"] == entry.author:
        raise RuleViolation("a wallet cannot challenge a claim on its own bond")
    if claim in state.ns("shown_false"):
        raise RuleViolation(f"claim {claim} was shown false already, by ruling {state.ns('shown_false')[claim]}")
    cents = _cents(entry, body["cents"])
    _text(entry, body["evidence"], "evidence", MAX_EVIDENCE, required=True)
    recipe = body.get("recipe")
    if recipe is not None and not isinstance(recipe, dict):
        raise RuleViolation(f"{entry.kind}: recipe must be an object (the release, commit, patch, tasks and commands)")
    debit(state, entry.author, cents, "deposit")
    bond["open"].append(entry.claim_id)
    state.ns("challenges")[entry.claim_id] = {
        "bond": bond_id,
        "claim": claim,
        "challenger": entry.author,
        "cents": cents,
        "pulse": entry.pulse,
        "evidence": body["evidence"],
        "recipe": recipe,
        "status": OPEN,
        "ruling": None,
    }


def _ruling(state: State, entry: Entry) -> None:
    body = entry.body
    _keys(
        entry,
        {"challenge", "uphold"},
        {"note"},
        '{"challenge": <challenge claim id>, "uphold": <bool>, "note"?: <text>}',
    )
    challenge_id, uphold = body["challenge"], body["uphold"]
    challenge = state.ns("challenges").get(challenge_id) if isinstance(challenge_id, str) else None
    if challenge is None:
        raise RuleViolation(f"no challenge {challenge_id} on the log")
    if not isinstance(uphold, bool):
        raise RuleViolation(f"{entry.kind}: uphold must be true or false")
    _text(entry, body.get("note", ""), "note", MAX_NOTE)
    bond = state.ns("bonds")[challenge["bond"]]
    if entry.author != bond["adjudicator"]:
        raise RuleViolation(f"only the bond's adjudicator ({bond['adjudicator']}) rules on its challenges")
    if challenge["status"] != OPEN:
        raise RuleViolation(
            f"challenge {challenge_id} was {challenge['status']} already, by ruling {challenge['ruling']}"
        )
    bond["open"].remove(challenge_id)
    challenge["status"], challenge["ruling"] = (UPHELD if uphold else DISMISSED), entry.claim_id
    if not uphold:
        state.balances[bond["owner"]] = credited(state, bond["owner"], challenge["cents"], entry.kind)
        return
    slashed = bond["cents"] if bond["status"] == OPEN else 0
    state.balances[challenge["challenger"]] = credited(
        state, challenge["challenger"], challenge["cents"] + slashed, entry.kind
    )
    state.ns("shown_false")[challenge["claim"]] = entry.claim_id
    if bond["status"] == OPEN:
        bond["status"], bond["ended"] = SLASHED, entry.pulse


def _bond(state: State, bond_id: Any, field: str) -> dict[str, Any]:
    bond: dict[str, Any] | None = state.ns("bonds").get(bond_id) if isinstance(bond_id, str) else None
    if bond is None:
        raise RuleViolation(f"{field} {bond_id} is no bond on the log: post one with bond.post/v1 first")
    return bond


def _keys(entry: Entry, required: set[str], optional: set[str], shape: str) -> None:
    keys = entry.body.keys()
    if not required <= keys or not keys <= required | optional:
        raise RuleViolation(f"{entry.kind} body is {shape}")


def _cents(entry: Entry, cents: Any) -> int:
    if type(cents) is not int or not 0 < cents <= MAX_CENTS:
        raise RuleViolation(f"{entry.kind}: cents must be a whole number of cents above 0")
    return cents


def _text(entry: Entry, value: Any, field: str, limit: int, *, required: bool = False) -> None:
    if not isinstance(value, str) or len(value) > limit or (required and not value.strip()):
        need = "non-empty text" if required else "text"
        raise RuleViolation(f"{entry.kind}: {field} must be {need} of at most {limit} characters")
