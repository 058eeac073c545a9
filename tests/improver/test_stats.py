"""The statistics: Wilson, Newcombe, the exact tests within each task, the rules around them."""

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
    with pytest.raises(ImproverError, match="no test named 'welch': use one of stratified, newcombe, paired"):
        compare("welch", tallies((1, 1)), tallies((1, 1)), 0.05)


# -- the exact tests within each task ------------------------------------------------------


def enumerated_pvalue(change: list[Tally], current: list[Tally], weigh) -> Fraction:
    """P(weighted change passes >= observed), every way each task's passes could split
    between the arms given how many passed, enumerated and weighed by its chance."""
    from math import comb

    terms = []
    for c, a in zip(change, current, strict=True):
        total, runs = c.passed + a.passed, c.runs + a.runs
        w = weigh(c, a)
        splits = [
            (k, Fraction(comb(total, k) * comb(runs - total, c.runs - k), comb(runs, c.runs)))
            for k in range(c.runs + 1)
        ]
        terms.append([(w * k, chance) for k, chance in splits if chance])
    observed = sum(weigh(c, a) * c.passed for c, a in zip(change, current, strict=True))
    hits = Fraction(0)
    for combo in itertools.product(*terms):
        if sum(v for v, _ in combo) >= observed:
            chance = Fraction(1)
            for _, c in combo:
                chance *= c
            hits += chance
    return hits


def paired_weight(lcm: int):
    """The paired statistic's weight, on the scale of the run counts' least common multiple."""
    return lambda c, a: lcm // c.runs + lcm // a.runs


def spread_weight(c: Tally, a: Tally) -> int:
    return int(stats.stratified_weights(c.passed + a.passed, c.runs + a.runs))


def test_the_stratified_pvalue_by_hand() -> None:
    # One task, 4 runs of the change (all passed) against 16 of the agent (none): of the
    # C(20, 4) ways the 4 passes could fall, one puts all on the change.
    assert stats.stratified_pvalues([[4]], [[4]], [[0]], [[16]])[0] == pytest.approx(1 / 4845, rel=1e-9)
    # Tasks every run of which came out the same carry no evidence.
    assert stats.stratified_pvalues([[4, 0]], [[4, 4]], [[16, 0]], [[16, 16]]).tolist() == [1.0]
    # Weights: a task passed half the time weighs 4, one passed in 1 of 20 runs 8.
    assert stats.stratified_weights(10, 20) == 4 and stats.stratified_weights(1, 20) == 8


@pytest.mark.parametrize("test, weigh", [("stratified", spread_weight), ("paired", None)])
def test_the_exact_pvalues_equal_full_enumeration(test: str, weigh) -> None:
    rng = np.random.default_rng(7)
    for _ in range(60):
        m = int(rng.integers(1, 6))
        runs = [(int(rng.integers(1, 4)), int(rng.integers(1, 7))) for _ in range(m)]
        change = [Tally(int(rng.integers(0, cn + 1)), cn) for cn, _ in runs]
        current = [Tally(int(rng.integers(0, an + 1)), an) for _, an in runs]
        expected = enumerated_pvalue(change, current, weigh or paired_weight(int(np.lcm.reduce(np.ravel(runs)))))
        got = stats.stratified_pvalues(
            [[t.passed for t in change]],
            [[t.runs for t in change]],
            [[t.passed for t in current]],
            [[t.runs for t in current]],
            test,
        )[0]
        assert got == pytest.approx(float(expected), abs=1e-12), (change, current)


def test_the_hypergeometric_distribution_equals_counting_the_draws() -> None:
    # 7 runs of which 3 passed; 4 of them taken at random: count the ways each k comes out.
    runs = [True] * 3 + [False] * 4
    ways = [sum(sum(draw) == k for draw in itertools.combinations(runs, 4)) for k in range(5)]
    assert stats.hypergeom_pmf(7, 3, 4).tolist() == [w / sum(ways) for w in ways]
    assert stats.hypergeom_cdf([-1, 0, 2, 4, 9], 7, 3, 4).tolist() == pytest.approx(
        [0.0, ways[0] / 35, sum(ways[:3]) / 35, 1.0, 1.0], abs=1e-15
    )


