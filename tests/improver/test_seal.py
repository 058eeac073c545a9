"""The seal's split by content, and canaries that nothing but their code word sets apart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from improver.base.routes import Routes
from improver.episodes.validate import validate
from improver.seals.seal import SealRequest, ShownTasks, make_seal, split
from improver.seals.separation import Separation
from improver.tasks.task import Task, TaskSet
from improver.train.export import ExportRecord
from tests.improver.taskkit import OPERATOR, paid_task

NOTHING = Separation({}, frozenset(), ExportRecord())  # nothing sealed or exported before


def twin(name: str, session: str) -> Task:
    """The same request as paid_task(number="23"), made again in another session."""
    return paid_task(name, number="23", id=session)


def with_twins() -> TaskSet:
    """Ten tasks: three alike (invoice 23, three sessions), five good and two bad others."""
    others = [paid_task(f"work-{n}", number=str(n)) for n in range(40, 45)]
    bad = [paid_task(f"work-{n}", number=str(n), payee="mallory", outcome="bad") for n in (50, 51)]
    tasks = [twin("work-1", "s-a"), *others, twin("work-2", "s-b"), *bad, twin("work-3", "s-c")]
    return TaskSet("invoices", OPERATOR, tuple(tasks))


def test_identical_tasks_fall_on_the_same_side_whatever_the_seed() -> None:
    taskset = with_twins()
    assert len({t.content_key for t in taskset.tasks if t.name in ("work-1", "work-2", "work-3")}) == 1
    for seed in range(40):
        choose, sealed = split(taskset, 50, str(seed))
        sides = {
            "sealed" if t in sealed else "choose" for t in taskset.tasks if t.name in ("work-1", "work-2", "work-3")
        }
        assert len(sides) == 1, f"seed {seed} split the twins"
        assert len(choose) + len(sealed) == len(taskset.tasks)
        assert sorted(t.source["outcome"] for t in sealed).count("bad") == 1  # each outcome drawn on its own


def test_the_split_by_content_is_the_same_for_anyone_with_the_set_and_the_seed() -> None:
    taskset = with_twins()
    first, again = split(taskset, 50, "s1"), split(taskset, 50, "s1")
    assert [t.name for t in first[1]] == [t.name for t in again[1]]
    draws = {tuple(t.name for t in split(taskset, 50, str(seed))[1]) for seed in range(20)}
    assert len(draws) > 1  # the seed does draw


def test_whole_groups_are_taken_until_the_share_is_reached() -> None:
    taskset = with_twins()
    for seed in range(40):
        _, sealed = split(taskset, 50, str(seed))
        good = [t for t in sealed if t.source["outcome"] == "good"]
        # Eight good tasks, four wanted: four single ones, or the three twins with the
        # single ones drawn before them, and the taking stops once there are four.
        twins = sum(1 for t in good if t.name in ("work-1", "work-2", "work-3"))
        assert len(good) == 4 if twins == 0 else 4 <= len(good) <= 6, f"seed {seed} sealed {len(good)} good tasks"


def validated(taskset: TaskSet) -> TaskSet:
    return asyncio.run(validate(taskset)).taskset


def test_canaries_stand_among_the_sealed_tasks_by_digest_not_at_the_end(tmp_path: Path) -> None:
    taskset = validated(
        TaskSet("invoices", OPERATOR, tuple(paid_task(f"work-{n}", number=str(n)) for n in range(20, 32)))
    )
    seal = make_seal(taskset, Routes(tmp_path), SealRequest(share=50, canaries=3, seed="x"), NOTHING)
    tasks = seal.sealed.tasks
    assert [t.digest for t in tasks] == sorted(t.digest for t in tasks)
    assert len(seal.canaries) == 3 and len(seal.real_tasks) == 6
    for canary in seal.canaries:
        copied = next(t for t in seal.real_tasks if t.task == canary.task)
        # What a candidate is given of a canary is what it is given of the task it copies.
        assert (canary.task, canary.tools, canary.schemas(), canary.standins) == (
            copied.task,
            copied.tools,
            copied.schemas(),
            copied.standins,
        )


def test_an_exported_task_is_covered_under_another_name_and_from_another_session() -> None:
    exported = paid_task("tasks-1", number="23", id="s-exported")
    record = ExportRecord(frozenset(), frozenset({exported.digest}), frozenset({exported.content_key}))
    assert record.covers(paid_task("work-7", number="23", id="s-exported"))
    assert record.covers(twin("work-9", "s-elsewhere"))
    assert not record.covers(paid_task("work-8", number="24"))
    by_session = ExportRecord(frozenset({"s-exported"}))
    assert by_session.covers(paid_task("work-5", number="99", id="s-exported"))


def test_a_task_shown_before_stays_to_choose_on_and_the_share_is_sealed_from_the_others() -> None:
    taskset = with_twins()
    keys = {t.name: t.content_key for t in taskset.tasks}
    shown = {keys["work-1"]: "seal 0123456789abcdef", keys["work-40"]: "seal 0123456789abcdef"}
    for seed in range(20):
        choose, sealed = split(taskset, 50, str(seed), shown)
        assert not {t.content_key for t in sealed} & set(shown), f"seed {seed} sealed a shown task"
        assert {"work-1", "work-2", "work-3", "work-40"} <= {t.name for t in choose}
        # Eight good tasks, four wanted, and only four never shown: all of them, whatever the seed.
        assert sorted(t.name for t in sealed if t.source["outcome"] == "good") == [
            "work-41",
            "work-42",
            "work-43",
            "work-44",
        ]


def test_too_few_tasks_never_shown_for_the_share_is_refused_naming_a_seal_that_showed_one() -> None:
    taskset = with_twins()
    keys = {t.name: t.content_key for t in taskset.tasks}
    shown = {keys[name]: "seal 0123456789abcdef" for name in ("work-1", "work-40", "work-41")}
    with pytest.raises(ShownTasks) as refused:
        split(taskset, 50, "s", shown)
    assert str(refused.value) == (
        "5 of the 10 tasks were shown to a proposer before (task work-1, by seal 0123456789abcdef), so they stay to "
        "choose on and are never sealed; that leaves 3 of the 8 tasks whose outcome was good to seal, fewer than the 4 "
        "a share of 50% takes: lower --share or harvest more tasks"
    )
    assert len(split(taskset, 30, "s", shown)[1]) == 3  # a smaller share fits
