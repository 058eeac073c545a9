"""Verifying a whole log from its store, as an auditor would: trust nothing stored.

The rows are streamed in Pulse order, so memory stays flat however long the log.
Every entry's bytes are rehashed, reparsed in canonical form and their signature
checked (in worker processes when asked), the ledger's rules and each kind's are
replayed (an entry for another log, a sequence number reused, skipped or out of order,
the same entry twice), and the tree is rebuilt: each leaf and upper node is held
against the tiles proofs are served from, the root against the head, and each
checkpoint the log signed, and any the auditor brings, as the replay reaches its size.
Rows beyond the head are found, and the store's snapshot is held against the fold at
its size (appends start from it; a snapshot that disagrees means the store is corrupt).
Asked for witnesses, the audit also requires a checkpoint carrying enough valid
cosignatures. The report names the first bad Pulse and why.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import orjson

from ledger import checkpoint as notes, cosignature, merkle, snapshot as snapshots, tiles
from ledger.entry import Entry, leaf_hash
from ledger.errors import RESTORE_HINT, LedgerError
from ledger.fold import fold
from ledger.rules import RuleSet, State
from ledger.store import CHAIN_START, Head, Recorder, Row, Snapshot, chain, row_pages, tile_pages

PROGRESS_EVERY = 10_000
CHUNK = 250  # rows a worker is sent at once

# An entry's kind, author, at, log, seq and body: what a worker sends back for each good entry.
Fields = tuple[str, str, str, str, int, dict[str, Any]]


@dataclass(frozen=True)
class Problem:
    """The first thing found wrong; `pulse` is None when no single entry can be blamed
    (a head or checkpoint that no prefix of the log matches)."""

    pulse: int | None
    reason: str

    def __str__(self) -> str:
        return f"Pulse {self.pulse}: {self.reason}" if self.pulse else self.reason


@dataclass(frozen=True)
class Witnessing:
    """The witnesses an auditor trusts, as (name, Ed25519 public key), and how many of
    them must have cosigned a checkpoint of the log."""

    keys: list[tuple[str, bytes]]
    quorum: int

    def __post_init__(self) -> None:
        # One key under two names would count as two cosigners toward the quorum.
        seen: dict[bytes, str] = {}
        for name, key in self.keys:
            if key in seen:
                raise notes.CheckpointError(
                    f"the witnesses {seen[key]} and {name} have one key: trust each witness once, under one name"
                )
            seen[key] = name


@dataclass
class VerifyReport:
    """What an audit found: `size` entries checked good (all of them when `ok`), the
    root they hash to, the sizes of the checkpoints the log was shown to extend, the
    size of the store's snapshot when it was found to agree with the replay, and the
    largest checkpoint cosigned by the witnesses asked for."""

    size: int = 0
    root: bytes = merkle.EMPTY_ROOT
    signatures: int = 0
    checkpoints: list[int] = field(default_factory=list)
    problem: Problem | None = None
    snapshot: int | None = None
    witnessed: int | None = None
    cosigners: list[str] = field(default_factory=list)

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
            "witnessed": self.witnessed,
            "cosigners": self.cosigners,
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
    witnesses: Witnessing | None = None,
) -> VerifyReport:
    """Recomputes everything about the log in `store`; see the module docstring."""
    # Checkpoints and the snapshot first, then the head: on a live log, each then covers
    # no more than the head, and rows appended after it are left for the next audit.
    signed = [c.note for c in store.checkpoints()]
    garbled = _garbled(signed)
    if garbled:  # a finding like any other: the store holds what its log's key never signed
        return VerifyReport(problem=Problem(None, garbled))
    snapshot = store.snapshot()
    head = store.head()
    replay = _Replay(
        rules, snapshot, [*signed, checkpoint] if checkpoint else signed, tiles_of(store), leaves_of(store)
    )
    with _Checker(jobs) as check:
        for page, checked in check(_upto(row_pages(store), head.size)):
            if not replay.steps(page, checked, progress):
                break
    size = replay.state.size
    report = VerifyReport(size, replay.frontier.root(), size)
    report.problem = (
        replay.problem
        or _tree(replay, head, store, report)
        or _snapshot(replay, report)
        or (_witnessed(replay, witnesses, report) if witnesses else None)
    )
    return report


def _garbled(notes_stored: list[str]) -> str | None:
    """Why the first stored checkpoint that is not a checkpoint note is not one; None when all are."""
    for i, note in enumerate(notes_stored, 1):
        try:
            notes.parse(note)
        except notes.CheckpointError as exc:
            return (
                f"stored checkpoint {i} of {len(notes_stored)} is not a checkpoint: {exc}; the store is damaged: "
                f"{RESTORE_HINT}"
            )
    return None


def _upto(pages: Iterable[list[Row]], size: int) -> Iterator[list[Row]]:
    """The pages' rows up to Pulse `size`; those beyond the head are _tree's to find."""
    for page in pages:
        if page[-1].pulse <= size:
            yield page
            continue
        within = page[: bisect_right(page, size, key=lambda row: row.pulse)]
        if within:
            yield within
        return


def tiles_of(store: Recorder) -> Callable[[int, int], bytes | None]:
    """The stored hash of each tree node of a tile level, read in order, a page at a time."""
    streams: dict[int, Iterator[tiles.Tile]] = {}
    current: dict[int, tiles.Tile] = {}

    def stored(level: int, index: int) -> bytes | None:
        number, offset = divmod(index, tiles.WIDTH)
        tile = current.get(level)
        while tile is None or tile.index < number:
            tile = next(streams.setdefault(level, tile_pages(store, level)), None)
            if tile is None:
                return None
            current[level] = tile
        if tile.index != number:
            return None
        return tile.hashes[offset * tiles.HASH : (offset + 1) * tiles.HASH] or None

    return stored


def leaves_of(store: Recorder) -> Iterator[bytes | None]:
    """The stored tree's leaf hashes in order, None for each one it lacks and past its
    end: the replay reads one an entry, so it takes them in order rather than by index."""
    index = 0
    for tile in tile_pages(store, 0):
        start = tile.index * tiles.WIDTH
        yield from repeat(None, start - index)
        hashes = tile.hashes
        for offset in range(0, tiles.WIDTH * tiles.HASH, tiles.HASH):
            yield hashes[offset : offset + tiles.HASH] or None
        index = start + tiles.WIDTH
    yield from repeat(None)


class _Replay:
    """Folds checked entries in Pulse order, keeping what the tree checks need."""

    def __init__(
        self,
        rules: RuleSet,
        snapshot: Snapshot | None,
        checkpoints: list[str],
        stored: Callable[[int, int], bytes | None],
        leaves: Iterator[bytes | None],
    ) -> None:
        self.rules = rules
        self.state = State()
        self.frontier = merkle.Frontier()
        self.completed = self.frontier.keep(tiles.HEIGHT)
        self.chain = CHAIN_START
        self.stored = stored
        self.leaves = leaves
        self.public_key: bytes | None = None
        self.problem: Problem | None = None
        # Checkpoints by size, each checked as the replay reaches it; those checked good.
        self.pending = sorted(((notes.parse(n).size, n) for n in checkpoints), reverse=True)
        self.held: list[tuple[int, str]] = []
        # An intact snapshot of another rule set is left alone: no ledger with these rules uses it.
        foreign = snapshot is not None and snapshot.rules != rules.fingerprint and snapshots.intact(snapshot)
        self.snapshot = None if foreign else snapshot
        # How the snapshot differs from the fold at its size; None until the replay gets there.
        self.snapshot_differs: str | None = None
        self.snapshot_compared = False

    def steps(self, rows: list[Row], checked: list[Entry | str], progress: Callable[[int], None] | None) -> bool:
        """Folds a page of rows; False at the first bad one."""
        for row, entry in zip(rows, checked, strict=False):
            if not self.step(row, entry):
                return False
            if progress and row.pulse % PROGRESS_EVERY == 0:
                progress(row.pulse)
        return True

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
        if row.kind != checked.kind or row.author != checked.author:
            return self._fail(row.pulse, "the store's kind and author columns disagree with the entry's bytes")
        checked.pulse = row.pulse
        try:
            fold(self.rules, self.state, checked)
        except LedgerError as exc:
            return self._fail(row.pulse, f"breaks a rule: {exc}")
        if next(self.leaves) != row.leaf:
            return self._fail(
                row.pulse,
                "out of place: the log's stored tree holds another entry at this Pulse (entries were swapped, "
                "inserted or removed here, and the running digests recomputed)",
            )
        if row.pulse == 1:
            self.public_key = checked.public_key
        self.frontier.append(row.leaf)
        # Most entries complete no stored node and reach no checkpoint or snapshot: those
        # checks are skipped by a test each, since this runs for every entry of the log.
        if self.completed and not self._tree_holds(row.pulse):
            return False
        if self.pending and self.pending[-1][0] == row.pulse and not self._checkpoints_hold():
            return False
        if self.snapshot is not None and row.pulse == self.snapshot.size:
            self.snapshot_differs = snapshots.disagreement(self.snapshot, self.state, self.frontier, self.chain)
            self.snapshot_compared = True
        return True

    def _tree_holds(self, pulse: int) -> bool:
        for height, index, digest in self.completed:
            if self.stored(height // tiles.HEIGHT, index) != digest:
                first = (index << height) + 1
                return self._fail(
                    first,
                    f"the log's stored tree disagrees with the entries from here to Pulse {pulse}: proofs served "
                    "from it are wrong",
                )
        self.completed.clear()
        return True

    def _checkpoints_hold(self) -> bool:
        size = self.state.size
        while self.pending and self.pending[-1][0] == size:
            _, note = self.pending.pop()
            problem = self._consistent(note)
            if problem:
                self.problem = problem
                return False
            self.held.append((size, note))
        return True

    def _consistent(self, note: str) -> Problem | None:
        """Whether the log as replayed so far is the tree `note` signs, by its own key."""
        problem = self.signed(note)
        if problem is None and notes.parse(note).root != self.frontier.root():
            size = self.state.size
            return Problem(
                None, f"not consistent with the checkpoint at size {size}: entries up to Pulse {size} were rewritten"
            )
        return problem

    def signed(self, note: str) -> Problem | None:
        """Whether the log's own key signed `note`, a checkpoint of this log."""
        if self.public_key is None or self.state.origin is None:
            return Problem(1, "missing: the log has no genesis entry, so no key of its own to check a checkpoint by")
        try:
            notes.verify(note, self.public_key, self.state.origin)
        except LedgerError as exc:
            return Problem(None, f"checkpoint refused: {exc}")
        return None

    def _fail(self, pulse: int, reason: str) -> bool:
        self.problem = Problem(pulse, reason)
        return False


