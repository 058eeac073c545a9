"""The statistics: Wilson, Newcombe, the paired sign-flip test, the rules around them."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from improver.base.errors import ImproverError
from improver.decide import stats
from improver.decide.levels import confirmation_level
from improver.decide.stats import (
    Tally,
    better_beyond_chance,
    compare,
    compare_newcombe,
    compare_paired,
    newcombe_interval,
    passes,
    sign_flip_pvalues,
    thompson_draws,
    thompson_pick,
    wilson_interval,
)

LEVELS = (0.05, 0.0125, 0.01, 0.2)


def tallies(*pairs: tuple[int, int]) -> dict[str, Tally]:
    return {f"task-{i}": Tally(p, r) for i, (p, r) in enumerate(pairs)}


# -- Wilson and Newcombe against statsmodels ----------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_wilson_matches_statsmodels_on_every_count(level: float) -> None:
    for runs in (1, 2, 3, 5, 10, 24, 80, 160):
        for passed in range(runs + 1):
            expected = proportion_confint(passed, runs, alpha=level, method="wilson")
            assert wilson_interval(passed, runs, level) == pytest.approx(expected, abs=1e-9)


def test_wilson_at_none_and_all_reaches_the_ends() -> None:
    assert wilson_interval(0, 12)[0] == 0.0
    assert wilson_interval(12, 12)[1] == 1.0


@pytest.mark.parametrize("level", LEVELS)
def test_newcombe_matches_statsmodels_on_a_grid_with_none_and_all(level: float) -> None:
    sizes = (1, 4, 7, 24, 70)
    for runs_a, runs_b in itertools.product(sizes, sizes):
        for passed_a in sorted({0, 1, runs_a // 2, runs_a - 1, runs_a} & set(range(runs_a + 1))):
            for passed_b in sorted({0, 1, runs_b // 2, runs_b - 1, runs_b} & set(range(runs_b + 1))):
                expected = confint_proportions_2indep(
                    passed_a, runs_a, passed_b, runs_b, method="newcomb", compare="diff", alpha=level
                )
                got = newcombe_interval(passed_a, runs_a, passed_b, runs_b, level)
                assert got == pytest.approx(expected, abs=1e-9), (passed_a, runs_a, passed_b, runs_b)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.floats(0.001, 0.5),
)
def test_newcombe_matches_statsmodels_on_any_counts(a: tuple[int, int], b: tuple[int, int], level: float) -> None:
    expected = confint_proportions_2indep(*a, *b, method="newcomb", compare="diff", alpha=level)
    assert newcombe_interval(*a, *b, level) == pytest.approx(expected, abs=1e-9)


def test_newcombe_gives_its_published_example() -> None:
    # Newcombe (1998), Statistics in Medicine 17: 56/70 against 48/80 at 95%.
    low, high = newcombe_interval(56, 70, 48, 80, 0.05)
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)


def test_the_references_decision_lines() -> None:
    current = tallies(*[(4, 4)] * 4, *[(0, 4)] * 2)  # 16/24
    assert compare_newcombe(current, current, 0.05).describe() == (
        "16/24 against 16/24 (newcombe test, 95% interval -25% to +25%)"
    )
    sealed_current = tallies(*[(4, 4)] * 2, *[(0, 4)] * 4)  # 8/24
    sealed_change = tallies(*[(4, 4)] * 6)  # 24/24
    result = compare_newcombe(sealed_change, sealed_current, confirmation_level(4))
    assert result.describe() == "24/24 against 8/24 (newcombe test, 98.75% interval +34% to +85%)"
    assert result.better and result.tasks == 6


# -- levels and the basic rules -------------------------------------------------------------


def test_bonferroni_splits_five_percent_among_the_confirmations() -> None:
    assert confirmation_level(1) == 0.05
    assert confirmation_level(4) == 0.0125
    for bad in (0, -2, True, 1.5):
        with pytest.raises(ImproverError, match="at least one confirmation"):
            confirmation_level(bad)


def test_better_beyond_chance_means_the_lower_end_is_above_zero() -> None:
    assert better_beyond_chance(0.001)
    assert not better_beyond_chance(0.0)
    assert not better_beyond_chance(-0.2)


def test_a_task_is_passed_when_more_than_half_of_its_runs_pass() -> None:
    assert [Tally(p, 4).passes for p in range(5)] == [False, False, False, True, True]
    assert [Tally(p, 2).passes for p in range(3)] == [False, False, True]
    assert [Tally(p, 1).passes for p in range(2)] == [False, True]
    assert passes(np.array([[2, 3], [1, 0]]), 4).tolist() == [[False, True], [False, False]]


def test_arms_run_on_different_tasks_are_refused_by_name() -> None:
    with pytest.raises(ImproverError, match=r"only the agent: b; only the change: c\): run both"):
        compare_paired({"a": Tally(1, 1), "c": Tally(1, 1)}, {"a": Tally(1, 1), "b": Tally(1, 1)}, 0.05)
    with pytest.raises(ImproverError, match="no tasks to compare"):
        compare_paired({}, {}, 0.05)


@pytest.mark.parametrize("passed, runs", [(5, 4), (-1, 4), (0, 0), (1.0, 2), (True, 2)])
def test_an_impossible_tally_is_refused(passed, runs) -> None:
    with pytest.raises(ImproverError, match="tally"):
        Tally(passed, runs)


@pytest.mark.parametrize("level", [0, 1, -0.1, 5, "0.05"])
def test_a_level_outside_zero_and_one_is_refused(level) -> None:
    with pytest.raises(ImproverError, match="between 0 and 1"):
        newcombe_interval(1, 2, 1, 2, level)
    with pytest.raises(ImproverError, match="between 0 and 1"):
        compare_paired(tallies((1, 2)), tallies((1, 2)), level)


def test_an_unknown_test_is_refused() -> None:
    with pytest.raises(ImproverError, match="no test named 'welch': use one of newcombe, paired"):
        compare("welch", tallies((1, 1)), tallies((1, 1)), 0.05)


# -- the paired test --------------------------------------------------------------------------


def enumerated_pvalue(differences: list[Fraction], shift: Fraction = Fraction(0)) -> Fraction:
    """P(sum of randomly signed |d - shift| >= sum of (d - shift)), over all 2^m flips."""
    centred = [d - shift for d in differences]
    observed = sum(centred)
    flips = list(itertools.product((1, -1), repeat=len(centred)))
    hits = sum(1 for signs in flips if sum(s * abs(c) for s, c in zip(signs, centred, strict=False)) >= observed)
    return Fraction(hits, len(flips))


def exact(bound: float) -> Fraction:
    """The subset mean a float bound stands for (its denominator divides 12 x tasks)."""
    return Fraction(bound).limit_denominator(1000)


def test_sign_flip_pvalue_by_hand() -> None:
    # Three tasks each better by one run: only "all three positive" reaches +3, so 1/8.
    assert sign_flip_pvalues([1, 1, 1])[0] == pytest.approx(1 / 8, abs=1e-15)
    # +2, +1, -1 sums to 2; of the eight signings, 2+1+1, 2+1-1 and 2-1+1 reach 2: 3/8.
    assert sign_flip_pvalues([2, 1, -1])[0] == pytest.approx(3 / 8, abs=1e-15)
    # Tasks that came out the same carry no evidence: the p-value ignores them.
    assert sign_flip_pvalues([[2, 1, -1, 0, 0]])[0] == pytest.approx(3 / 8, abs=1e-15)
    assert sign_flip_pvalues([[0, 0, 0], [-1, -1, -1]]).tolist() == [1.0, 1.0]


def test_sign_flip_pvalue_equals_full_enumeration() -> None:
    rng = np.random.default_rng(7)
    rows = [rng.integers(-4, 5, size=int(rng.integers(1, 11))) for _ in range(200)]
    for row in rows:
        expected = enumerated_pvalue([Fraction(int(v)) for v in row])
        assert sign_flip_pvalues(row)[0] == pytest.approx(float(expected), abs=1e-12), row
    # Rows decided together get the same answers as one by one.
    table = np.array([r[:3] for r in rows if len(r) >= 3])
    assert sign_flip_pvalues(table).tolist() == pytest.approx([sign_flip_pvalues(r)[0] for r in table])


def test_paired_interval_is_the_inverted_test() -> None:
    # Four runs per task; the interval's ends are the shifts where the test turns.
    rng = np.random.default_rng(11)
    for _ in range(40):
        m = int(rng.integers(6, 10))
        current = [int(x) for x in rng.integers(0, 5, size=m)]
        change = [int(min(4, max(0, x + rng.integers(-1, 3)))) for x in current]
        result = compare_paired(tallies(*[(c, 4) for c in change]), tallies(*[(c, 4) for c in current]), 0.05)
        differences = [Fraction(a - b, 4) for a, b in zip(change, current, strict=False)]
        tiny = Fraction(1, 10**9)
        low, high = exact(result.low), exact(result.high)
        assert enumerated_pvalue(differences, low) > Fraction(1, 40)
        assert enumerated_pvalue(differences, low - tiny) <= Fraction(1, 40)
        assert enumerated_pvalue([-d for d in differences], -high) > Fraction(1, 40)
        assert enumerated_pvalue([-d for d in differences], -high - tiny) <= Fraction(1, 40)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda runs: st.lists(st.tuples(st.integers(0, runs), st.integers(0, runs)), min_size=1, max_size=30).map(
            lambda pairs: (runs, pairs)
        )
    ),
    st.sampled_from(LEVELS),
)
def test_paired_decision_is_interval_above_zero_is_pvalue_at_most_half_the_level(case, level: float) -> None:
    runs, pairs = case
    change = tallies(*[(a, runs) for a, _ in pairs])
    current = tallies(*[(b, runs) for _, b in pairs])
    result = compare_paired(change, current, level)
    pvalue = sign_flip_pvalues([a - b for a, b in pairs])[0]
    assert result.better == (pvalue <= level / 2)
    assert -1 <= result.low <= result.high <= 1


def test_paired_needs_enough_tasks_to_say_anything() -> None:
    # Five tasks all better: 1/32 > 2.5%, so even this is not beyond chance at 95%.
    five = compare_paired(tallies(*[(4, 4)] * 5), tallies(*[(0, 4)] * 5), 0.05)
    assert not five.better and (five.low, five.high) == (-1.0, 1.0)
    six = compare_paired(tallies(*[(4, 4)] * 6), tallies(*[(0, 4)] * 6), 0.05)
    assert six.better and six.low > 0
    assert six.describe() == "24/24 against 0/24 (paired test, 95% interval +100% to +100%)"


def test_paired_with_tasks_run_different_numbers_of_times() -> None:
    # A run that errored is not scored, so arms may hold 3 or 4 runs of a task.
    change = tallies((3, 3), (4, 4), (2, 3), (4, 4), (3, 4), (2, 2), (3, 3))
    current = tallies((1, 4), (2, 4), (0, 3), (1, 3), (2, 4), (0, 2), (1, 4))
    differences = [
        Fraction(a.passed, a.runs) - Fraction(b.passed, b.runs)
        for a, b in zip(change.values(), current.values(), strict=False)
    ]
    result = compare_paired(change, current, 0.05)
    assert result.better == (enumerated_pvalue(differences) <= Fraction(1, 40))
    assert enumerated_pvalue(differences, exact(result.low)) > Fraction(1, 40)
    assert result.describe().startswith("21/23 against 7/24 (paired test, 95% interval")


@pytest.mark.slow
def test_paired_on_many_tasks_is_sampled_repeatably_and_agrees_with_the_exact_test() -> None:
    rng = np.random.default_rng(3)
    current = [int(x) for x in rng.integers(0, 5, size=1000)]
    change = [int(min(4, max(0, x + rng.integers(-2, 3) + (rng.random() < 0.08)))) for x in current]
    arms = tallies(*[(c, 4) for c in change]), tallies(*[(c, 4) for c in current])
    first = compare_paired(*arms, 0.05)
    assert first == compare_paired(*arms, 0.05)
    exact = sign_flip_pvalues(np.array(change) - np.array(current))[0]
    assert first.better == (exact <= 0.025)
    mean = (sum(change) - sum(current)) / 4000
    assert first.low < mean < first.high


def test_sampled_interval_is_close_to_the_exact_one(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    current = [int(x) for x in rng.integers(0, 5, size=120)]
    change = [int(min(4, max(0, x + rng.integers(-1, 3)))) for x in current]
    arms = tallies(*[(c, 4) for c in change]), tallies(*[(c, 4) for c in current])
    exact = compare_paired(*arms, 0.05)
    monkeypatch.setattr(stats, "EXACT_WORK", 0)
    sampled = compare_paired(*arms, 0.05)
    assert sampled.low == pytest.approx(exact.low, abs=0.01)
    assert sampled.high == pytest.approx(exact.high, abs=0.01)


# -- Thompson sampling ------------------------------------------------------------------------


def test_thompson_draws_from_each_arms_beta_posterior() -> None:
    passed, failed = np.array([3, 0, 10]), np.array([1, 5, 10])
    drawn = thompson_draws(passed, failed, np.random.default_rng(9))
    assert drawn.tolist() == np.random.default_rng(9).beta(1 + passed, 1 + failed).tolist()


def test_thompson_pick_favours_the_productive_arm_and_still_explores() -> None:
    rng = np.random.default_rng(1)
    picks = [thompson_pick([40, 10], [10, 40], rng) for _ in range(2000)]
    assert picks.count(0) > 1990
    picks = [thompson_pick([2, 1], [1, 1], rng) for _ in range(2000)]
    assert 0 < picks.count(1) < picks.count(0)


@pytest.mark.parametrize("passed, failed", [([], []), ([1, 2], [1]), ([-1], [2]), ([[1]], [[1]])])
def test_thompson_refuses_counts_it_cannot_sample(passed, failed) -> None:
    with pytest.raises(ImproverError):
        thompson_draws(passed, failed, np.random.default_rng(0))


def test_an_interval_end_is_printed_on_the_side_of_zero_it_is_on() -> None:
    """A lower end of +0.46% beside "better beyond chance" must not read "+0%"."""
    from improver.decide.stats import percent

    assert [percent(x) for x in (0.34, -0.25, 0.0)] == ["+34%", "-25%", "+0%"]
    assert percent(0.0046) == "+0.5%" and percent(-0.003) == "-0.3%" and percent(0.00004) == "+0.004%"
