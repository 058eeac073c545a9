"""Separation: never seal what was exported, never export what is sealed, nor their
twins; never seal a task twice, nor a task a proposer was shown.

A task is known by its content key (improver.tasks.task.Task.content_key: what was asked,
its stand-ins and checks, whatever it is named), so a twin (the same request made in
another session) is the same task here; and by what survives editing it
(improver.tasks.twins): its twin key (the same but for case, spacing and punctuation)
and its sketch, which a near-twin's agrees with ("Please pay" for "Pay"). Every rule
below holds for twins and near-twins as for the task itself, and a refusal names the
earlier task a near-twin is one of. What is sealed comes from two places: the seal
files of this home, and the `agent.seal/v1` claims on the ledger, each of which carries
the content keys of the tasks it sealed. What was shown comes from the same places: a
seal's tasks to choose on are shown to the proposer (they and their runs' outcomes), so
they are in this home's seal's train file and, as `shown`, in its claim. So the rules
hold across homes that share a ledger: a task another home sealed is as sealed as one
sealed here, and a task another home's proposer was shown is as shown.

- `seal` refuses a task exported for training (a model may have learnt it) and a task
  sealed before (its confirmations were granted once; sealing it again would grant
  fresh ones on tasks the loop has already asked about), naming the task and the seal.
- `seal` keeps a task a proposer was shown on the side to choose on (it is known to the
  proposer already) and draws the sealed side from the others (improver.seals.seal.split).
- `harvest` leaves both out and counts them, so a fresh harvest can always be sealed.
- `export` leaves out every sealed task, the sessions they came from, and every session
  whose task, harvested now, is a sealed task's twin.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from improver.base.errors import ImproverError
from improver.tasks.task import Task
from improver.tasks.twins import Twins, sketch_of_text
from improver.train.export import ExportRecord
from ledger import Ledger

LEFT_OUT = ("sealed", "exported")
SEAL_KIND = "agent.seal/v1"


@dataclass(frozen=True)
class Separation:
    """What is sealed (by content and twin key, and by sketch, with the seal that sealed
    it), what a proposer was shown (alike), and what was exported."""

    sealed: Mapping[str, str]  # content key -> "seal ID (claim ...)"
    sealed_sessions: frozenset[str]  # the sessions this home's sealed tasks came from
    exported: ExportRecord
    shown: Mapping[str, str] = field(default_factory=dict)  # content key -> the first seal that had it to choose on
    sealed_twins: Mapping[str, str] = field(default_factory=dict)  # twin key -> the seal
    shown_twins: Mapping[str, str] = field(default_factory=dict)
    sealed_near: Twins[str] = field(default_factory=Twins)  # sketch -> the seal, and the task where it is known
    shown_near: Twins[str] = field(default_factory=Twins)

    @classmethod
    def of(
        cls,
        seals: Iterable[tuple[str, str | None, Sequence[Task], Sequence[Task]]],
        claims: Iterable[tuple[str, Mapping[str, Any]]],
        exported: ExportRecord,
    ) -> Separation:
        """From this home's seals (id, claim or None, real sealed tasks, tasks to choose
        on), the ledger's seal claims (claim id, body) and the record of exports."""
        sealed, shown = _Known(), _Known()
        sessions: set[str] = set()
        for seal_id, claim, tasks, train in seals:
            label = _label(seal_id, claim)
            for task in tasks:
                sealed.add(task, label)
                if task.source.get("session") is not None:
                    sessions.add(str(task.source["session"]))
            for task in train:
                shown.add(task, label)
        for claim, body in claims:
            label = _label(str(body.get("seal")), claim)
            sealed.read(body, ("contents", "twins", "sketches"), label, again=True)
            # Claims published before `shown` (or `twins`, `sketches`) were carried say nothing of them.
            shown.read(body, ("shown", "shown_twins", "shown_sketches"), label, again=False)
        return cls(
            sealed.keys, frozenset(sessions), exported, shown.keys, sealed.twins, shown.twins, sealed.near, shown.near
        )

    def sealed_by(self, task: Task) -> str | None:
        """The seal that sealed `task`, its twin or a near-twin, if one did (for a
        near-twin, which task of the seal's it is one of, where that is known)."""
        return _found(self.sealed, self.sealed_twins, self.sealed_near, task)

    def shown_by(self, task: Task) -> str | None:
        """The first seal that showed `task`, its twin or a near-twin to a proposer."""
        return _found(self.shown, self.shown_twins, self.shown_near, task)

    def check_sealable(self, tasks: Iterable[Task]) -> None:
        """Refuses, naming the first task and why, a set holding a task exported or sealed."""
        for task in tasks:
            if self.exported.covers(task):
                raise ImproverError(
                    f"task {task.name} was exported for training: a model may have learnt it, so it cannot be sealed; "
                    "harvest again (exported tasks are left out) and seal the new set"
                )
            by = self.sealed_by(task)
            if by:
                raise ImproverError(
                    f"task {task.name} was sealed already, by {by}: a task is sealed once, so its confirmations are "
                    "never granted twice; harvest again (sealed tasks are left out) and seal the new set"
                )

    def fresh(self, tasks: Iterable[Task]) -> tuple[tuple[Task, ...], Counter[str]]:
        """The tasks that may be sealed, and how many were left out for each reason."""
        kept: list[Task] = []
        left_out: Counter[str] = Counter()
        for task in tasks:
            if self.sealed_by(task) or task.source.get("session") in self.sealed_sessions:
                left_out["sealed"] += 1
            elif self.exported.covers(task):
                left_out["exported"] += 1
            else:
                kept.append(task)
        return tuple(kept), left_out

    def unexportable_sessions(self, harvested_now: Iterable[Task]) -> set[str]:
        """The sessions whose task is sealed: each sealed task's own, and every session
        whose task, harvested now, is a sealed task's twin."""
        twins = {str(t.source["session"]) for t in harvested_now if self.sealed_by(t) and t.source.get("session")}
        return set(self.sealed_sessions) | twins

    def exportable(self, tasks: Iterable[Task], private: set[str]) -> tuple[Task, ...]:
        """The tasks export may write: none sealed, none from a private or sealed session."""
        return tuple(t for t in tasks if t.source.get("session") not in private and not self.sealed_by(t))


