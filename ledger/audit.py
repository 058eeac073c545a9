"""Verifying a whole log from its store, as an auditor would: trust nothing stored.

Every entry's bytes are rehashed, reparsed in canonical form and their signature
checked (in worker processes when asked), the rules are replayed in Pulse order, the
tree is rebuilt and held against the head, the log's own checkpoints and any checkpoint
the auditor brings, and the store's snapshot is held against the fold at its size
(appends start from it; a snapshot that disagrees means the store is corrupt). The
report names the first bad Pulse and why.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ledger import checkpoint as notes
from ledger import merkle
from ledger import snapshot as snapshots
from ledger.entry import Entry, leaf_hash
from ledger.errors import LedgerError
from ledger.rules import RuleSet, State
from ledger.store import CHAIN_START, Head, Recorder, Row, Snapshot, chain, pages

CHUNK = 1000
PROGRESS_EVERY = 10_000

# An entry's kind, author, at and body: what a worker sends back for each good entry.
Fields = tuple[str, str, str, dict[str, Any]]


@dataclass(frozen=True)
class Problem:
    """The first thing found wrong; `pulse` is None when no single entry can be blamed
    (a head or checkpoint that no prefix of the log matches)."""

    pulse: int | None
    reason: str

    def __str__(self) -> str:
        return f"Pulse {self.pulse}: {self.reason}" if self.pulse else self.reason


@dataclass
class VerifyReport:
    """What an audit found: `size` entries checked good (all of them when `ok`), the
    root they hash to, the sizes of the checkpoints the log was shown to extend, and the
    size of the store's snapshot when it was found to agree with the replay."""

    size: int = 0
    root: bytes = merkle.EMPTY_ROOT
    signatures: int = 0
    checkpoints: list[int] = field(default_factory=list)
    problem: Problem | None = None
    snapshot: int | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "size": self.size,
            "root": self.root.hex(),
            "signatures": self.signatures,
            "checkpoints": self.checkpoints,
            "snapshot": self.snapshot,
            "first_bad_pulse": self.problem.pulse if self.problem else None,
            "problem": self.problem.reason if self.problem else None,
        }


