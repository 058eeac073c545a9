"""Pages of the log's entries as JSON lines, kept once written: what `GET /v1/entries?as=jsonl`
serves from.

The log is cut into bundles of BUNDLE entries from Pulse 1 (bundle k holds Pulses
k*BUNDLE+1 to (k+1)*BUNDLE). A full bundle never changes, so its JSON lines (`entry_lines`)
are written once, into a file of their own in the home (PAGES_FILE, SQLite, whatever store
the ledger is on), the first time a page asks for it or when the daemon's filler reaches
it; a page of the log then costs a read of a few kept blobs, not a read and a line written
for each of its rows. Each kept bundle carries the running digest (chain) of its last
entry, and is served only while the ledger's own row at that Pulse has the same: a ledger
replaced under the file (restored, made anew) gets its pages written again, never
another log's. The file is a cache, as large as the entries it holds: it can be removed at
any time and is written again as pages are asked for. One that cannot be used (a
read-only home, a full disk, a write that waited too long on another's) leaves the pages
served as they were, from the rows, for RETRY seconds; then it is tried again.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger import Recorder, entry_lines

BUNDLE = 250  # entries a kept page holds: the API's PIECE, so a page of 1,000 rows is four
PAGES_FILE = "entry-pages.db"
BUSY_MS = 5_000  # how long a thread waits for another's write to the file
RETRY = 60.0  # seconds the file is left alone after it could not be used: a disk filled may be emptied
log = logging.getLogger("agentd.serve")  # the daemon's log


class EntryPages:
    """The kept bundles of one home's log, read and written by any thread (a connection each)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._resting_until = 0.0  # the file could not be used: left alone until then (monotonic)
        self._filled = 0  # bundles before this one the filler found kept

    def lines(self, store: Recorder, pulse: int, limit: int) -> tuple[bytes, int] | None:
        """Up to `limit` rows from Pulse `pulse` on, no further than the end of its bundle,
        as JSON lines with how many; None when that bundle is not full yet (its rows are
        read as they are, as they are when nothing can be kept)."""
        index, offset = divmod(pulse - 1, BUNDLE)
        last = store.row((index + 1) * BUNDLE) if self._conn() is not None else None
        if last is None:
            return None
        found = self._found(index, last.chain, "lines") or self._keep(store, index, last.chain)
        count = min(limit, BUNDLE - offset)
        return _slice(found, offset, count), count

    def fill(self, store: Recorder, stop: Callable[[], bool]) -> int:
        """Keeps each full bundle not kept yet, from the first this process has not seen
        kept, until `stop` says to; how many it wrote."""
        written = 0
        while not stop():
            last = store.row((self._filled + 1) * BUNDLE)
            if last is None or self._conn() is None:
                break
            if self._found(self._filled, last.chain, "1") is None:  # its chain alone read, not its lines
                self._keep(store, self._filled, last.chain)
                written += 1
            self._filled += 1
        return written

    def _found(self, index: int, chain: bytes, column: str) -> Any:
        """`column` of bundle `index` as kept, when it was kept with the ledger's `chain`."""
        conn = self._conn()
        if conn is None:
            return None
        try:
            found = conn.execute(f"SELECT chain, {column} FROM entry_pages WHERE idx = ?", (index,)).fetchone()
        except sqlite3.Error as exc:
            self._failed(exc)
            return None
        return found[1] if found is not None and found[0] == chain else None

    def _keep(self, store: Recorder, index: int, chain: bytes) -> bytes:
        rows = store.raw_rows(index * BUNDLE + 1, limit=BUNDLE)
        if len(rows) != BUNDLE or rows[-1][2] != chain:  # the log moved under the read: serve it, keep nothing
            return entry_lines(rows[:BUNDLE])
        written = entry_lines(rows)
        conn = self._conn()
        if conn is not None:
            try:
                conn.execute(
                    "INSERT OR REPLACE INTO entry_pages (idx, chain, lines) VALUES (?, ?, ?)", (index, chain, written)
                )
            except sqlite3.Error as exc:
                self._failed(exc)
        return written

    def _conn(self) -> sqlite3.Connection | None:
        if time.monotonic() < self._resting_until:
            return None
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS entry_pages (idx INTEGER PRIMARY KEY, chain BLOB NOT NULL, lines BLOB NOT NULL)"
                )
            except sqlite3.Error as exc:
                self._failed(exc)
                return None
            self._local.conn = conn
        return conn

    def _failed(self, exc: sqlite3.Error) -> None:
        if time.monotonic() >= self._resting_until:  # said once a rest, whatever threads fail in it
            log.warning(
                "the entry pages at %s cannot be used (%s): pages are read from the rows for %.0f s, then it is tried again",
                self.path,
                exc,
                RETRY,
            )
        self._resting_until = time.monotonic() + RETRY


def _slice(lines: bytes, skip: int, count: int) -> bytes:
    """`count` lines of `lines` after the first `skip`."""
    if skip == 0 and count == BUNDLE:
        return lines
    start = 0
    for _ in range(skip):
        start = lines.index(b"\n", start) + 1
    end = start
    for _ in range(count):
        end = lines.index(b"\n", end) + 1
    return lines[start:end]
