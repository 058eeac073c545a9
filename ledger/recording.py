"""Recording a batch of signed entries inside an append's transaction.

The writing `Ledger` (ledger.log) decides what to record: its callers' entries, signed,
a refusal, or a copy being imported; a Recording puts a batch on the log. Under the
write lock, on the fold caught up to the locked head, it numbers the entries, folds
them in under the rules (see ledger.fold), and writes their rows, running digests, the
tree tiles they change and the new head, or writes nothing and says which entry a rule
refused and why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ledger import checkpoint as notes, tiles
from ledger.entry import Entry
from ledger.errors import LedgerError, RuleViolation
from ledger.fold import SequenceViolation, Tip, fold
from ledger.rules import RuleSet
from ledger.store import Head, Record, Recorder, Transaction, chain

# Words a refusal of the i-th of the caller's `given` entries (i < 1: one the ledger added).
Describe = Callable[[int, int, Entry, str], str]


class Refused(RuleViolation):
    """A rule refused `entry`; `spends` when it is one of the caller's and a kind's rule,
    not the ledger's own, refused it (see ledger.fold)."""

    def __init__(self, message: str, entry: Entry, spends: bool) -> None:
        super().__init__(message)
        self.entry = entry
        self.spends = spends


@dataclass(frozen=True)
class Recording:
    """One append's transaction, on `tip`: the fold up to its locked head, which each
    batch recorded advances."""

    txn: Transaction
    tip: Tip
    rules: RuleSet
    store: Recorder  # to name where an entry refused as a duplicate already is

    def add(self, batch: list[Entry], given: int, describe: Describe, held_to: notes.Checkpoint | None = None) -> None:
        """Folds `batch` into the tip and writes its rows, the tiles they change and the
        head; the last `given` entries are the caller's, and `held_to` is a checkpoint the
        log must extend (its root checked at its size)."""
        if len({e.leaf_hash for e in batch}) != len(batch):
            raise LedgerError("the batch holds the same entry twice: an entry is recorded once")
        frontier = self.tip.frontier
        old_size = frontier.size
        completed = frontier.keep(tiles.HEIGHT)
        records = self._fold(batch, given, describe, held_to)
        frontier.completed = None
        head = Head(frontier.size, frontier.root())
        leaves = [entry.leaf_hash for entry in batch]
        self.txn.add(records, head, tiles.updates(self.txn.tile, old_size, leaves, completed))

    def _fold(
        self, batch: list[Entry], given: int, describe: Describe, held_to: notes.Checkpoint | None
    ) -> list[Record]:
        """Numbers the entries and folds them in, as the rows to write."""
        records = []
        state, frontier, link = self.tip.state, self.tip.frontier, self.tip.chain
        for i, entry in enumerate(batch, 1 + given - len(batch)):
            entry.pulse = state.size + 1
            try:
                fold(self.rules, state, entry)
            except RuleViolation as exc:
                spends = i >= 1 and not isinstance(exc, SequenceViolation)
                raise Refused(describe(i, given, entry, self._why(entry, str(exc))), entry, spends) from None
            frontier.append(entry.leaf_hash)
            link = chain(link, entry.leaf_hash)
            records.append(Record(entry.pulse, entry.raw, entry.leaf_hash, link, entry.kind, entry.author, entry.seq))
            if held_to is not None and frontier.size == held_to.size and frontier.root() != held_to.root:
                raise LedgerError(
                    f"the copy is not the log of the checkpoint: its first {held_to.size} entries do not hash to the "
                    f"checkpoint's root (an entry up to Pulse {held_to.size} was changed, removed or moved)"
                )
        self.tip.chain = link
        return records

    def _why(self, entry: Entry, reason: str) -> str:
        """A refusal's reason, naming the Pulse when the entry is one already recorded."""
        if not reason.startswith("recorded once"):
            return reason
        found = self.store.find(entry.leaf_hash, entry.leaf_hash, 1)
        if found:
            return f"entry {entry.claim_id[:16]} is already on the log at Pulse {found[0]}: an entry is recorded once"
        return reason
