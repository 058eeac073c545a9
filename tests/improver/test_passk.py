"""pass@k: Chen et al.'s unbiased estimator, over the same per-task tallies as the loop."""

from __future__ import annotations

import asyncio
from fractions import Fraction
from itertools import combinations
from math import comb
from typing import Any

import pytest
from hypothesis import given, strategies as st

from improver.base.errors import ImproverError
from improver.base.protocol import Completion, ProviderError, TokenUsage
from improver.base.variant import Variant
from improver.episodes.trials import run_trials
from improver.train.passk import parse_ks, pass_at_k, run_eval
from tests.improver.taskkit import OPERATOR, calls, follows_the_protocol, paid_task, pays_right, says


def drawn(n: int, c: int, k: int) -> Fraction:
    """The share of the k-subsets of n runs (c of them passes) holding a pass, counted."""
    runs = [True] * c + [False] * (n - c)
    subsets = list(combinations(range(n), k))
    return Fraction(sum(any(runs[i] for i in s) for s in subsets), len(subsets))


def test_the_estimator_is_the_share_of_k_draws_holding_a_pass() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(float(drawn(n, c, k)), abs=1e-12), (n, c, k)


@given(st.integers(1, 400), st.data())
def test_the_estimator_matches_the_binomial_form_without_forming_it(n: int, data: Any) -> None:
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    exact = 1 - Fraction(comb(n - c, k), comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-9)
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)


def test_ks_are_read_and_one_larger_than_the_runs_is_refused() -> None:
    assert parse_ks("10, 1,5,5", 10) == (1, 5, 10)
    for text, said in [
        ("1,20", "--k 20 is larger than --runs 10"),
        ("a,b", "whole numbers"),
        ("0,1", "at least 1"),
        (",", "names no k"),
    ]:
        with pytest.raises(ImproverError, match=said):
            parse_ks(text, 10)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


class Episodes:
    """A model answering each episode (counted at its first turn) as `pattern` says:
    right, wrong, or a provider fault through every retry."""

    name = "episodes"

    def __init__(self, pattern: list[str]) -> None:
        self.pattern = pattern
        self.episode = -1

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        self.episode += turn == 0
        kind = self.pattern[self.episode % len(self.pattern)]
        if kind == "fault":
            raise ProviderError("HTTP 500 through every retry")
        replies = pays_right() if kind == "right" else [calls(("pay", {"to": "mallory", "amount": "7"})), says("Paid.")]
        return Completion(replies[turn], TokenUsage(1, 1), self.name)


PATTERN = ["right", "wrong", "wrong", "fault"] + ["wrong"] * 4  # work-1's four runs, then work-2's


def test_eval_reports_pass_at_k_with_errored_runs_left_out_and_counted() -> None:
    tasks = [paid_task("work-1"), paid_task("work-2")]
    variant = Variant(OPERATOR, "", ("episodes",))
    result = asyncio.run(
        run_eval(
            variant, tasks, follows_the_protocol, lambda _s: Episodes(PATTERN), 4, (1, 2, 4), concurrency=1, retries=0
        )
    )
    first, second = result.tasks
    assert (first.passed, first.judged, first.errored) == (1, 3, 1)
    assert first.pass_at == {1: pytest.approx(1 / 3), 2: pytest.approx(2 / 3), 4: None}
    assert (second.passed, second.judged, second.pass_at[4]) == (0, 4, 0.0)
    assert result.pass_at == {1: pytest.approx(1 / 6), 2: pytest.approx(1 / 3), 4: 0.0}
    assert result.left_out == {1: 0, 2: 0, 4: 1}
    assert result.errored == 1 and "HTTP 500" in result.errors[0]
    assert first.best_reward == 1.0 and second.best_reward is not None and second.best_reward < 1.0
    assert result.best_of_n == pytest.approx((1.0 + second.best_reward) / 2)
    wrong = second.best_reward
    assert result.mean_reward == pytest.approx((1.0 + 6 * wrong) / 7)  # seven judged runs, the fault left out
    # The loop's trials tally the same runs the same way.
    trial = asyncio.run(
        run_trials(variant, tasks, follows_the_protocol, lambda _s: Episodes(PATTERN), runs=4, concurrency=1, retries=0)
    )
    assert {n: (t.passed, t.judged, t.errored) for n, t in trial.per_task.items()} == {
        t.task: (t.passed, t.judged, t.errored) for t in result.tasks
    }


def test_eval_refuses_no_tasks_and_a_k_beyond_the_runs() -> None:
    variant = Variant(OPERATOR, "", ("episodes",))
    with pytest.raises(ImproverError, match="no tasks"):
        asyncio.run(run_eval(variant, [], follows_the_protocol, lambda _s: Episodes(PATTERN), 2, (1,)))
    with pytest.raises(ImproverError, match="between 1 and the runs per task"):
        asyncio.run(run_eval(variant, [paid_task()], follows_the_protocol, lambda _s: Episodes(PATTERN), 2, (1, 3)))
