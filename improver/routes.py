"""The routes folder: where a profile's seals, archives, lineage, loop lock and record of
exports are kept. Every path under it is named here, and nowhere else.

    PROFILE-sealed-SEAL.json     a seal: its terms, sealed tasks and state (improver.seal)
    PROFILE-train-SEAL.json      the seal's tasks to choose changes on
    PROFILE-archive-TRAIN.json   every variant tried on those tasks (improver.archive)
    PROFILE-lineage.jsonl        every decision the loop made (improver.lineage)
    PROFILE-exported.json        what was exported for training (improver.export)
    PROFILE-judged.json          marks a judge proposed, not yet accepted (improver.judge)
    PROFILE-loop.lock            held by one loop, adopt or undo of the profile at a time
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

    def sealed_files(self, profile: str) -> list[Path]:
        """Every seal file of the profile, in no particular order (improver.seal.seals_of orders them)."""
        return list(self.root.glob(f"{profile}-sealed-*.json"))

    def archive(self, profile: str, train_digest: str) -> Path:
        return self.root / f"{profile}-archive-{train_digest[:ARCHIVE_DIGEST]}.json"

    def lineage(self, profile: str) -> Path:
        return self.root / f"{profile}-lineage.jsonl"

    def exported(self, profile: str) -> Path:
        return self.root / f"{profile}-exported.json"

    def judged(self, profile: str) -> Path:
        return self.root / f"{profile}-judged.json"

    def loop_lock(self, profile: str) -> Path:
        return self.root / f"{profile}-loop.lock"
