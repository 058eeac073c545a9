"""The Ledger: an append-only log of signed entries, its rules, proofs and checkpoints.

Appends run as one store transaction each: under the write lock the ledger catches up
on entries other processes appended, checks the new entries against the state folded
up to the locked head, and records them with their leaf hashes and running digests,
moving the head to the new size and root, or records nothing. The first append to an empty log is preceded by its genesis entry,
signed by the log's own key, which names the log and the key that mints and signs
checkpoints, so a copy of the log carries its own authority.

A Ledger object keeps the fold of the log in memory between appends; a new one starts
from the snapshot the store keeps (see ledger.snapshot) and folds only the entries
after it. Appends rewrite the snapshot in their transaction once the entries since it
would take about as long to replay as a new snapshot takes to write.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ledger import checkpoint as notes
from ledger import merkle
from ledger import snapshot as snapshots
from ledger.audit import VerifyReport, audit
from ledger.entry import Entry, EntryError
from ledger.errors import LedgerError, RuleViolation
from ledger.keys import Wallet
from ledger.postgres import PREFIXES as POSTGRES_PREFIXES
from ledger.postgres import PostgresRecorder
from ledger.proofs import ConsistencyProof, InclusionProof
from ledger.rules import GENESIS, RuleSet, State
from ledger.sqlite import PREFIX as SQLITE_PREFIX
from ledger.sqlite import SqliteRecorder
from ledger.store import CHAIN_START, Head, Recorder, Row, Snapshot, Transaction, chain, pages

_CLAIM = re.compile(r"[0-9a-f]{4,64}")
VERIFY_HINT = "run `agentd ledger verify` to find the first bad Pulse"
# Folding one entry costs about what taking and writing this many bytes of snapshot does
# (bench/ledger.py measured 1,200 to 1,800 on SQLite, the fewer on larger snapshots). A
# snapshot is rewritten once the entries since it number its length over this, so the
# writes cost appends about one more fold per entry, and a new process replays at most
# what one write costs.
SNAPSHOT_BYTES_PER_ENTRY = 1024

log = logging.getLogger("ledger")


def open_store(url: str) -> Recorder:
    """The store a ledger URL names: sqlite:///PATH or postgresql://…"""
    if url.startswith(SQLITE_PREFIX):
        return SqliteRecorder(url)
    if url.startswith(POSTGRES_PREFIXES):
        return PostgresRecorder(url)
    raise LedgerError(f"unknown ledger URL {url!r}: use sqlite:///PATH or postgresql://HOST/DB")


def origin_of(key: Wallet) -> str:
    """The name a log started by `key` goes by in its checkpoints."""
    return f"agentd.ledger/{key.id}"


