"""The confirmations held-out problems have spent, counted per set and per task.

Held-out problems allow k confirmations, each at one-sided level 0.05/k (Bonferroni), so
that over all of them a no-better improver is kept at most 5% of the time. That bound is
about the tasks, not the names they come under: a held-out task that was in an earlier
set of held-out problems has been tested on as often as that set was confirmed on, and
each test was a chance to keep a no-better improver by luck. So every confirmation's
lineage line names the tasks it spent (by content key, what identical tasks share:
improver.tasks.task), and a set's next confirmation is numbered past both its own and
what the most-tested of its tasks has spent, counted in its own level (a task spent
twice at 0.05/4 has spent four confirmations of a set allowing 8). Lines written before
tasks were named count for their set alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from improver.base.errors import ImproverError
from improver.decide import levels
from improver.loop.running import Stop

FRESH = "give fresh held-out problems"
SLACK = 1e-9  # levels are sums of fractions: what rounding may leave over a whole count


@dataclass(frozen=True)
class Spent:
    """What a set of held-out problems has spent: its own confirmations, and its tasks'."""

    held: str  # the set's digest (problems.held_digest)
    tasks: Mapping[str, str]  # content key -> a name to say (problems.held_tasks)
    confirmations: int  # what the set allows
    lines: tuple[dict[str, Any], ...]  # the improver lineage's lines

    @property
    def by_set(self) -> int:
        """Its own confirmations spent, by every run so far."""
        return max(
            (line.get("confirmation", 0) for line in self.lines if line.get("held_out_digest") == self.held), default=0
        )

    def by_task(self) -> dict[str, float]:
        """Per task of the set: the confirmations spent on it, in this set's level."""
        level = levels.confirmation_level(self.confirmations)
        out = dict.fromkeys(self.tasks, 0.0)
        for line in self.lines:
            if "confirmation" not in line:
                continue
            for key in set(line.get("held_out_tasks") or ()) & out.keys():
                out[key] += levels.confirmation_level(line["confirmations"]) / level
        return out

    def most_spent(self) -> tuple[int, str | None]:
        """The confirmations the set's most-tested task has spent, whole, and its name."""
        spent = self.by_task()
        key = max(spent, key=lambda k: spent[k], default=None)
        if key is None:
            return 0, None
        return math.ceil(spent[key] - SLACK), self.tasks[key]

    def next_number(self) -> int:
        """The number of the set's next confirmation; Stop when none is left."""
        task_spent, task = self.most_spent()
        number = max(self.by_set, task_spent) + 1
        if number <= self.confirmations:
            return number
        if task_spent > self.by_set:
            raise Stop(
                f"held-out task {task} has spent {task_spent} of {self.confirmations} confirmations with earlier "
                f"held-out problems: {FRESH}"
            )
        raise Stop(f"the held-out problems have spent their {self.confirmations} confirmations: {FRESH}")

    def check_new(self) -> None:
        """A set not given before must not hold a task spent already beyond what it allows."""
        if self.by_set:
            return  # given before: its own count goes on, and stops the run when spent
        task_spent, task = self.most_spent()
        if task_spent >= self.confirmations:
            raise ImproverError(
                f"held-out task {task} has spent {task_spent} of {self.confirmations} confirmations with earlier "
                f"held-out problems, all that --confirmations {self.confirmations} allows a task: {FRESH}"
            )


def spent_of(held: str, tasks: Mapping[str, str], confirmations: int, lines: Iterable[dict[str, Any]]) -> Spent:
    return Spent(held, tasks, confirmations, tuple(lines))
