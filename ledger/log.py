"""The Ledger: an append-only log of signed entries kept in a store, held to a rule set.

A Ledger is a LedgerReader (ledger.reading) that also writes: it appends, imports a
copy into an empty store, signs checkpoints and keeps witnesses' cosignatures of them.
Whoever only reads needs no more than the reader, and no key.

Appends run as one store transaction each: under the write lock the ledger catches up
on entries other processes appended, signs the caller's entries with the log's origin
and each author's next sequence number, and records them against the state folded up
to the locked head (see ledger.recording), moving the head to the new size and root,
or records nothing. The same transaction signs a checkpoint when one is due, or a
promise of one, and each recorded entry carries its receipt (see ledger.receipts). The
first append to an empty log is preceded by its genesis entry, signed by the log's own
key, which names the log's origin and the key that mints and signs checkpoints, so a
copy of the log carries its own authority.

What an append may make the log store is bounded: an entry over MAX_ENTRY_BYTES (see
ledger.entry) is refused before anything is written, and an entry signed elsewhere that
a kind's rule refuses is kept as a refusal (which spends its sequence number) only when
the log knows its author (see ledger.reading.knows): a wallet never funded and with no
entry of its own costs the log nothing. Replays and imports hold what a log already
holds to the rules alone, so logs written before either bound still verify.

Each append advances the fold the reader keeps. Appends rewrite the store's snapshot of
it in their transaction once the entries since it would take about as long to replay
as a new snapshot takes to write.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Self

from ledger import checkpoint as notes
from ledger.entry import Entry, EntryError, EntryTooLarge, too_large
from ledger.errors import VERIFY_HINT, LedgerError, RefusalRecorded, RuleViolation
from ledger.fold import Tip, at_head, refusal_body
from ledger.keys import Wallet
from ledger.notary import Notary
from ledger.reading import LedgerReader, knows
from ledger.receipts import CheckpointPolicy, Receipt
from ledger.recording import Describe, Recording, Refused
from ledger.rules import GENESIS, REFUSAL, RuleSet
from ledger.store import Recorder, Transaction
from ledger.stores import open_store

# Folding one entry costs about what taking and writing this many bytes of snapshot does
# (bench/ledger.py measured 1,200 to 1,800 on SQLite, the fewer on larger snapshots). A
# snapshot is rewritten once the entries since it number its length over this, so the
# writes cost appends about one more fold per entry, and a new process replays at most
# what one write costs.
SNAPSHOT_BYTES_PER_ENTRY = 1024
IMPORT_BATCH = 1000  # entries of a copy read and recorded at a time

# A body, or how to make it from the caller's entries signed before it in the same batch:
# an entry naming another of its batch (by claim id) can be signed only after that one.
Body = dict[str, Any] | Callable[[list[Entry]], dict[str, Any]]
Item = tuple[Wallet, str, Body]


@dataclass(frozen=True)
class Imported:
    """What an import recorded, and what it was held to: the size of the checkpoint the
    copy was found consistent with, or None when only its own consistency was checked."""

    size: int  # the entries recorded
    checkpoint: int | None

    @property
    def scope(self) -> str:
        if self.checkpoint is None:
            return "only self-consistency was checked (no checkpoint given): a truncated copy passes"
        return f"consistent with the checkpoint at size {self.checkpoint}"


class Ledger(LedgerReader):
    """A signed append-only log kept in a store, every entry held to a rule set."""

    def __init__(
        self,
        store: Recorder,
        rules: RuleSet,
        key: Wallet | None = None,
        *,
        check: bool = True,
        policy: CheckpointPolicy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`key` is the log's own key: it starts an empty log and signs checkpoints and
        receipts. `check` runs the start-up check (the head against the highest row and
        the stored tree); verify skips it. `policy` says when appends sign checkpoints."""
        self._key = key
        self._notary = Notary(key, policy or CheckpointPolicy(), clock, store.url)
        super().__init__(store, rules, check=check)

    @classmethod
    def open(
        cls,
        url: str,
        rules: RuleSet,
        key: Wallet | None = None,
        *,
        check: bool = True,
        policy: CheckpointPolicy | None = None,
    ) -> Self:
        return cls(open_store(url), rules, key, check=check, policy=policy)

    # Appending

    def append(self, wallet: Wallet, kind: str, body: dict[str, Any]) -> Entry:
        return self.append_many([(wallet, kind, body)])[0]

    def append_many(self, items: Iterable[Item]) -> list[Entry]:
        """Signs and records entries in one transaction: all of them, or none. Each
        carries its receipt. A body given as a function is made from the caller's entries
        signed before it (their claim ids are known once signed), so an entry can name
        another recorded with it."""
        items = list(items)
        return self._record(lambda tip: self._sign(tip, items), _appended)

    def append_raw(self, raws: Iterable[bytes]) -> list[Entry]:
        """Records entries signed elsewhere, each checked (its size, canonical bytes,
        signature, author) before the rules; all of them, or none. Each must name this
        log's origin and its author's next sequence number (see `origin`,
        `next_sequence`). An entry a kind's rule refuses raises RefusalRecorded when its
        refusal is recorded (see `_spend`), else RuleViolation."""
        entries = _signed_elsewhere(raws)

        def batch(tip: Tip) -> tuple[list[Entry], int]:
            return ([self._genesis()] if tip.state.size == 0 else []) + entries, len(entries)

        try:
            return self._record(batch, _appended)
        except Refused as refused:
            if not refused.spends:
                raise
            raise self._spend(refused) from None

    def _spend(self, refused: Refused) -> RuleViolation:
        """Records that an entry signed elsewhere was refused, which spends its sequence
        number, when this ledger holds the log's key and the log knows the entry's
        author (see ledger.reading.knows); the error to raise. A wallet the log does not
        know costs it nothing: its refused entries are not kept, so keys made by the
        thousand, never funded, cannot grow the log."""
        entry, reason = refused.entry, str(refused)
        if self._key is None:
            return RuleViolation(reason)
        item = (self._key, REFUSAL, refusal_body(entry, reason))

        def batch(tip: Tip) -> tuple[list[Entry], int]:
            # Asked under the write lock: another process may have funded the wallet since.
            return self._sign(tip, [item]) if knows(tip.state, entry.author, self._store) else ([], 0)

        try:
            recorded = self._record(batch, _appended)
        except LedgerError:
            return RuleViolation(reason)  # the log moved on meanwhile: the entry may now be good, or spent
        if not recorded:
            return RuleViolation(
                f"{reason}; nothing is recorded, not even the refusal, and sequence number {entry.seq} of wallet "
                f"{entry.author} is not spent: the log knows nothing of the wallet (no entry of its own, never funded)"
            )
        return RefusalRecorded(
            f"{reason}; the refusal is recorded at Pulse {recorded[0].pulse}, which spends sequence number "
            f"{entry.seq} of wallet {entry.author}: its next entry carries {entry.seq + 1}"
        )

    def import_entries(self, raws: Iterable[bytes], checkpoint: str | None = None) -> Imported:
        """Rebuilds an exported log in this empty ledger, checking each entry as it goes.
        The copy must start with its own genesis entry: one made up here would be signed
        by another key than the log's, and move every Pulse after it. Given `checkpoint`
        (a signed note of the log, from a source the caller trusts), the copy must
        extend it: a copy cut short, pruned or reordered is refused, naming the first
        bad Pulse where it can be known. The copy is read and recorded IMPORT_BATCH
        entries at a time, in one transaction: all of it is recorded, or none."""
        entries = _parsed(raws)
        first = next(entries, None)
        if first is not None and first.kind != GENESIS:
            raise LedgerError(
                f"the copy does not start with its genesis entry (its Pulse 1 is a {first.kind}): "
                "export the whole log, from Pulse 1"
            )
        trusted = None
        if checkpoint is not None:
            if first is None:
                raise LedgerError("the copy is empty, so it extends no checkpoint")
            trusted = notes.verify(checkpoint, first.public_key, first.log)
        size = self._import(itertools.chain([first] if first else [], entries), trusted)  # the first put back
        return Imported(size, trusted.size if trusted else None)

    def _import(self, entries: Iterator[Entry], held_to: notes.Checkpoint | None) -> int:
        with self._store.transaction() as txn:
            if txn.head.size:
                raise LedgerError(f"the ledger at {self.url} is not empty: import into a fresh home or database")
            recording = self._recording(txn)
            tip = recording.tip
            while batch := list(itertools.islice(entries, IMPORT_BATCH)):
                recording.add(batch, len(batch), _imported, held_to)
            if held_to is not None and tip.frontier.size < held_to.size:
                raise LedgerError(
                    f"Pulse {tip.frontier.size + 1}: missing: the checkpoint covers {held_to.size} entries and the copy "
                    f"holds {tip.frontier.size} (it was cut short)"
                )
            if tip.frontier.size:
                self._snapshot_if_due(txn, tip)
                self._notary.receipt(txn, tip)
        self._tip = tip
        return tip.frontier.size

    def _record(self, batch_of: Callable[[Tip], tuple[list[Entry], int]], describe: Describe) -> list[Entry]:
        """Records the entries `batch_of` gives for the locked tip, in one transaction:
        a batch whose last `given` entries are the caller's, which get their receipts."""
        with self._store.transaction() as txn:
            recording = self._recording(txn)
            tip = recording.tip
            batch, given = batch_of(tip)
            if not given:
                self._tip = tip
                return []
            recording.add(batch, given, describe)
            self._snapshot_if_due(txn, tip)
            receipt = self._notary.receipt(txn, tip)
        self._tip = tip
        mine = batch[len(batch) - given :]
        for entry in mine:
            entry.receipt = Receipt(entry.pulse or 0, entry.leaf_hash, *receipt)
        return mine

    def _recording(self, txn: Transaction) -> Recording:
        """The transaction on the fold caught up to its locked head, which must extend
        the last checkpoint the log signed."""
        tip = self._catch_up(txn)
        self._notary.hold(txn, tip)
        return Recording(txn, tip, self._rules, self._store)

    def _snapshot_if_due(self, txn: Transaction, tip: Tip) -> None:
        size, length = txn.snapshot_extent()
        if tip.frontier.size - size >= max(1, length // SNAPSHOT_BYTES_PER_ENTRY):
            txn.save_snapshot(self._folder.snapshot(tip))

    def _sign(self, tip: Tip, items: list[Item]) -> tuple[list[Entry], int]:
        """The caller's items signed for this log, each with its author's next sequence
        number; the genesis entry first when the log is empty."""
        batch: list[Entry] = []
        mine: list[Entry] = []
        origin = tip.state.origin
        taken: dict[str, int] = {}
        if tip.state.size == 0:
            batch.append(self._genesis())
            origin = batch[0].log
            taken[batch[0].author] = 1
        assert origin is not None
        for i, (wallet, kind, body) in enumerate(items, 1):
            seq = taken.get(wallet.id, tip.state.sequences.get(wallet.id, 0)) + 1
            taken[wallet.id] = seq
            made = body(list(mine)) if callable(body) else body
            entry = Entry.create(wallet, kind, made, log=origin, seq=seq)
            # The ledger's own entries are exempt: a refusal holds one entry within the bound.
            if kind not in (GENESIS, REFUSAL) and (why := too_large(entry.raw)):
                raise EntryTooLarge(_appended(i, len(items), entry, f"the entry is {why}"))
            mine.append(entry)
        return batch + mine, len(items)

    def _genesis(self) -> Entry:
        if self._key is None:
            raise LedgerError("the log is empty and this ledger was opened without the log's key to start it")
        origin = new_origin(self._key)
        return Entry.create(self._key, GENESIS, {"origin": origin}, log=origin, seq=1)

    def _catch_up(self, txn: Transaction) -> Tip:
        """The fold of the log up to the locked head. The caller owns it, and gives it back
        to this object only when its own work succeeds."""
        tip, self._tip = self._tip, None
        if tip is None:
            self._notary.forget()
            tip, ignored = self._folder.resume(txn.snapshot(), txn.rows, txn.head)
            if ignored:
                txn.save_snapshot(self._folder.snapshot(tip))
            return tip
        if txn.head.size < tip.frontier.size:
            raise LedgerError(f"the ledger shrank from {tip.frontier.size} to {txn.head.size} entries; {VERIFY_HINT}")
        self._folder.advance(tip, txn.rows(tip.frontier.size + 1))
        at_head(tip, txn.head)
        return tip

    # Checkpoints

    def checkpoint(self) -> str:
        """The log's checkpoint of its current size, with any cosignatures: the one
        signed already, or one signed now by the log's key. Refuses to sign one that does
        not extend the last."""
        with self._store.transaction() as txn:
            tip = self._catch_up(txn)
            # Signing reads the fold without changing it, so this object keeps it whatever follows.
            self._tip = tip
            return self._notary.current(txn, tip)

    def sign_due(self) -> str | None:
        """Signs the checkpoint the policy calls for by now, if one is due and this ledger
        holds the log's key: what a server runs on a timer to keep its promises."""
        with self._store.transaction() as txn:
            tip = self._catch_up(txn)
            self._tip = tip
            return self._notary.due(txn, tip)

    def add_cosignatures(self, note: str) -> str:
        """Keeps the signature lines of `note` (witnesses' cosignatures) on the log's own
        checkpoint of the same size; returns it as now stored."""
        size = notes.parse(note).size
        with self._store.transaction() as txn:
            stored = txn.checkpoint(size)
            if stored is None:
                raise LedgerError(f"this log signed no checkpoint of size {size}")
            if notes.signed_text(stored.note) != notes.signed_text(note):
                raise LedgerError(
                    f"the note's checkpoint of size {size} is not the one this log signed (their roots differ)"
                )
            merged = notes.with_signatures(stored.note, note)
            txn.replace_checkpoint(size, merged)
        return merged


def new_origin(key: Wallet) -> str:
    """A name for a new log started by `key`, unique even when one key starts several
    logs, so that an entry signed for one is refused by every other."""
    return f"agentd.ledger/{key.id}/{secrets.token_hex(8)}"


def _appended(i: int, given: int, entry: Entry, reason: str) -> str:
    """How an append words a refusal: which of the caller's entries, when there are several."""
    return f"entry {i} of {given} ({entry.kind}): {reason}" if given > 1 else reason


def _imported(i: int, given: int, entry: Entry, reason: str) -> str:
    return f"Pulse {entry.pulse} refused: {reason}"


def _signed_elsewhere(raws: Iterable[bytes]) -> list[Entry]:
    """Entries signed elsewhere, each within the size bound and well formed, none of the
    kinds only this ledger's own key writes; EntryError or RuleViolation naming the first
    that is not."""
    entries = []
    for i, raw in enumerate(raws, 1):
        try:
            if why := too_large(raw):
                raise EntryTooLarge(f"it is {why}")
            entries.append(Entry.parse(raw))
        except EntryError as exc:
            raise type(exc)(f"entry {i} refused: {exc}") from None
    if any(e.kind in (GENESIS, REFUSAL) for e in entries):
        raise RuleViolation(f"only this ledger's own key writes {GENESIS} and {REFUSAL} entries")
    return entries


def _parsed(raws: Iterable[bytes]) -> Iterator[Entry]:
    for pulse, raw in enumerate(raws, 1):
        try:
            yield Entry.parse(raw, pulse)
        except EntryError as exc:
            raise EntryError(f"Pulse {pulse} refused: {exc}") from None
