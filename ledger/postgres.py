"""The PostgreSQL store, for a ledger several hosts share: appends lock the head row.

The connection runs in autocommit mode so reads hold no transaction open; appends run
in an explicit transaction that starts with SELECT … FOR UPDATE on the head row, which
serializes appenders across processes and hosts. Tables go in the first schema of the
connection's search_path (set it with `?options=-csearch_path%3DNAME` in the URL).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg
from psycopg.rows import TupleRow

from ledger.errors import DamagedStore, LedgerError
from ledger.sql import INSERT_COLUMNS, SqlRecorder, claim_key
from ledger.store import Row

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS ledger_format (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS ledger_entries (
        pulse BIGINT PRIMARY KEY,
        raw BYTEA NOT NULL,
        leaf BYTEA NOT NULL,
        chain BYTEA NOT NULL,
        kind TEXT NOT NULL,
        author TEXT NOT NULL,
        claim BIGINT NOT NULL UNIQUE)""",
    "CREATE INDEX IF NOT EXISTS ledger_entries_kind ON ledger_entries (kind, pulse)",
    "CREATE INDEX IF NOT EXISTS ledger_entries_author ON ledger_entries (author, pulse)",
    """CREATE TABLE IF NOT EXISTS ledger_head (
        id INTEGER PRIMARY KEY CHECK (id = 1), size BIGINT NOT NULL, root BYTEA NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS ledger_tiles (
        level INTEGER NOT NULL, idx BIGINT NOT NULL, hashes BYTEA NOT NULL, PRIMARY KEY (level, idx))""",
    """CREATE TABLE IF NOT EXISTS ledger_checkpoints (
        size BIGINT PRIMARY KEY, note TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS ledger_snapshot (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        size BIGINT NOT NULL,
        root BYTEA NOT NULL,
        chain BYTEA NOT NULL,
        frontier BYTEA NOT NULL,
        rules BYTEA NOT NULL,
        state BYTEA NOT NULL,
        digest BYTEA NOT NULL)""",
]


class PostgresRecorder(SqlRecorder):
    param = "%s"
    integrity_error = psycopg.IntegrityError
    driver_error = psycopg.Error
    _conn: psycopg.Connection[TupleRow]

    def __init__(self, url: str) -> None:
        try:
            conn = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise LedgerError(f"cannot connect to the ledger database: {_first_line(exc)}") from None
        super().__init__(_redacted(url), conn)
        try:
            self._prepare(SCHEMA)
        except LedgerError:
            conn.close()
            raise

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            with self._conn.transaction():
                yield
        except psycopg.Error as exc:
            raise self._failure(exc) from None

    def _failure(self, exc: Exception) -> LedgerError:
        reason = _first_line(exc)
        # Class XX, "internal error", is where PostgreSQL reports corrupt data and indexes.
        if (getattr(exc, "sqlstate", None) or "").startswith("XX"):
            return DamagedStore(f"the ledger database at {self.url} is damaged ({reason}): restore it from a backup")
        return LedgerError(f"the ledger database at {self.url} failed: {reason}; check the server, then try again")

    def _serialize_schema(self) -> None:
        # CREATE … IF NOT EXISTS races between sessions; one lock key serializes them.
        self._execute("SELECT pg_advisory_xact_lock(hashtext('agentd ledger schema'))")

    def _tables(self) -> set[str]:
        sql = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        return {r[0] for r in self._fetch(sql)}

    def _cursor(self) -> psycopg.Cursor[TupleRow]:
        return self._conn.cursor()

    def _lock_clause(self) -> str:
        return " FOR UPDATE"

    def _insert(self, rows: Sequence[Row]) -> None:
        # A savepoint, so a refused row leaves the transaction usable to say why.
        with (
            self._conn.transaction(),
            self._conn.cursor() as cur,
            cur.copy(f"COPY ledger_entries ({INSERT_COLUMNS}) FROM STDIN") as copy,
        ):
            for r in rows:
                copy.write_row((*r, claim_key(r.leaf)))


def _redacted(url: str) -> str:
    """The URL without a password, for messages."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    return f"{scheme}{sep}{creds.partition(':')[0]}{at}{host}" if at else url


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
