"""State as a fold over entries, and the rules an entry must keep to join the log.

A RuleSet maps each kind the log accepts to a rule: `rule(state, entry)` raises
RuleViolation to refuse the entry, else records what it changes in `state`. The same
rules run when an entry is appended and when an auditor replays the log. Packages
register their own kinds; the ledger itself knows the genesis entry that names the log's
key and the refusal entry (see ledger.fold), and offers the funds rules to whoever
composes a rule set.
"""

from __future__ import annotations

import hashlib
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson

from ledger.entry import ORIGIN, WALLET_ID, Entry
from ledger.errors import LedgerError, RuleViolation

GENESIS = "ledger.genesis/v1"
# The log's key records that an entry signed elsewhere was refused (see ledger.fold).
REFUSAL = "ledger.refusal/v1"
MINT = "funds.mint/v1"
TRANSFER = "funds.transfer/v1"
MAX_CENTS = 2**53 - 1
MAX_MEMO = 500
_PAYMENT_KEYS = frozenset({"to", "cents", "memo"})

Rule = Callable[["State", Entry], None]


@dataclass
class State:
    """What the log's entries add up to, as of `size` entries.

    Rules keep only JSON data in their namespaces (dicts with string keys, lists,
    strings, integers, floats, booleans, None; no tuples or sets), because the fold is
    stored as JSON in the ledger's snapshot and read back from it."""

    size: int = 0
    origin: str | None = None
    authority: str | None = None
    balances: dict[str, int] = field(default_factory=dict)
    namespaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Each author's last sequence number on the log (see ledger.fold).
    sequences: dict[str, int] = field(default_factory=dict)

    def ns(self, name: str) -> dict[str, Any]:
        """The namespace a package's rules keep their own data in."""
        return self.namespaces.setdefault(name, {})

    def balance(self, wallet: str) -> int:
        return self.balances.get(wallet, 0)

    def copy(self) -> State:
        # The namespaces hold JSON data only (above), so a JSON round trip copies them
        # exactly, three times quicker than deepcopy: commands that read the fold of a
        # long log copy every session's item.
        return State(
            self.size,
            self.origin,
            self.authority,
            dict(self.balances),
            orjson.loads(orjson.dumps(self.namespaces)),
            dict(self.sequences),
        )


class RuleSet:
    """The kinds a log accepts, each with the rule its entries must keep."""

    def __init__(self) -> None:
        self._rules: dict[str, Rule] = {GENESIS: _genesis}
        self._fingerprint: bytes | None = None

    def register(self, kind: str, rule: Rule) -> None:
        if kind in self._rules:
            raise LedgerError(f"kind {kind} already has a rule")
        self._rules[kind] = rule
        self._fingerprint = None

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(self._rules)

    @property
    def fingerprint(self) -> bytes:
        """A digest of the kinds and of each rule's name and bytecode. A snapshot folded
        under another fingerprint (other kinds, another version of a rule) is not used.
        Helpers a rule calls are not covered: a change there that alters what the rule
        keeps in the state needs a new kind version."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            for kind in sorted(self._rules):
                rule = self._rules[kind]
                name = f"{getattr(rule, '__module__', '')}.{getattr(rule, '__qualname__', type(rule).__qualname__)}"
                code = getattr(rule, "__code__", None)
                digest.update(f"{kind}\0{name}\0".encode() + (_code_bytes(code) if code else b"") + b"\0")
            self._fingerprint = digest.digest()
        return self._fingerprint

    def apply(self, state: State, entry: Entry) -> None:
        """Folds `entry` into `state`, or raises RuleViolation. A rule may have changed
        `state` before it refused, so callers that keep going work on a copy."""
        rule = self._rules.get(entry.kind)
        if rule is None:
            accepted = ", ".join(sorted({*self._rules, REFUSAL}))
            raise RuleViolation(f"unknown kind {entry.kind}: this log accepts {accepted}")
        if state.size == 0 and entry.kind != GENESIS:
            raise RuleViolation(f"a log starts with its {GENESIS} entry")
        rule(state, entry)
        state.size += 1


def _code_bytes(code: types.CodeType) -> bytes:
    """A code object's bytecode, names and constants, the same in every process (set
    constants are sorted: their order follows string hashing, which varies by process)."""
    parts = [code.co_code, "\0".join(code.co_names).encode()]
    parts += [_code_bytes(c) if isinstance(c, types.CodeType) else _constant(c) for c in code.co_consts]
    return hashlib.sha256(b"\0".join(parts)).digest()


def _constant(value: object) -> bytes:
    if isinstance(value, tuple):
        return b"(" + b",".join(map(_constant, value)) + b")"
    if isinstance(value, frozenset):
        return b"{" + b",".join(sorted(map(_constant, value))) + b"}"
    return repr(value).encode()


def register_funds(rules: RuleSet) -> None:
    """Money in integer cents: the log's key mints, wallets transfer what they hold."""
    rules.register(MINT, _mint)
    rules.register(TRANSFER, _transfer)