def test_the_hypergeometric_distribution_matches_scipy_on_run_counts_the_loop_sees() -> None:
    from scipy.stats import hypergeom  # statsmodels' own dependency: a reference, not ours

    rng = np.random.default_rng(3)
    drawn, other = rng.integers(1, 65, 400), rng.integers(1, 65, 400)
    good = rng.integers(0, drawn + other + 1)
    k = rng.integers(-1, drawn + 2)
    assert np.allclose(
        stats.hypergeom_cdf(k, drawn + other, good, drawn),
        hypergeom.cdf(k, drawn + other, good, drawn),
        rtol=1e-12,
        atol=1e-15,
    )
    for total, g, d in zip(drawn + other, good, drawn, strict=True):
        assert np.allclose(
            stats.hypergeom_pmf(int(total), int(g), int(d)),
            hypergeom.pmf(np.arange(d + 1), total, g, d),
            rtol=1e-10,
            atol=1e-300,
        )


def test_rows_decided_together_get_the_answers_they_get_alone() -> None:
    rng = np.random.default_rng(3)
    p = rng.beta(0.5, 0.5, size=(50, 30))
    cp, ap = rng.binomial(4, np.minimum(p + 0.1, 1)), rng.binomial(16, p)
    together = stats.stratified_pvalues(cp, 4, ap, 16)
    assert together.tolist() == pytest.approx(
        [stats.stratified_pvalues(cp[i], 4, ap[i], 16)[0] for i in range(50)], abs=1e-12
    )


@pytest.mark.parametrize("test", ["stratified", "paired"])
def test_the_exact_tests_hold_their_level_on_changes_no_better(test: str) -> None:
    # 40,000 null comparisons on tasks mostly passed, 2 runs of the change against 8 of
    # the agent: where the sign-flip test kept 1.5% at a one-sided 1.25%.
    rng = np.random.default_rng(11)
    p = rng.beta(4, 1, size=(40_000, 40))
    kept = stats.stratified_pvalues(rng.binomial(2, p), 2, rng.binomial(8, p), 8, test) <= 0.0125
    assert kept.mean() < 0.0125 + 3 * np.sqrt(0.0125 * 0.9875 / 40_000)


def test_a_comparison_by_an_exact_test_says_its_p_beside_the_level() -> None:
    five = compare("paired", tallies(*[(4, 4)] * 2), tallies(*[(0, 4)] * 2), 0.05)
    assert five.better and five.low is None and five.p == pytest.approx((1 / 70) ** 2)
    assert five.describe() == "8/8 against 0/8 (paired test, one-sided p 0.0002 against 0.025, +100% a task)"
    no = compare("stratified", tallies((3, 4), (2, 4)), tallies((2, 4), (2, 4)), 0.05)
    assert not no.better and "(stratified test, one-sided p 0." in no.describe() and "+12% a task" in no.describe()


def test_a_p_value_is_printed_with_the_digits_that_put_it_on_its_side_of_the_level() -> None:
    assert stats.p_text(0.01249, 0.0125) == "0.012"
    assert stats.p_text(0.0125, 0.0125) == "0.0125"  # two digits would read 0.013, above the level
    assert stats.p_text(0.01251, 0.0125) == "0.013"
    assert stats.p_text(0.012504, 0.01251) == "0.0125"  # not 0.013
    assert stats.p_text(0.3, 0.0125) == "0.3"


def test_paired_with_tasks_run_different_numbers_of_times() -> None:
    # A run that errored is not scored, so arms may hold 2, 3 or 4 runs of a task.
    change = tallies((3, 3), (4, 4), (2, 3), (4, 4), (3, 4), (2, 2), (3, 3))
    current = tallies((1, 4), (2, 4), (0, 3), (1, 3), (2, 4), (0, 2), (1, 4))
    result = compare_paired(change, current, 0.05)
    lcm = 12
    expected = enumerated_pvalue(
        list(change.values()), list(current.values()), lambda c, a: lcm // c.runs + lcm // a.runs
    )
    assert result.p == pytest.approx(float(expected), abs=1e-12)
    assert result.better == (expected <= Fraction(1, 40))
    assert result.describe().startswith("21/23 against 7/24 (paired test, one-sided p ")


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
