"""The tables of a SQL ledger store: how they are made, checked for damage and carried
over from an older layout, and the driver calls every query goes through. Shared by the
SQLite and PostgreSQL stores; the queries of the Recorder interface are in ledger.sql.

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
from contextlib import AbstractContextManager
from typing import Any

from ledger.errors import RESTORE_HINT, DamagedStore, LedgerError
from ledger.fold import read
from ledger.merkle import EMPTY_ROOT
from ledger.store import FORMAT, PAGE, Head, Record, Row

COLUMNS = "pulse, raw, leaf, chain, kind, author"
INSERT_COLUMNS = f"{COLUMNS}, seq"
# The layout before FORMAT: read as it is, and carried over when first opened to write.
CARRIED = 2
# The tables of the first layout, which had no ledger_format row.
V1_TABLES = ("ledger_entries", "ledger_head", "ledger_checkpoints", "ledger_snapshot")
_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)")
# The Python types each column is read back as, by both drivers; anything else is damage.
INT, BLOB, TEXT, REAL = (int,), (bytes,), (str,), (float, int)
_ENTRY_TYPES = (int, bytes, bytes, bytes, str, str)
_TYPE_NAMES = {bytes: "bytes", str: "text", int: "an integer", float: "a number", type(None): "NULL"}


class SqlTables(ABC):
    """A ledger store's six tables: ledger_format (one row: the layout's version),
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
        size, root = self._checked(found[0], "ledger_head", "size, root", (INT, BLOB))
        return Head(size, root)

    def _version(self) -> Any:
        """The store's format, from its one ledger_format row; DamagedStore without it."""
        found = self._fetch("SELECT version FROM ledger_format WHERE id = 1")
        if not found:
            raise self._damaged("has no format row (ledger_format)")
        return found[0][0]

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


def _made(schema: Sequence[str]) -> set[str]:
    """The tables `schema` makes."""
    return {m.group(1) for m in map(_TABLE.search, schema) if m}
