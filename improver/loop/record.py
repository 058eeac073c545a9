"""What a loop records of itself: each decision a lineage line and an event.

`Record` is any loop's account: its lines (stamped with the time, the profile and the
round) and the events an operator reads. `Verdicts` records a decision on a change for the
loops that keep an archive (lessons, code): how it went goes into the archive's history,
as the proposer is told it, the line under the lineage's name for the outcome, and the
event in the loop's own wording (`Wording`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from improver.base.clock import utc_now
from improver.base.protocol import TokenUsage
from improver.base.variant import Variant
from improver.decide.archive import Archive, Archived
from improver.decide.decision import CHALLENGE, CHOOSE, SEALED, Decision, Outcome
from improver.loop.lineage import Lineage, chosen_counts


@dataclass(frozen=True)
class Event:
    """One thing the loop did, as an operator line and as data (`--json`)."""

    kind: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Record:
    """A loop's lineage lines and events; `round` is the round under way (0 before the first)."""

    profile: str
    lineage: Lineage
    on_event: Callable[[Event], None]
    round: int = 0
    # What was said of the change being judged before its decision (its challenge), said
    # again in the decision's lineage line.
    said: list[str] = field(default_factory=list)

    def emit(self, kind: str, text: str, **data: Any) -> None:
        self.on_event(Event(kind, text, data))

    def before_decision(self, event: Event) -> None:
        """An event on the change being judged, whose line its decision's line repeats."""
        self.on_event(event)
        self.said.append(event.text)

    def line(self, line: dict[str, Any]) -> None:
        self.lineage.append({"at": utc_now(), "profile": self.profile, "round": self.round, **line})

    def decision(self, name: str, text: str, line: dict[str, Any]) -> None:
        """A decision named `name`: its line in the lineage, with every line the operator
        was told of it (`said`, for whoever reads the lineage later: the dashboard), and
        its event saying `text`."""
        said, self.said = [*self.said, text], []
        self.line({"decision": name, **line, "said": said})
        self.on_event(Event(name, text, line))

    def stopped(self, reason: str) -> None:
        self.emit("stopped", f"stopped: {reason}", reason=reason)
        self.said = []
        self.line({"decision": "stopped", "reason": reason, "said": [f"stopped: {reason}"]})

    def ended(self, used: TokenUsage) -> None:
        self.emit("tokens", f"{used.total} tokens used", tokens_in=used.tokens_in, tokens_out=used.tokens_out)
        self.emit("recorded", f"recorded in {self.lineage.path}", lineage=str(self.lineage.path))


@dataclass(frozen=True)
class Verdict:
    """A decision on a change as a stage reached it: improver.decide.decision's word on
    it, the verb its line says, what was found, and what else its line holds."""

    said: Decision
    verb: str  # "turned down", "tried", "not judged" or "kept"
    what: str
    data: dict[str, Any] = field(default_factory=dict)
    went: str = ""  # how it went, as the proposer is told, when not how_it_went's words


class Wording(Protocol):
    """How a loop's operator lines word its decisions on changes."""

    def line(self, verdict: Verdict, label: str, change: Variant | None, number: int) -> str:
        """The line for `verdict` on the change labelled `label`, in round `number`."""
        ...

    def extra(self, number: int) -> dict[str, Any]:
        """What else each decision's event holds, in round `number`."""
        ...


@dataclass
class Verdicts:
    """Each decision on a change recorded: the archive's history and the changes tried,
    the lineage line and the event."""

    record: Record
    archive: Archive
    wording: Wording

    def __call__(self, verdict: Verdict, label: str, change: Variant | None, parent: Archived) -> None:
        said = verdict.said
        name = LINEAGE[said.outcome, said.part]
        data = {"outcome": said.outcome.value, **verdict.data, **self.wording.extra(self.record.round)}
        self.archive.history.append({"change": label, "went": verdict.went or how_it_went(name, data)})
        if change is not None:
            self.archive.tried.add(change.id)  # only now: a change interrupted mid-trial may be proposed again
        self.archive.save()
        line = {"change": label, "variant": change.id if change else None, "parent": parent.variant.id, **data}
        self.record.decision(name, self.wording.line(verdict, label, change, self.record.round), line)


# A decision's outcome and part, as the lineage has always named it.
LINEAGE: dict[tuple[Outcome, str], str] = {
    (Outcome.TURNED_DOWN, CHOOSE): "turned down",
    (Outcome.HOLDOUT_TURNED_DOWN, SEALED): "turned down",
    (Outcome.TURNED_DOWN, SEALED): "turned down",
    (Outcome.DROPPED, CHOOSE): "dropped",
    (Outcome.NOT_JUDGED, CHOOSE): "not judged",
    (Outcome.NOT_JUDGED, SEALED): "not judged",
    (Outcome.NOT_BETTER, CHOOSE): "tried",
    (Outcome.NOT_BETTER, CHALLENGE): "shortcut",
    (Outcome.LOSES_TASKS, CHALLENGE): "shortcut",
    (Outcome.LOSES_TASKS, CHOOSE): "tried",
    (Outcome.NOT_BETTER, SEALED): "not confirmed",
    (Outcome.LOSES_TASKS, SEALED): "not confirmed",
    (Outcome.KEPT, SEALED): "kept",
}


def how_it_went(decision: str, data: dict[str, Any], chosen_on: str = "tasks") -> str:
    """How a change went, as the proposer may be told: nothing a sealed task said. The
    improver loop words its own decisions so too, chosen on "problems"."""
    counts = chosen_counts(data)
    if decision == "turned down":
        return (
            "turned down before it was tried"
            if "holdout_gain" not in data
            else f"better on the {chosen_on} to choose on, but not confirmed"
        )
    if decision == "not confirmed":
        return f"better on the {chosen_on} to choose on{counts}, but not confirmed"
    if decision == "shortcut":
        return f"better on the {chosen_on} to choose on{counts}, but a shortcut: not better on variants of the tasks it newly passes"
    if decision == "dropped":
        return f"clearly worse after one run of each task{counts}"
    if decision == "not judged":
        return "not judged: too many of its runs errored"
    return f"not better on the {chosen_on} to choose on{counts}"


def contests(said: Decision) -> str:
    """How many tasks were contested (looked lost, so were run again) and how many were lost."""
    if not said.contested:
        return ""
    return f"; {len(said.contested)} contested task(s) run again, {len(said.lost)} lost beyond chance"


def left_out(errored: int) -> str:
    """Errored runs are never counted as failures; the lines say how many were left out."""
    return f" ({errored} errored runs left out)" if errored else ""
