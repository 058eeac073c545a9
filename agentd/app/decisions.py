"""A profile's decisions as the dashboard shows them: every line of its lineage (the
lesson loop's and the code loop's) and of its improver lineage, grouped by round and
worded as `improve run`, `improve code` and `improve improver` printed them when they
made them: kept, not better, a shortcut with what the challenger's variants showed,
turned down and why, contested tasks, and each test's interval or p-value.

Each lineage line keeps what the command printed of its decision (`said`, the challenge
that came first included), so the dashboard shows those very lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from agentd.app.adopt import lineage_of
from agentd.app.archives import CODE, LESSONS, Tried, profile_archives
from agentd.errors import AgentdError
from agentd.home import Home
from improver import Lineage

IMPROVER = "improver"  # the loop of the improver lineage (`improve improver`)


@dataclass(frozen=True)
class Decision:
    """One lineage line: its decision, the change and the variant it made, and its lines
    as the command printed them (a kept change's challenge first, as it came first)."""

    loop: str
    line: int  # its line's number in its lineage file
    round: int | None
    name: str  # the lineage's: kept, tried, shortcut, not confirmed, turned down, dropped, not judged, stopped
    verdict: str  # at a glance: kept, not better, loses tasks, shortcut, ...
    change: str
    variant: str | None  # the variant's id, for the archive's tree to link to
    parent: str | None  # the id of the variant it was made from
    said: list[str]
    at: str
    step: str | None = None
    pulse: int | None = None  # a kept change's claim on the ledger

    @property
    def anchor(self) -> str | None:
        """What a page links to it by: a variant tried by its id (as the archive's tree
        links it; a change turned down was never tried), the improver's by its line."""
        if self.loop == IMPROVER:
            return f"i-{self.line}"
        return f"v-{self.variant}" if self.variant and self.name != "turned down" else None


@dataclass(frozen=True)
class Round:
    loop: str
    number: int | None
    building_on: str | None  # "variant N (label)", as the lesson loop's round line says
    decisions: list[Decision] = field(default_factory=list)


@dataclass(frozen=True)
class Placed:
    """A variant as an archive holds it."""

    tried: Tried
    number: int
    label: str


@dataclass(frozen=True)
class Known:
    """What a line's place needs beyond the line: the archives' variants by id (the loop
    that tried it, the parent a round built on)."""

    variants: dict[str, Placed]

    def loop_of(self, line: dict[str, Any]) -> str:
        for key in ("variant", "parent"):
            found = self.variants.get(str(line.get(key)))
            if found:
                return found.tried.loop
        return CODE if "code" in (line.get("after") or {}) else LESSONS


def known(home: Home, profile: str) -> Known:
    return Known(
        {
            a.variant.id: Placed(t, a.number, a.label)
            for t in reversed(profile_archives(home, profile))
            for a in t.archive.variants
        }
    )


def rounds(home: Home, profile: str) -> list[Round]:
    """Every decision of the profile's loops, oldest first, in rounds (a run's rounds
    count from 1, so a round is the lines in a row that name the same one)."""
    facts = known(home, profile)
    lineage = lineage_of(home, profile)
    lines = [_read(lineage, n, line, lambda n, line: decision(n, line, facts)) for n, line in lineage.lines()]
    lines += improver_decisions(home, profile)
    return [_round(loop, number, list(group), facts) for (loop, number), group in _runs(lines)]


def verdicts(home: Home, profile: str) -> dict[str, Decision]:
    """The decision on each variant tried, by the variant's id (a change turned down was
    never tried, even when it is one tried before, proposed again)."""
    return {d.variant: d for r in rounds(home, profile) for d in r.decisions if d.variant and d.name != "turned down"}


def _runs(lines: list[Decision]) -> Iterator[tuple[tuple[str, int | None], Iterator[Decision]]]:
    return groupby(lines, key=lambda d: (d.loop, d.round))


def _round(loop: str, number: int | None, decisions: list[Decision], facts: Known) -> Round:
    parent = facts.variants.get(str(decisions[0].parent))
    building_on = f"variant {parent.number} ({parent.label})" if parent and loop == LESSONS else None
    return Round(loop, number, building_on, decisions)


def decision(number: int, line: dict[str, Any], facts: Known) -> Decision:
    """A lesson or code loop's lineage line, with what its command printed of it."""
    name, change = str(line["decision"]), str(line.get("change", ""))
    return Decision(
        facts.loop_of(line),
        number,
        line.get("round"),
        name,
        _verdict(line),
        change,
        line.get("variant"),
        line.get("parent"),
        said_of(line),
        line["at"],
        line.get("step"),
        line.get("pulse"),
    )


def said_of(line: dict[str, Any]) -> list[str]:
    """The lines the command printed of a decision, as its lineage line keeps them; a
    line written before lineages kept them has only its decision and change."""
    said = line.get("said")
    if isinstance(said, list) and all(isinstance(text, str) for text in said):
        return said
    if line["decision"] == "stopped":
        return [f"stopped: {line.get('reason')}"]
    return [f"{line['decision']}: {line.get('change', '')}"]


def _verdict(line: dict[str, Any]) -> str:
    """A tried change's outcome (not better, or losing tasks), else the decision's name."""
    name = str(line["decision"])
    if name != "tried":
        return name
    return str(line.get("outcome") or ("loses tasks" if line.get("lost") else "not better"))


# -- the improver lineage (`improve improver`) ---------------------------------------------


def improver_decisions(home: Home, profile: str) -> list[Decision]:
    """Every decision on the profile's improver (`improve improver`), oldest first."""
    lineage = Lineage(home.routes.improvers(profile))
    return [_read(lineage, number, line, improver_decision) for number, line in lineage.lines()]


def _read(
    lineage: Lineage, number: int, line: dict[str, Any], worded: Callable[[int, dict[str, Any]], Decision]
) -> Decision:
    """Line `number` worded; a line without what its decision holds is named, as damaged."""
    try:
        return worded(number, line)
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise AgentdError(
            f"{lineage.path}: line {number}: a {line['decision']!r} line without what it should hold "
            f"({type(exc).__name__}: {exc}); it was damaged"
        ) from None


def improver_decision(number: int, line: dict[str, Any]) -> Decision:
    """A line of the improver lineage, with what `improve improver` printed of it."""
    name, change = str(line["decision"]), str(line.get("change", ""))
    return Decision(
        IMPROVER,
        number,
        line.get("round"),
        name,
        _verdict(line),
        change,
        line.get("improver"),
        None,
        said_of(line),
        line["at"],
        line.get("step"),
        line.get("pulse"),
    )
