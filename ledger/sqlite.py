"""The SQLite store: one file in WAL mode, appends under BEGIN IMMEDIATE.

Plain `sqlite3` rather than an ORM: the store needs exact control of when the write
lock is taken (BEGIN IMMEDIATE, so two appenders never both read the same head) and
moves raw bytes in bulk.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger.errors import LedgerError
from ledger.merkle import EMPTY_ROOT
from ledger.sql import SqlRecorder

PREFIX = "sqlite:///"
BUSY_TIMEOUT_S = 120

SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_entries (
    pulse INTEGER PRIMARY KEY,
    raw BLOB NOT NULL,
    leaf BLOB NOT NULL,
    chain BLOB NOT NULL,
    kind TEXT NOT NULL,
    author TEXT NOT NULL,
    claim INTEGER NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS ledger_entries_kind ON ledger_entries (kind, pulse);
CREATE INDEX IF NOT EXISTS ledger_entries_author ON ledger_entries (author, pulse);
-- Covers the start-up check's read of every leaf hash, which then skips the entries' bytes.
CREATE INDEX IF NOT EXISTS ledger_entries_leaf ON ledger_entries (pulse, leaf);
CREATE TABLE IF NOT EXISTS ledger_head (id INTEGER PRIMARY KEY CHECK (id = 1), size INTEGER NOT NULL, root BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS ledger_checkpoints (size INTEGER PRIMARY KEY, note TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ledger_snapshot (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    size INTEGER NOT NULL,
    root BLOB NOT NULL,
    chain BLOB NOT NULL,
    frontier BLOB NOT NULL,
    rules BLOB NOT NULL,
    state BLOB NOT NULL,
    digest BLOB NOT NULL
);
"""


class SqliteRecorder(SqlRecorder):
    integrity_error = sqlite3.IntegrityError

    def __init__(self, url: str) -> None:
        path = Path(url.removeprefix(PREFIX))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit mode: this class issues BEGIN IMMEDIATE / COMMIT itself.
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            # FULL: an append that returned survives a power cut, not only a crash.
            conn.execute("PRAGMA synchronous=FULL")
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(f"cannot open the ledger at {path}: {exc}") from None
        super().__init__(url, conn)
        with self._locked():
            # Statement by statement: executescript would commit and drop the lock.
            for statement in filter(str.strip, SCHEMA.split(";")):
                conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO ledger_head (id, size, root) VALUES (1, 0, ?)", [EMPTY_ROOT])

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise LedgerError(f"the ledger at {self.url} is busy ({exc}); try again") from None
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
