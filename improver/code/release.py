"""Releases: a confirmed code change, its record and its patch.

A release records the commit its patch applies to, the patch's SHA-256, the files and
lines it changes, the commands it was built, tested and scored with, the operator's
words and the agent it was scored as; the evidence (the counts, intervals, level and
confirmation) is the kept line's and the claim's. Its patch is kept at
`routes/releases/ID.patch` and its record beside it at `ID.json`, both written before
its claim (`agent.release/v1`) is published. `check` holds a kept release to the two.

`Release` is a release as the ledger publishes it, which whoever works from the ledger
reads (`published`, `of_entry`): an attester rebuilding it, an installer checking it;
a claim it cannot read, or whose id is not its commit and patch's, is refused there for
both. `recipe_for` is what a challenge carries to rebuild it again, and `Release.following`
reads one back: what is rerun is the release's own published commands, never the
recipe's, which may only add a step the release leaves open, and at most MAX_RERUN_RUNS
runs of each sealed task, so that whoever wrote the recipe cannot choose what an
adjudicator's sandbox runs, nor for how long.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from improver.base.digests import digest
from improver.base.errors import ImproverError
from improver.base.files import write_atomic
from improver.base.routes import Routes
from improver.base.variant import Variant
from improver.code.patchlimits import counts, parse
from improver.seals.claims import RELEASE, release_claim_of
from ledger import Entry, Ledger

KIND = RELEASE
ID_LENGTH = 16
RECIPE_FIELDS = ("release", "commit", "patch", "tasks", "commands", "runs")
MAX_RERUN_RUNS = 64  # runs of each sealed task, per tree, that a challenge's recipe may ask a rerun for


@dataclass(frozen=True)
class Commands:
    """How the code is built, tested and run as a candidate; empty: that step is skipped."""

    build: str
    test: str
    candidate: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Rebuild:
    """A challenge's recipe as it is rerun: the release with the commands run (its own,
    and what the recipe adds where it leaves a step open), the runs, and each way the
    recipe differs from the release, a line each, for whoever reruns it to see."""

    release: Release
    runs: int
    differs: tuple[str, ...]


@dataclass(frozen=True)
class Release:
    """What the ledger says of a release: its agent.release/v1 claim and the seal it names."""

    id: str
    claim: str
    publisher: str  # the wallet that signed its claim
    commit: str
    patch: str  # the patch's SHA-256
    commands: Commands
    files: tuple[str, ...]  # what its publisher says it changes
    agent: Variant  # the agent it was scored as: the operator's words, lessons and models
    record: dict[str, Any]  # the release as its claim publishes it
    sealed_digest: str
    confirmations: int
    level: float  # one-sided, the seal's
    test: str

    @classmethod
    def of(cls, claim: str, publisher: str, body: dict[str, Any], seal: dict[str, Any]) -> Release:
        """From a release claim (its id, its author and its body) and the body of the
        seal claim it names; ImproverError when they are not a release with its seal, or
        its id is not that of its commit and patch."""
        record = body.get("release")
        if not isinstance(record, dict):
            raise ImproverError(f"claim {claim} is not a release: it holds no release record")
        try:
            agent = Variant.from_json(record["agent"])
            files = record.get("files")
            rid, commit, patch, commands = _change(record)
            release = cls(
                rid,
                claim,
                publisher,
                commit,
                patch,
                commands,
                tuple(files) if isinstance(files, list) else (),
                Variant(agent.operator, agent.lessons, agent.models),
                record,
                seal["sealed_digest"],
                int(seal["confirmations"]),
                float(seal["level"]),
                seal["test"],
            )
        except (KeyError, TypeError, ValueError, ImproverError) as exc:
            raise ImproverError(
                f"claim {claim} is not a release with its seal ({exc!r} is missing or malformed)"
            ) from None
        # The ledger's rule refuses such a claim as it is appended; attester and installer
        # alike hold to it on their own, whatever ledger the claim was read from.
        if release_id(release.commit, release.patch) != release.id:
            raise ImproverError(f"release {release.id} is not the id of its commit and patch")
        return release

    def following(self, recipe: dict[str, Any]) -> Rebuild:
        """How a challenge's recipe reruns this release: the recipe must name this release,
        its commit and its patch, and at most MAX_RERUN_RUNS runs; its commands are the
        release's, the recipe's taken only for a step the release leaves open (empty)."""
        missing = [f for f in RECIPE_FIELDS if f not in recipe]
        if missing:
            raise ImproverError(f"the recipe needs {', '.join(missing)}")
        ids = (recipe["release"], recipe["commit"], recipe["patch"])
        if ids != (self.id, self.commit, self.patch):
            raise ImproverError(f"the recipe is not release {self.id}'s (its release, commit or patch differ)")
        runs = _rerun_runs(recipe["runs"])
        commands, differs = _commands_for(self.commands, recipe["commands"])
        return Rebuild(replace(self, commands=commands), runs, differs)


def _rerun_runs(runs: Any) -> int:
    if not isinstance(runs, int) or isinstance(runs, bool) or not 1 <= runs <= MAX_RERUN_RUNS:
        raise ImproverError(
            f"the recipe's runs must be a count from 1 to {MAX_RERUN_RUNS}, the most a rerun makes of each sealed "
            f"task, not {str(runs)[:20]}"
        )
    return runs


def _commands_for(own: Commands, given: Any) -> tuple[Commands, tuple[str, ...]]:
    """The commands a rerun runs, the release's `own` with what the recipe's `given` adds
    where a step is left open, and each way the two differ, a line each."""
    published = own.to_json()
    if (
        not isinstance(given, dict)
        or not set(given) <= set(published)
        or not all(isinstance(c, str) for c in given.values())
    ):
        raise ImproverError(f"the recipe's commands must be {', '.join(published)}, as text")
    run, differs = dict(published), []
    for name, theirs in published.items():
        asked = given.get(name, "")
        if not theirs and asked:
            run[name] = asked
            differs.append(f"the recipe adds a {name} command the release leaves open: {asked!r}")
        elif asked != theirs:
            differs.append(
                f"the recipe's {name} command {asked!r} is not the release's {theirs!r}: the release's is run"
            )
    return Commands(**run), tuple(differs)


def _change(record: dict[str, Any]) -> tuple[str, str, str, Commands]:
    """A release record's id, commit, patch digest and commands: what the ledger's rule
    holds every release claim to. KeyError or TypeError when one is missing or malformed."""
    return record["release"], record["commit"], record["patch"], Commands(**record["commands"])


def recipe_for(body: dict[str, Any], tasks: str, runs: int) -> dict[str, Any]:
    """How to rebuild the release agent.release/v1 claim `body` publishes and score it
    `runs` times on the sealed tasks of digest `tasks`: what a challenge carries, and
    `Release.following` reads back. Made from what the ledger's rule holds every release
    claim to, so that any release on a ledger can be challenged with its recipe."""
    rid, commit, patch, commands = _change(body["release"])
    return dict(zip(RECIPE_FIELDS, (rid, commit, patch, tasks, commands.to_json(), runs), strict=True))


def published(ledger: Ledger, release: str) -> Release:
    """Release `release` (its id) as the ledger holds it; ImproverError when it holds no
    claim for it."""
    found = release_claim_of(ledger.state(), release)
    if found is None:
        raise ImproverError(f"release {release} has no agent.release/v1 claim on the ledger at {ledger.url}")
    return of_entry(ledger, ledger.find(found["claim"]))


def of_entry(ledger: Ledger, entry: Entry) -> Release:
    """The release an agent.release/v1 entry of `ledger` publishes, with the seal it names."""
    seal = ledger.find(str(entry.body.get("seal_claim")))
    return Release.of(entry.claim_id, entry.author, entry.body, seal.body)


def patch_digest(patch: bytes) -> str:
    return hashlib.sha256(patch).hexdigest()


def release_id(commit: str, patch: str) -> str:
    """A release's id: from the commit and the patch's digest, so the same change to the
    same code is the same release wherever it is made."""
    return digest({"commit": commit, "patch": patch})[:ID_LENGTH]


def record(
    profile: str, change: Variant, scored_as: Variant, patch: bytes, summary: str, commands: Commands
) -> dict[str, Any]:
    files = parse(patch)
    added, deleted = counts(files)
    return {
        "release": release_id(change.commit, change.patch),
        "profile": profile,
        "commit": change.commit,
        "patch": patch_digest(patch),
        "files": [f.path for f in files],
        "added": added,
        "deleted": deleted,
        "summary": summary,
        "commands": commands.to_json(),
        "operator": scored_as.operator,
        "agent": scored_as.to_json(),
    }


def save(routes: Routes, body: dict[str, Any], patch: bytes) -> None:
    """The patch, then its record: a record is never there without its patch."""
    write_atomic(routes.release_patch(body["release"]), patch.decode())
    write_atomic(routes.release_record(body["release"]), json.dumps(body, indent=2, ensure_ascii=False) + "\n")


def releases(routes: Routes, profile: str) -> list[dict[str, Any]]:
    """Every release of `profile` this home keeps, oldest first by file time."""
    folder = routes.releases()
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.json"), key=lambda p: (p.stat().st_mtime, p.name)):
        try:
            body = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ImproverError(f"{path}: not a release record ({exc}); restore it or move it aside") from None
        if isinstance(body, dict) and body.get("profile") == profile:
            found.append(body)
    return found


def check(after: dict[str, Any], claimed: Any, routes: Routes) -> str | None:
    """Why a kept code change does not hold to its claim's release and the patch kept
    here, or None. `after` is the kept line's variant, `claimed` the claim's release."""
    code = after.get("code")
    if not isinstance(code, dict) or not isinstance(claimed, dict):
        return "it is a code change without a release, or a release without its code"
    rid = release_id(str(code.get("commit")), str(code.get("patch")))
    if (
        claimed.get("release") != rid
        or claimed.get("commit") != code.get("commit")
        or claimed.get("patch") != code.get("patch")
    ):
        return f"its claim's release is not the code it kept (release {rid})"
    path = routes.release_patch(rid)
    try:
        patch = path.read_bytes()
        kept = json.loads(routes.release_record(rid).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return f"release {rid}: its patch or record is not here to check ({exc})"
    if patch_digest(patch) != code.get("patch"):
        return f"release {rid}: {path} is not the patch it published (its SHA-256 differs)"
    if kept != claimed:
        differ = sorted(k for k in set(kept) | set(claimed) if kept.get(k) != claimed.get(k))
        return f"release {rid}: its record here does not match its claim ({', '.join(differ)} differ)"
    return None
