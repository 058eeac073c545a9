"""The recorder over a SQL database, shared by the SQLite and PostgreSQL stores.

Subclasses say how to connect, how to take the write lock on the head row, how to list
tables, how to insert many rows fast and how to find a leaf hash; the other queries are
the same. SQL is written with `?` parameters and rewritten to the driver's style.

An entry is recorded once because the store holds each author's sequence number once
(a unique index on author and seq): the same signed bytes carry the same author and
number, and that index grows where each author's entries end, a few pages a batch.
Layout 2 held a key of each claim id unique instead, in an index of random keys that,
once larger than the page cache, took a page of its own for nearly every entry a batch
appended, which is what slowed appends as the log grew. A store of layout 2 is read as
it is and carried over the first time it is opened to write.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ledger.errors import RESTORE_HINT, DamagedStore, LedgerError
from ledger.fold import read
from ledger.merkle import EMPTY_ROOT
from ledger.store import FORMAT, PAGE, TILE_PAGE, Head, Record, Row, Snapshot, StoredCheckpoint
from ledger.tiles import Tile

COLUMNS = "pulse, raw, leaf, chain, kind, author"
INSERT_COLUMNS = f"{COLUMNS}, seq"
# The layout before FORMAT: read as it is, and carried over when first opened to write.
CARRIED = 2
CHECKPOINT_COLUMNS = "size, note, at"
SNAPSHOT_COLUMNS = "size, root, chain, frontier, rules, state, digest"
# The tables of the first layout, which had no ledger_format row.
V1_TABLES = ("ledger_entries", "ledger_head", "ledger_checkpoints", "ledger_snapshot")
_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)")
# The Python types each column is read back as, by both drivers; anything else is damage.
_INT, _BLOB, _TEXT, _REAL = (int,), (bytes,), (str,), (float, int)
_ENTRY_TYPES = (int, bytes, bytes, bytes, str, str)
_SNAPSHOT_TYPES = (_INT, *[_BLOB] * 6)
_TYPE_NAMES = {bytes: "bytes", str: "text", int: "an integer", float: "a number", type(None): "NULL"}


def _claim_key(leaf: bytes) -> int:
    """The first 8 bytes of a leaf hash as a signed 64-bit integer, in the same order: what
    a store of layout 2 indexes claim ids by."""
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
        self.layout = FORMAT  # what the store's format row says, once it is opened

    def _prepare(self, schema: Sequence[str]) -> None:
        """Creates the tables of a new store. A store of the first layout is refused
        when it holds entries (they cannot be carried over: see ledger.entry), and made
        anew when it holds none; one of layout 2 is carried over (see `_carry_over`). A
        store this layout made that lost a table or a row is damaged: nothing is made
        anew in it."""
        tables = self._tables()
        if _made(schema) <= tables and self._fetch("SELECT version FROM ledger_format")[:1] == [(FORMAT,)]:
            return  # made already: opening reads two rows, not the whole schema again
        with self._locked():
            self._serialize_schema()
            tables = self._tables()
            if "ledger_format" in tables:
                self._intact(schema, tables)
                if self._version() == CARRIED:
                    self._carry_over(schema)
            elif "ledger_entries" in tables:
                self._refuse_v1()
                for table in V1_TABLES:
                    self._execute(f"DROP TABLE IF EXISTS {table}")
            for statement in schema:
                self._execute(statement)
            self._execute(f"INSERT INTO ledger_format (id, version) VALUES (1, {FORMAT}) ON CONFLICT DO NOTHING")
            version = self._version()
            if version != FORMAT:
                raise LedgerError(f"the ledger at {self.url} is in format v{version}, which this version cannot read")
            self._execute(
                "INSERT INTO ledger_head (id, size, root) VALUES (1, 0, ?) ON CONFLICT DO NOTHING", [EMPTY_ROOT]
            )

    def _carry_over(self, schema: Sequence[str]) -> None:
        """Carries a store of layout 2 over to this one, in the transaction that first opens
        it to write (once, reading every row: about a minute a million entries): each row
        gets its author's sequence number, read from its entry, and the store holds those
        once instead of claim keys, which it drops. A row that cannot be read, or two that
        share a number, stop it and leave the store as it was, to be read and verified."""
        self._renew_entries(schema)
        self._execute(f"UPDATE ledger_format SET version = {FORMAT} WHERE id = 1")

    @abstractmethod
    def _renew_entries(self, schema: Sequence[str]) -> None:
        """Gives ledger_entries its seq column (see `_sequenced`) and no claim column;
        whatever of `schema` is still missing is made after."""

    def _sequenced(self, table: str) -> Iterator[list[Record]]:
        """The rows of `table`, a page at a time, each with its author's sequence number."""
        last = 0
        sql = f"SELECT {COLUMNS} FROM {table} WHERE pulse > ? ORDER BY pulse LIMIT ?"
        while page := [self._row(found) for found in self._fetch(sql, [last, PAGE])]:
            yield [Record(*row, read(row).seq) for row in page]
            last = page[-1].pulse

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

    def _check_layout(self, schema: Sequence[str]) -> None:
        """For a store opened to read alone: its layout is this version's whole, or one it
        can name, since nothing may be made or dropped."""
        tables = self._tables()
        if "ledger_format" not in tables:
            if "ledger_entries" in tables:
                self._refuse_v1()
            raise LedgerError(f"no ledger at {self.url} yet: its tables are made when it is first written to")
        self._intact(schema, tables)
        version = self._version()
        if version not in (CARRIED, FORMAT):
            raise LedgerError(f"the ledger at {self.url} is in format v{version}, which this version cannot read")
        self.layout = version

    def _intact(self, schema: Sequence[str], tables: set[str]) -> None:
        """DamagedStore unless a store this layout made still holds its tables and its format
        row. The snapshot's may be missing: a store from before snapshots gets one when
        next written to."""
        lost = sorted(_made(schema) - tables - {"ledger_snapshot"})
        if lost:
            raise self._damaged(f"has lost its {', '.join(lost)} table{'s' if len(lost) > 1 else ''}")
        self._version()

    def _damaged(self, what: str) -> DamagedStore:
        return DamagedStore(f"the ledger at {self.url} {what}: the store is damaged; {RESTORE_HINT}")

    def _checked(
        self, found: Sequence[Any], table: str, columns: str, types: Sequence[tuple[type, ...]], where: str = ""
    ) -> Sequence[Any]:
        """`found`, a row of `table`, once each value is of a type its column is read as;
        DamagedStore naming the first that is not (text where bytes belong, say), which
        the code reading it would otherwise trip over."""
        for column, value, allowed in zip(columns.split(", "), found, types, strict=True):
            if type(value) not in allowed:
                held, kept = _TYPE_NAMES.get(type(value), type(value).__name__), _TYPE_NAMES[allowed[0]]
                raise self._damaged(f"holds {held} in {table}.{column}{where}, where it keeps {kept}")
        return found

    def _row(self, found: Any) -> Row:
        row = Row._make(found)
        # The types compared at once first: this runs for every row an audit or a listing reads.
        if tuple(map(type, row)) != _ENTRY_TYPES:
            self._checked(row, "ledger_entries", COLUMNS, [(kind,) for kind in _ENTRY_TYPES], f" at Pulse {row.pulse}")
        return row

    def _head(self, found: list[Any]) -> Head:
        if not found:  # made with the tables, so only damage removes it
            raise self._damaged("has no head row (ledger_head)")
        size, root = self._checked(found[0], "ledger_head", "size, root", (_INT, _BLOB))
        return Head(size, root)

    def _version(self) -> Any:
        """The store's format, from its one ledger_format row; DamagedStore without it."""
        found = self._fetch("SELECT version FROM ledger_format WHERE id = 1")
        if not found:
            raise self._damaged("has no format row (ledger_format)")
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
        return [self._row(r) for r in self._fetch(sql + f" ORDER BY {order} LIMIT ?", [*params, limit])]

    def row(self, pulse: int) -> Row | None:
        found = self._fetch(f"SELECT {COLUMNS} FROM ledger_entries WHERE pulse = ?", [pulse])
        return self._row(found[0]) if found else None

    def last_pulse(self) -> int:
        return self._fetch("SELECT max(pulse) FROM ledger_entries")[0][0] or 0

    def tile(self, level: int, index: int) -> bytes | None:
        found = self._fetch("SELECT hashes FROM ledger_tiles WHERE level = ? AND idx = ?", [level, index])
        if not found:
            return None
        hashes: bytes = self._checked(found[0], "ledger_tiles", "hashes", [_BLOB], f" at level {level}, index {index}")[
            0
        ]
        return hashes

    def tiles(self, level: int, start: int, limit: int = TILE_PAGE) -> list[Tile]:
        sql = "SELECT level, idx, hashes FROM ledger_tiles WHERE level = ? AND idx >= ? ORDER BY idx LIMIT ?"
        return [self._tile(found) for found in self._fetch(sql, [level, start, limit])]

    def _tile(self, found: Any) -> Tile:
        return Tile(*self._checked(found, "ledger_tiles", "level, idx, hashes", (_INT, _INT, _BLOB)))

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
        size, note, at = self._checked(found, "ledger_checkpoints", CHECKPOINT_COLUMNS, (_INT, _TEXT, _REAL))
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
        size, length = self._checked(found[0], "ledger_snapshot", "size, state", (_INT, _INT))
        return size, length

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

    @abstractmethod
    def _insert(self, records: Sequence[Record]) -> None:
        """Inserts the rows into ledger_entries; the driver's integrity error if the store refuses one."""

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


def _made(schema: Sequence[str]) -> set[str]:
    """The tables `schema` makes."""
    return {m.group(1) for m in map(_TABLE.search, schema) if m}