def _tree(replay: _Replay, head: Head, store: Recorder, report: VerifyReport) -> Problem | None:
    size, root = replay.state.size, replay.frontier.root()
    if size < head.size:
        return Problem(
            size + 1, f"missing: the head records {head.size} entries but the store holds {size} (truncated)"
        )
    last = store.last_pulse()
    if last > head.size:
        return Problem(
            head.size + 1,
            f"beyond the head: the store holds rows up to Pulse {last} but its head records {head.size} entries "
            "(rows were added without an append; appends refuse to go on)",
        )
    if root != head.root:
        return Problem(None, "the entries do not hash to the root the head records: the head was altered")
    for pending_size, note in replay.pending:
        return replay.signed(note) or Problem(
            size + 1,
            f"missing: a checkpoint of this log covers {pending_size} entries, the log holds {size} (truncated)",
        )
    report.checkpoints = sorted(s for s, _ in replay.held)
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


def _witnessed(replay: _Replay, witnessing: Witnessing, report: VerifyReport) -> Problem | None:
    """The largest checkpoint the log was shown to extend that enough witnesses cosigned."""
    best: tuple[int, int, list[str]] = (0, 0, [])
    for size, note in replay.held:
        names = [name for name, key in witnessing.keys if cosignature.cosigned_by(note, name, key)]
        best = max(best, (len(set(names)), size, sorted(set(names))))
        if len(set(names)) >= witnessing.quorum and (report.witnessed or 0) < size:
            report.witnessed, report.cosigners = size, sorted(set(names))
    if report.witnessed is None:
        most = f"the most: {best[0]}, on the checkpoint at size {best[1]}" if best[1] else "none carries any"
        return Problem(
            None,
            f"no checkpoint of the log carries {witnessing.quorum} valid cosignatures of the "
            f"{len(witnessing.keys)} witnesses given ({most})",
        )
    return None


