"""Near-twins: the demo's own sealed tasks, edited as a person or a proposer might edit
them, are sealed again by no home, and a refusal names the task they are a twin of."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from agentd.app.demo import PROFILE
from agentd.app.seals import seal_tasks
from agentd.errors import WrongValue
from agentd.home import Home
from improver.base.errors import ImproverError
from improver.episodes.validate import validate
from improver.seals.seal import SealRequest
from improver.tasks.task import Task, TaskSet, load_tasks
from tests.cli.test_seal_cli import sharing_ledger
from tests.examplekit import harvested, sealed

EDITS = {
    "a trailing space": lambda ask: ask + " ",
    "lower-cased": str.lower,
    "no full stop": lambda ask: ask.rstrip("."),
    "Please pay": lambda ask: ask.replace("Pay ", "Please pay ", 1),
    "a greeting first": lambda ask: "Hello. " + ask,
}


def edited_set(tasks: tuple[Task, ...], edit, operator: str, path: Path) -> Path:
    """The tasks with their asks edited, validated as any set, under new names."""
    renamed = tuple(replace(t, name=f"edited-{i}", task=edit(t.task)) for i, t in enumerate(tasks))
    asyncio.run(validate(TaskSet(PROFILE, operator, renamed))).taskset.save(path)
    return path


@pytest.mark.parametrize("how", EDITS)
def test_an_edited_sealed_task_is_refused_naming_the_task_it_is_a_twin_of(
    agentd, home: Home, tmp_path: Path, how: str
) -> None:
    first = sealed(home)
    target = first.seal.real_tasks[0]
    work = edited_set((target,), EDITS[how], load_tasks(home.root / "work.json").operator, tmp_path / "edited.json")
    r = agentd("improve", "seal", PROFILE, "--tasks", work, "--seed", "again")
    assert r.code == 1 and "Traceback" not in r.err
    assert f"task edited-0 was sealed already, by seal {first.seal.id}" in r.err
    assert f"twin of its task {target.name}" in r.err
    assert len(list(home.routes.root.glob("*-sealed-*"))) == 1


def test_a_near_twin_of_a_task_another_home_sealed_is_refused_by_the_claims_sketches(
    agentd, home: Home, tmp_path: Path
) -> None:
    first = sealed(home)
    other = sharing_ledger(home, tmp_path / "other")
    harvested(other)  # the example in the other home, its sessions recorded there too
    operator = load_tasks(home.root / "work.json").operator
    work = edited_set(first.seal.real_tasks[:1], EDITS["Please pay"], operator, tmp_path / "edited.json")
    with pytest.raises(ImproverError, match=rf"sealed already, by seal {first.seal.id} \(claim .*near-twin of one of"):
        seal_tasks(other, PROFILE, work, SealRequest(seed="elsewhere"), None)


def test_near_twins_of_tasks_shown_to_a_proposer_stay_to_choose_on(agentd, home: Home, tmp_path: Path) -> None:
    first = sealed(home, wallet=None)
    shown = first.seal.train().tasks
    operator = load_tasks(home.root / "work.json").operator
    twins = [replace(t, name=f"twin-{i}", task=EDITS["Please pay"](t.task)) for i, t in enumerate(shown)]
    work = tmp_path / "twins.json"
    asyncio.run(validate(TaskSet(PROFILE, operator, tuple(twins)))).taskset.save(work)
    with pytest.raises(
        WrongValue, match=r"were shown to a proposer before \(task twin-\d+, by seal \w+, as a near-twin"
    ):
        seal_tasks(home, PROFILE, work, SealRequest(seed="x"), None)
