"""The home's ledger as the server's threads use it.

A store's connection belongs to the thread that opened it (SQLite's rule), and a
`Ledger` keeps the log's fold between appends, so each reading thread opens its own
ledger without the log's key, and every write (appends, signing checkpoints) runs on
one thread that holds the only ledger with the key. Entries posted while that thread
is busy are recorded together, in one transaction (see `append`).

What one wallet may have the log store through the server is bounded by a token bucket
per author (`Rates`): RATE entries a second on average, BURST at once, from
`[serve] entries_per_second` and `entries_burst` in config.toml when set.
"""

from __future__ import annotations

import math
import queue
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from agentd.app.ledger import open_ledger, rule_set
from agentd.errors import AgentdError
from agentd.home import Home
from ledger import Entry, Ledger, LedgerError, Recorder, open_store

T = TypeVar("T")
BATCH = 256  # entries recorded in one transaction at most
# Entries one author may have recorded through POST /v1/entries (a refusal kept counts as
# one): this many a second on average, and BURST at once. With the 64 kB cap on a posted
# entry, whose refusal holds it in base64 (117 kB), one wallet makes the log store at most
# about 234 kB a second, 2.3 MB at once.
RATE = 2.0
BURST = 20
SWEEP = 1024  # buckets held before full ones are looked for
# How the ledger names the entry of a batch that was refused (see ledger.log).
_BLAMED = re.compile(r"entry (\d+) (?:of \d+ \([^)]*\): |refused: )(.*)", re.S)


@dataclass(frozen=True)
class Reader:
    """One thread's view of the log: its rows and tiles as stored, and proofs over them."""

    store: Recorder
    ledger: Ledger


class Rates:
    """A token bucket per author: `take` spends one of its tokens, which come back at
    `rate` a second up to `burst`; `give_back` returns one for an entry that recorded
    nothing (refused without a refusal kept), so replaying a wallet's recorded entries,
    which anyone can read, never spends its tokens. A bucket that has filled again is
    forgotten, so keys made by the thousand leave nothing behind."""

    def __init__(self, rate: float = RATE, burst: int = BURST, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst = rate, burst
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # author: (tokens, when counted)
        self._sweep_at, self._swept = SWEEP, clock()

    @classmethod
    def of(cls, home: Home) -> Rates:
        """The rates of [serve] entries_per_second and entries_burst in config.toml, or the defaults."""
        rate = home.setting("serve", "entries_per_second")
        burst = home.setting("serve", "entries_burst")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0):
            raise AgentdError(f"{home.config_path}: [serve] entries_per_second must be a number above 0, not {rate!r}")
        if burst is not None and (isinstance(burst, bool) or not isinstance(burst, int) or burst < 1):
            raise AgentdError(
                f"{home.config_path}: [serve] entries_burst must be a whole number of 1 or more, not {burst!r}"
            )
        return cls(RATE if rate is None else float(rate), BURST if burst is None else burst)

    def take(self, author: str) -> float | None:
        """Spends one of `author`'s tokens; None when it had one, else the seconds until it has."""
        with self._lock:
            now = self._clock()
            tokens = self._tokens(author, now)
            if tokens < 1:
                return (1 - tokens) / self.rate
            self._buckets[author] = (tokens - 1, now)
            held = len(self._buckets)
            if held >= self._sweep_at or (held > SWEEP and now - self._swept >= self.burst / self.rate):
                self._sweep(now)
            return None

    def give_back(self, author: str) -> None:
        with self._lock:
            now = self._clock()
            tokens = self._tokens(author, now) + 1
            if tokens >= self.burst:
                self._buckets.pop(author, None)
            else:
                self._buckets[author] = (tokens, now)

    @property
    def tracked(self) -> int:
        """The authors whose buckets are held in memory: those not full, and full ones until the next sweep."""
        with self._lock:
            return len(self._buckets)

    def _tokens(self, author: str, now: float) -> float:
        found = self._buckets.get(author)
        if found is None:
            return float(self.burst)
        tokens, then = found
        return min(float(self.burst), tokens + (now - then) * self.rate)

    def _sweep(self, now: float) -> None:
        """Forgets the full buckets. The next sweep comes when those left have doubled, or
        once a bucket emptied now would have filled again: memory follows the authors of
        the last moments, not of every key ever seen."""
        for author in [a for a in self._buckets if self._tokens(a, now) >= self.burst]:
            del self._buckets[author]
        self._sweep_at, self._swept = max(SWEEP, 2 * len(self._buckets)), now

    def wording(self, author: str, wait: float) -> str:
        return (
            f"too many entries from wallet {author}: this server records {self.burst} at once from one wallet, "
            f"then {self.rate:g} a second; post again in {retry_after(wait)} s"
        )


def retry_after(wait: float) -> int:
    """The whole seconds of a Retry-After header that cover `wait`."""
    return max(1, math.ceil(wait))


class Ledgers:
    def __init__(self, home: Home) -> None:
        self.home = home
        self.rates = Rates.of(home)  # of entries posted, per author: read first, so a wrong setting starts nothing
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
            # One entry broke a rule (its refusal is recorded when the log knows its author,
            # as it would be alone): it hears why, in the words it would have heard alone
            # (and the error's type, which says whether a refusal was recorded); the others go on.
            bad = int(blamed.group(1)) - 1
            batch[bad][1].set_exception(type(exc)(blamed.group(2)))
            self._record(ledger, batch[:bad] + batch[bad + 1 :])

    def close(self) -> None:
        """Lets the write under way finish, then closes the writing ledger on its own
        thread. Readers hold read-only connections, which only their own threads may
        close: they go with those threads, and nothing of theirs is left unwritten."""
        self._writes.submit(self._writer.close).result()
        self._writes.shutdown(wait=True)
