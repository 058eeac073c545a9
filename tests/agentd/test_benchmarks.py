"""BFCL and τ²-bench imported as tasks: they validate, and agentd scores the runs of a
scripted answerer (each task right, and many wrong ways) as the authors' own scorers do."""

from __future__ import annotations

import asyncio

import pytest

from improver.base.variant import Variant
from improver.benchmarks import agreement, bfcl, tau2
from improver.episodes.harness import run_task
from improver.episodes.validate import check_task, replay
from improver.tasks.task import Task
from tests.agentd.benchkit import bfcl_rows, needs, tau2_rows

NO_MODEL = Variant("", "", ())


def no_model(spec: str):  # a replayed run asks no model
    raise AssertionError(f"a replay asked for model {spec}")


async def harness_verdicts(tasks: list[Task]) -> list[tuple[Task, agreement.Variant, bool]]:
    """Each task's runs, through the harness against the task's own stand-ins or world."""
    out = []
    for task in tasks:
        for variant in agreement.variants(task):
            result = await run_task(task, NO_MODEL, replay(variant.run), no_model, retries=0)
            assert result.outcome != "errored", result.reason
            out.append((task, variant, result.passed))
    return out


@needs("bfcl_eval")
@pytest.mark.parametrize("name", ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance"])
def test_bfcl_sets_agree_with_bfcls_own_checker(name: str) -> None:
    imported = bfcl.import_set(name, "bfcl")
    rows, truths = bfcl_rows(name)
    assert len(imported.tasks) == len(rows) and not imported.skipped
    kept = [t for t in imported.tasks if asyncio.run(check_task(t)) is None]
    assert len(kept) >= len(rows) - 5  # the few whose own answer fails are excluded, with a reason
    verdicts = asyncio.run(harness_verdicts(imported.tasks))
    wrong = [
        (task.name, variant.why, ours)
        for task, variant, ours in verdicts
        if ours
        != agreement.bfcl_verdict(rows[task.source["id"]], truths.get(task.source["id"]), name, variant.run.calls)
    ]
    assert len(verdicts) >= 3 * len(rows)
    assert wrong == []
    assert any(not ours for _, _, ours in verdicts) and any(ours for _, _, ours in verdicts)


@needs("tau2")
def test_tau2_retail_tasks_agree_with_tau2s_own_evaluation() -> None:
    imported, policy = asyncio.run(tau2.import_domain("retail", "tau2-retail", limit=3))
    assert "retail" in policy.lower() and len(imported.tasks) == 3
    rows = tau2_rows("retail")
    verdicts = asyncio.run(harness_verdicts(imported.tasks))
    wrong = [
        (task.name, variant.why, ours)
        for task, variant, ours in verdicts
        if ours != agreement.tau2_verdict("retail", rows[task.source["id"]], variant.run)
    ]
    assert wrong == []
    assert {ours for _, _, ours in verdicts} == {True, False}


@needs("tau2")
def test_with_a_user_model_a_tau2_task_is_a_conversation_its_customer_holding_the_rest() -> None:
    imported, _ = asyncio.run(tau2.import_domain("retail", "tau2-retail", user_model="script:customer.toml", limit=2))
    task = imported.tasks[0]
    assert task.user is not None and task.user.model == "script:customer.toml"
    assert "Yusuf Rossi" in task.user.said[0] and "Yusuf Rossi" not in task.task  # what the customer knows is held back
    assert asyncio.run(check_task(task)) is None  # validated with the recorded person in the customer's seat
