"""Separation: never seal what was exported, never export what is sealed, nor their
twins; never seal a task twice, nor a task a proposer was shown.

A task is known by its content key (improver.tasks.task.Task.content_key: what was asked,
its stand-ins and checks, whatever it is named), so a twin (the same request made in
another session) is the same task here. What is sealed comes from two places: the seal
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
from improver.train.export import ExportRecord
from ledger import Ledger

LEFT_OUT = ("sealed", "exported")
SEAL_KIND = "agent.seal/v1"


@dataclass(frozen=True)
class Separation:
    """What is sealed (by content key, with the seal that sealed it) and what was exported."""

    sealed: Mapping[str, str]  # content key -> "seal ID (claim ...)"
    sealed_sessions: frozenset[str]  # the sessions this home's sealed tasks came from
    exported: ExportRecord
    shown: Mapping[str, str] = field(default_factory=dict)  # content key -> the first seal that had it to choose on

    @classmethod
    def of(
        cls,
        seals: Iterable[tuple[str, str | None, Sequence[Task], Sequence[Task]]],
        claims: Iterable[tuple[str, Mapping[str, Any]]],
        exported: ExportRecord,
    ) -> Separation:
        """From this home's seals (id, claim or None, real sealed tasks, tasks to choose
        on), the ledger's seal claims (claim id, body) and the record of exports."""
        sealed: dict[str, str] = {}
        shown: dict[str, str] = {}
        sessions: set[str] = set()
        for seal_id, claim, tasks, train in seals:
            for task in tasks:
                sealed.setdefault(task.content_key, _label(seal_id, claim))
                if task.source.get("session") is not None:
                    sessions.add(str(task.source["session"]))
            for task in train:
                shown.setdefault(task.content_key, _label(seal_id, claim))
        for claim, body in claims:
            for key in body.get("contents") or ():
                sealed[str(key)] = _label(str(body.get("seal")), claim)
            # Claims published before `shown` was carried say nothing of their side to choose on.
            for key in body.get("shown") or ():
                shown.setdefault(str(key), _label(str(body.get("seal")), claim))
        return cls(sealed, frozenset(sessions), exported, shown)

    def sealed_by(self, task: Task) -> str | None:
        """The seal that sealed `task` (or its twin), if one did."""
        return self.sealed.get(task.content_key)

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


def _label(seal_id: str, claim: str | None) -> str:
    return f"seal {seal_id} (claim {claim[:16]})" if claim else f"seal {seal_id}"
