"""The state of a log as a fold over its entries, and the rules of the ledger itself.

Before a kind's own rule sees an entry, the ledger holds it to three rules of its own,
on append and on replay alike: it names this log (the origin its genesis entry fixed),
it carries its author's next sequence number (1, 2, 3, … with no gap), and so it is
recorded once: the same signed bytes, or any other entry reusing a sequence number,
cannot be appended again, here or on another log.

An entry signed elsewhere that a kind's rule refuses is not lost either, when the log
knows its author (see ledger.log): the log's key records a ledger.refusal/v1 entry
holding its bytes, which spends its sequence number, so a transfer refused for an
overdraft cannot be appended later, once the sender has been funded. Replay checks each
refusal, whoever wrote the entry it holds (logs of earlier versions kept refusals of
every author): the entry must carry its author's next number and break a rule at that
point of the log.

A Tip is a fold as far as some Pulse: the state, the tree's right edge and the running
digest. A ledger resumes one from the snapshot its store keeps (see ledger.snapshot),
folding only the rows after it, or, when the snapshot does not hold, from Pulse 1.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ledger import merkle, snapshot as snapshots
from ledger.entry import Entry
from ledger.errors import VERIFY_HINT, DamagedStore, LedgerError, RuleViolation
from ledger.rules import GENESIS, REFUSAL, RuleSet, State
from ledger.store import CHAIN_START, Head, Row, Snapshot

log = logging.getLogger("ledger")
MAX_REASON = 500


class SequenceViolation(RuleViolation):
    """An entry breaks one of the ledger's own rules: it is for another log, or does not
    carry its author's next sequence number. Such an entry spends nothing when refused."""


def fold(rules: RuleSet, state: State, entry: Entry) -> None:
    """Folds `entry` into `state` under the ledger's rules, then its kind's; RuleViolation
    if it breaks one (`state` may then be part changed: callers fold on a copy)."""
    if state.size == 0 and entry.kind != GENESIS:
        raise SequenceViolation(f"a log starts with its {GENESIS} entry")
    in_sequence(state, entry)
    if entry.kind == REFUSAL:
        _refusal(rules, state, entry)
        state.size += 1
    else:
        rules.apply(state, entry)
    state.sequences[entry.author] = entry.seq


def in_sequence(state: State, entry: Entry) -> None:
    """SequenceViolation unless `entry` names this log and carries its author's next number."""
    if entry.kind != GENESIS and entry.log != state.origin:
        raise SequenceViolation(
            f"the entry was signed for log {entry.log}, not this one ({state.origin}): an entry is recorded only "
            "on the log it names"
        )
    last = state.sequences.get(entry.author, 0)
    if entry.seq != last + 1:
        raise SequenceViolation(_out_of_sequence(entry, last))


def refusal_body(entry: Entry, reason: str) -> dict[str, str]:
    """The body of the ledger.refusal/v1 entry that records `entry` was refused."""
    return {"entry": base64.b64encode(entry.raw).decode(), "reason": reason[:MAX_REASON]}


def _refusal(rules: RuleSet, state: State, entry: Entry) -> None:
    """A refusal spends the refused entry's sequence number, if the entry is what it says."""
    if entry.author != state.authority:
        raise RuleViolation(f"{REFUSAL} may be signed only by the log's key ({state.authority})")
    body = entry.body
    if body.keys() != {"entry", "reason"} or not isinstance(body["entry"], str) or not isinstance(body["reason"], str):
        raise RuleViolation(f'{REFUSAL} body is {{"entry": "<base64 of the refused entry>", "reason": "<text>"}}')
    try:
        refused = Entry.parse(base64.b64decode(body["entry"], validate=True))
    except (binascii.Error, LedgerError) as exc:
        raise RuleViolation(f"{REFUSAL}: what it holds is not a signed entry ({exc})") from None
    if refused.kind in (GENESIS, REFUSAL):
        raise RuleViolation(f"{REFUSAL}: a {refused.kind} entry is never refused this way")
    refused.pulse = state.size + 1  # where it would have gone
    try:
        in_sequence(state, refused)
        rules.apply(state.copy(), refused)
    except SequenceViolation as exc:
        raise RuleViolation(f"{REFUSAL}: the entry it holds has no sequence number to spend here ({exc})") from None
    except RuleViolation:
        state.sequences[refused.author] = refused.seq
        return
    raise RuleViolation(f"{REFUSAL}: the entry it holds keeps every rule here, so it was not refused")