class _Checker:
    """Checks rows' bytes and signatures in `jobs` processes: this one and jobs - 1
    workers. This process also replays the rules, so it checks a page itself only
    while every worker has work queued: it never waits while a core is left idle, unless
    a worker the machine starves of CPU holds back so many pages checked here that
    memory would grow with the log; then it waits for that worker."""

    def __init__(self, jobs: int) -> None:
        self._pool = _pool(jobs - 1) if jobs > 1 else None
        self._window = 2 * (jobs - 1)
        self._most = 4 * jobs  # pages held, checked or queued

    def __enter__(self) -> Callable[[Iterable[list[Row]]], Iterator[tuple[list[Row], list[Entry | str]]]]:
        return self._run

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()

    def _run(self, pages: Iterable[list[Row]]) -> Iterator[tuple[list[Row], list[Entry | str]]]:
        if self._pool is None:
            for page in pages:
                yield page, [check_row(row.raw, row.leaf) for row in page]
            return
        # Pages in Pulse order, each with its workers' AsyncResult or the results checked here.
        # A page is split in parts of CHUNK rows: what is queued for the workers when the
        # rows run out is all this process waits for, so the less the better.
        pending: deque[tuple[list[Row], Any]] = deque()
        for page in (part for whole in pages for part in _parts(whole)):
            queued = sum(1 for _, result in pending if not isinstance(result, list) and not result.ready())
            if queued < self._window:
                pending.append((page, self._pool.apply_async(check_rows, ([(r.raw, r.leaf) for r in page],))))
            else:
                pending.append((page, [check_row(r.raw, r.leaf) for r in page]))
            while pending and (isinstance(pending[0][1], list) or pending[0][1].ready() or len(pending) > self._most):
                yield _results(*pending.popleft())
        while pending:
            yield _results(*pending.popleft())


