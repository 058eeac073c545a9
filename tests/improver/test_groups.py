"""groups.jsonl: each task's runs in the archive, with group-relative advantages."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from improver.base.variant import Variant
from improver.decide.archive import Archive
from improver.decide.stats import Tally
from improver.tasks.task import TaskSet
from improver.train.export import export
from improver.train.groups import GROUPS
from tests.improver.taskkit import OPERATOR, paid_task


def archive(tmp_path: Path) -> Archive:
    kept = Archive(tmp_path / "archive.json", "train")
    kept.add(
        Variant(OPERATOR, "", ("script:a",)),
        None,
        {"work-1": Tally(2, 4), "work-2": Tally(3, 3)},
        4,
        "the agent as it was",
        {},
    )
    kept.add(
        Variant(OPERATOR, "Check the payee.", ("script:a",)),
        0,
        {"work-1": Tally(4, 4), "work-2": Tally(4, 4), "gone": Tally(1, 2)},
        4,
        "a lesson",
        {},
    )
    return kept


def test_export_writes_each_tasks_group_with_advantages_and_marks_those_with_no_signal(tmp_path: Path) -> None:
    tasks = TaskSet(
        "invoices", OPERATOR, (paid_task("work-1"), paid_task("work-2", number="24"), paid_task("work-3", number="25"))
    )
    report = export(
        tmp_path / "out",
        [],
        tasks,
        ["agentd", "improve", "env"],
        tmp_path / "exported.json",
        validation=0,
        archive=archive(tmp_path),
    )
    lines = [json.loads(line) for line in (tmp_path / "out" / GROUPS).read_text().splitlines()]
    assert [g["task"] for g in lines] == ["work-1", "work-2"]  # work-3 was never run; "gone" is not exported
    mixed, flat = lines
    assert [r["reward"] for r in mixed["runs"]] == [1, 1, 0, 0, 1, 1, 1, 1]
    std = math.sqrt(0.75 * 0.25)
    assert (mixed["mean"], mixed["std"], mixed["signal"]) == (0.75, pytest.approx(std), True)
    assert mixed["runs"][0]["advantage"] == pytest.approx(0.25 / std) and mixed["runs"][2][
        "advantage"
    ] == pytest.approx(-0.75 / std)
    assert sum(r["advantage"] for r in mixed["runs"]) == pytest.approx(0)
    assert mixed["digest"] == tasks.tasks[0].digest and len(mixed["variants"]) == 2
    assert mixed["variants"][mixed["runs"][-1]["variant"]]["lessons"] == "Check the payee."
    assert (flat["signal"], flat["std"], {r["advantage"] for r in flat["runs"]}) == (False, 0.0, {0.0})
    assert (report.groups, report.flat_groups) == (2, 1)
    assert "## groups.jsonl (2 tasks, 1 of them with no signal)" in (tmp_path / "out" / "README.md").read_text()


def test_without_an_archive_groups_is_written_empty(tmp_path: Path) -> None:
    tasks = TaskSet("invoices", OPERATOR, (paid_task("work-1"),))
    report = export(tmp_path / "out", [], tasks, ["agentd", "improve", "env"], tmp_path / "exported.json", validation=0)
    assert (tmp_path / "out" / GROUPS).read_text() == "" and report.groups == 0
