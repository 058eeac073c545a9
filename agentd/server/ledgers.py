"""The home's ledger as the server's threads use it.

A store's connection belongs to the thread that opened it (SQLite's rule), and a
`Ledger` keeps the log's fold between appends, so each reading thread opens its own
ledger without the log's key, and every write (appends, signing checkpoints) runs on
one thread that holds the only ledger with the key. Entries posted while that thread
is busy are recorded together, in one transaction (see `append`).
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from agentd.app.ledger import open_ledger, rule_set
from agentd.home import Home
from ledger import Entry, Ledger, LedgerError, Recorder, open_store

T = TypeVar("T")
BATCH = 256  # entries recorded in one transaction at most
# How the ledger names the entry of a batch that was refused (see ledger.log).
_BLAMED = re.compile(r"entry (\d+) (?:of \d+ \([^)]*\): |refused: )(.*)", re.S)


@dataclass(frozen=True)
class Reader:
    """One thread's view of the log: its rows and tiles as stored, and proofs over them."""

    store: Recorder
    ledger: Ledger


class Ledgers:
    def __init__(self, home: Home) -> None:
        self.home = home
        self._local = threading.local()
        self._writes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-writer")
        self._queued: queue.SimpleQueue[tuple[bytes, Future[Entry]]] = queue.SimpleQueue()
        # Opened on the writing thread, with the start-up check, before anything is served.
        self._writer: Ledger = self._writes.submit(open_ledger, home).result()

    def reader(self) -> Reader:
        """This thread's store and ledger, for reading; opened on first use."""
        found: Reader | None = getattr(self._local, "reader", None)
        if found is None:
            store = open_store(self.home.ledger_url, read_only=True)
            found = Reader(store, Ledger(store, rule_set(), check=False))
            self._local.reader = found
        return found

    def write(self, work: Callable[[Ledger], T]) -> T:
        """Runs `work` on the writing thread with the ledger that holds the log's key."""
        return self._writes.submit(work, self._writer).result()

    def append(self, raw: bytes) -> Entry:
        """Records one entry signed elsewhere. Entries posted at once are recorded in one
        transaction (one commit for many, as a database's group commit); when the batch
        is refused, each is tried alone, so each gets its own answer and only a bad
        entry is refused."""
        done: Future[Entry] = Future()
        self._queued.put((raw, done))
        self._writes.submit(self._drain, self._writer)
        return done.result()

    def _drain(self, ledger: Ledger) -> None:
        batch: list[tuple[bytes, Future[Entry]]] = []
        while len(batch) < BATCH:
            try:
                batch.append(self._queued.get_nowait())
            except queue.Empty:
                break
        self._record(ledger, batch)

    def _record(self, ledger: Ledger, batch: list[tuple[bytes, Future[Entry]]]) -> None:
        if not batch:
            return  # an earlier drain took these entries
        try:
            for entry, (_, done) in zip(ledger.append_raw([raw for raw, _ in batch]), batch, strict=False):
                done.set_result(entry)
            return
        except LedgerError as exc:
            if len(batch) == 1:
                batch[0][1].set_exception(exc)
                return
            blamed = _BLAMED.match(str(exc))
            if blamed is None:  # the batch as a whole (the same entry twice): each alone
                for item in batch:
                    self._record(ledger, [item])
                return
            # One entry broke a rule (its refusal is recorded, as it would be alone): it
            # hears why, in the words it would have heard alone; the others go on.
            bad = int(blamed.group(1)) - 1
            batch[bad][1].set_exception(type(exc)(blamed.group(2)))
            self._record(ledger, batch[:bad] + batch[bad + 1 :])

    def close(self) -> None:
        """Lets the write under way finish, then closes the writing ledger on its own
        thread. Readers hold read-only connections, which only their own threads may
        close: they go with those threads, and nothing of theirs is left unwritten."""
        self._writes.submit(self._writer.close).result()
        self._writes.shutdown(wait=True)
