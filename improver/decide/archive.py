"""The archive: every variant tried on one set of tasks to choose on, kept between runs.

The loop draws the variant to build on from it as the Huxley-Gödel Machine does:
Thompson sampling over lines, a line being a variant and every variant made from it,
each line's Beta drawn from the passes and failures of the whole line. The counts are
taken afresh from each variant's own record at every draw, never accumulated, so a
weaker variant whose descendants do well is still drawn often: it may be the stepping
stone to a better one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from improver.base.errors import ImproverError
from improver.base.files import write_atomic
from improver.base.variant import Variant
from improver.decide import stats
from improver.decide.stats import Tally

FORMAT = 1


@dataclass
class Archived:
    number: int  # "variant N" in the operator's lines
    variant: Variant
    parent: int | None
    tallies: dict[str, Tally]  # per task to choose on: runs passed of runs judged
    runs: int  # runs per task asked for
    label: str  # what the change was, or "the agent as it was"
    wrong: dict[str, list[str]] = field(default_factory=dict)  # per task failed: what went wrong
    errored: int = 0  # runs left out of the tallies: provider or harness faults
    kept: bool = False

    def counts(self) -> str:
        """E.g. "12/24 runs passed" or "11/23 runs passed (1 errored, left out)"."""
        return f"{self.passed}/{self.judged} runs passed" + (
            f" ({self.errored} errored, left out)" if self.errored else ""
        )

    @property
    def passed(self) -> int:
        return sum(t.passed for t in self.tallies.values())

    @property
    def judged(self) -> int:
        return sum(t.runs for t in self.tallies.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "variant": self.variant.to_json(),
            "parent": self.parent,
            "tallies": {name: [t.passed, t.runs] for name, t in self.tallies.items()},
            "runs": self.runs,
            "label": self.label,
            "wrong": self.wrong,
            "errored": self.errored,
            "kept": self.kept,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Archived:
        return cls(
            number=int(data["number"]),
            variant=Variant.from_json(data["variant"]),
            parent=data["parent"],
            tallies={name: Tally(int(p), int(n)) for name, (p, n) in data["tallies"].items()},
            runs=int(data["runs"]),
            label=str(data["label"]),
            wrong={str(k): [str(w) for w in v] for k, v in data.get("wrong", {}).items()},
            errored=int(data.get("errored", 0)),
            kept=bool(data.get("kept", False)),
        )


@dataclass
class Archive:
    path: Path
    train_digest: str
    variants: list[Archived] = field(default_factory=list)
    tried: set[str] = field(default_factory=set)  # every change's variant id, however far it got
    history: list[dict[str, str]] = field(default_factory=list)  # {change, went}, as the proposer is told

    @classmethod
    def load(cls, path: Path, train_digest: str) -> Archive:
        if not path.exists():
            return cls(path, train_digest)
        try:
            data = json.loads(path.read_text())
            if data["format"] != FORMAT or data["train"] != train_digest:
                raise ValueError("it belongs to other tasks to choose on")
            variants = [Archived.from_json(v) for v in data["variants"]]
            history = [{"change": str(h["change"]), "went": str(h["went"])} for h in data["history"]]
            return cls(path, train_digest, variants, set(data["tried"]), history)
        except (OSError, ValueError, KeyError, TypeError, ImproverError) as exc:
            raise ImproverError(
                f"{path}: the archive is damaged ({exc}); restore it or move it aside to start afresh"
            ) from None

    def save(self) -> None:
        body = {
            "format": FORMAT,
            "train": self.train_digest,
            "tried": sorted(self.tried),
            "history": self.history,
            "variants": [v.to_json() for v in self.variants],
        }
        write_atomic(self.path, json.dumps(body, indent=2, ensure_ascii=False) + "\n")

    def find(self, variant: Variant) -> Archived | None:
        return next((a for a in self.variants if a.variant.id == variant.id), None)

    def add(
        self,
        variant: Variant,
        parent: int | None,
        tallies: dict[str, Tally],
        runs: int,
        label: str,
        wrong: dict[str, list[str]],
        errored: int = 0,
    ) -> Archived:
        archived = Archived(len(self.variants), variant, parent, tallies, runs, label, wrong, errored)
        self.variants.append(archived)
        self.tried.add(variant.id)
        return archived

    def line(self, number: int) -> list[Archived]:
        """The variant and every variant made from it, however far down."""
        members, frontier = [], {number}
        for archived in self.variants:  # parents always come before their children
            if archived.number in frontier or archived.parent in frontier:
                frontier.add(archived.number)
                members.append(archived)
        return members

    def pick(self, rng: np.random.Generator) -> Archived:
        """A variant to build on, by Thompson sampling over the lines' passes and failures."""
        if not self.variants:
            raise ImproverError("the archive is empty: nothing to build on")
        passed, failed = [], []
        for archived in self.variants:
            members = self.line(archived.number)
            p = sum(m.passed for m in members)
            passed.append(p)
            failed.append(sum(m.judged for m in members) - p)
        return self.variants[stats.thompson_pick(passed, failed, rng)]