def _genesis(state: State, entry: Entry) -> None:
    if state.size:
        raise RuleViolation(f"only the first entry of a log may be {GENESIS}")
    origin = entry.body.get("origin")
    if entry.body.keys() != {"origin"} or not isinstance(origin, str) or not ORIGIN.fullmatch(origin):
        raise RuleViolation(f'{GENESIS} body is {{"origin": "<log name, printable ASCII, no space or +>"}}')
    if entry.log != origin:
        raise RuleViolation(f"the {GENESIS} entry must name the log it starts ({origin}), not {entry.log}")
    state.origin, state.authority = origin, entry.author


def _mint(state: State, entry: Entry) -> None:
    to, cents = _payment(entry)
    if entry.author != state.authority:
        raise RuleViolation(f"{MINT} may be signed only by the log's key ({state.authority})")
    state.balances[to] = credited(state, to, cents, entry.kind)


def _transfer(state: State, entry: Entry) -> None:
    to, cents = _payment(entry)
    if to == entry.author:
        raise RuleViolation("a transfer to the sending wallet itself moves nothing")
    debit(state, entry.author, cents, "send")
    state.balances[to] = credited(state, to, cents, entry.kind)  # a copy is folded: a refusal here undoes the debit


def credited(state: State, to: str, cents: int, kind: str) -> int:
    """`to`'s balance with `cents` more, which must stay a safe integer: balances are
    JSON numbers in the snapshot and in what readers of the log compute."""
    balance = state.balances.get(to, 0) + cents
    if balance > MAX_CENTS:
        raise RuleViolation(
            f"{kind}: wallet {to} holds {state.balance(to)} cents and cannot receive {cents} more: "
            f"a balance may not exceed {MAX_CENTS} cents"
        )
    return balance


def _payment(entry: Entry) -> tuple[str, int]:
    body = entry.body
    to, cents, memo = body.get("to"), body.get("cents"), body.get("memo", "")
    if not body.keys() <= _PAYMENT_KEYS or "to" not in body or "cents" not in body:
        raise RuleViolation(f'{entry.kind} body is {{"to": <wallet id>, "cents": <int>, "memo"?: <text>}}')
    if not isinstance(to, str) or not wallet_id_shaped(to):
        raise RuleViolation(f"{entry.kind}: to must be a wallet id (32 lowercase hex digits)")
    if type(cents) is not int or not 0 < cents <= MAX_CENTS:
        raise RuleViolation(f"{entry.kind}: cents must be a whole number of cents above 0")
    if not isinstance(memo, str) or len(memo) > MAX_MEMO:
        raise RuleViolation(f"{entry.kind}: memo must be text of at most {MAX_MEMO} characters")
    return to, cents


def debit(state: State, wallet: str, cents: int, what: str) -> None:
    """Takes `cents` from `wallet`, which must hold them ("cannot <what> <cents>" if not)."""
    held = state.balance(wallet)
    if cents > held:
        raise RuleViolation(f"overdraft: wallet {wallet} holds {held} cents and cannot {what} {cents}")
    state.balances[wallet] = held - cents


@lru_cache(maxsize=4096)
def wallet_id_shaped(text: str) -> bool:
    # Remembered: a log's payments go to a few wallets many times over, and replay checks each.
    return WALLET_ID.fullmatch(text) is not None
