"""Executors: a trial's runs through one protocol, and a run's result as JSON that comes
back exactly as the harness made it (what a worker elsewhere sends)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given, strategies as st

from improver.base.errors import ImproverError
from improver.base.protocol import EpisodeLimits, ProviderError, TokenUsage
from improver.base.variant import Variant
from improver.episodes.executors import LocalExecutor, result_from_json, result_to_json
from improver.episodes.harness import Candidate, RunResult
from improver.episodes.trials import run_trials
from improver.tasks.runs import Call, Run
from improver.tasks.task import Task
from tests.improver.taskkit import OPERATOR, ScriptedModel, follows_the_protocol, paid_task, says
from tests.improver.test_trials import pays

TASKS = [paid_task("work-1", number="23"), paid_task("work-2", number="24"), paid_task("work-3", number="25")]
VARIANT = Variant(OPERATOR, "", ("script:x",))


def trial(**options: object) -> list[RunResult]:
    model = ScriptedModel(pays)
    result = asyncio.run(
        run_trials(VARIANT, TASKS, follows_the_protocol, lambda spec: model, runs=2, retries=1, **options)  # type: ignore[arg-type]
    )
    return result.results


def test_every_result_of_a_real_trial_comes_back_from_json_as_it_was() -> None:
    for result in trial():
        sent = json.dumps(result_to_json(result))
        assert result_from_json(json.loads(sent)) == result


@dataclass
class Elsewhere:
    """An executor that is not the local one: each run made here, then sent as JSON, the
    runs under way at once counted; `sent` says whether it tells the trial they run on
    another machine."""

    inner: LocalExecutor
    sent: bool = False
    seen: list[str] = field(default_factory=list)
    under_way: int = 0
    most: int = 0

    def remote(self, task: Task) -> bool:
        return self.sent

    async def run(self, task: Task, variant: Variant, candidate: Candidate, limits: EpisodeLimits) -> RunResult:
        self.seen.append(task.name)
        self.under_way += 1
        self.most = max(self.most, self.under_way)
        await asyncio.sleep(0.01)  # as the runs of a queue wait for their workers
        made = await self.inner.run(task, variant, candidate, limits)
        self.under_way -= 1
        return result_from_json(json.loads(json.dumps(result_to_json(made))))


def test_a_trial_through_another_executor_counts_what_it_counts_here() -> None:
    model = ScriptedModel(pays)
    elsewhere = Elsewhere(LocalExecutor(lambda spec: model, retries=1))
    assert trial(executor=elsewhere) == trial()
    assert sorted(elsewhere.seen) == sorted([t.name for t in TASKS] * 2)


@pytest.mark.parametrize(("sent", "most"), [(False, 1), (True, 6)])
def test_the_trial_s_concurrency_bounds_the_runs_here_not_those_sent_elsewhere(sent: bool, most: int) -> None:
    model = ScriptedModel(pays)
    elsewhere = Elsewhere(LocalExecutor(lambda spec: model, retries=1), sent)
    assert trial(executor=elsewhere, concurrency=1) == trial()
    assert elsewhere.most == most


texts = st.text(max_size=20)
counts = st.integers(min_value=0, max_value=10**9)
arguments = st.one_of(texts, st.dictionaries(st.text(max_size=5), st.one_of(texts, counts), max_size=3))
results = st.builds(
    RunResult,
    task=texts,
    outcome=st.sampled_from(["passed", "failed", "errored"]),
    reward=st.floats(min_value=0, max_value=1),
    failures=st.lists(texts, max_size=3),
    run=st.builds(
        Run,
        calls=st.lists(st.builds(Call, texts, arguments), max_size=3).map(tuple),
        answer=texts,
        ended=st.sampled_from(["done", "asked", "limit", "errored", "broken"]),
        why=texts,
        state=texts,
    ),
    reason=texts,
    usage=st.builds(TokenUsage, counts, counts),
    turns=counts,
    attempts=counts,
    retryable=st.booleans(),
    leaked=st.booleans(),
    user=st.lists(st.tuples(texts, texts), max_size=3).map(tuple),
    user_usage=st.builds(TokenUsage, counts, counts),
)


@given(results)
def test_any_result_round_trips_exactly(result: RunResult) -> None:
    assert result_from_json(json.loads(json.dumps(result_to_json(result)))) == result


@pytest.mark.parametrize(
    "broken",
    [
        {},
        {"outcome": "won"},
        {"turns": -1},
        {"usage": ["1", 2]},
        {"run": {"calls": [{"tool": "pay", "arguments": 7}], "answer": "", "ended": "done", "why": "", "state": ""}},
    ],
)
def test_what_is_not_a_result_is_refused_naming_what(broken: dict[str, object]) -> None:
    sent = {**result_to_json(trial()[0]), **broken} if broken else {}
    with pytest.raises(ImproverError, match="not a run's result: missing or malformed"):
        result_from_json(sent)


def test_the_local_executor_is_the_harness_run() -> None:
    model = ScriptedModel(lambda messages: ProviderError("down") if "25" in messages[1]["content"] else says("Done."))
    local = LocalExecutor(lambda spec: model, retries=0)
    result = asyncio.run(local.run(TASKS[2], VARIANT, follows_the_protocol, EpisodeLimits()))
    assert (result.outcome, result.attempts) == ("errored", 1)
