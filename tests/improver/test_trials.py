"""Trials: a variant on a task set R times each, a bounded number at once."""

from __future__ import annotations

import asyncio

import pytest

from improver.base.protocol import ProviderError
from improver.base.variant import Variant
from improver.episodes.trials import run_trials
from tests.improver.taskkit import OPERATOR, ScriptedModel, calls, follows_the_protocol, paid_task, says


def pays(messages: list[dict]) -> dict:
    """Reads the invoice the task names, then pays acme-ltd, except on invoice 24
    (pays mallory) and invoice 25 (the provider is down)."""
    task = messages[1]["content"]
    number = task.split()[2]
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if number == "25":
        return ProviderError("HTTP 503 through every retry")
    if turn == 0:
        return calls(("read_invoice", {"number": number}))
    if turn == 1:
        return calls(("pay", {"to": "mallory" if number == "24" else "acme-ltd", "amount": "7"}))
    return says("Paid.")


def test_per_task_counts_totals_tokens_and_errors_kept_apart() -> None:
    tasks = [paid_task("work-1", number="23"), paid_task("work-2", number="24"), paid_task("work-3", number="25")]
    model = ScriptedModel(pays)
    seen = []
    result = asyncio.run(
        run_trials(
            Variant(OPERATOR, "", ("script:x",)),
            tasks,
            follows_the_protocol,
            lambda spec: model,
            runs=4,
            concurrency=3,
            retries=1,
            on_result=seen.append,
        )
    )
    assert {name: (t.passed, t.failed, t.errored) for name, t in result.per_task.items()} == {
        "work-1": (4, 0, 0),
        "work-2": (0, 4, 0),
        "work-3": (0, 0, 4),
    }
    assert (result.passed, result.failed, result.errored, result.judged) == (4, 4, 4, 8)
    assert result.errors == ["script:x: HTTP 503 through every retry"]
    assert result.per_task["work-2"].failures == [
        'it calls pay with {"amount":"7","to":"acme-ltd"}',
        "it changes nothing else",
    ]
    assert result.usage.total > 0
    assert [r.task for r in result.results] == ["work-1"] * 4 + ["work-2"] * 4 + ["work-3"] * 4
    assert len(seen) == 12
    assert all(r.attempts == 2 for r in result.results if r.task == "work-3")


def test_no_more_runs_at_once_than_the_concurrency_allows() -> None:
    model = ScriptedModel(pays)
    tasks = [paid_task(f"work-{i}", number="23") for i in range(1, 11)]
    asyncio.run(
        run_trials(
            Variant(OPERATOR, "", ("script:x",)), tasks, follows_the_protocol, lambda spec: model, runs=3, concurrency=4
        )
    )
    assert 1 < model.most_in_flight <= 4


def test_runs_must_be_at_least_one() -> None:
    with pytest.raises(ValueError):
        asyncio.run(
            run_trials(
                Variant(OPERATOR, "", ("script:x",)),
                [paid_task()],
                follows_the_protocol,
                lambda s: ScriptedModel(pays),
                runs=0,
            )
        )
