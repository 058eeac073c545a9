"""Groups for GRPO-style training: each task's recorded runs, with group-relative advantages.

The archive (improver.decide.archive) keeps, for every variant the loop tried on the tasks to
choose on, how many of each task's judged runs passed. A task's group is all of those
runs, under every variant: a run's reward is 1 when it passed and 0 when it failed (the
archive keeps the outcome of each run, not its share of checks; errored runs are not in
it). A run's advantage is its reward minus the group's mean, divided by the group's
standard deviation (the population's, over the group's runs), as GRPO takes it.

A group whose runs all passed or all failed (or that holds one run) has a deviation of
0: its advantages are 0 and it is marked `"signal": false`, since it can teach nothing
by comparison.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, pstdev
from typing import Any

from improver.decide.archive import Archive
from improver.tasks.task import Task

GROUPS = "groups.jsonl"


@dataclass(frozen=True)
class Groups:
    lines: list[dict[str, Any]]

    @property
    def flat(self) -> int:
        """Groups that carry no signal: every run passed, or every run failed."""
        return sum(1 for line in self.lines if not line["signal"])

    def jsonl(self) -> str:
        return "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in self.lines)


def make_groups(archive: Archive | None, tasks: Sequence[Task]) -> Groups:
    """A group for each of `tasks` with a run in the archive, in the tasks' order."""
    lines = []
    for task in tasks:
        line = _group(archive, task) if archive is not None else None
        if line is not None:
            lines.append(line)
    return Groups(lines)


def _group(archive: Archive, task: Task) -> dict[str, Any] | None:
    runs: list[tuple[str, float]] = []
    variants: dict[str, dict[str, Any]] = {}
    for archived in archive.variants:
        tally = archived.tallies.get(task.name)
        if tally is None:
            continue
        vid = archived.variant.id
        variants[vid] = {
            "number": archived.number,
            "label": archived.label,
            "lessons": archived.variant.lessons,
            "models": list(archived.variant.models),
        }
        runs += [(vid, 1.0)] * tally.passed + [(vid, 0.0)] * (tally.runs - tally.passed)
    if not runs:
        return None
    rewards = [reward for _, reward in runs]
    mean, spread = fmean(rewards), pstdev(rewards)
    return {
        "task": task.name,
        "digest": task.digest,
        "runs": [
            {"variant": vid, "reward": r, "advantage": (r - mean) / spread if spread > 0 else 0.0} for vid, r in runs
        ],
        "mean": mean,
        "std": spread,
        "signal": spread > 0,
        "variants": variants,
    }


def readme_section(groups: Groups) -> str:
    """What groups.jsonl is, for the export's README."""
    return f"""
## {GROUPS} ({len(groups.lines)} tasks, {groups.flat} of them with no signal)

For GRPO-style training: a line per task with runs recorded in the loop's archive (the
same task under every variant tried on it): `runs`, each `{{"variant", "reward",
"advantage"}}`, with the group's `mean` and `std`, and `variants` (each one's lessons and
models). A run's reward is 1 when it passed and 0 when it failed (errored runs are left
out); its advantage is (reward - mean) / std, the population's standard deviation of
the group's rewards. A group whose runs all passed or all failed has std 0: its
advantages are 0 and it is marked `"signal": false`.
"""
