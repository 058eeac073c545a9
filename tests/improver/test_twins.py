"""Twins and near-twins: what survives editing a task, and the split that keeps them together."""

from __future__ import annotations

from dataclasses import replace

import pytest

from improver.seals.seal import split
from improver.tasks import twins
from improver.tasks.task import TaskSet
from improver.train.export import ExportRecord
from tests.improver.taskkit import OPERATOR, paid_task

BASE = paid_task("work-1", number="23")


@pytest.mark.parametrize(
    "ask", [BASE.task + "  ", BASE.task.upper(), BASE.task.rstrip("."), BASE.task.replace(",", " ;")]
)
def test_case_spacing_and_punctuation_leave_the_twin_key(ask: str) -> None:
    edited = replace(BASE, task=ask)
    assert edited.content_key != BASE.content_key and edited.twin_key == BASE.twin_key


@pytest.mark.parametrize(
    ("ask", "near"),
    [
        (BASE.task.replace("Pay", "Please pay"), True),
        ("Hello. " + BASE.task, True),
        (BASE.task + " Thanks!", True),
        ("Pay invoice 24 from Acme, 7 USD, to acme-ltd.", False),  # another invoice, same payee and amount
        ("Send acme-ltd 7 USD.", False),  # a reworded ask that shares few words
    ],
)
def test_a_reworded_ask_is_a_near_twin_and_another_invoice_is_not(ask: str, near: bool) -> None:
    known = twins.Twins[str]()
    known.add(BASE.sketch, "base")
    assert (known.near(replace(BASE, task=ask).sketch) == "base") is near


def test_tasks_whose_checks_differ_are_never_near_twins_however_alike_they_read() -> None:
    other = paid_task("work-2", number="23", payee="mallory")  # the same ask, another right run
    assert other.task == BASE.task and other.checks != BASE.checks
    known = twins.Twins[str]()
    known.add(BASE.sketch, "base")
    assert known.near(other.sketch) is None


def test_a_sketch_is_published_and_read_back() -> None:
    text = twins.sketch_text(BASE.sketch)
    assert twins.sketch_of_text(text) == BASE.sketch
    assert twins.sketch_of_text("short") is None and twins.sketch_of_text("z" * len(text)) is None


def test_near_twins_fall_on_one_side_of_every_split() -> None:
    family = [
        replace(BASE, name=f"work-{i}", task=ask)
        for i, ask in enumerate(
            [BASE.task, BASE.task.lower(), BASE.task.replace("Pay", "Please pay"), "Hello. " + BASE.task], 1
        )
    ]
    others = [paid_task(f"work-{n}", number=str(n)) for n in range(40, 48)]
    taskset = TaskSet("invoices", OPERATOR, (*family, *others))
    assert len(set(twins.groups(taskset.tasks).values())) == 1 + len(others)
    for seed in range(30):
        _, sealed = split(taskset, 50, str(seed))
        sides = {t.name in {s.name for s in sealed} for t in family}
        assert len(sides) == 1, f"seed {seed} split the near-twins"


def test_an_export_record_covers_the_twins_and_near_twins_of_what_went_out() -> None:
    record = ExportRecord(
        contents=frozenset({BASE.content_key}),
        twins=frozenset({BASE.twin_key}),
        sketches=(twins.sketch_text(BASE.sketch),),
    )
    assert record.covers(replace(BASE, task=BASE.task.lower(), source={}))
    assert record.covers(replace(BASE, task="Hello. " + BASE.task, source={}))
    assert not record.covers(replace(paid_task("x", number="31"), source={}))
