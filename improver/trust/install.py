"""Installing a release into a checkout, only when the installer's own rules hold, and
taking it back out.

Four checks, each a named result:

- patch: the patch file is the one the release published (its SHA-256);
- allow: every path the patch touches, read from the patch itself (and as git reads
  it), is within the installer's allowed paths, and what it holds keeps to the limits
  the code loop holds a coder's patch to (improver/code/patchlimits.py): no symbolic
  link, mode change or binary file, no added line that starts a process, opens the
  network or loads code; what the publisher says it changes is not asked;
- commit: the checkout stands at the release's commit, with nothing uncommitted;
- attestations: each verifier the installer names has, among the attestations given,
  one that counts: about this release, not by its publisher, holding up, not expired,
  not shown false; with `bonded`, also on a bond still open, under an adjudicator the
  installer names, holding at least the least bond. A bond that was slashed or
  withdrawn stands behind nothing, even an attestation issued on it later.

The patch is applied (git apply, improver/code/git.py) only when all four hold. What was
installed is recorded in routes/installs/ with the patch itself and the digests of the
files it left, so `undo_install` takes exactly that patch back out, and refuses when
any of those files changed since. Nothing is built or run: that stays the installer's.
"""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from improver.base.errors import ImproverError
from improver.base.files import write_atomic
from improver.base.routes import Routes
from improver.code.git import apply_to, head_of, paths_git_reads, source_commit
from improver.code.patchlimits import DEFAULT_ALLOW, content_refusal, outside, touched
from improver.code.release import Release, patch_digest, published
from improver.seals.claims import ATTESTATION, attestation_of
from ledger import Ledger, State, bonds_in

LEAST_BOND = 1000  # cents: a bond must hold 10 USD unless the installer says otherwise
PATCH, ALLOW, COMMIT, ATTESTATIONS = "patch", "allow", "commit", "attestations"
SHORT = 12  # hex digits of a claim, a commit or a wallet shown in a line


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Trust:
    """The installer's own rules: whose attestations count, and what a patch may touch."""

    verifiers: tuple[str, ...]  # wallet ids
    allow: tuple[str, ...] = DEFAULT_ALLOW
    bonded: bool = False
    adjudicators: tuple[str, ...] = ()  # wallet ids
    least_bond: int = LEAST_BOND  # cents
    names: dict[str, str] = field(default_factory=dict)  # wallet id -> the name the installer knows it by

    def wallet(self, wallet_id: str) -> str:
        """A wallet as a line shows it: by its name here and its id's first digits."""
        name = self.names.get(wallet_id)
        return f"{name} ({wallet_id[:SHORT]})" if name else wallet_id[:SHORT]


@dataclass(frozen=True)
class Weighed:
    """One attestation given, and whether it counts (`why` says which way and why)."""

    claim: str
    author: str | None
    counts: bool
    why: str


@dataclass(frozen=True)
class Review:
    release: Release
    checks: tuple[Check, ...]
    attestations: tuple[Weighed, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if not c.ok]


def review(
    ledger: Ledger, release: str, patch: bytes, checkout: Path, claims: tuple[str, ...], trust: Trust, now: str
) -> Review:
    """The four checks of installing `release` from `patch` into `checkout`, on the
    attestations `claims` (full claim ids), as of `now` (a UTC time stamp)."""
    rel = published(ledger, release)
    weighed = tuple(weigh(ledger.state(), rel, claims, trust, now))
    checks = (
        check_patch(patch, rel),
        check_allow(patch, rel, trust.allow, checkout),
        check_commit(checkout, rel),
        check_attestations(weighed, trust),
    )
    return Review(rel, checks, weighed)


def check_patch(patch: bytes, release: Release) -> Check:
    found = patch_digest(patch)
    if found != release.patch:
        return Check(
            PATCH,
            False,
            f"its SHA-256 is {found[:SHORT]}…, not {release.patch[:SHORT]}… that release {release.id} published",
        )
    return Check(PATCH, True, f"its SHA-256 {found[:SHORT]}… is the one release {release.id} published")