class Ledger:
    """A signed append-only log kept in a store, every entry held to a rule set."""

    def __init__(self, store: Recorder, rules: RuleSet, key: Wallet | None = None, *, check: bool = True) -> None:
        """`key` is the log's own key: it starts an empty log and signs checkpoints.
        `check` runs the start-up check (leaves against the head); verify skips it."""
        self._store = store
        self._rules = rules
        self._key = key
        # The fold of the log as this object last saw it: None until it is first needed,
        # and again after an append fails, since rules may have changed it before refusing.
        self._tip: _Tip | None = None
        # Entries this object folded from the store rather than appended itself: what a
        # caller can see of how much a new object had to replay.
        self.replayed = 0
        if check:
            self.check()

    @classmethod
    def open(cls, url: str, rules: RuleSet, key: Wallet | None = None, *, check: bool = True) -> Ledger:
        return cls(open_store(url), rules, key, check=check)

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

    def check(self) -> None:
        """The start-up check: the stored leaves hash to the root the head records."""
        # Under the write lock, so an append by another process cannot fall between the reads.
        with self._store.transaction() as txn:
            head, leaves = txn.head, txn.leaves()
        if len(leaves) != head.size:
            raise LedgerError(
                f"the ledger at {self.url} holds {len(leaves)} entries but its head records {head.size}; {VERIFY_HINT}"
            )
        if merkle.root(leaves) != head.root:
            raise LedgerError(f"the entries of the ledger at {self.url} do not hash to its head; {VERIFY_HINT}")

    # Reading

    def get(self, pulse: int) -> Entry:
        row = self._store.row(pulse)
        if row is None:
            raise LedgerError(f"no Pulse {pulse}: the log holds {self.size} entries")
        return _entry(row)

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
            raise LedgerError(f"claim prefix {prefix} is ambiguous (Pulses {found[0]}, {found[1]}, …): give more digits")
        return self.get(found[0])

    def entries(self, kind: str | None = None, start: int = 1, author: str | None = None) -> Iterator[Entry]:
        for row in pages(self._store, max(start, 1), kind=kind, author=author):
            yield _entry(row)

    def state(self) -> State:
        """The fold of every entry recorded so far (a copy: changing it changes nothing)."""
        tip, self._tip = self._tip, None
        if tip is None:
            tip, _ = self._resume(self._store.snapshot(), lambda start: pages(self._store, start), None)
        else:
            self._advance(tip, pages(self._store, tip.frontier.size + 1))
        self._tip = tip
        return tip.state.copy()

    @property
    def snapshot_size(self) -> int:
        """The number of entries the store's snapshot folds (0 when it holds none)."""
        return self._store.snapshot_extent()[0]

    # Appending

    def append(self, wallet: Wallet, kind: str, body: dict[str, Any]) -> Entry:
        return self.append_many([(wallet, kind, body)])[0]

    def append_many(self, items: Iterable[tuple[Wallet, str, dict[str, Any]]]) -> list[Entry]:
        """Signs and records entries in one transaction: all of them, or none."""
        return self._record([Entry.create(wallet, kind, body) for wallet, kind, body in items])

    def append_raw(self, raws: Iterable[bytes]) -> list[Entry]:
        """Records entries signed elsewhere, each checked (canonical bytes, signature,
        author) before the rules; all of them, or none."""
        entries = []
        for i, raw in enumerate(raws, 1):
            try:
                entries.append(Entry.parse(raw))
            except EntryError as exc:
                raise EntryError(f"entry {i} refused: {exc}") from None
        return self._record(entries)

    def import_entries(self, raws: Iterable[bytes]) -> list[Entry]:
        """Rebuilds an exported log in this empty ledger, checking each entry as it goes.
        The copy must start with its own genesis entry: one made up here would be signed
        by another key than the log's, and move every Pulse after it."""
        entries = []
        for pulse, raw in enumerate(raws, 1):
            try:
                entries.append(Entry.parse(raw, pulse))
            except EntryError as exc:
                raise EntryError(f"Pulse {pulse} refused: {exc}") from None
        if entries and entries[0].kind != GENESIS:
            raise LedgerError(
                f"the copy does not start with its genesis entry (its Pulse 1 is a {entries[0].kind}): "
                "export the whole log, from Pulse 1"
            )
        return self._record(entries, fresh=True)

    def _record(self, entries: list[Entry], *, fresh: bool = False) -> list[Entry]:
        if not entries:
            return []
        with self._store.transaction() as txn:
            if fresh and txn.head.size:
                raise LedgerError(f"the ledger at {self.url} is not empty: import into a fresh home or database")
            tip = self._catch_up(txn)
            batch = entries
            if tip.state.size == 0 and entries[0].kind != GENESIS:
                batch = [self._genesis(), *entries]
            elif entries[0].kind == GENESIS and not fresh and (self._key is None or entries[0].author != self._key.id):
                # Whoever signs the genesis entry owns the log; only imports bring their own.
                raise RuleViolation(f"only this ledger's own key may start the log with {GENESIS}")
            if len({e.leaf_hash for e in batch}) != len(batch):
                raise LedgerError("the batch holds the same entry twice: an entry is recorded once")
            rows = self._apply(tip, batch, given=len(entries))
            txn.add(rows, Head(tip.frontier.size, tip.frontier.root()))
            size, length = txn.snapshot_extent()
            if tip.frontier.size - size >= max(1, length // SNAPSHOT_BYTES_PER_ENTRY):
                txn.save_snapshot(self._snapshot(tip))
        self._tip = tip
        return entries

    def _catch_up(self, txn: Transaction) -> _Tip:
        """The fold of the log up to the locked head. The caller owns it, and gives it back
        to this object only when its own work succeeds."""
        tip, self._tip = self._tip, None
        if tip is None:
            tip, ignored = self._resume(txn.snapshot(), txn.rows, txn.head)
            if ignored:
                txn.save_snapshot(self._snapshot(tip))
            return tip
        if txn.head.size < tip.frontier.size:
            raise LedgerError(f"the ledger shrank from {tip.frontier.size} to {txn.head.size} entries; {VERIFY_HINT}")
        self._advance(tip, txn.rows(tip.frontier.size + 1))
        self._at_head(tip, txn.head)
        return tip

    def _resume(self, snapshot: Snapshot | None, rows: Callable[[int], Iterable[Row]], head: Head | None) -> tuple[_Tip, bool]:
        """The fold from the stored snapshot and the `rows` after it, or, when that does
        not hold, from Pulse 1; and whether a snapshot was ignored. Held to `head` if given."""
        if snapshot is not None:
            try:
                return self._from_snapshot(snapshot, rows, head), False
            except LedgerError as exc:
                log.warning(
                    "the ledger at %s does not use its stored snapshot (of %d entries): %s; replaying the whole log",
                    self.url, snapshot.size, exc,
                )  # fmt: skip
        tip = _Tip(State(), merkle.Frontier(), CHAIN_START)
        self._advance(tip, rows(1))
        if head is not None:
            self._at_head(tip, head)
        return tip, snapshot is not None

    def _from_snapshot(self, snapshot: Snapshot, rows: Callable[[int], Iterable[Row]], head: Head | None) -> _Tip:
        """The snapshot's fold advanced by the rows after it."""
        state, frontier = snapshots.restore(snapshot, self._rules.fingerprint)
        if head is not None and snapshot.size > head.size:
            raise LedgerError(f"it describes more entries than the head records ({head.size})")
        following = iter(rows(snapshot.size))
        last = next(following, None)
        if last is None or last.pulse != snapshot.size or last.chain != snapshot.chain:
            raise LedgerError(f"Pulse {snapshot.size} on the log is not the entry it was folded up to")
        tip = _Tip(state, frontier, snapshot.chain)
        self._advance(tip, following)
        if head is not None:
            self._at_head(tip, head)
        return tip

    def _snapshot(self, tip: _Tip) -> Snapshot:
        return snapshots.take(tip.state, tip.frontier, tip.chain, self._rules.fingerprint)

    def _advance(self, tip: _Tip, rows: Iterable[Row]) -> None:
        """Folds rows recorded by others into `tip`, trusting their signatures (checked when
        they were appended; `verify` checks them again)."""
        for row in rows:
            if row.pulse != tip.frontier.size + 1:
                raise LedgerError(f"Pulse {tip.frontier.size + 1} is missing from the ledger; {VERIFY_HINT}")
            try:
                self._rules.apply(tip.state, _entry(row))
            except RuleViolation as exc:
                raise LedgerError(f"Pulse {row.pulse} on the ledger breaks a rule ({exc}); {VERIFY_HINT}") from None
            tip.frontier.append(row.leaf)
            tip.chain = row.chain
            self.replayed += 1

    @staticmethod
    def _at_head(tip: _Tip, head: Head) -> None:
        if tip.frontier.root() != head.root:
            raise LedgerError(f"the ledger's entries do not hash to its head; {VERIFY_HINT}")

    def _genesis(self) -> Entry:
        if self._key is None:
            raise LedgerError("the log is empty and this ledger was opened without the log's key to start it")
        return Entry.create(self._key, GENESIS, {"origin": origin_of(self._key)})

    def _apply(self, tip: _Tip, batch: list[Entry], given: int) -> list[Row]:
        """Numbers the entries and applies the rules; the last `given` are the caller's."""
        rows = []
        state, frontier, link = tip.state, tip.frontier, tip.chain
        for i, entry in enumerate(batch, 1 + given - len(batch)):
            entry.pulse = state.size + 1
            try:
                self._rules.apply(state, entry)
            except RuleViolation as exc:
                where = f"entry {i} of {given} ({entry.kind}): " if given > 1 else ""
                raise RuleViolation(f"{where}{exc}") from None
            frontier.append(entry.leaf_hash)
            link = chain(link, entry.leaf_hash)
            rows.append(Row(entry.pulse, entry.raw, entry.leaf_hash, link, entry.kind, entry.author))
        tip.chain = link
        return rows

    # Proofs and checkpoints

    def root(self, size: int | None = None) -> bytes:
        return merkle.root(self._leaves(self._size_arg(size)))

    def inclusion_proof(self, pulse: int, size: int | None = None) -> InclusionProof:
        size = self._size_arg(size)
        if not 1 <= pulse <= size:
            raise LedgerError(f"Pulse {pulse} is not in a tree of {size} entries")
        leaves = self._leaves(size)
        return InclusionProof(pulse, size, leaves[pulse - 1], merkle.root(leaves), merkle.inclusion_proof(leaves, pulse - 1))

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> ConsistencyProof:
        new_size = self._size_arg(new_size)
        if not 1 <= old_size <= new_size:
            raise LedgerError(f"a consistency proof runs from a size of 1 or more up to {new_size}, not from {old_size}")
        leaves = self._leaves(new_size)
        path = merkle.consistency_proof(leaves, old_size) if old_size < new_size else []
        return ConsistencyProof(old_size, new_size, merkle.root(leaves[:old_size]), merkle.root(leaves), path)

    def checkpoints(self) -> list[str]:
        return self._store.checkpoints()

    def checkpoint(self) -> str:
        """A checkpoint of the log as it stands, signed by the log's key (or the one
        already signed at this size). Refuses to sign one that does not extend the last."""
        with self._store.transaction() as txn:
            tip = self._catch_up(txn)
            # Signing reads the fold without changing it, so this object keeps it whatever follows.
            self._tip = tip
            state, size, root = tip.state, tip.frontier.size, tip.frontier.root()
            if size == 0:
                raise LedgerError("the log is empty: there is nothing to checkpoint yet")
            last = txn.latest_checkpoint()
            if last is not None:
                previous = notes.parse(last)
                if previous.size == size and previous.root == root:
                    return last
                self._extends(previous, txn.leaves(), root)
            if self._key is None or state.origin is None or self._key.id != state.authority:
                raise LedgerError(f"only the log's key ({state.authority}) signs its checkpoints, and this home holds another")
            note = notes.sign(notes.Checkpoint(state.origin, size, root), self._key, state.origin)
            txn.save_checkpoint(size, note)
        return note

    def verify(
        self, jobs: int = 1, checkpoint: str | None = None, progress: Callable[[int], None] | None = None
    ) -> VerifyReport:
        """Rechecks every entry, rule, the tree and the checkpoints; see ledger.audit."""
        return audit(self._store, self._rules, jobs=jobs, checkpoint=checkpoint, progress=progress)

    @staticmethod
    def _extends(previous: notes.Checkpoint, leaves: list[bytes], root: bytes) -> None:
        size = len(leaves)
        if previous.size > size:
            raise LedgerError(f"the log's last checkpoint covers {previous.size} entries but it holds {size}; {VERIFY_HINT}")
        try:
            path = merkle.consistency_proof(leaves, previous.size) if previous.size < size else []
            merkle.verify_consistency(previous.size, size, path, previous.root, root)
        except LedgerError:
            raise LedgerError(
                f"refusing to sign: the log does not extend its last checkpoint (size {previous.size}); {VERIFY_HINT}"
            ) from None

    def _size_arg(self, size: int | None) -> int:
        current = self.size
        if size is None:
            return current
        if not 1 <= size <= current:
            raise LedgerError(f"size {size} is outside the log, which holds {current} entries")
        return size

    def _leaves(self, size: int) -> list[bytes]:
        leaves = self._store.leaves(size)
        if len(leaves) != size:
            raise LedgerError(f"the ledger is missing entries below Pulse {size}; {VERIFY_HINT}")
        return leaves


@dataclass
class _Tip:
    """What the ledger knows of the log's end: the folded state, the tree's right edge,
    and the running digest of the last row."""

    state: State
    frontier: merkle.Frontier
    chain: bytes


def _entry(row: Row) -> Entry:
    try:
        return Entry.parse(row.raw, row.pulse, verify=False)
    except LedgerError as exc:
        raise LedgerError(f"Pulse {row.pulse} is corrupt ({exc}); {VERIFY_HINT}") from None