def _parts(page: list[Row]) -> Iterator[list[Row]]:
    for start in range(0, len(page), CHUNK):
        yield page[start : start + CHUNK]


def _results(page: list[Row], result: Any) -> tuple[list[Row], list[Entry | str]]:
    if isinstance(result, list):
        return page, result
    return page, _rebuilt(page, result.get())


def check_row(raw: bytes, leaf: bytes) -> Entry | str:
    """The entry in `raw`, or why it is bad."""
    if leaf_hash(raw) != leaf:
        return "its bytes changed after it was appended (they no longer hash to its recorded leaf)"
    try:
        return Entry.parse(raw, leaf=leaf)
    except LedgerError as exc:
        return str(exc)


def check_rows(rows: list[tuple[bytes, bytes]]) -> bytes | list[Fields | str]:
    """A worker's share: each entry's fields without its bytes (the caller has them), or
    why it is bad. As one JSON array, which the caller reads back several times quicker
    than a pickle of the same, exactly (orjson prints what it reads back); as the list
    itself in the one case orjson refuses, nesting deeper than it prints, which the
    wrapping adds to a body nested nearly as deep as an entry allows."""
    checked = [check_row(raw, leaf) for raw, leaf in rows]
    fields = [c if isinstance(c, str) else (c.kind, c.author, c.at, c.log, c.seq, c.body) for c in checked]
    try:
        return orjson.dumps(fields)
    except orjson.JSONEncodeError:
        return fields


def _rebuilt(rows: list[Row], checked: bytes | list[Fields | str]) -> list[Entry | str]:
    fields: list[Fields | str] = orjson.loads(checked) if isinstance(checked, bytes) else checked
    return [c if isinstance(c, str) else Entry(row.raw, *c, row.leaf) for row, c in zip(rows, fields, strict=False)]


def _pool(jobs: int) -> Any:
    # fork, not spawn or forkserver: those re-run the __main__ module in every worker, and
    # `python -m agentd` would start the CLI again there. Workers only hash and check
    # bytes they are sent; they never touch the inherited database connection.
    import multiprocessing  # here: only an audit with workers needs it, and every command imports this module

    return multiprocessing.get_context("fork").Pool(jobs)