def check_allow(patch: bytes, release: Release, allow: tuple[str, ...], checkout: Path) -> Check:
    """Read from the patch itself and as git reads it, never from the publisher's list.
    Whatever paths the installer allows, a link or a mode git would apply could reach
    past them (agent.py made a link to the home's keys), so the patch is held to what
    the code loop holds a coder's to as well: a release its limits would have refused
    was not made by an honest loop."""
    try:
        patch.decode()
    except UnicodeDecodeError:
        return Check(ALLOW, False, "the patch is not UTF-8 text, so what it touches cannot be read from it")
    try:
        paths = paths_of(patch, checkout)
    except ImproverError as exc:
        return Check(ALLOW, False, f"git cannot read the patch ({exc})")
    if not paths:
        return Check(ALLOW, False, "the patch changes nothing")
    bad = outside(paths, allow)
    if bad is not None:
        said = f"; its publisher says it changes {', '.join(release.files)}" if bad not in release.files else ""
        return Check(ALLOW, False, f"it touches {bad}, outside what you allow ({', '.join(allow)}){said}")
    held = content_refusal(patch)
    if held is not None:
        return Check(ALLOW, False, f"{held} (the code loop's limits, which a release keeps to)")
    return Check(ALLOW, True, f"it touches {', '.join(paths)}, within what you allow ({', '.join(allow)})")


def paths_of(patch: bytes, checkout: Path) -> list[str]:
    """Every path the patch touches: as its headers name them (both sides of a rename)
    and as git reads it, so that no reading of it applies to a path the check missed."""
    paths = touched(patch)
    return paths + [p for p in paths_git_reads(patch, checkout) if p not in paths]


def check_commit(checkout: Path, release: Release) -> Check:
    try:
        head = source_commit(checkout)
    except ImproverError as exc:
        return Check(COMMIT, False, str(exc))
    if head != release.commit:
        return Check(
            COMMIT,
            False,
            f"{checkout} stands at {head[:SHORT]}, not at {release.commit[:SHORT]}, release {release.id}'s commit",
        )
    return Check(COMMIT, True, f"{checkout} stands at {head[:SHORT]}, release {release.id}'s commit")


def weigh(state: State, release: Release, claims: tuple[str, ...], trust: Trust, now: str) -> list[Weighed]:
    """Each attestation given, and whether it counts for the installer's rules."""
    return [_weighed(state, release, claim, trust, now) for claim in claims]


def _weighed(state: State, release: Release, claim: str, trust: Trust, now: str) -> Weighed:
    found = attestation_of(state, claim)
    if found is None:
        return Weighed(claim, None, False, f"not counted: not an {ATTESTATION} claim")
    why = _why_not(state, release, claim, found, trust, now)
    if why is not None:
        return Weighed(claim, found["author"], False, why)
    bonded = _on_bond(state, found, trust) if trust.bonded else ""
    return Weighed(claim, found["author"], True, f"counts: by verifier {trust.wallet(found['author'])}{bonded}")


def _why_not(state: State, release: Release, claim: str, found: dict[str, Any], trust: Trust, now: str) -> str | None:
    """Why the attestation does not count, or None. Past whom it is by and what it is
    about, every reason is given, so a refusal names all that would have to change."""
    if found["release"] != release.id:
        return f"not counted: about release {found['release']}, not {release.id}"
    if found["author"] == release.publisher:  # the ledger's rule refuses these; an install holds to it on its own
        return "not counted: by the release's publisher"
    if found["author"] not in trust.verifiers:
        return f"not counted: by {trust.wallet(found['author'])}, a wallet you did not name with --verifier"
    reasons = []
    if not found["holds"]:
        reasons.append("it says the release did not hold up")
    if found["expires"] <= now:
        reasons.append(f"it expired at {found['expires']}")
    ruling = bonds_in(state).shown_false(claim)
    if ruling is not None:
        reasons.append(f"shown false by ruling {ruling[:SHORT]}")
    if trust.bonded:
        reasons += _not_bonded(state, found, trust)
    return f"not counted: {'; '.join(reasons)}" if reasons else None


def _not_bonded(state: State, found: dict[str, Any], trust: Trust) -> list[str]:
    if found["bond"] is None:
        return ["not on a bond, and you asked for --bonded"]
    bond = bonds_in(state).bond(found["bond"])
    if bond is None:  # the rule that took the attestation in checked its bond: a damaged state
        return [f"its bond {found['bond'][:SHORT]} is not on the ledger"]
    reasons = []
    if bond.adjudicator not in trust.adjudicators:
        reasons.append(
            f"on bond {bond.id[:SHORT]} under adjudicator {trust.wallet(bond.adjudicator)}, not one you named"
        )
    if not bond.stands:
        reasons.append(f"bond {bond.id[:SHORT]} was {bond.status} at Pulse {bond.ended} and stands behind nothing")
    if bond.cents < trust.least_bond:
        reasons.append(
            f"bond {bond.id[:SHORT]} holds {_usd(bond.cents)}, less than the {_usd(trust.least_bond)} you ask for"
        )
    return reasons


