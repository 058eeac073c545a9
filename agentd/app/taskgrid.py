"""Each archive of a profile as a grid of tasks to choose on by variants tried: the runs of
each task each variant passed, and what went wrong in those it failed (the failed checks
the archive keeps for the proposer), as promptfoo's matrix shows a prompt per column.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentd.app.archives import Tried, profile_archives
from agentd.app.decisions import Decision, verdicts
from agentd.home import Home
from improver import ImproverError, Task


@dataclass(frozen=True)
class Cell:
    passed: int
    runs: int
    wrong: list[str]  # what went wrong in the runs it failed

    @property
    def state(self) -> str:
        """How the cell is coloured: every run passed, some, or none."""
        return "all" if self.passed == self.runs else "none" if self.passed == 0 else "some"


@dataclass(frozen=True)
class Column:
    """A variant tried, and the verdict on it (None for the agent as it was)."""

    number: int
    id: str
    label: str
    kept: bool
    verdict: str | None


@dataclass(frozen=True)
class Row:
    task: str
    ask: str  # what the task asks; "" for a task the seal does not hold (a practice task)
    session: str | None  # the session it was harvested from
    cells: list[Cell | None]  # a column's cell; None where that variant never ran the task


@dataclass(frozen=True)
class Grid:
    seal: str
    loop: str
    key: str
    columns: list[Column]
    rows: list[Row]


def grids(home: Home, profile: str) -> list[Grid]:
    """The profile's archives that hold a variant, newest seal first, each as a grid."""
    said = verdicts(home, profile)
    return [_grid(t, said) for t in profile_archives(home, profile) if t.archive.variants]


def _grid(tried: Tried, said: dict[str, Decision]) -> Grid:
    variants = tried.archive.variants
    decided = {id: d.verdict for id, d in said.items()}
    columns = [Column(a.number, a.variant.id, a.label, a.kept, decided.get(a.variant.id)) for a in variants]
    tasks = _tasks(tried)
    names = list(tasks) + sorted({n for a in variants for n in a.tallies} - set(tasks))
    rows = []
    for name in names:
        task = tasks.get(name)
        cells = [
            Cell(a.tallies[name].passed, a.tallies[name].runs, a.wrong.get(name, [])) if name in a.tallies else None
            for a in variants
        ]
        source = task.source.get("session") if task else None
        rows.append(Row(name, task.task if task else "", str(source) if source else None, cells))
    return Grid(tried.seal.id, tried.loop, tried.key, columns, rows)


def _tasks(tried: Tried) -> dict[str, Task]:
    """The seal's tasks to choose on by name; none when their file cannot be read (the
    grid still shows what the archive holds)."""
    try:
        return {t.name: t for t in tried.seal.train().tasks}
    except ImproverError:
        return {}
