"""The routes folder: where a profile's seals, archives, lineage, practice sets, loop lock
and record of exports are kept. Every path under it is named here, and nowhere else.

    PROFILE-sealed-SEAL.json     a seal: its terms, sealed tasks and state (improver.seals.seal)
    PROFILE-train-SEAL.json      the seal's tasks to choose changes on
    PROFILE-revealed-SEAL.json   an examiner's seal revealed: its tasks and examinations (improver.seals.reveal)
    PROFILE-archive-TRAIN.json   every variant tried on those tasks (improver.decide.archive)
    PROFILE-lineage.jsonl        every decision the loop made (improver.loop.lineage)
    PROFILE-improvers.jsonl      every decision on the improver itself (improver.meta.metaloop)
    PROFILE-exported.json        what was exported for training (improver.train.export)
    PROFILE-practice-SET.json    practice tasks a model wrote (improver.loop.practice)
    PROFILE-judged.json          marks a judge proposed, not yet accepted (improver.train.judge)
    PROFILE-loop.lock            held by one loop, adopt or undo of the profile at a time
    PROFILE-code-archive-TRAIN.json  every code change tried on those tasks (improver.code.codeloop)
    PROFILE-code-work/           a code run's clones and built trees, removed when it ends
    releases/ID.patch, ID.json   a kept code change's patch and its record (improver.code.release)
    installs/PROFILE-ID.json     a release installed into a checkout, to take it back out (improver.trust.install)
    attest-work-ID/              an attester's clones and built trees of release ID, removed when it ends
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ARCHIVE_DIGEST = 16  # how much of the train set's digest names its archive


@dataclass(frozen=True)
class Routes:
    root: Path

    def sealed(self, profile: str, seal: str) -> Path:
        return self.root / f"{profile}-sealed-{seal}.json"

    def train(self, profile: str, seal: str) -> Path:
        return self.root / f"{profile}-train-{seal}.json"

    def revealed(self, profile: str, seal: str) -> Path:
        return self.root / f"{profile}-revealed-{seal}.json"

    def sealed_files(self, profile: str) -> list[Path]:
        """Every seal file of the profile, in no particular order (improver.seals.seal.seals_of orders them)."""
        return list(self.root.glob(f"{profile}-sealed-*.json"))

    def seal_ids(self, profile: str) -> set[str]:
        """The ids of the profile's seals here, read from their files' names."""
        prefix = f"{profile}-sealed-"
        return {path.stem[len(prefix) :] for path in self.sealed_files(profile)}

    def archive(self, profile: str, train_digest: str) -> Path:
        return self.root / f"{profile}-archive-{train_digest[:ARCHIVE_DIGEST]}.json"

    def lineage(self, profile: str) -> Path:
        return self.root / f"{profile}-lineage.jsonl"

    def improvers(self, profile: str) -> Path:
        return self.root / f"{profile}-improvers.jsonl"

    def practice(self, profile: str, set_digest: str) -> Path:
        return self.root / f"{profile}-practice-{set_digest[:ARCHIVE_DIGEST]}.json"

    def exported(self, profile: str) -> Path:
        return self.root / f"{profile}-exported.json"

    def judged(self, profile: str) -> Path:
        return self.root / f"{profile}-judged.json"

    def loop_lock(self, profile: str) -> Path:
        return self.root / f"{profile}-loop.lock"

    def code_archive(self, profile: str, train_digest: str) -> Path:
        return self.root / f"{profile}-code-archive-{train_digest[:ARCHIVE_DIGEST]}.json"

    def code_work(self, profile: str) -> Path:
        return self.root / f"{profile}-code-work"

    def releases(self) -> Path:
        return self.root / "releases"

    def release_patch(self, release: str) -> Path:
        return self.releases() / f"{release}.patch"

    def release_record(self, release: str) -> Path:
        return self.releases() / f"{release}.json"

    def install_record(self, profile: str, release: str) -> Path:
        return self.root / "installs" / f"{profile}-{release}.json"

    def attest_work(self, release: str) -> Path:
        return self.root / f"attest-work-{release}"
