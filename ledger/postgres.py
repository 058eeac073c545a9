"""The PostgreSQL store, for a ledger several hosts share: appends lock the head row.

The connection runs in autocommit mode so reads hold no transaction open; appends run
in an explicit transaction that starts with SELECT … FOR UPDATE on the head row, which
serializes appenders across processes and hosts. Tables go in the first schema of the
connection's search_path (set it with `?options=-csearch_path%3DNAME` in the URL).

Opened to read alone, the session refuses every write (an audit or a listing writes
nothing, whatever it finds: no table or row is made anew), and what a reader reads
together (the start-up check) is read from one snapshot, since it takes no lock.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg
from psycopg.rows import TupleRow

from ledger.errors import RESTORE_HINT, DamagedStore, LedgerError
from ledger.sql import SqlRecorder
from ledger.store import Record
from ledger.tables import INSERT_COLUMNS

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS ledger_format (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS ledger_entries (
        pulse BIGINT PRIMARY KEY,
        raw BYTEA NOT NULL,
        leaf BYTEA NOT NULL,
        chain BYTEA NOT NULL,
        kind TEXT NOT NULL,
        author TEXT NOT NULL,
        seq BIGINT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS ledger_entries_kind ON ledger_entries (kind, pulse)",
    "CREATE INDEX IF NOT EXISTS ledger_entries_author ON ledger_entries (author, pulse)",
    "CREATE UNIQUE INDEX IF NOT EXISTS ledger_entries_once ON ledger_entries (author, seq)",
    # One index of random keys: PostgreSQL logs what a commit changes in a page, not the page.
    "CREATE INDEX IF NOT EXISTS ledger_entries_leaf ON ledger_entries (leaf)",
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
_READ_ONLY_TRANSACTION = "25006"  # the SQLSTATE of a write refused by a read-only session


class PostgresRecorder(SqlRecorder):
    param = "%s"
    integrity_error = psycopg.IntegrityError
    driver_error = psycopg.Error
    _conn: psycopg.Connection[TupleRow]

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.read_only = read_only
        try:
            conn = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise LedgerError(f"cannot connect to the ledger database: {_first_line(exc)}") from None
        super().__init__(_redacted(url), conn)
        try:
            if read_only:
                self._execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                self._check_layout(SCHEMA)
            else:
                self._prepare(SCHEMA)
        except LedgerError:
            conn.close()
            raise

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            with self._conn.transaction():
                if self.read_only:  # no lock to take: one snapshot for every read instead
                    self._execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield
        except psycopg.Error as exc:
            raise self._failure(exc) from None

    def _failure(self, exc: Exception) -> LedgerError:
        reason = _first_line(exc)
        state = getattr(exc, "sqlstate", None) or ""
        # Class XX, "internal error", is where PostgreSQL reports corrupt data and indexes.
        if state.startswith("XX"):
            return DamagedStore(f"the ledger database at {self.url} is damaged ({reason}): {RESTORE_HINT}")
        if state == _READ_ONLY_TRANSACTION:
            return LedgerError(
                f"the ledger database at {self.url} is opened read-only here ({reason}): this command needs to write to it"
            )
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
        return "" if self.read_only else " FOR UPDATE"

    def _insert(self, records: Sequence[Record]) -> None:
        # A savepoint, so a refused row leaves the transaction usable to say why.
        with (
            self._conn.transaction(),
            self._conn.cursor() as cur,
            cur.copy(f"COPY ledger_entries ({INSERT_COLUMNS}) FROM STDIN") as copy,
        ):
            for record in records:
                copy.write_row(record)

    def _renew_entries(self, schema: Sequence[str]) -> None:
        self._execute("ALTER TABLE ledger_entries ADD COLUMN seq BIGINT")
        for records in self._sequenced("ledger_entries"):
            self._execute_many("UPDATE ledger_entries SET seq = ? WHERE pulse = ?", [(r.seq, r.pulse) for r in records])
        self._execute("ALTER TABLE ledger_entries ALTER COLUMN seq SET NOT NULL")
        self._execute("ALTER TABLE ledger_entries DROP COLUMN claim")


def _redacted(url: str) -> str:
    """The URL without a password, for messages."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    return f"{scheme}{sep}{creds.partition(':')[0]}{at}{host}" if at else url


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
