"""The SQLite store: one file in WAL mode, appends under BEGIN IMMEDIATE.

Plain `sqlite3` rather than an ORM: the store needs exact control of when the write
lock is taken (BEGIN IMMEDIATE, so two appenders never both read the same head) and
moves raw bytes in bulk.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ledger.errors import DamagedStore, LedgerError
from ledger.sql import SqlRecorder
from ledger.store import Record
from ledger.tables import INSERT_COLUMNS

BUSY_TIMEOUT_S = 120
WAL_RETRY_S = 0.01
WAL_PAGES = 10_000
CACHE_KIB = 8_000
# What sqlite3 raises reading a TEXT value that is not UTF-8 (a blob cast to text).
_UNDECODABLE = re.compile(r"Could not decode to UTF-8 column '([^']*)'")
# Leaf hashes are indexed by generation (each 2**14 Pulses from a multiple of 16,384 on)
# and by their first 8 bytes, because SQLite writes every page a commit changes to its
# WAL, and again to the file at the next checkpoint: a batch of appends then changes the
# hundred-odd pages of the newest generation's stretch of the index, where one index of
# random keys as large as the log takes a page a key once it outgrows the page cache.
# Finding a claim id seeks once a generation (611 seeks at 10,000,000 entries).
GENERATION = 14

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS ledger_format (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS ledger_entries (
        pulse INTEGER PRIMARY KEY,
        raw BLOB NOT NULL,
        leaf BLOB NOT NULL,
        chain BLOB NOT NULL,
        kind TEXT NOT NULL,
        author TEXT NOT NULL,
        seq INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS ledger_entries_kind ON ledger_entries (kind, pulse)",
    "CREATE INDEX IF NOT EXISTS ledger_entries_author ON ledger_entries (author, pulse)",
    "CREATE UNIQUE INDEX IF NOT EXISTS ledger_entries_once ON ledger_entries (author, seq)",
    f"CREATE INDEX IF NOT EXISTS ledger_entries_leaf ON ledger_entries (pulse >> {GENERATION}, substr(leaf, 1, 8))",
    """CREATE TABLE IF NOT EXISTS ledger_head (
        id INTEGER PRIMARY KEY CHECK (id = 1), size INTEGER NOT NULL, root BLOB NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS ledger_tiles (
        level INTEGER NOT NULL, idx INTEGER NOT NULL, hashes BLOB NOT NULL, PRIMARY KEY (level, idx))""",
    "CREATE TABLE IF NOT EXISTS ledger_checkpoints (size INTEGER PRIMARY KEY, note TEXT NOT NULL, at REAL NOT NULL)",
    """CREATE TABLE IF NOT EXISTS ledger_snapshot (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        size INTEGER NOT NULL,
        root BLOB NOT NULL,
        chain BLOB NOT NULL,
        frontier BLOB NOT NULL,
        rules BLOB NOT NULL,
        state BLOB NOT NULL,
        digest BLOB NOT NULL)""",
]


class SqliteRecorder(SqlRecorder):
    """`read_only` opens an existing file for reading alone (SQLite's `mode=ro`): no
    schema, no write lock, nothing created, so a copy on a read-only disk can be read and
    verified. Anything that would write fails with a LedgerError saying so."""

    integrity_error = sqlite3.IntegrityError
    driver_error = sqlite3.Error

    def __init__(self, url: str, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        conn = self._connect_read_only() if read_only else self._connect()
        super().__init__(url, conn)
        try:
            if read_only:
                self._check_layout(SCHEMA)
            else:
                self._prepare(SCHEMA)
        except LedgerError:
            conn.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit mode: this class issues BEGIN IMMEDIATE / COMMIT itself.
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except OSError as exc:
            raise LedgerError(f"cannot open the ledger at {self.path}: {exc.strerror or exc}") from None
        except sqlite3.Error as exc:
            raise self._failure(exc) from None
        try:
            _use_wal(conn)
            # FULL: an append that returned survives a power cut, not only a crash.
            conn.execute("PRAGMA synchronous=FULL")
            # Checkpoints every 10,000 pages of WAL, not 1,000: a batch of appends writes a few
            # hundred, so the file gets each page once every few dozen batches, not every
            # third, with a sync of its own each time.
            conn.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")
            # 8 MB of page cache, not SQLite's 2: a batch of appends works on a few hundred pages
            # (the last of the table and of each index) and with 2 MB read some 16 of them back
            # from the file every batch (4 with 8 MB), from the disk if the system evicted them.
            conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        except sqlite3.Error as exc:
            conn.close()
            raise self._failure(exc) from None
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        if not self.path.is_file():
            raise LedgerError(f"no ledger at {self.path}")
        # A WAL file needs its -shm beside it, which a read-only folder cannot get. With
        # no -wal there, everything is in the file itself, and no writer can reach it
        # through a folder this process cannot write either: it is read as immutable.
        quiet = not self.path.with_name(self.path.name + "-wal").exists() and not os.access(self.path.parent, os.W_OK)
        conn = None
        try:
            conn = sqlite3.connect(
                f"{self.path.as_uri()}?{'immutable=1' if quiet else 'mode=ro'}",
                uri=True,
                timeout=BUSY_TIMEOUT_S,
                isolation_level=None,
            )
            conn.execute("SELECT 1 FROM sqlite_master")  # a database at all: its layout is checked next
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise self._failure(exc) from None
        return conn

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            # Read-only, a plain (deferred) transaction still reads one consistent state.
            self._conn.execute("BEGIN" if self.read_only else "BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                # SQLite ends some failed transactions itself (a full disk, an I/O error).
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    def _tables(self) -> set[str]:
        return {r[0] for r in self._fetch("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _insert(self, records: Sequence[Record]) -> None:
        # sqlite3 binds a bytearray at once but looks each bytes value up in its adapter
        # registry first: 0.7 µs of an append's 18 above signing, for three of them a row.
        self._conn.executemany(
            f"INSERT INTO ledger_entries ({INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (pulse, bytearray(raw), bytearray(leaf), bytearray(chain), kind, author, seq)
                for pulse, raw, leaf, chain, kind, author, seq in records
            ],
        )

    def _renew_entries(self, schema: Sequence[str]) -> None:
        # SQLite cannot drop a column's UNIQUE: the rows move to a table made anew.
        self._execute("ALTER TABLE ledger_entries RENAME TO ledger_entries_carried")
        for index in ("ledger_entries_kind", "ledger_entries_author"):  # they moved with it
            self._execute(f"DROP INDEX {index}")
        for statement in schema:
            self._execute(statement)
        for records in self._sequenced("ledger_entries_carried"):
            self._insert(records)
        self._execute("DROP TABLE ledger_entries_carried")

    def _find(self, low: bytes, high: bytes, limit: int) -> list[int]:
        # Each generation's stretch of the index in turn (see GENERATION).
        sql = f"""WITH RECURSIVE generation (n) AS (
                SELECT 0 UNION ALL SELECT n + 1 FROM generation
                WHERE n < (SELECT max(pulse) >> {GENERATION} FROM ledger_entries))
            SELECT pulse FROM generation CROSS JOIN ledger_entries ON pulse >> {GENERATION} = n
            WHERE substr(leaf, 1, 8) >= ? AND substr(leaf, 1, 8) <= ? AND leaf >= ? AND leaf <= ?
            ORDER BY pulse LIMIT ?"""
        return [r[0] for r in self._fetch(sql, [low[:8], high[:8], low, high, limit])]

    def _failure(self, exc: Exception) -> LedgerError:
        # The primary result code: the low byte of the extended one sqlite3 reports.
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return LedgerError(f"the ledger at {self.path} is busy ({exc}); try again")
        if code == sqlite3.SQLITE_READONLY:
            return LedgerError(
                f"the ledger at {self.path} is read-only here ({exc}): this command needs to write to it"
            )
        undecodable = _UNDECODABLE.match(str(exc))
        if undecodable:  # sqlite3's own error, with no code, and the bytes it could not decode
            return self._damaged(f"holds bytes that are not UTF-8 text in its {undecodable.group(1)} column")
        if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return DamagedStore(
                f"the ledger file {self.path} is damaged ({exc}): restore it from a backup, or rebuild the "
                "log from an export with `agentd ledger import` in a fresh home"
            )
        return LedgerError(f"the ledger at {self.path} failed ({exc}); check the file, its folder and the disk")


def _use_wal(conn: sqlite3.Connection) -> None:
    """Puts the file in WAL mode (it stays so). While another process does the same to a
    new file, SQLite answers busy at once rather than calling the busy handler, so the
    wait the handler would have made is made here."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(WAL_RETRY_S)
