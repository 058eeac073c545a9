"""What the dashboard shows, read from the home: profiles and their schedules, the
archives as trees with the verdict on each variant, the pass rate over kept steps with
its intervals, seals, recent sessions, the ledger entry by entry with its inclusion proof
and the checkpoint it is proved against, and the stamp a live page polls to know the home
changed. (Sessions, decisions, the task grid and third parties have modules of their own.)

Reading alone, except that proving an entry signs a checkpoint of the whole log when
none covers it yet and this home holds the log's key (as `agentd ledger prove` does).
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any

from apscheduler.triggers.cron import CronTrigger

from agentd.app.adopt import lineage_of
from agentd.app.archives import profile_archives
from agentd.app.decisions import Decision, verdicts
from agentd.app.killswitch import is_on
from agentd.app.ledger import open_for_signing, open_ledger, pulse_of, tree_to_prove
from agentd.app.schedules import runs_path
from agentd.app.seals import settle_seals, spent_of
from agentd.app.sessions import open_sessions
from agentd.app.transcripts import listed
from agentd.errors import AgentdError
from agentd.home import Home, load_toml
from agentd.profiles import list_profiles, profile_dir
from improver import Archive, ImproverError, digest, open_seal, seals_of, wilson_interval
from ledger import Entry

JOBS = ("improve", "harvest", "code")  # the jobs a profile's [schedule] may name
RECENT_SESSIONS = 20


@dataclass(frozen=True)
class Schedule:
    job: str
    cron: str
    next_run: str | None
    last_run: str | None = None
    last_result: str | None = None


@dataclass
class ProfileView:
    name: str
    schedules: list[Schedule]
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SealView:
    profile: str
    id: str
    made: str
    sealed_tasks: int
    train_tasks: int
    canaries: int
    confirmations: int
    spent: int
    claim: str | None
    pulse: int | None

    @property
    def left(self) -> int:
        return max(self.confirmations - self.spent, 0)


@dataclass(frozen=True)
class Node:
    """A variant in the archive, with its own tallies and those of its whole line, and
    the verdict of the decision on it (None for the agent as it was)."""

    number: int
    id: str
    label: str
    parent: int | None
    passed: int
    judged: int
    line_passed: int
    line_judged: int
    kept: bool
    step: str | None  # the kept step's id in the lineage
    verdict: str | None
    children: list[Node] = field(default_factory=list)


@dataclass(frozen=True)
class Point:
    """The pass rate after a kept step (step None: the agent before the first one), each
    with its 95% Wilson interval."""

    step: str | None
    change: str
    choose: tuple[int, int]
    sealed: tuple[int, int] | None

    @property
    def choose_interval(self) -> tuple[float, float]:
        return wilson_interval(*self.choose)

    @property
    def sealed_interval(self) -> tuple[float, float] | None:
        return wilson_interval(*self.sealed) if self.sealed and self.sealed[1] else None


@dataclass
class ArchiveView:
    profile: str
    seal: str
    loop: str  # lessons, or code (`improve code`'s)
    key: str  # the archive's name in a page's address
    roots: list[Node]


@dataclass
class Overview:
    home: str
    kill_switch: bool
    profiles: list[ProfileView]
    seals: list[SealView]
    sessions: list[dict[str, Any]]
    warnings: list[str]
    from_daemon: bool  # schedules as the running daemon reports them, last runs included


@dataclass(frozen=True)
class EntryView:
    pulse: int
    kind: str
    author: str
    at: str
    claim: str
    body: dict[str, Any]
    raw_b64: str
    proof: dict[str, Any] | None  # `agentd ledger prove`'s document, checkpoint included
    size: int
    log_key: str  # base64 of the log's public key (its genesis names it); "" in listings


@dataclass(frozen=True)
class EntryPage:
    """A page of the ledger's entries, and the Pulse the pages either side of it start
    from (None where there is none), with the number of entries in the whole log."""

    entries: list[EntryView]
    start: int
    earlier: int | None
    later: int | None
    size: int


def overview(home: Home, status: dict[str, Any] | None = None) -> Overview:
    """The front page: schedules (from the daemon's status when it runs, else from each
    profile.toml), seals and recent sessions."""
    warnings: list[str] = []
    profiles = (
        profiles_from_status(status) if status is not None else [scheduled(home, name) for name in list_profiles(home)]
    )
    seals: list[SealView] = []
    for name in list_profiles(home):
        seals += seal_views(home, name, warnings)
    kill = bool(status["kill_switch"]) if status is not None else is_on(home)
    return Overview(str(home.root), kill, profiles, seals, recent_sessions(home), warnings, status is not None)


def profiles_from_status(status: dict[str, Any]) -> list[ProfileView]:
    return [
        ProfileView(
            str(p["name"]),
            [
                Schedule(str(s["job"]), str(s["cron"]), s.get("next_run"), s.get("last_run"), s.get("last_result"))
                for s in p.get("schedules", [])
            ],
            [str(w) for w in p.get("warnings", [])],
        )
        for p in status.get("profiles", [])
    ]


def scheduled(home: Home, name: str, now: datetime | None = None) -> ProfileView:
    """A profile's jobs as its profile.toml `[schedule]` names them (`improve = "0 3 * * *"`,
    or a table with `cron`), each with its next run; the last run is the daemon's to know."""
    view = ProfileView(name, [])
    try:
        table = load_toml(profile_dir(home, name) / "profile.toml").get("schedule", {})
    except AgentdError as exc:
        view.warnings.append(str(exc))
        return view
    for job in JOBS:
        value = table.get(job) if isinstance(table, dict) else None
        cron = value.get("cron") if isinstance(value, dict) else value
        if cron is None:
            continue
        try:
            trigger = CronTrigger.from_crontab(str(cron), timezone=UTC)
        except ValueError as exc:
            view.warnings.append(f"schedule {job}: {cron!r} is not a cron expression ({exc})")
            continue
        fire = trigger.get_next_fire_time(None, now or datetime.now(UTC))
        view.schedules.append(Schedule(job, str(cron), fire.strftime("%Y-%m-%dT%H:%M:%SZ") if fire else None))
    return view


