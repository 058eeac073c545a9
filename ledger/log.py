"""The Ledger: an append-only log of signed entries kept in a store, held to a rule set.

Appends run as one store transaction each: under the write lock the ledger catches up
on entries other processes appended, signs the caller's entries with the log's origin
and each author's next sequence number, checks them against the state folded up to the
locked head (see ledger.fold), and records them with their leaf hashes, running
digests and the tree tiles they change, moving the head to the new size and root, or
records nothing. The same transaction signs a checkpoint when one is due, or a promise
of one, and each recorded entry carries its receipt (see ledger.receipts). The first
append to an empty log is preceded by its genesis entry, signed by the log's own key,
which names the log's origin and the key that mints and signs checkpoints, so a copy
of the log carries its own authority.

Opening a ledger reads a few rows whatever its size: the head, the highest Pulse and
the tiles of the tree's right edge. A Ledger object keeps the fold of the log in memory
between appends; a new one starts from the snapshot the store keeps and folds only the
entries after it. Appends rewrite the snapshot in their transaction once the entries
since it would take about as long to replay as a new snapshot takes to write. The full
recomputation is `verify`'s (see ledger.audit).
"""

from __future__ import annotations

import itertools
import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ledger import checkpoint as notes, merkle, tiles
from ledger.audit import VerifyReport, Witnessing, audit
from ledger.entry import Entry, EntryError
from ledger.errors import VERIFY_HINT, LedgerError, RuleViolation
from ledger.fold import Folder, SequenceViolation, Tip, at_head, fold, read, refusal_body
from ledger.forks import ForkProof, fork_between
from ledger.keys import Wallet
from ledger.notary import Notary
from ledger.proofs import ConsistencyProof, InclusionProof
from ledger.receipts import CheckpointPolicy, Receipt
from ledger.rules import GENESIS, REFUSAL, RuleSet, State
from ledger.store import Head, Recorder, Row, Transaction, chain, pages
from ledger.stores import open_store

_CLAIM = re.compile(r"[0-9a-f]{4,64}")
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
# Words a refusal of the i-th of the caller's `given` entries (i < 1: one the ledger added).
Describe = Callable[[int, int, Entry, str], str]


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


