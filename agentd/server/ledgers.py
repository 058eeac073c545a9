"""The home's ledger as the server's threads use it.

A store's connection belongs to the thread that opened it (SQLite's rule), and a
`Ledger` keeps the log's fold between appends, so each reading thread opens its own
ledger without the log's key, and every write (appends, signing checkpoints) runs on
one thread that holds the only ledger with the key: appends reach the store one at a
time in this process, as they would from as many separate processes.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, TypeVar

from agentd.app.ledger import open_ledger, rule_set
from agentd.home import Home
from ledger import Ledger, Recorder, open_store

T = TypeVar("T")


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

    def close(self) -> None:
        """Lets the write under way finish, then closes the writing ledger on its own
        thread. Readers hold read-only connections, which only their own threads may
        close: they go with those threads, and nothing of theirs is left unwritten."""
        self._writes.submit(self._writer.close).result()
        self._writes.shutdown(wait=True)