def seal_views(home: Home, profile: str, warnings: list[str]) -> list[SealView]:
    """The profile's seals, newest first; a damaged one is a warning, not a broken page."""
    settle_seals(home)
    try:
        paths = seals_of(home.routes, profile)
    except ImproverError as exc:
        warnings.append(str(exc))
        return []
    views = []
    for path in reversed(paths):
        try:
            seal = open_seal(path)
        except ImproverError as exc:
            warnings.append(str(exc))
            continue
        t, state = seal.terms, seal.state()
        views.append(
            SealView(
                profile,
                seal.id,
                t.made,
                t.sealed_tasks,
                t.train_tasks,
                t.canaries,
                t.confirmations,
                spent_of(home, seal),
                state.claim,
                state.pulse,
            )
        )
    return views


def recent_sessions(home: Home, count: int = RECENT_SESSIONS) -> list[dict[str, Any]]:
    """The last sessions recorded, newest first, with their outcome and a person's mark."""
    if not home.exists:
        return []
    return [listed(r) for r in reversed(open_sessions(home).list()[-count:])]


def archives(home: Home, profile: str) -> list[ArchiveView]:
    """Each seal's archives of the profile (the lesson loop's, the code loop's) as trees,
    newest seal first; each variant carries the verdict on it and, kept, its step."""
    said = verdicts(home, profile)
    return [
        ArchiveView(profile, t.seal.id, t.loop, t.key, tree(t.archive, said)) for t in profile_archives(home, profile)
    ]


def tree(archive: Archive, said: dict[str, Decision]) -> list[Node]:
    nodes: dict[int, Node] = {}
    roots: list[Node] = []
    for a in archive.variants:  # parents always come before their children
        line = archive.line(a.number)
        line_passed = sum(m.passed for m in line)
        decided = said.get(a.variant.id)
        node = Node(
            a.number,
            a.variant.id,
            a.label,
            a.parent,
            a.passed,
            a.judged,
            line_passed,
            sum(m.judged for m in line),
            a.kept,
            decided.step if decided else None,
            decided.verdict if decided else None,
        )
        nodes[a.number] = node
        (nodes[a.parent].children if a.parent in nodes else roots).append(node)
    return roots


