"""The queries of the Recorder interface over a SQL store, shared by the SQLite and
PostgreSQL stores; how the tables are made and checked is in ledger.tables.

Subclasses say how to connect, how to take the write lock on the head row, how to list
tables, how to insert many rows fast and how to find a leaf hash; the other queries are
the same. SQL is written with `?` parameters and rewritten to the driver's style.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ledger.errors import LedgerError
from ledger.store import PAGE, TILE_PAGE, Head, RawRow, Record, Row, Snapshot, StoredCheckpoint
from ledger.tables import BLOB, CARRIED, COLUMNS, INT, REAL, TEXT, SqlTables
from ledger.tiles import Tile

CHECKPOINT_COLUMNS = "size, note, at"
RAW_COLUMNS = "pulse, leaf, chain, raw"  # what Recorder.raw_rows reads
SNAPSHOT_COLUMNS = "size, root, chain, frontier, rules, state, digest"
_SNAPSHOT_TYPES = (INT, *[BLOB] * 6)


def _claim_key(leaf: bytes) -> int:
    """The first 8 bytes of a leaf hash as a signed 64-bit integer, in the same order: what
    a store of layout 2 indexes claim ids by."""
    return int.from_bytes(leaf[:8], "big") - 2**63


class SqlRecorder(SqlTables):
    """The Recorder of a SQL store: reads, and a transaction that writes under the head row's lock."""

    def head(self) -> Head:
        return self._head(self._fetch("SELECT size, root FROM ledger_head WHERE id = 1"))

    def rows(
        self, start: int = 1, *, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[Row]:
        return [self._row(r) for r in self._range(COLUMNS, start, False, kind, author, limit)]

    def rows_back(
        self, end: int, *, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[Row]:
        return [self._row(r) for r in self._range(COLUMNS, end, True, kind, author, limit)]

    def raw_rows(
        self, pulse: int, *, back: bool = False, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[RawRow]:
        return self._range(RAW_COLUMNS, pulse, back, kind, author, limit)

    def _range(
        self, columns: str, pulse: int, back: bool, kind: str | None, author: str | None, limit: int
    ) -> list[Any]:
        """`columns` of up to `limit` rows from Pulse `pulse` on (`back`: at or before it,
        newest first) of `kind` and by `author` when given, as the driver reads them."""
        sql = f"SELECT {columns} FROM ledger_entries WHERE pulse {'<=' if back else '>='} ?"
        params: list[Any] = [pulse]
        if kind is not None:
            sql, params = sql + " AND kind = ?", [*params, kind]
        if author is not None:
            sql, params = sql + " AND author = ?", [*params, author]
        return self._fetch(sql + f" ORDER BY pulse{' DESC' if back else ''} LIMIT ?", [*params, limit])

    def row(self, pulse: int) -> Row | None:
        found = self._fetch(f"SELECT {COLUMNS} FROM ledger_entries WHERE pulse = ?", [pulse])
        return self._row(found[0]) if found else None

    def last_pulse(self) -> int:
        return self._fetch("SELECT max(pulse) FROM ledger_entries")[0][0] or 0

    def tile(self, level: int, index: int) -> bytes | None:
        found = self._fetch("SELECT hashes FROM ledger_tiles WHERE level = ? AND idx = ?", [level, index])
        if not found:
            return None
        hashes: bytes = self._checked(found[0], "ledger_tiles", "hashes", [BLOB], f" at level {level}, index {index}")[
            0
        ]
        return hashes

    def tiles(self, level: int, start: int, limit: int = TILE_PAGE) -> list[Tile]:
        sql = "SELECT level, idx, hashes FROM ledger_tiles WHERE level = ? AND idx >= ? ORDER BY idx LIMIT ?"
        return [self._tile(found) for found in self._fetch(sql, [level, start, limit])]

    def _tile(self, found: Any) -> Tile:
        return Tile(*self._checked(found, "ledger_tiles", "level, idx, hashes", (INT, INT, BLOB)))

    def find(self, low: bytes, high: bytes, limit: int) -> list[int]:
        if self.layout == CARRIED:  # read as it is, through its index of claim keys
            sql = (
                "SELECT pulse FROM ledger_entries WHERE claim >= ? AND claim <= ? AND leaf >= ? AND leaf <= ?"
                " ORDER BY pulse LIMIT ?"
            )
            return [r[0] for r in self._fetch(sql, [_claim_key(low), _claim_key(high), low, high, limit])]
        return self._find(low, high, limit)

    def _find(self, low: bytes, high: bytes, limit: int) -> list[int]:
        """The first `limit` Pulses whose leaf hash lies between `low` and `high`."""
        sql = "SELECT pulse FROM ledger_entries WHERE leaf >= ? AND leaf <= ? ORDER BY pulse LIMIT ?"
        return [r[0] for r in self._fetch(sql, [low, high, limit])]

    def checkpoints(self) -> list[StoredCheckpoint]:
        return [
            self._checkpoint(r)
            for r in self._fetch(f"SELECT {CHECKPOINT_COLUMNS} FROM ledger_checkpoints ORDER BY size")
        ]

    def latest_checkpoint(self) -> StoredCheckpoint | None:
        found = self._fetch(f"SELECT {CHECKPOINT_COLUMNS} FROM ledger_checkpoints ORDER BY size DESC LIMIT 1")
        return self._checkpoint(found[0]) if found else None

    def checkpoint(self, size: int) -> StoredCheckpoint | None:
        found = self._fetch(f"SELECT {CHECKPOINT_COLUMNS} FROM ledger_checkpoints WHERE size = ?", [size])
        return self._checkpoint(found[0]) if found else None

    def _checkpoint(self, found: Any) -> StoredCheckpoint:
        size, note, at = self._checked(found, "ledger_checkpoints", CHECKPOINT_COLUMNS, (INT, TEXT, REAL))
        return StoredCheckpoint(size, note, float(at))

    def snapshot(self) -> Snapshot | None:
        found = self._fetch(f"SELECT {SNAPSHOT_COLUMNS} FROM ledger_snapshot WHERE id = 1")
        if not found:
            return None
        return Snapshot(*self._checked(found[0], "ledger_snapshot", SNAPSHOT_COLUMNS, _SNAPSHOT_TYPES))

    def snapshot_extent(self) -> tuple[int, int]:
        found = self._fetch("SELECT size, length(state) FROM ledger_snapshot WHERE id = 1")
        if not found:
            return 0, 0
        size, length = self._checked(found[0], "ledger_snapshot", "size, state", (INT, INT))
        return size, length

    @contextmanager
    def transaction(self) -> Iterator[SqlTransaction]:
        with self._locked():
            head = self._head(self._fetch("SELECT size, root FROM ledger_head WHERE id = 1" + self._lock_clause()))
            yield SqlTransaction(self, head)

    def close(self) -> None:
        self._conn.close()

    def _lock_clause(self) -> str:
        return ""

    @abstractmethod
    def _insert(self, records: Sequence[Record]) -> None:
        """Inserts the rows into ledger_entries; the driver's integrity error if the store refuses one."""


class SqlTransaction:
    """The Transaction of a SqlRecorder: its queries run under the held lock."""

    def __init__(self, recorder: SqlRecorder, head: Head) -> None:
        self._r = recorder
        self.head = head

    def rows(self, start: int) -> list[Row]:
        sql = f"SELECT {COLUMNS} FROM ledger_entries WHERE pulse >= ? AND pulse <= ? ORDER BY pulse"
        return [self._r._row(r) for r in self._r._fetch(sql, [start, self.head.size])]

    def last_pulse(self) -> int:
        return self._r.last_pulse()

    def tile(self, level: int, index: int) -> bytes | None:
        return self._r.tile(level, index)

    def add(self, records: Sequence[Record], head: Head, tiles: Sequence[Tile]) -> None:
        try:
            self._r._insert(records)
        except self._r.integrity_error as exc:
            # The unique index on authors' sequence numbers refuses an entry recorded before; say which.
            self._refuse_duplicate(records)
            raise LedgerError(
                f"the store refused the new rows ({str(exc).splitlines()[0]}): it holds rows beyond its head; "
                "run `agentd ledger verify`"
            ) from None
        self._r._execute_many(
            "INSERT INTO ledger_tiles (level, idx, hashes) VALUES (?, ?, ?) "
            "ON CONFLICT (level, idx) DO UPDATE SET hashes = excluded.hashes",
            [(t.level, t.index, t.hashes) for t in tiles],
        )
        self._r._execute("UPDATE ledger_head SET size = ?, root = ? WHERE id = 1", [head.size, head.root])
        self.head = head

    def _refuse_duplicate(self, records: Sequence[Record]) -> None:
        """LedgerError naming the row on the log that holds a record's author and number."""
        sql = "SELECT pulse, leaf FROM ledger_entries WHERE author = ? AND seq = ? AND pulse <= ?"
        for record in records:
            for pulse, leaf in self._r._fetch(sql, [record.author, record.seq, self.head.size]):
                if leaf == record.leaf:
                    raise LedgerError(
                        f"entry {leaf.hex()[:16]} is already on the log at Pulse {pulse}: an entry is recorded once"
                    )
                raise LedgerError(
                    f"entry {record.leaf.hex()[:16]} carries sequence number {record.seq} of wallet {record.author}, "
                    f"which Pulse {pulse} holds: an author's number is used once"
                )

    def latest_checkpoint(self) -> StoredCheckpoint | None:
        return self._r.latest_checkpoint()

    def checkpoint(self, size: int) -> StoredCheckpoint | None:
        return self._r.checkpoint(size)

    def save_checkpoint(self, checkpoint: StoredCheckpoint) -> None:
        self._r._execute("INSERT INTO ledger_checkpoints (size, note, at) VALUES (?, ?, ?)", list(checkpoint))

    def replace_checkpoint(self, size: int, note: str) -> None:
        self._r._execute("UPDATE ledger_checkpoints SET note = ? WHERE size = ?", [note, size])

    def snapshot(self) -> Snapshot | None:
        return self._r.snapshot()

    def snapshot_extent(self) -> tuple[int, int]:
        return self._r.snapshot_extent()

    def save_snapshot(self, snapshot: Snapshot) -> None:
        self._r._execute("DELETE FROM ledger_snapshot")
        self._r._execute(
            f"INSERT INTO ledger_snapshot (id, {SNAPSHOT_COLUMNS}) VALUES (1, ?, ?, ?, ?, ?, ?, ?)",
            [
                snapshot.size,
                snapshot.root,
                snapshot.chain,
                snapshot.frontier,
                snapshot.rules,
                snapshot.state,
                snapshot.digest,
            ],
        )
