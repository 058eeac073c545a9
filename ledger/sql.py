"""The recorder over a SQL database, shared by the SQLite and PostgreSQL stores.

Subclasses say how to connect, how to take the write lock on the head row, how to list
tables and how to insert many rows fast; the queries are the same. SQL is written with
`?` parameters and rewritten to the driver's style.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ledger.errors import DamagedStore, LedgerError
from ledger.merkle import EMPTY_ROOT
from ledger.store import FORMAT, PAGE, TILE_PAGE, Head, Row, Snapshot, StoredCheckpoint
from ledger.tiles import Tile

COLUMNS = "pulse, raw, leaf, chain, kind, author"
INSERT_COLUMNS = f"{COLUMNS}, claim"
SNAPSHOT_COLUMNS = "size, root, chain, frontier, rules, state, digest"
# The tables of the first layout, which had no ledger_format row.
V1_TABLES = ("ledger_entries", "ledger_head", "ledger_checkpoints", "ledger_snapshot")
_CHUNK = 500
_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)")


def claim_key(leaf: bytes) -> int:
    """The first 8 bytes of a leaf hash as a signed 64-bit integer, in the same order.

    The unique index is on this, not on the 32-byte hash: a batch of appends then
    dirties a third of the index pages, which is a third of an append's cost on SQLite.
    Two different entries sharing 64 bits of hash is refused with its own message."""
    return int.from_bytes(leaf[:8], "big") - 2**63


class SqlRecorder(ABC):
    """A ledger store in six tables: ledger_format (one row: the layout's version),
    ledger_entries, ledger_head, ledger_tiles, ledger_checkpoints and ledger_snapshot
    (one row at most)."""

    param = "?"
    integrity_error: type[Exception] = Exception
    # The driver's base error: whatever it raises leaves this class as a LedgerError.
    driver_error: type[Exception] = Exception

    def __init__(self, url: str, conn: Any) -> None:
        self.url = url
        self._conn = conn

    def _prepare(self, schema: Sequence[str]) -> None:
        """Creates the tables of a new store. A store of the first layout is refused
        when it holds entries (they cannot be carried over: see ledger.entry), and made
        anew when it holds none."""
        tables = self._tables()
        made = {m.group(1) for m in map(_TABLE.search, schema) if m}
        if made <= tables and self._fetch("SELECT version FROM ledger_format")[:1] == [(FORMAT,)]:
            return  # made already: opening reads two rows, not the whole schema again
        with self._locked():
            self._serialize_schema()
            tables = self._tables()
            if "ledger_entries" in tables and "ledger_format" not in tables:
                self._refuse_v1()
                for table in V1_TABLES:
                    self._execute(f"DROP TABLE IF EXISTS {table}")
            if "ledger_format" in tables and not self._fetch("SELECT version FROM ledger_format"):
                self._version()  # a format row lost under a store that was made: damage, never made anew
            for statement in schema:
                self._execute(statement)
            self._execute(f"INSERT INTO ledger_format (id, version) VALUES (1, {FORMAT}) ON CONFLICT DO NOTHING")
            version = self._version()
            if version != FORMAT:
                raise LedgerError(f"the ledger at {self.url} is in format v{version}, which this version cannot read")
            self._execute(
                "INSERT INTO ledger_head (id, size, root) VALUES (1, 0, ?) ON CONFLICT DO NOTHING", [EMPTY_ROOT]
            )

    def _refuse_v1(self) -> None:
        """A store of the first layout that holds entries: they cannot be carried over."""
        held = self._fetch("SELECT max(pulse) FROM ledger_entries")[0][0] or 0
        if held:
            raise LedgerError(
                f"the ledger at {self.url} holds {held} entries in format v1, from before entries named "
                "their log and carried sequence numbers (a v1 entry's signature can be replayed): this "
                "version can neither extend nor verify it; keep it for the record, move it aside (or name "
                "another ledger URL) and start a new log"
            )

    def _check_layout(self) -> None:
        """For a store opened to read alone: its layout is this version's, or one it can
        name, since nothing may be made or dropped."""
        tables = self._tables()
        if "ledger_entries" in tables and "ledger_format" not in tables:
            self._refuse_v1()
        if "ledger_format" in tables:
            version = self._version()
            if version != FORMAT:
                raise LedgerError(f"the ledger at {self.url} is in format v{version}, which this version cannot read")

    def _head(self, found: list[Any]) -> Head:
        if not found:  # made with the tables, so only damage removes it
            raise DamagedStore(f"the ledger at {self.url} has no head row (ledger_head): the store is damaged")
        size, root = found[0]
        return Head(size, bytes(root))

    def _version(self) -> Any:
        """The store's format, from its one ledger_format row; DamagedStore without it."""
        found = self._fetch("SELECT version FROM ledger_format WHERE id = 1")
        if not found:
            raise DamagedStore(f"the ledger at {self.url} has no format row (ledger_format): the store is damaged")
        return found[0][0]

    def head(self) -> Head:
        return self._head(self._fetch("SELECT size, root FROM ledger_head WHERE id = 1"))

    def rows(
        self, start: int = 1, *, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[Row]:
        return self._rows("pulse >= ?", start, kind, author, "pulse", limit)

    def rows_back(
        self, end: int, *, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[Row]:
        return self._rows("pulse <= ?", end, kind, author, "pulse DESC", limit)

    def _rows(self, where: str, pulse: int, kind: str | None, author: str | None, order: str, limit: int) -> list[Row]:
        sql = f"SELECT {COLUMNS} FROM ledger_entries WHERE {where}"
        params: list[Any] = [pulse]
        if kind is not None:
            sql, params = sql + " AND kind = ?", [*params, kind]
        if author is not None:
            sql, params = sql + " AND author = ?", [*params, author]
        return [_row(r) for r in self._fetch(sql + f" ORDER BY {order} LIMIT ?", [*params, limit])]

    def row(self, pulse: int) -> Row | None:
        found = self._fetch(f"SELECT {COLUMNS} FROM ledger_entries WHERE pulse = ?", [pulse])
        return _row(found[0]) if found else None

    def last_pulse(self) -> int:
        return self._fetch("SELECT max(pulse) FROM ledger_entries")[0][0] or 0

    def tile(self, level: int, index: int) -> bytes | None:
        found = self._fetch("SELECT hashes FROM ledger_tiles WHERE level = ? AND idx = ?", [level, index])
        return bytes(found[0][0]) if found else None

    def tiles(self, level: int, start: int, limit: int = TILE_PAGE) -> list[Tile]:
        sql = "SELECT level, idx, hashes FROM ledger_tiles WHERE level = ? AND idx >= ? ORDER BY idx LIMIT ?"
        return [Tile(lv, i, bytes(h)) for lv, i, h in self._fetch(sql, [level, start, limit])]

    def find(self, low: bytes, high: bytes, limit: int) -> list[int]:
        sql = (
            "SELECT pulse FROM ledger_entries WHERE claim >= ? AND claim <= ? AND leaf >= ? AND leaf <= ?"
            " ORDER BY pulse LIMIT ?"
        )
        return [r[0] for r in self._fetch(sql, [claim_key(low), claim_key(high), low, high, limit])]

    def checkpoints(self) -> list[StoredCheckpoint]:
        return [_checkpoint(r) for r in self._fetch("SELECT size, note, at FROM ledger_checkpoints ORDER BY size")]

    def latest_checkpoint(self) -> StoredCheckpoint | None:
        found = self._fetch("SELECT size, note, at FROM ledger_checkpoints ORDER BY size DESC LIMIT 1")
        return _checkpoint(found[0]) if found else None

    def checkpoint(self, size: int) -> StoredCheckpoint | None:
        found = self._fetch("SELECT size, note, at FROM ledger_checkpoints WHERE size = ?", [size])
        return _checkpoint(found[0]) if found else None

    def snapshot(self) -> Snapshot | None:
        found = self._fetch(f"SELECT {SNAPSHOT_COLUMNS} FROM ledger_snapshot WHERE id = 1")
        if not found:
            return None
        size, *blobs = found[0]
        return Snapshot(size, *map(bytes, blobs))

    def snapshot_extent(self) -> tuple[int, int]:
        found = self._fetch("SELECT size, length(state) FROM ledger_snapshot WHERE id = 1")
        return (found[0][0], found[0][1]) if found else (0, 0)

    @contextmanager
    def transaction(self) -> Iterator[SqlTransaction]:
        with self._locked():
            head = self._head(self._fetch("SELECT size, root FROM ledger_head WHERE id = 1" + self._lock_clause()))
            yield SqlTransaction(self, head)

    def close(self) -> None:
        self._conn.close()

    @abstractmethod
    def _locked(self) -> AbstractContextManager[None]:
        """A write transaction that commits on clean exit and rolls back on error; the
        driver's errors leave it as LedgerErrors (see _failure)."""

    @abstractmethod
    def _failure(self, exc: Exception) -> LedgerError:
        """The driver's error as one line naming the store and what to do about it."""

    @abstractmethod
    def _tables(self) -> set[str]:
        """The names of the tables the store's schema holds."""

    def _serialize_schema(self) -> None:  # noqa: B027  (a hook: PostgreSQL's takes a lock; SQLite needs none)
        """Keeps two sessions from creating the tables at once (the write lock does, on SQLite)."""

    def _lock_clause(self) -> str:
        return ""

    def _insert(self, rows: Sequence[Row]) -> None:
        sql = f"INSERT INTO ledger_entries ({INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
        self._conn.executemany(self._sql(sql), [(*r, claim_key(r.leaf)) for r in rows])

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            rows: list[Any] = self._conn.execute(self._sql(sql), params).fetchall()
            return rows
        except self.driver_error as exc:
            raise self._failure(exc) from None

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        try:
            self._conn.execute(self._sql(sql), params)
        except self.driver_error as exc:
            raise self._failure(exc) from None

    def _execute_many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        try:
            self._cursor().executemany(self._sql(sql), params)
        except self.driver_error as exc:
            raise self._failure(exc) from None

    def _cursor(self) -> Any:
        """What runs executemany: the connection itself (sqlite3) or a cursor of it (psycopg)."""
        return self._conn

    def _sql(self, sql: str) -> str:
        return sql if self.param == "?" else sql.replace("?", self.param)


class SqlTransaction:
    """The Transaction of a SqlRecorder: its queries run under the held lock."""

    def __init__(self, recorder: SqlRecorder, head: Head) -> None:
        self._r = recorder
        self.head = head

    def rows(self, start: int) -> list[Row]:
        sql = f"SELECT {COLUMNS} FROM ledger_entries WHERE pulse >= ? AND pulse <= ? ORDER BY pulse"
        return [_row(r) for r in self._r._fetch(sql, [start, self.head.size])]

    def last_pulse(self) -> int:
        return self._r.last_pulse()

    def tile(self, level: int, index: int) -> bytes | None:
        return self._r.tile(level, index)

    def add(self, rows: Sequence[Row], head: Head, tiles: Sequence[Tile]) -> None:
        try:
            self._r._insert(rows)
        except self._r.integrity_error as exc:
            # The unique index on leaf hashes refuses an entry recorded before; say which.
            self._refuse_duplicate([r.leaf for r in rows])
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

    def _refuse_duplicate(self, leaves: Sequence[bytes]) -> None:
        wanted = {claim_key(leaf): leaf for leaf in leaves}
        keys = list(wanted)
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i : i + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            sql = f"SELECT claim, leaf, pulse FROM ledger_entries WHERE pulse <= ? AND claim IN ({marks})"
            for key, leaf, pulse in self._r._fetch(sql, [self.head.size, *chunk]):
                if bytes(leaf) != wanted[key]:
                    raise LedgerError(
                        f"entry {wanted[key].hex()[:16]} shares its first 64 bits of hash with Pulse {pulse}; "
                        "sign it again (a new second gives new bytes)"
                    )
                raise LedgerError(
                    f"entry {bytes(leaf).hex()[:16]} is already on the log at Pulse {pulse}: an entry is recorded once"
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


def _checkpoint(found: Any) -> StoredCheckpoint:
    size, note, at = found
    return StoredCheckpoint(size, note, float(at))


_row = Row._make
