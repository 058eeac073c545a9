"""Rubrics: gates and weights over a task's checks, scored by the harness and validated
on the reward they give."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from improver.base.errors import ImproverError
from improver.base.variant import Variant
from improver.episodes.harness import run_task
from improver.episodes.validate import validate
from improver.tasks.rubric import Rubric, parse_rubric
from improver.tasks.task import Task, TaskSet, load_tasks
from tests.improver.taskkit import OPERATOR, ScriptedModel, calls, follows_the_protocol, paid_task, pays_right, says

TOOLS = ["read_invoice", "pay", "notify"]
PAYS_BOTH = [
    calls(("read_invoice", {"number": "23"})),
    calls(("pay", {"to": "acme-ltd", "amount": "7"}), ("pay", {"to": "mallory", "amount": "7"})),
    says("Paid."),
]
PAYS_NOBODY = [calls(("read_invoice", {"number": "23"})), says("Done.")]


def run(task: Task, replies: list[dict[str, Any]]) -> Any:
    variant = Variant(OPERATOR, "", ("script:test",))
    return asyncio.run(run_task(task, variant, follows_the_protocol, lambda _s: ScriptedModel(replies), retries=0))


def test_a_gate_that_does_not_hold_makes_the_reward_0() -> None:
    plain = paid_task("work-1")
    gated = replace(plain, rubric=parse_rubric({"gates": ["no_other_changes"]}, TOOLS))
    assert run(plain, PAYS_BOTH).reward == pytest.approx(2 / 3)
    result = run(gated, PAYS_BOTH)
    assert (result.reward, result.passed) == (0.0, False)
    assert "it changes nothing else (a gate: the reward is 0)" in result.failures
    assert run(gated, pays_right()).reward == 1.0


def test_weights_make_the_reward_the_weighted_share_held() -> None:
    weighted = replace(paid_task("work-1"), rubric=parse_rubric({"weights": {"makes:pay": 3, "finishes": 1}}, TOOLS))
    result = run(weighted, PAYS_NOBODY)  # finishes (1) and changes nothing else (1 by default); no payment (3)
    assert result.reward == pytest.approx(2 / 5) and not result.passed
    assert run(
        replace(weighted, rubric=parse_rubric({"weights": {"makes": 1}}, TOOLS)), PAYS_NOBODY
    ).reward == pytest.approx(2 / 3)
    assert run(weighted, pays_right()).reward == 1.0


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ({"gates": ["pays"]}, "'pays', which is no check"),
        ({"gates": ["makes:refund"]}, "there is no tool 'refund'"),
        ({"weights": {"finishes:pay": 1}}, "finishes checks name no tool"),
        ({"weights": {"makes": -1}}, "must be a number, 0 or more"),
        ({"weights": {"makes": "3"}}, "must be a number, 0 or more"),
        ({"weights": {"makes": 0, "finishes": 0}}, "weights sum to 0"),
        ({"gates": "avoids"}, "gates must be a list"),
        ({"gate": ["avoids"]}, "not 'gate'"),
        ({}, "neither gates nor weights"),
    ],
)
def test_a_bad_rubric_is_refused_saying_what_is_wrong(table: dict[str, Any], said: str) -> None:
    with pytest.raises(ImproverError, match=said):
        parse_rubric(table, TOOLS)


def test_a_rubric_travels_in_the_task_file_under_its_digest(tmp_path: Path) -> None:
    plain = paid_task("work-1")
    assert "rubric" not in plain.to_json()  # tasks without one keep the digest they had
    ruled = replace(
        plain, name="work-2", rubric=parse_rubric({"gates": ["avoids:pay"], "weights": {"makes:pay": 2}}, TOOLS)
    )
    path = tmp_path / "work.json"
    TaskSet("invoices", OPERATOR, (plain, ruled)).save(path)
    loaded = load_tasks(path)
    assert loaded.get("work-2").rubric == ruled.rubric and loaded.get("work-1").rubric is None
    assert loaded.get("work-2").digest == ruled.digest != plain.digest
    data = json.loads(path.read_text())
    data["tasks"][1]["rubric"]["weights"]["makes:pay"] = 0.5
    path.write_text(json.dumps(data))
    with pytest.raises(ImproverError, match="task work-2: field 'digest' does not match"):
        load_tasks(path)


def test_validation_judges_the_rubrics_reward() -> None:
    plain = paid_task("work-1")
    # The failure (does nothing and finishes) misses only checks that weigh nothing.
    blind = replace(
        plain,
        name="work-2",
        rubric=parse_rubric({"weights": {"makes": 0, "no_other_changes": 0, "finishes": 1}}, TOOLS),
    )
    # A profile's weights sum above 0, but none of this task's checks carries any.
    weightless = replace(
        plain,
        name="work-3",
        rubric=Rubric(weights={"makes": 0.0, "no_other_changes": 0.0, "finishes": 0.0, "says": 1.0}),
    )
    gated = replace(
        plain, name="work-4", rubric=parse_rubric({"gates": ["makes:pay"], "weights": {"finishes": 5}}, TOOLS)
    )
    checked = asyncio.run(validate(TaskSet("invoices", OPERATOR, (plain, blind, weightless, gated))))
    assert [t.name for t in checked.taskset.tasks] == ["work-1", "work-4"]
    reasons = {e.task.name: e.reason for e in checked.newly_excluded}
    assert "failure 1 (does nothing and finishes) scores the full reward under the rubric" in reasons["work-2"]
    assert "its solution scores 0 under the rubric, not 1: its checks carry no weight" in reasons["work-3"]