def audit(
    store: Recorder,
    rules: RuleSet,
    *,
    jobs: int = 1,
    checkpoint: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> VerifyReport:
    """Recomputes everything about the log in `store`; see the module docstring."""
    # Checkpoints and the snapshot first, then the head: on a live log, each then covers
    # no more than the head, and rows appended after it are left for the next audit.
    signed = store.checkpoints()
    snapshot = store.snapshot()
    head = store.head()
    replay = _Replay(rules, snapshot)
    with _Checker(jobs) as check:
        for row, checked in check(_upto(pages(store), head.size)):
            if not replay.step(row, checked):
                break
            if progress and row.pulse % PROGRESS_EVERY == 0:
                progress(row.pulse)
    size = replay.state.size
    report = VerifyReport(size, replay.frontier.root(), size)
    notes_to_check = [*signed, checkpoint] if checkpoint else signed
    report.problem = replay.problem or _tree(replay, head, notes_to_check, report) or _snapshot(replay, report)
    return report


def _upto(rows: Iterable[Row], size: int) -> Iterator[Row]:
    for row in rows:
        if row.pulse > size:
            return
        yield row


class _Replay:
    """Folds checked entries in Pulse order, keeping what the tree checks need."""

    def __init__(self, rules: RuleSet, snapshot: Snapshot | None) -> None:
        self.rules = rules
        self.state = State()
        self.frontier = merkle.Frontier()
        self.chain = CHAIN_START
        self.leaves: list[bytes] = []
        self.public_key: bytes | None = None
        self.problem: Problem | None = None
        # An intact snapshot of another rule set is left alone: no ledger with these rules uses it.
        foreign = snapshot is not None and snapshot.rules != rules.fingerprint and snapshots.intact(snapshot)
        self.snapshot = None if foreign else snapshot
        # How the snapshot differs from the fold at its size; None until the replay gets there.
        self.snapshot_differs: str | None = None
        self.snapshot_compared = False

    def step(self, row: Row, checked: Entry | str) -> bool:
        expected = self.state.size + 1
        if row.pulse != expected:
            return self._fail(expected, f"missing: the store has no Pulse {expected} (its next is {row.pulse})")
        self.chain = chain(self.chain, row.leaf)
        if self.chain != row.chain:
            return self._fail(
                row.pulse,
                "out of place: the entries up to here are not the ones recorded when it was appended "
                "(entries were removed, inserted, swapped or replaced here)",
            )
        if isinstance(checked, str):
            return self._fail(row.pulse, checked)
        if (row.kind, row.author) != (checked.kind, checked.author):
            return self._fail(row.pulse, "the store's kind and author columns disagree with the entry's bytes")
        checked.pulse = row.pulse
        try:
            self.rules.apply(self.state, checked)
        except LedgerError as exc:
            return self._fail(row.pulse, f"breaks a rule: {exc}")
        if row.pulse == 1:
            self.public_key = checked.public_key
        self.frontier.append(row.leaf)
        self.leaves.append(row.leaf)
        if self.snapshot is not None and row.pulse == self.snapshot.size:
            self.snapshot_differs = snapshots.disagreement(self.snapshot, self.state, self.frontier, self.chain)
            self.snapshot_compared = True
        return True

    def _fail(self, pulse: int, reason: str) -> bool:
        self.problem = Problem(pulse, reason)
        return False


def _tree(replay: _Replay, head: Head, checkpoints: list[str], report: VerifyReport) -> Problem | None:
    size, root = replay.state.size, replay.frontier.root()
    if size < head.size:
        return Problem(size + 1, f"missing: the head records {head.size} entries but the store holds {size} (truncated)")
    if root != head.root:
        return Problem(None, "the entries do not hash to the root the head records: the head was altered")
    for note in checkpoints:
        problem = _consistent(replay, note, size, root)
        if problem:
            return problem
        report.checkpoints.append(notes.parse(note).size)
    return None


def _snapshot(replay: _Replay, report: VerifyReport) -> Problem | None:
    """Whether the store's snapshot is the fold of the log at its size."""
    stored = replay.snapshot
    if stored is None:
        return None
    if not replay.snapshot_compared:
        held = f"the log holds {replay.state.size}"
        return Problem(None, f"the store's snapshot describes {stored.size} entries and {held}: the store is corrupt")
    if replay.snapshot_differs:
        return Problem(
            None,
            f"the store's snapshot of the first {stored.size} entries disagrees with the replay: "
            f"{replay.snapshot_differs}; the store is corrupt",
        )
    report.snapshot = stored.size
    return None


def _consistent(replay: _Replay, note: str, size: int, root: bytes) -> Problem | None:
    """Whether the log extends the checkpoint `note`, which its own key must have signed."""
    state = replay.state
    if replay.public_key is None or state.origin is None:
        return Problem(1, "missing: the log has no genesis entry, so no key of its own to check a checkpoint by")
    try:
        cp = notes.verify(note, replay.public_key, state.origin)
    except LedgerError as exc:
        return Problem(None, f"checkpoint refused: {exc}")
    if cp.size > size:
        return Problem(size + 1, f"missing: a checkpoint of this log covers {cp.size} entries, the log holds {size} (truncated)")
    try:
        proof = merkle.consistency_proof(replay.leaves, cp.size) if cp.size < size else []
        merkle.verify_consistency(cp.size, size, proof, cp.root, root)
    except LedgerError:
        return Problem(None, f"not consistent with the checkpoint at size {cp.size}: entries up to Pulse {cp.size} were rewritten")
    return None


class _Checker:
    """Checks rows' bytes and signatures, in this process or in `jobs` worker processes."""

    def __init__(self, jobs: int) -> None:
        self._pool = _pool(jobs) if jobs > 1 else None
        self._window = 2 * jobs

    def __enter__(self) -> Callable[[Iterable[Row]], Iterator[tuple[Row, Entry | str]]]:
        return self._run

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()

    def _run(self, rows: Iterable[Row]) -> Iterator[tuple[Row, Entry | str]]:
        if self._pool is None:
            for row in rows:
                yield row, check_row(row.raw, row.leaf)
            return
        pending: deque[tuple[list[Row], Any]] = deque()
        for chunk in _chunks(rows):
            pending.append((chunk, self._pool.apply_async(check_rows, ([(r.raw, r.leaf) for r in chunk],))))
            if len(pending) >= self._window:
                done, result = pending.popleft()
                yield from _rebuilt(done, result.get())
        while pending:
            done, result = pending.popleft()
            yield from _rebuilt(done, result.get())


def check_row(raw: bytes, leaf: bytes) -> Entry | str:
    """The entry in `raw`, or why it is bad."""
    if leaf_hash(raw) != leaf:
        return "its bytes changed after it was appended (they no longer hash to its recorded leaf)"
    try:
        return Entry.parse(raw, leaf=leaf)
    except LedgerError as exc:
        return str(exc)


def check_rows(rows: list[tuple[bytes, bytes]]) -> list[Fields | str]:
    """A worker's share: the entries' fields without their bytes, which the caller has."""
    checked = (check_row(raw, leaf) for raw, leaf in rows)
    return [c if isinstance(c, str) else (c.kind, c.author, c.at, c.body) for c in checked]


def _rebuilt(rows: list[Row], checked: list[Fields | str]) -> Iterator[tuple[Row, Entry | str]]:
    for row, c in zip(rows, checked):
        yield row, c if isinstance(c, str) else Entry(row.raw, *c, row.leaf)


def _chunks(rows: Iterable[Row]) -> Iterator[list[Row]]:
    chunk: list[Row] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _pool(jobs: int) -> Any:
    # fork, not spawn or forkserver: those re-run the __main__ module in every worker, and
    # `python -m agentd` would start the CLI again there. Workers only hash and check
    # bytes they are sent; they never touch the inherited database connection.
    return multiprocessing.get_context("fork").Pool(jobs)