class Ledger:
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
        self._store = store
        self._rules = rules
        self._key = key
        self._folder = Folder(rules, store.url)
        self._notary = Notary(key, policy or CheckpointPolicy(), clock, store.url)
        # The fold of the log as this object last saw it: None until it is first needed,
        # and again after an append fails, since rules may have changed it before refusing.
        self._tip: Tip | None = None
        if check:
            self.check()

    @classmethod
    def open(
        cls,
        url: str,
        rules: RuleSet,
        key: Wallet | None = None,
        *,
        check: bool = True,
        policy: CheckpointPolicy | None = None,
    ) -> Ledger:
        return cls(open_store(url), rules, key, check=check, policy=policy)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        return self._store.url

    @property
    def size(self) -> int:
        return self._store.head().size

    @property
    def replayed(self) -> int:
        """Entries this object folded from the store rather than appended itself: what a
        caller can see of how much a new object had to replay."""
        return self._folder.replayed

    def check(self) -> None:
        """The start-up check, a few reads whatever the size: the store holds no row past
        its head and none is missing at its end, and the stored tree hashes to the head."""
        # Under the write lock, so an append by another process cannot fall between the reads.
        with self._store.transaction() as txn:
            head, last = txn.head, txn.last_pulse()
            root = tiles.Tree(txn.tile, head.size).root()
        if last != head.size:
            raise LedgerError(
                f"the ledger at {self.url} holds rows up to Pulse {last} but its head records {head.size} entries; {VERIFY_HINT}"
            )
        if root != head.root:
            raise LedgerError(f"the stored tree of the ledger at {self.url} does not hash to its head; {VERIFY_HINT}")

    # Reading

    def get(self, pulse: int) -> Entry:
        row = self._store.row(pulse)
        if row is None:
            raise LedgerError(f"no Pulse {pulse}: the log holds {self.size} entries")
        return read(row)

    def find(self, claim: str) -> Entry:
        """The entry whose claim id is `claim` or starts with it (at least 4 hex digits)."""
        prefix = claim.strip().lower()
        if not _CLAIM.fullmatch(prefix):
            raise LedgerError(f"{claim!r} is not a claim id: give at least 4 of its hex digits")
        low = bytes.fromhex((prefix + "0" * 64)[:64])
        high = bytes.fromhex((prefix + "f" * 64)[:64])
        found = self._store.find(low, high, 2)
        if not found:
            raise LedgerError(f"no claim {prefix} on the log")
        if len(found) > 1:
            raise LedgerError(
                f"claim prefix {prefix} is ambiguous (Pulses {found[0]}, {found[1]}, …): give more digits"
            )
        return self.get(found[0])

    def entries(self, kind: str | None = None, start: int = 1, author: str | None = None) -> Iterator[Entry]:
        for row in pages(self._store, max(start, 1), kind=kind, author=author):
            yield read(row)

    def entries_back(self, end: int, limit: int, kind: str | None = None, author: str | None = None) -> list[Entry]:
        """The last `limit` matching entries at or before Pulse `end`, newest first, read
        from the end of the log (a listing's last page, or the page before one)."""
        return [read(row) for row in self._store.rows_back(end, kind=kind, author=author, limit=limit)]

    def state(self) -> State:
        """The fold of every entry recorded so far (a copy: changing it changes nothing).
        Its cost grows with what the log's claims keep; `balance` reads one figure."""
        return self._current().state.copy()

    def balance(self, wallet_id: str) -> int:
        """What wallet `wallet_id` holds now, in cents, without copying the fold."""
        return self._current().state.balance(wallet_id)

    @property
    def origin(self) -> str:
        """The log's name, which every entry must carry: its genesis entry fixed it."""
        return self._genesis_entry().log

    @property
    def public_key(self) -> bytes:
        """The log's own key, as its genesis entry names it: what checks its checkpoints."""
        return self._genesis_entry().public_key

    def _genesis_entry(self) -> Entry:
        row = self._store.row(1)
        if row is None:
            raise LedgerError("the log is empty: it is named by its first entry, which the log's key signs")
        return read(row)

    def next_sequence(self, author: str) -> int:
        """The sequence number `author`'s next entry must carry, for entries signed
        elsewhere (append_raw); it is taken when one is recorded."""
        return self._current().state.sequences.get(author, 0) + 1

    @property
    def snapshot_size(self) -> int:
        """The number of entries the store's snapshot folds (0 when it holds none)."""
        return self._store.snapshot_extent()[0]

    def _current(self) -> Tip:
        tip, self._tip = self._tip, None
        if tip is None:
            tip, _ = self._folder.resume(self._store.snapshot(), lambda start: pages(self._store, start), None)
        else:
            self._folder.advance(tip, pages(self._store, tip.frontier.size + 1))
        self._tip = tip
        return tip

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
        """Records entries signed elsewhere, each checked (canonical bytes, signature,
        author) before the rules; all of them, or none. Each must name this log's origin
        and its author's next sequence number (see `origin`, `next_sequence`)."""
        entries = []
        for i, raw in enumerate(raws, 1):
            try:
                entries.append(Entry.parse(raw))
            except EntryError as exc:
                raise EntryError(f"entry {i} refused: {exc}") from None
        if any(e.kind in (GENESIS, REFUSAL) for e in entries):
            raise RuleViolation(f"only this ledger's own key writes {GENESIS} and {REFUSAL} entries")

        def batch(tip: Tip) -> tuple[list[Entry], int]:
            return ([self._genesis()] if tip.state.size == 0 else []) + entries, len(entries)

        try:
            return self._record(batch, _appended)
        except _Refused as refused:
            if not refused.spends:
                raise
            raise RuleViolation(self._spend(refused)) from None

    def _spend(self, refused: _Refused) -> str:
        """Records that an entry signed elsewhere was refused, which spends its sequence
        number, when this ledger holds the log's key; the refusal's message."""
        entry, reason = refused.entry, str(refused)
        if self._key is None:
            return reason
        try:
            item = (self._key, REFUSAL, refusal_body(entry, reason))
            recorded = self._record(lambda tip: self._sign(tip, [item]), _appended)
        except LedgerError:
            return reason  # the log moved on meanwhile: the entry may now be good, or spent
        return (
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
            tip = self._catch_up(txn)
            self._notary.hold(txn, tip)
            while batch := list(itertools.islice(entries, IMPORT_BATCH)):
                self._add(txn, tip, batch, len(batch), _imported, held_to)
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
            tip = self._catch_up(txn)
            self._notary.hold(txn, tip)
            batch, given = batch_of(tip)
            if not given:
                self._tip = tip
                return []
            self._add(txn, tip, batch, given, describe)
            self._snapshot_if_due(txn, tip)
            receipt = self._notary.receipt(txn, tip)
        self._tip = tip
        mine = batch[len(batch) - given :]
        for entry in mine:
            entry.receipt = Receipt(entry.pulse or 0, entry.leaf_hash, *receipt)
        return mine

    def _add(
        self,
        txn: Transaction,
        tip: Tip,
        batch: list[Entry],
        given: int,
        describe: Describe,
        held_to: notes.Checkpoint | None = None,
    ) -> None:
        """Folds `batch` into `tip` and writes its rows, the tiles they change and the head."""
        if len({e.leaf_hash for e in batch}) != len(batch):
            raise LedgerError("the batch holds the same entry twice: an entry is recorded once")
        old_size = tip.frontier.size
        completed = tip.frontier.keep(tiles.HEIGHT)
        rows = self._apply(tip, batch, given, describe, held_to)
        tip.frontier.completed = None
        head = Head(tip.frontier.size, tip.frontier.root())
        txn.add(rows, head, tiles.updates(txn.tile, old_size, [r.leaf for r in rows], completed))

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
        for wallet, kind, body in items:
            seq = taken.get(wallet.id, tip.state.sequences.get(wallet.id, 0)) + 1
            taken[wallet.id] = seq
            made = body(list(mine)) if callable(body) else body
            mine.append(Entry.create(wallet, kind, made, log=origin, seq=seq))
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

    def _apply(
        self, tip: Tip, batch: list[Entry], given: int, describe: Describe, held_to: notes.Checkpoint | None
    ) -> list[Row]:
        """Numbers the entries and folds them in; the last `given` are the caller's, and
        `held_to` is a checkpoint the log must extend (its root checked at its size)."""
        rows = []
        state, frontier, link = tip.state, tip.frontier, tip.chain
        for i, entry in enumerate(batch, 1 + given - len(batch)):
            entry.pulse = state.size + 1
            try:
                fold(self._rules, state, entry)
            except RuleViolation as exc:
                spends = i >= 1 and not isinstance(exc, SequenceViolation)
                raise _Refused(describe(i, given, entry, self._why(entry, str(exc))), entry, spends) from None
            frontier.append(entry.leaf_hash)
            link = chain(link, entry.leaf_hash)
            rows.append(Row(entry.pulse, entry.raw, entry.leaf_hash, link, entry.kind, entry.author))
            if held_to is not None and frontier.size == held_to.size and frontier.root() != held_to.root:
                raise LedgerError(
                    f"the copy is not the log of the checkpoint: its first {held_to.size} entries do not hash to the "
                    f"checkpoint's root (an entry up to Pulse {held_to.size} was changed, removed or moved)"
                )
        tip.chain = link
        return rows

    def _why(self, entry: Entry, reason: str) -> str:
        """A refusal's reason, naming the Pulse when the entry is one already recorded."""
        if not reason.startswith("recorded once"):
            return reason
        found = self._store.find(entry.leaf_hash, entry.leaf_hash, 1)
        if found:
            return f"entry {entry.claim_id[:16]} is already on the log at Pulse {found[0]}: an entry is recorded once"
        return reason

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

    def latest_checkpoint(self) -> str | None:
        """The last checkpoint the log signed, with any cosignatures, without signing."""
        last = self._store.latest_checkpoint()
        return last.note if last else None

    def checkpoints(self) -> list[str]:
        return [c.note for c in self._store.checkpoints()]

    def checkpoint_of(self, size: int) -> str | None:
        """The checkpoint the log signed of its tree of `size` entries, if it signed one."""
        found = self._store.checkpoint(size)
        return found.note if found else None

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

    # Proofs

    def root(self, size: int | None = None) -> bytes:
        size = self._size_arg(size)
        return tiles.Tree(self._store.tile, size).root()

    def inclusion_proof(self, pulse: int, size: int | None = None) -> InclusionProof:
        size = self._size_arg(size)
        if not 1 <= pulse <= size:
            raise LedgerError(f"Pulse {pulse} is not in a tree of {size} entries")
        tree = tiles.Tree(self._store.tile, size)
        path = merkle.inclusion_path(pulse - 1, size, tree.subtree)
        return InclusionProof(pulse, size, tree.node(0, pulse - 1), tree.root(), path)

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> ConsistencyProof:
        new_size = self._size_arg(new_size)
        if not 1 <= old_size <= new_size:
            raise LedgerError(
                f"a consistency proof runs from a size of 1 or more up to {new_size}, not from {old_size}"
            )
        tree = tiles.Tree(self._store.tile, new_size)
        path = merkle.consistency_path(old_size, new_size, tree.subtree) if old_size < new_size else []
        return ConsistencyProof(old_size, new_size, tree.subtree(0, old_size), tree.root(), path)

    def fork_proof(self, one: str, other: str) -> ForkProof | None:
        """The proof that two signed checkpoints of this log conflict, or None when they
        are consistent. Of two sizes, this ledger must hold the larger one's tree: it
        gives the consistency proof."""
        smaller, larger = sorted((notes.parse(one), notes.parse(other)), key=lambda c: c.size)
        if smaller.size < larger.size and (larger.size > self.size or self.root(larger.size) != larger.root):
            raise LedgerError(
                f"this ledger's tree of {larger.size} entries is not the checkpoint's: a fork proof comes from the "
                "ledger that holds the larger checkpoint's tree"
            )
        found = fork_between(one, other, self.consistency_proof)
        if found is not None:
            found.check(self.public_key)
        return found

    def _size_arg(self, size: int | None) -> int:
        current = self.size
        if size is None:
            return current
        if not 1 <= size <= current:
            raise LedgerError(f"size {size} is outside the log, which holds {current} entries")
        return size

    # Auditing

    def verify(
        self,
        jobs: int = 1,
        checkpoint: str | None = None,
        progress: Callable[[int], None] | None = None,
        witnesses: Witnessing | None = None,
    ) -> VerifyReport:
        """Rechecks every entry, rule, the tree and the checkpoints; see ledger.audit."""
        return audit(self._store, self._rules, jobs=jobs, checkpoint=checkpoint, progress=progress, witnesses=witnesses)


class _Refused(RuleViolation):
    """A rule refused `entry`; `spends` when it is one of the caller's and a kind's rule,
    not the ledger's own, refused it (see ledger.fold)."""

    def __init__(self, message: str, entry: Entry, spends: bool) -> None:
        super().__init__(message)
        self.entry = entry
        self.spends = spends


def new_origin(key: Wallet) -> str:
    """A name for a new log started by `key`, unique even when one key starts several
    logs, so that an entry signed for one is refused by every other."""
    return f"agentd.ledger/{key.id}/{secrets.token_hex(8)}"


def _appended(i: int, given: int, entry: Entry, reason: str) -> str:
    """How an append words a refusal: which of the caller's entries, when there are several."""
    return f"entry {i} of {given} ({entry.kind}): {reason}" if given > 1 else reason


def _imported(i: int, given: int, entry: Entry, reason: str) -> str:
    return f"Pulse {entry.pulse} refused: {reason}"


def _parsed(raws: Iterable[bytes]) -> Iterator[Entry]:
    for pulse, raw in enumerate(raws, 1):
        try:
            yield Entry.parse(raw, pulse)
        except EntryError as exc:
            raise EntryError(f"Pulse {pulse} refused: {exc}") from None
