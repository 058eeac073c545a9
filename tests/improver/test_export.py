"""The export record: written before the files, under a lock, and read back whole."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from improver.base.errors import ImproverError
from improver.tasks.task import TaskSet
from improver.train.export import Transcript, export, read_exported, record_exported
from tests.improver.taskkit import OPERATOR, paid_session, paid_task


def transcript(number: str, outcome: str = "good", **kw) -> Transcript:
    session = paid_session(number, outcome=outcome)
    return Transcript(
        id=session.id, profile="invoices", outcome=outcome, ended="done", messages=session.transcript, tools=[], **kw
    )


def test_an_export_that_cannot_write_its_files_has_recorded_them_already(tmp_path: Path) -> None:
    out, record = tmp_path / "out", tmp_path / "exported.json"
    (out / "sft.jsonl").mkdir(parents=True)  # a directory where a file must go
    tasks = TaskSet("invoices", OPERATOR, (paid_task("tasks-1", number="31", payee="mallory", outcome="bad"),))
    with pytest.raises(ImproverError, match=f"cannot write the export into {out}.*recorded in {record} already"):
        export(out, [transcript("23")], tasks, ["agentd", "improve", "env"], record, validation=0, force=True)
    kept = read_exported(record)
    assert kept.sessions == {"s-23-acme-ltd", "s-31-mallory"}
    assert kept.covers(paid_task("work-4", number="31", payee="mallory", outcome="bad"))


def test_a_malformed_or_sealed_transcript_is_passed_over_and_counted(tmp_path: Path) -> None:
    broken = transcript("24")
    broken.messages[2]["tool_calls"] = ["pay"]
    report = export(
        tmp_path / "out",
        [transcript("23"), broken, transcript("25", sealed=True)],
        TaskSet("invoices", OPERATOR, ()),
        ["agentd", "improve", "env"],
        tmp_path / "exported.json",
        validation=0,
    )
    assert (report.sft, report.passed_over["malformed"], report.passed_over["sealed"]) == (1, 1, 1)
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "whose task is sealed" in readme and "1 sealed, 1 malformed" in readme


def _record_many(path: str, worker: int) -> None:  # runs in another process
    for n in range(10):
        task = paid_task(f"tasks-{n}", number=f"{worker}{n}", id=f"s-{worker}-{n}")
        record_exported(Path(path), [f"line-{worker}-{n}"], [task])


def test_exports_at_once_lose_nothing_of_each_other(tmp_path: Path) -> None:
    path = tmp_path / "exported.json"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_record_many, args=(str(path), w)) for w in range(6)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
    assert all(p.exitcode == 0 for p in workers)
    kept = read_exported(path)
    assert len(kept.sessions) == 6 * 10 * 2 and len(kept.tasks) == len(kept.contents) == 6 * 10


def test_a_damaged_record_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "exported.json"
    path.write_text('{"sessions": 5, "tasks": []}')
    with pytest.raises(ImproverError, match="not a record of exports"):
        read_exported(path)