def _out_of_sequence(entry: Entry, last: int) -> str:
    who = f"wallet {entry.author}"
    if entry.seq <= last:
        return (
            f"recorded once: {who} already used sequence number {entry.seq} on this log (its last is {last}): "
            "the entry is a duplicate or a replay"
        )
    return f"{who} skipped ahead: its next sequence number is {last + 1}, not {entry.seq}"


@dataclass
class Tip:
    """A fold of the log as far as Pulse `frontier.size`: the state, the tree's right
    edge, and the running digest of the last row."""

    state: State
    frontier: merkle.Frontier
    chain: bytes

    @classmethod
    def empty(cls) -> Tip:
        return cls(State(), merkle.Frontier(), CHAIN_START)


class Folder:
    """Folds rows of the log at `url` under `rules`, counting the entries it replays."""

    def __init__(self, rules: RuleSet, url: str) -> None:
        self.rules = rules
        self.url = url
        self.replayed = 0

    def resume(
        self, snapshot: Snapshot | None, rows: Callable[[int], Iterable[Row]], head: Head | None
    ) -> tuple[Tip, bool]:
        """The fold from the stored snapshot and the `rows` after it, or, when that does
        not hold, from Pulse 1; and whether a snapshot was ignored. Held to `head` if given."""
        if snapshot is not None:
            try:
                return self._from_snapshot(snapshot, rows, head), False
            except DamagedStore:
                raise  # the store cannot be read: replaying it from Pulse 1 would only read it again
            except LedgerError as exc:
                log.warning(
                    "the ledger at %s does not use its stored snapshot (of %d entries): %s; replaying the whole log",
                    self.url,
                    snapshot.size,
                    exc,
                )
        tip = Tip.empty()
        self.advance(tip, rows(1))
        if head is not None:
            at_head(tip, head)
        return tip, snapshot is not None

    def _from_snapshot(self, snapshot: Snapshot, rows: Callable[[int], Iterable[Row]], head: Head | None) -> Tip:
        """The snapshot's fold advanced by the rows after it."""
        state, frontier = snapshots.restore(snapshot, self.rules.fingerprint)
        if head is not None and snapshot.size > head.size:
            raise LedgerError(f"it describes more entries than the head records ({head.size})")
        following = iter(rows(snapshot.size))
        last = next(following, None)
        if last is None or last.pulse != snapshot.size or last.chain != snapshot.chain:
            raise LedgerError(f"Pulse {snapshot.size} on the log is not the entry it was folded up to")
        tip = Tip(state, frontier, snapshot.chain)
        self.advance(tip, following)
        if head is not None:
            at_head(tip, head)
        return tip

    def advance(self, tip: Tip, rows: Iterable[Row]) -> None:
        """Folds rows recorded by others into `tip`, trusting their signatures (checked when
        they were appended; `verify` checks them again)."""
        for row in rows:
            if row.pulse != tip.frontier.size + 1:
                raise LedgerError(f"Pulse {tip.frontier.size + 1} is missing from the ledger; {VERIFY_HINT}")
            try:
                fold(self.rules, tip.state, read(row))
            except RuleViolation as exc:
                raise LedgerError(f"Pulse {row.pulse} on the ledger breaks a rule ({exc}); {VERIFY_HINT}") from None
            tip.frontier.append(row.leaf)
            tip.chain = row.chain
            self.replayed += 1

    def snapshot(self, tip: Tip) -> Snapshot:
        return snapshots.take(tip.state, tip.frontier, tip.chain, self.rules.fingerprint)


def at_head(tip: Tip, head: Head) -> None:
    if tip.frontier.size != head.size or tip.frontier.root() != head.root:
        raise LedgerError(f"the ledger's entries do not hash to its head; {VERIFY_HINT}")


def read(row: Row) -> Entry:
    """The entry a stored row holds, parsed without rechecking its signature."""
    try:
        return Entry.parse(row.raw, row.pulse, verify=False)
    except LedgerError as exc:
        raise LedgerError(f"Pulse {row.pulse} is corrupt ({exc}); {VERIFY_HINT}") from None
