"""The recorder interface every ledger store implements, and the rows it keeps.

A store keeps, per Pulse, the entry's exact bytes, its leaf hash (so proofs never
rehash entries), a running digest of every leaf up to it (so an audit can say where a
reordering starts), its kind and author (to filter without parsing) and its author's
sequence number (no two rows hold the same author and number: an entry is recorded
once). A head row records the size and Merkle root the last append left; appends hold
a lock on it. The tree itself is kept as tiles (see ledger.tiles), so roots and proofs
cost a few reads. Checkpoints are kept with the time they were signed. A snapshot row
keeps the fold of the log at some size (see ledger.snapshot), written by an append in
its own transaction, so a new process need not replay the whole log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ledger.tiles import Tile

PAGE = 1000
TILE_PAGE = 64  # tiles of 8 kB
CHAIN_START = bytes(32)
# The store layout this version writes: 2 since entries name their log and carry
# sequence numbers (see ledger.entry); 3 since the store holds each author's sequence
# number once instead of each claim id (see ledger.sql). A store of layout 2 is read as
# it is and carried over when first written to.
FORMAT = 3


def chain(previous: bytes, leaf: bytes) -> bytes:
    """The running digest after `leaf`: one hash per entry, where a Merkle root costs log n."""
    return hashlib.sha256(previous + leaf).digest()


class Row(NamedTuple):
    pulse: int
    raw: bytes
    leaf: bytes
    chain: bytes  # SHA-256(chain of the Pulse before ‖ leaf); 32 zero bytes before Pulse 1
    kind: str
    author: str


# A row's Pulse, leaf hash, running digest and exact bytes as the store's driver hands
# them over (see Recorder.raw_rows): a Row's columns less kind and author, unchecked.
RawRow = tuple[int, bytes, bytes, bytes]


class Record(NamedTuple):
    """A row as an append writes it: a Row's fields and its author's sequence number, which
    the store holds once with the author, so the same entry is never recorded twice."""

    pulse: int
    raw: bytes
    leaf: bytes
    chain: bytes
    kind: str
    author: str
    seq: int


@dataclass(frozen=True)
class Head:
    size: int
    root: bytes


class StoredCheckpoint(NamedTuple):
    size: int
    note: str  # the signed note, with any cosignatures witnesses added
    at: float  # when the log signed it, in seconds since the epoch


@dataclass(frozen=True)
class Snapshot:
    """The fold of the first `size` entries as stored; ledger.snapshot makes and reads it."""

    size: int
    root: bytes  # the Merkle root of those entries
    chain: bytes  # the running digest of Pulse `size`
    frontier: bytes  # the tree's right edge: its nodes, 32 bytes each, largest subtree first
    rules: bytes  # the fingerprint of the rule set that folded it
    state: bytes  # the State as JSON
    digest: bytes  # SHA-256 over the fields above


class Transaction(Protocol):
    """An append in progress, holding the log's write lock; it commits on clean exit."""

    head: Head

    def rows(self, start: int) -> list[Row]:
        """Rows from Pulse `start` to the locked head (entries others appended)."""

    def last_pulse(self) -> int:
        """The highest Pulse the store holds, whatever the head says (0 when none)."""

    def tile(self, level: int, index: int) -> bytes | None: ...

    def add(self, records: Sequence[Record], head: Head, tiles: Sequence[Tile]) -> None:
        """Records rows after the locked head, writes the tiles they change and moves the
        head; LedgerError naming the Pulse if one of the entries is on the log already
        (or another holds its author's sequence number)."""

    def latest_checkpoint(self) -> StoredCheckpoint | None: ...

    def checkpoint(self, size: int) -> StoredCheckpoint | None: ...

    def save_checkpoint(self, checkpoint: StoredCheckpoint) -> None: ...

    def replace_checkpoint(self, size: int, note: str) -> None:
        """Stores the checkpoint of `size` again, with more signatures (cosignatures)."""

    def snapshot(self) -> Snapshot | None:
        """The stored snapshot, if there is one."""

    def snapshot_extent(self) -> tuple[int, int]:
        """The size the stored snapshot describes and the length of its state in bytes,
        without reading it; (0, 0) when there is none."""

    def save_snapshot(self, snapshot: Snapshot) -> None:
        """Replaces the stored snapshot."""


class Recorder(Protocol):
    """Where a ledger keeps its entries: SQLite by default, PostgreSQL to share one."""

    url: str

    def head(self) -> Head: ...

    def rows(
        self, start: int = 1, *, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[Row]:
        """Up to `limit` rows from Pulse `start` on, filtered by kind and author."""

    def rows_back(
        self, end: int, *, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[Row]:
        """Up to `limit` rows at or before Pulse `end`, newest first, filtered alike: the
        last matches of a long log without reading it from its start."""

    def raw_rows(
        self, pulse: int, *, back: bool = False, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[RawRow]:
        """What `rows` (with `back`, `rows_back`) reads from Pulse `pulse`, but only each
        row's Pulse, leaf, chain and bytes, as the driver hands them over: no Row is made
        and no type checked, so that the stored bytes are passed on as they are at the
        least cost. A damaged store may hand over values of other types: whoever passes
        them on checks them, and `rows` says what is wrong."""

    def row(self, pulse: int) -> Row | None: ...

    def last_pulse(self) -> int:
        """The highest Pulse the store holds, whatever the head says (0 when none)."""

    def tile(self, level: int, index: int) -> bytes | None: ...

    def tiles(self, level: int, start: int, limit: int = TILE_PAGE) -> list[Tile]:
        """Up to `limit` stored tiles of `level` from index `start` on, in order."""

    def find(self, low: bytes, high: bytes, limit: int) -> list[int]:
        """Pulses whose leaf hash lies between `low` and `high` (a claim id prefix)."""

    def checkpoints(self) -> list[StoredCheckpoint]:
        """Every checkpoint the log signed, oldest first."""

    def latest_checkpoint(self) -> StoredCheckpoint | None: ...

    def checkpoint(self, size: int) -> StoredCheckpoint | None: ...

    def snapshot(self) -> Snapshot | None:
        """The stored snapshot, if there is one."""

    def snapshot_extent(self) -> tuple[int, int]:
        """The size the stored snapshot describes and the length of its state in bytes,
        without reading it; (0, 0) when there is none."""

    def transaction(self) -> AbstractContextManager[Transaction]: ...

    def close(self) -> None: ...


def pages(recorder: Recorder, start: int = 1, *, kind: str | None = None, author: str | None = None) -> Iterator[Row]:
    """Every matching row from `start` on, read a page at a time (no long-held reads)."""
    for page in row_pages(recorder, start, kind=kind, author=author):
        yield from page


def row_pages(
    recorder: Recorder, start: int = 1, *, kind: str | None = None, author: str | None = None
) -> Iterator[list[Row]]:
    """The same rows as `pages`, a list a page (for those who handle a page at once)."""
    while True:
        page = recorder.rows(start, kind=kind, author=author)
        if page:
            yield page
        if len(page) < PAGE:
            return
        start = page[-1].pulse + 1


def tile_pages(recorder: Recorder, level: int) -> Iterator[Tile]:
    """Every stored tile of `level`, in order, read a page at a time."""
    start = 0
    while True:
        page = recorder.tiles(level, start)
        yield from page
        if len(page) < TILE_PAGE:
            return
        start = page[-1].index + 1