def progress(home: Home, profile: str) -> list[Point]:
    """The pass rate over kept steps: the agent before the first, then after each."""
    kept = [line for _, line in lineage_of(home, profile).kept()]
    if not kept:
        return []
    first = kept[0]
    points = [Point(None, "the agent as it was", _pair(first["choose"]["current"]), _pair(first["sealed"]["current"]))]
    return points + [
        Point(k["step"], k["change"], _pair(k["choose"]["change"]), _pair(k["sealed"]["change"])) for k in kept
    ]


def _pair(counts: list[int]) -> tuple[int, int]:
    return int(counts[0]), int(counts[1])


def stamp(home: Home) -> str:
    """What changes whenever a page of the dashboard could: the ledger's size, and the
    size and time of the sessions store, of each file under routes/ (lineages, archives,
    seals, releases) and of the profiles, the kill switch and the record of jobs run. A
    page polls it (`/live`) and fetches itself again when it changed."""
    if not home.exists:
        return ""
    files = [home.agentd_db, Path(f"{home.agentd_db}-wal"), home.kill_switch_path, runs_path(home)]
    files += [*home.routes.root.glob("*"), *home.routes.releases().glob("*"), *home.profiles_dir.glob("*/*.*")]
    seen = [f"{f} {s.st_size} {s.st_mtime_ns}" for f in sorted(files) if (s := _stat(f))]
    return digest({"ledger": ledger_size(home), "files": seen})[:16]


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except OSError:
        return None  # not there (yet): nothing to tell apart


def known_profile(home: Home, profile: str) -> bool:
    return profile in list_profiles(home) or bool(home.routes.sealed_files(profile))


def ledger_size(home: Home) -> int:
    if not home.exists:
        return 0
    with open_ledger(home, read_only=True) as ledger:
        return ledger.size


def entry_page(
    home: Home, start: int | None, limit: int, kind: str | None = None, author: str | None = None
) -> EntryPage:
    """At most `limit` entries, without proofs, from Pulse `start` on (the newest when
    None); only those of `kind` and by the wallet id `author` when they are given (see
    `agentd.app.ledger.entry_filter` for what a person may give)."""
    if not home.exists:
        return EntryPage([], start or 1, None, None, 0)
    with open_ledger(home, read_only=True) as ledger:
        size = ledger.size
        if kind is None and author is None:
            # Every Pulse is listed: the pages either side are found by counting.
            first = start or max(size - limit + 1, 1)
            shown = list(islice(ledger.entries(start=first), limit))
            earlier, later = (
                max(first - limit, 1) if first > 1 else None,
                first + limit if first + limit <= size else None,
            )
            return EntryPage([_view(e, None, size, "") for e in shown], first, earlier, later, size)
        # Only some match: the store finds the page's neighbours by its kind and author
        # indexes, read back from the end, so no page reads the log from its start.
        if start is None:
            page, later = ledger.entries_back(size, limit, kind, author)[::-1], None
        else:
            found = list(islice(ledger.entries(kind=kind, start=start, author=author), limit + 1))
            page, later = found[:limit], (found[limit].pulse if len(found) > limit else None)
        first = start or (pulse_of(page[0]) if page else 1)
        before = ledger.entries_back(first - 1, limit, kind, author) if first > 1 else []
        views = [_view(e, None, size, "") for e in page]
        return EntryPage(views, first, before[-1].pulse if before else None, later, size)


def entry(home: Home, pulse: int) -> EntryView | None:
    """One entry, decoded, with its inclusion proof in the whole log and the log's signed
    checkpoint of that tree (signed now when none covers it and this home can); None when
    the log holds no such Pulse."""
    if not home.exists:
        return None
    with open_for_signing(home) as ledger:
        if not 1 <= pulse <= ledger.size:
            return None
        found = ledger.get(pulse)
        size, note = tree_to_prove(ledger, None, home)
        proof = {**ledger.inclusion_proof(pulse, size).to_json(), "checkpoint": note}
        return _view(found, proof, ledger.size, base64.b64encode(ledger.public_key).decode())


def _view(e: Entry, proof: dict[str, Any] | None, size: int, key: str) -> EntryView:
    return EntryView(
        pulse_of(e), e.kind, e.author, e.at, e.claim_id, e.body, base64.b64encode(e.raw).decode(), proof, size, key
    )
