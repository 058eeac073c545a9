"""The reusable holdout: Thresholdout as the reference describes it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from improver.base.errors import ImproverError
from improver.decide.holdout import Holdout


def test_noise_and_threshold_follow_the_number_of_sealed_tasks() -> None:
    eighty = Holdout.create(80, 3, np.random.default_rng(0))
    # The reference's line for 80 sealed tasks: "at 22.4% or less (their noise 5.6%)".
    assert (round(eighty.threshold * 100, 1), round(eighty.noise * 100, 1)) == (22.4, 5.6)
    assert eighty.noise == pytest.approx(1 / (2 * math.sqrt(80)))
    assert eighty.threshold == pytest.approx(4 * eighty.noise)
    assert Holdout.create(400, 3, np.random.default_rng(0)).threshold == pytest.approx(0.10)
    assert eighty.budget == 3 and not eighty.spent


def test_threshold_noise_comes_from_the_system_unless_a_generator_is_given() -> None:
    drawn = {Holdout.create(80, 3).threshold_noise for _ in range(20)}
    assert len(drawn) == 20
    seeded = [Holdout.create(80, 3, np.random.default_rng(42)).threshold_noise for _ in range(2)]
    assert seeded[0] == seeded[1]


def test_threshold_noise_is_laplace_at_twice_the_noise_scale() -> None:
    rng = np.random.default_rng(1)
    draws = np.array([Holdout.create(100, 1, rng).threshold_noise for _ in range(20_000)])
    # For Laplace(0, b) the mean absolute value is b; here b = 2 * 1/(2 sqrt(100)) = 0.1.
    assert np.abs(draws).mean() == pytest.approx(0.1, rel=0.03)
    assert abs(np.median(draws)) < 0.005


@pytest.mark.parametrize(
    "tasks, budget, message",
    [(0, 3, "at least one sealed task"), (80, 0, "at least one disagreement"), (80, True, "disagreement")],
)
def test_a_holdout_that_cannot_work_is_refused(tasks, budget, message) -> None:
    with pytest.raises(ImproverError, match=message):
        Holdout.create(tasks, budget)


def test_each_answer_follows_the_algorithm_step_by_step() -> None:
    """Replays the generator: compare with a noisy threshold, answer, spend, redraw."""
    holdout = Holdout.create(80, 10_000, np.random.default_rng(2))
    rng, replay = np.random.default_rng(3), np.random.default_rng(3)
    gains = np.random.default_rng(4).uniform(-0.5, 0.5, size=(300, 2))
    seen = set()
    for choose, sealed in gains:
        answer = holdout.ask(float(choose), float(sealed), rng)
        sigma = holdout.noise
        comparison = replay.laplace(0, 4 * sigma)
        if abs(sealed - choose) > holdout.threshold + holdout.threshold_noise + comparison:
            expected_gain = sealed + replay.laplace(0, sigma)
            expected_noise = replay.laplace(0, 2 * sigma)
            assert (answer.spent, answer.holdout.budget) == (1, holdout.budget - 1)
            assert answer.holdout.threshold_noise == expected_noise != holdout.threshold_noise
        else:
            expected_gain = choose
            assert answer.spent == 0 and answer.holdout == holdout
        assert answer.gain == pytest.approx(expected_gain, abs=1e-15)
        assert answer.turned_down == (answer.gain <= holdout.threshold)
        seen.add(answer.spent)
        holdout = answer.holdout
    assert seen == {0, 1}


def test_agreement_answers_the_gain_on_the_tasks_to_choose_on_and_spends_nothing() -> None:
    holdout = Holdout.create(400, 5, np.random.default_rng(5))
    rng = np.random.default_rng(6)
    agreed = [a for a in (holdout.ask(0.3, 0.3, rng) for _ in range(200)) if a.spent == 0]
    assert len(agreed) > 100
    for answer in agreed:
        assert answer.gain == 0.3 and not answer.turned_down
        assert answer.holdout == holdout  # same budget, same threshold noise


def test_a_gain_at_or_below_the_threshold_is_turned_down_without_spending() -> None:
    holdout = Holdout.create(80, 5, np.random.default_rng(7))
    rng = np.random.default_rng(8)
    answers = [holdout.ask(0.2, 0.2, rng) for _ in range(200)]
    agreed = [a for a in answers if a.spent == 0]
    assert agreed and all(a.turned_down and a.gain == 0.2 for a in agreed)


def test_a_change_that_only_fits_the_tasks_to_choose_on_is_turned_down() -> None:
    rng = np.random.default_rng(9)
    answers = [Holdout.create(80, 3, rng).ask(0.9, 0.0, rng) for _ in range(500)]
    down = [a for a in answers if a.turned_down]
    assert len(down) > 450
    assert all(a.spent == 1 and a.holdout.budget == 2 for a in down)


def test_it_never_turns_down_a_change_clearly_better_on_both_parts() -> None:
    rng = np.random.default_rng(10)
    holdout = Holdout.create(400, 1_000, rng)
    for _ in range(500):
        answer = holdout.ask(0.6, 0.55, rng)
        assert not answer.turned_down
        holdout = answer.holdout


def test_a_spent_holdout_answers_nothing_more() -> None:
    rng = np.random.default_rng(11)
    holdout = Holdout.create(80, 2, rng)
    while not holdout.spent:
        holdout = holdout.ask(0.9, -0.9, rng).holdout
    assert holdout.budget == 0
    with pytest.raises(ImproverError, match="budget is spent\\): seal fresh tasks"):
        holdout.ask(0.1, 0.1, rng)


@pytest.mark.parametrize("choose, sealed", [(1.5, 0.0), (0.0, -2.0), (float("nan"), 0.0), ("0.1", 0.0), (True, 0.0)])
def test_a_gain_outside_minus_one_and_one_is_refused(choose, sealed) -> None:
    with pytest.raises(ImproverError, match="between -1 and 1"):
        Holdout.create(80, 3, np.random.default_rng(0)).ask(choose, sealed)


def test_state_round_trips_through_json_exactly() -> None:
    holdout = Holdout.create(137, 4, np.random.default_rng(12))
    holdout = holdout.ask(0.9, -0.5, np.random.default_rng(13)).holdout
    assert Holdout.from_json(json.loads(json.dumps(holdout.to_json()))) == holdout


@pytest.mark.parametrize(
    "change",
    [
        {"budget": None},
        {"budget": -1},
        {"budget": 1.0},
        {"budget": True},
        {"noise": 0},
        {"threshold": -0.1},
        {"threshold_noise": "0.01"},
        {"threshold_noise": float("inf")},
        {"extra": 1},
    ],
)
def test_a_damaged_state_is_refused_with_the_reason(change) -> None:
    data = {**Holdout.create(80, 3, np.random.default_rng(0)).to_json(), **change}
    with pytest.raises(ImproverError, match="seal file is damaged"):
        Holdout.from_json(data)


def test_a_state_that_is_not_an_object_is_refused() -> None:
    for data in ([], "holdout", None, {"threshold": 0.2}):
        with pytest.raises(ImproverError, match="must be an object with exactly"):
            Holdout.from_json(data)
