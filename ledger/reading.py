"""Reading a ledger: its entries, its state, its checkpoints and proofs over its tree.

A LedgerReader never writes (the start-up check and `verify` only read), so it is what
an auditor, a listing or a server's reading thread needs, on a store opened read-only
or not. The writing `Ledger` (ledger.log) builds on it: the fold it keeps up to date as
it appends is the one this class reads.

Opening a ledger reads a few rows whatever its size: the head, the highest Pulse and
the tiles of the tree's right edge. The fold is kept in memory: a new object starts
from the snapshot the store keeps and folds only the entries after it, and each read
folds in what other writers appended since. `state` hands out a read-only copy of it
(see ledger.readonly), made once per size of the log, so asking again costs nothing
until the log grows. The full recomputation is `verify`'s (see ledger.audit).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Self

from ledger import checkpoint as notes, merkle, tiles
from ledger.audit import VerifyReport, Witnessing, audit
from ledger.entry import Entry
from ledger.errors import VERIFY_HINT, LedgerError
from ledger.fold import Folder, Tip, read
from ledger.forks import ForkProof, fork_between
from ledger.proofs import ConsistencyProof, InclusionProof
from ledger.readonly import ReadOnlyState
from ledger.rules import RuleSet, State
from ledger.store import Recorder, pages
from ledger.stores import open_store

_CLAIM = re.compile(r"[0-9a-f]{4,64}")


class LedgerReader:
    """A signed append-only log kept in a store, read and folded under a rule set."""

    def __init__(self, store: Recorder, rules: RuleSet, *, check: bool = True) -> None:
        """`check` runs the start-up check (the head against the highest row and the
        stored tree); verify skips it."""
        self._store = store
        self._rules = rules
        self._folder = Folder(rules, store.url)
        # The fold of the log as this object last saw it: None until it is first needed,
        # and again after an append fails, since rules may have changed it before refusing.
        self._tip: Tip | None = None
        self._view: ReadOnlyState | None = None  # what `state` last handed out
        if check:
            self.check()

    @classmethod
    def open(cls, url: str, rules: RuleSet, *, check: bool = True) -> Self:
        """The ledger at `url`, its store opened for reading alone (see ledger.stores)."""
        return cls(open_store(url, read_only=True), rules, check=check)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        return self._store.url

    @property
    def size(self) -> int:
        return self._store.head().size

    @property
    def replayed(self) -> int:
        """Entries this object folded from the store rather than appended itself: what a
        caller can see of how much a new object had to replay."""
        return self._folder.replayed

    def check(self) -> None:
        """The start-up check, a few reads whatever the size: the store holds no row past
        its head and none is missing at its end, and the stored tree hashes to the head."""
        # Under the write lock, so an append by another process cannot fall between the reads.
        with self._store.transaction() as txn:
            head, last = txn.head, txn.last_pulse()
            root = tiles.Tree(txn.tile, head.size).root()
        if last != head.size:
            raise LedgerError(
                f"the ledger at {self.url} holds rows up to Pulse {last} but its head records {head.size} entries; {VERIFY_HINT}"
            )
        if root != head.root:
            raise LedgerError(f"the stored tree of the ledger at {self.url} does not hash to its head; {VERIFY_HINT}")

    # Entries

    def get(self, pulse: int) -> Entry:
        row = self._store.row(pulse)
        if row is None:
            raise LedgerError(f"no Pulse {pulse}: the log holds {self.size} entries")
        return read(row)

    def find(self, claim: str) -> Entry:
        """The entry whose claim id is `claim` or starts with it (at least 4 hex digits)."""
        prefix = claim.strip().lower()
        if not _CLAIM.fullmatch(prefix):
            raise LedgerError(f"{claim!r} is not a claim id: give at least 4 of its hex digits")
        low = bytes.fromhex((prefix + "0" * 64)[:64])
        high = bytes.fromhex((prefix + "f" * 64)[:64])
        found = self._store.find(low, high, 2)
        if not found:
            raise LedgerError(f"no claim {prefix} on the log")
        if len(found) > 1:
            raise LedgerError(
                f"claim prefix {prefix} is ambiguous (Pulses {found[0]}, {found[1]}, …): give more digits"
            )
        return self.get(found[0])

    def entries(self, kind: str | None = None, start: int = 1, author: str | None = None) -> Iterator[Entry]:
        for row in pages(self._store, max(start, 1), kind=kind, author=author):
            yield read(row)

    def entries_back(self, end: int, limit: int, kind: str | None = None, author: str | None = None) -> list[Entry]:
        """The last `limit` matching entries at or before Pulse `end`, newest first, read
        from the end of the log (a listing's last page, or the page before one)."""
        return [read(row) for row in self._store.rows_back(end, kind=kind, author=author, limit=limit)]

    @property
    def origin(self) -> str:
        """The log's name, which every entry must carry: its genesis entry fixed it."""
        return self._genesis_entry().log

    @property
    def public_key(self) -> bytes:
        """The log's own key, as its genesis entry names it: what checks its checkpoints."""
        return self._genesis_entry().public_key

    def _genesis_entry(self) -> Entry:
        row = self._store.row(1)
        if row is None:
            raise LedgerError("the log is empty: it is named by its first entry, which the log's key signs")
        return read(row)

    # The fold

    def state(self) -> State:
        """The fold of every entry recorded so far, read-only all the way down (see
        ledger.readonly): the same object again until the log grows. `State.copy` of it
        is one to change."""
        tip = self._current()
        if self._view is None or self._view.size != tip.state.size:
            self._view = ReadOnlyState(tip.state)
        return self._view

    def balance(self, wallet_id: str) -> int:
        """What wallet `wallet_id` holds now, in cents, without copying the fold."""
        return self._current().state.balance(wallet_id)

    def knows(self, author: str) -> bool:
        """Whether the log knows wallet `author` (see `knows`): the refusals of entries
        signed elsewhere by a wallet it does not know are not recorded."""
        return knows(self._current().state, author, self._store)

    def next_sequence(self, author: str) -> int:
        """The sequence number `author`'s next entry must carry, for entries signed
        elsewhere (append_raw); it is taken when one is recorded."""
        return self._current().state.sequences.get(author, 0) + 1

    @property
    def snapshot_size(self) -> int:
        """The number of entries the store's snapshot folds (0 when it holds none)."""
        return self._store.snapshot_extent()[0]

    def _current(self) -> Tip:
        """The fold advanced by what others appended since, read without the write lock."""
        tip, self._tip = self._tip, None
        if tip is None:
            tip, _ = self._folder.resume(self._store.snapshot(), lambda start: pages(self._store, start), None)
        else:
            self._folder.advance(tip, pages(self._store, tip.frontier.size + 1))
        self._tip = tip
        return tip

    # Checkpoints, as signed

    def latest_checkpoint(self) -> str | None:
        """The last checkpoint the log signed, with any cosignatures, without signing."""
        last = self._store.latest_checkpoint()
        return last.note if last else None

    def checkpoints(self) -> list[str]:
        return [c.note for c in self._store.checkpoints()]

    def checkpoint_of(self, size: int) -> str | None:
        """The checkpoint the log signed of its tree of `size` entries, if it signed one."""
        found = self._store.checkpoint(size)
        return found.note if found else None

    # Proofs

    def root(self, size: int | None = None) -> bytes:
        size = self._size_arg(size)
        return tiles.Tree(self._store.tile, size).root()

    def inclusion_proof(self, pulse: int, size: int | None = None) -> InclusionProof:
        size = self._size_arg(size)
        if not 1 <= pulse <= size:
            raise LedgerError(f"Pulse {pulse} is not in a tree of {size} entries")
        tree = tiles.Tree(self._store.tile, size)
        path = merkle.inclusion_path(pulse - 1, size, tree.subtree)
        return InclusionProof(pulse, size, tree.node(0, pulse - 1), tree.root(), path)

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> ConsistencyProof:
        new_size = self._size_arg(new_size)
        if not 1 <= old_size <= new_size:
            raise LedgerError(
                f"a consistency proof runs from a size of 1 or more up to {new_size}, not from {old_size}"
            )
        tree = tiles.Tree(self._store.tile, new_size)
        path = merkle.consistency_path(old_size, new_size, tree.subtree) if old_size < new_size else []
        return ConsistencyProof(old_size, new_size, tree.subtree(0, old_size), tree.root(), path)

    def fork_proof(self, one: str, other: str) -> ForkProof | None:
        """The proof that two signed checkpoints of this log conflict, or None when they
        are consistent. Of two sizes, this ledger must hold the larger one's tree: it
        gives the consistency proof."""
        smaller, larger = sorted((notes.parse(one), notes.parse(other)), key=lambda c: c.size)
        if smaller.size < larger.size and (larger.size > self.size or self.root(larger.size) != larger.root):
            raise LedgerError(
                f"this ledger's tree of {larger.size} entries is not the checkpoint's: a fork proof comes from the "
                "ledger that holds the larger checkpoint's tree"
            )
        found = fork_between(one, other, self.consistency_proof)
        if found is not None:
            found.check(self.public_key)
        return found

    def _size_arg(self, size: int | None) -> int:
        current = self.size
        if size is None:
            return current
        if not 1 <= size <= current:
            raise LedgerError(f"size {size} is outside the log, which holds {current} entries")
        return size

    # Auditing

    def verify(
        self,
        jobs: int = 1,
        checkpoint: str | None = None,
        progress: Callable[[int], None] | None = None,
        witnesses: Witnessing | None = None,
    ) -> VerifyReport:
        """Rechecks every entry, rule, the tree and the checkpoints; see ledger.audit."""
        return audit(self._store, self._rules, jobs=jobs, checkpoint=checkpoint, progress=progress, witnesses=witnesses)


def knows(state: State, author: str, store: Recorder) -> bool:
    """Whether the log of `state`, kept in `store`, knows wallet `author`: the log's own
    key, a wallet ever funded (it has a balance, if only 0 left), or one with an entry of
    its own on the log. Sequence numbers alone do not tell: a refusal spends one, and is
    the log key's entry, so the store's author index is asked whether any is the wallet's."""
    if author == state.authority or author in state.balances:
        return True
    return state.sequences.get(author, 0) > 0 and bool(store.rows(1, author=author, limit=1))