def _on_bond(state: State, found: dict[str, Any], trust: Trust) -> str:
    bond = bonds_in(state).bond(found["bond"])
    assert bond is not None  # _not_bonded counted it only with its bond
    return f", on bond {bond.id[:SHORT]} of {_usd(bond.cents)} under adjudicator {trust.wallet(bond.adjudicator)}"


def check_attestations(weighed: tuple[Weighed, ...], trust: Trust) -> Check:
    if not weighed:
        return Check(ATTESTATIONS, False, "no attestation given (--attestation CLAIM)")
    vouching = {v: next((w.claim for w in weighed if w.counts and w.author == v), None) for v in trust.verifiers}
    missing = [trust.wallet(v) for v, claim in vouching.items() if claim is None]
    if missing:
        return Check(ATTESTATIONS, False, f"no attestation that counts by verifier {', '.join(missing)}")
    return Check(
        ATTESTATIONS,
        True,
        "each verifier you named vouches: "
        + ", ".join(f"{trust.wallet(v)} by claim {str(c)[:SHORT]}" for v, c in vouching.items()),
    )


def installed(routes: Routes, profile: str, release: str) -> dict[str, Any] | None:
    """The record of `release` installed for `profile`, or None."""
    path = routes.install_record(profile, release)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ImproverError(f"{path}: not an install record ({exc}); restore it or move it aside") from None
    if not isinstance(record, dict):
        raise ImproverError(f"{path}: not an install record; restore it or move it aside")
    return record


def install_release(
    routes: Routes, profile: str, done: Review, checkout: Path, patch: bytes, now: str
) -> dict[str, Any]:
    """Applies the reviewed patch to `checkout` and records it; refuses unless every check held."""
    rid = done.release.id
    if not done.ok:
        raise ImproverError(f"release {rid} is not installed: {', '.join(done.failed)} failed")
    if installed(routes, profile, rid) is not None:
        raise ImproverError(f"release {rid} is already installed for {profile}")
    paths = paths_of(patch, checkout)
    with _modes_kept(checkout, paths):
        apply_to(checkout, patch)
    record = {
        "release": rid,
        "profile": profile,
        "checkout": str(checkout.resolve()),
        "commit": done.release.commit,
        "patch": patch_digest(patch),
        "attestations": [w.claim for w in done.attestations if w.counts],
        "at": now,
        "files": _digests(checkout, paths),
        "patch_text": patch.decode(),
    }
    try:
        write_atomic(routes.install_record(profile, rid), json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    except BaseException:
        with _modes_kept(checkout, paths):  # not recorded, so not installed: nothing else could undo it
            apply_to(checkout, patch, reverse=True)
        raise
    return record


def undo_install(routes: Routes, profile: str, release: str) -> dict[str, Any]:
    """Takes installed `release` back out of its checkout, exactly, and drops its record;
    refuses when the checkout changed since in a way that keeps that from being clean."""
    record = installed(routes, profile, release)
    if record is None:
        raise ImproverError(
            f"release {release} is not installed for {profile} (no {routes.install_record(profile, release)})"
        )
    checkout = Path(record["checkout"])
    head = head_of(checkout)
    if head != record["commit"]:
        raise ImproverError(
            f"{checkout} stands at {head[:SHORT]} now, not at {record['commit'][:SHORT]} where release {release} "
            "was installed: it cannot be taken back out cleanly"
        )
    now = _digests(checkout, list(record["files"]))
    changed = next((p for p, d in record["files"].items() if now[p] != d), None)
    if changed is not None:
        raise ImproverError(
            f"{checkout / changed} changed since release {release} was installed: undo takes back only what it "
            "applied; restore the file or take the release out by hand"
        )
    with _modes_kept(checkout, list(record["files"])):
        apply_to(checkout, record["patch_text"].encode(), reverse=True)
    routes.install_record(profile, release).unlink()
    return record


@contextmanager
def _modes_kept(checkout: Path, paths: list[str]) -> Iterator[None]:
    """git apply writes a file anew with its own idea of the mode: a file that was there
    before keeps its owner's read and write bits, and takes the executable bits git gave."""
    before = {p: stat.S_IMODE((checkout / p).stat().st_mode) for p in paths if (checkout / p).is_file()}
    yield
    for path, mode in before.items():
        file = checkout / path
        if file.is_file():
            file.chmod((mode & ~0o111) | (stat.S_IMODE(file.stat().st_mode) & 0o111))


def _digests(checkout: Path, paths: list[str]) -> dict[str, str | None]:
    """Each path's SHA-256 in the checkout, None where there is no file."""
    found: dict[str, str | None] = {}
    for path in paths:
        file = checkout / path
        found[path] = hashlib.sha256(file.read_bytes()).hexdigest() if file.is_file() else None
    return found


def _usd(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d} USD"