def seal_claims(ledger: Ledger) -> list[tuple[str, Mapping[str, Any]]]:
    """Every seal claim on the ledger, whoever published it: (claim id, body)."""
    return [(entry.claim_id, entry.body) for entry in ledger.entries(kind=SEAL_KIND)]


@dataclass
class _Known:
    """Tasks known by content key, twin key and sketch, each with a seal's label."""

    keys: dict[str, str] = field(default_factory=dict)
    twins: dict[str, str] = field(default_factory=dict)
    near: Twins[str] = field(default_factory=Twins)

    def add(self, task: Task, label: str) -> None:
        self.keys.setdefault(task.content_key, label)
        self.twins.setdefault(task.twin_key, f"{label}, as a twin of its task {task.name}")
        self.near.add(task.sketch, f"{label}, as a near-twin of its task {task.name}")

    def read(self, body: Mapping[str, Any], names: tuple[str, str, str], label: str, again: bool) -> None:
        """A claim's lists: content keys (a later claim's label wins when `again`), twin
        keys and sketches (where this home knows the task already, the label naming it stays)."""
        contents, twin_keys, sketches = (body.get(name) or () for name in names)
        for each in contents:
            if again:
                self.keys[str(each)] = label
            else:
                self.keys.setdefault(str(each), label)
        for each in twin_keys:
            self.twins.setdefault(str(each), f"{label}, as a twin of one of its tasks")
        for text in sketches:
            sketch = sketch_of_text(text)
            if sketch is not None:
                self.near.add(sketch, f"{label}, as a near-twin of one of its tasks")


def _found(keys: Mapping[str, str], twin_keys: Mapping[str, str], near: Twins[str], task: Task) -> str | None:
    """The label `task` is known by: as itself, as a twin, or as a near-twin (each label says which)."""
    return keys.get(task.content_key) or twin_keys.get(task.twin_key) or near.near(task.sketch)


def _label(seal_id: str, claim: str | None) -> str:
    return f"seal {seal_id} (claim {claim[:16]})" if claim else f"seal {seal_id}"
