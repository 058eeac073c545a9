"""Whether a change is better than the agent beyond chance, and the helpers around it.

Two tests compare a change with the agent as it is, both run on the same tasks:

- "newcombe" pools every run of each arm and takes Newcombe's hybrid score interval
  (method 10, built from two Wilson intervals) for the difference of the pass rates.
  It treats the runs as independent draws, which they are not: runs of one task share
  that task's difficulty, and both arms run the same tasks. That makes it conservative.
- "paired" works on each task's difference in pass fraction (change minus agent) and
  uses an exact sign-flip test: if the change is no better, each task's difference is
  as likely to have come out with the other sign.

A level here is the two-sided error of the interval: level 0.05 gives a 95% interval. A
change is better beyond chance when the interval's lower end is above zero, so the
chance of calling a change better that is not is at most level / 2. The decision
(improver.decide.decision) asks one-sided questions: at one-sided alpha it takes the interval
at level 2 alpha, so a seal allowing k confirmations holds each at one-sided 0.05 / k.

The vectorised helpers (`newcombe_bounds`, `sign_flip_pvalues`, `passes`) take numpy
arrays so the benches can decide thousands of simulated changes at once with the very
code the loop uses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import reduce

import numpy as np
from numpy.typing import ArrayLike, NDArray

from improver.base.errors import ImproverError
from improver.decide.levels import TESTS, check_level

# Past this much work (cell updates) or this big a table (cells, 8 bytes each) the paired
# interval is drawn by Monte Carlo rather than computed exactly: about a second of numpy
# and 80 MB, reached only with many hundreds of tasks, or with run counts whose least
# common multiple is large.
EXACT_WORK = 300_000_000
EXACT_CELLS = 10_000_000
MONTE_CARLO_DRAWS = 200_000
MONTE_CARLO_SEED = 20150806


@dataclass(frozen=True)
class Tally:
    """How many of a task's runs passed."""

    passed: int
    runs: int

    def __post_init__(self) -> None:
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (self.passed, self.runs)):
            raise ImproverError(f"a tally counts whole runs, not {self.passed!r} of {self.runs!r}")
        if self.runs < 1 or not 0 <= self.passed <= self.runs:
            raise ImproverError(
                f"a tally of {self.passed} passed out of {self.runs} runs is impossible: "
                "a task needs at least one run and passes between none and all of them"
            )

    @property
    def passes(self) -> bool:
        return bool(passes(self.passed, self.runs))


@dataclass(frozen=True)
class Comparison:
    """One test of a change against the agent as it is, as a decision line reports it.

    The counts are pooled over every run of every task; `low` and `high` bound the
    difference in pass rate (newcombe) or the mean per-task difference in pass fraction
    (paired), change minus agent.
    """

    test: str
    level: float
    tasks: int
    change_passed: int
    change_runs: int
    current_passed: int
    current_runs: int
    low: float
    high: float
    better: bool

    def describe(self) -> str:
        """E.g. "24/24 against 8/24 (newcombe test, 98.75% interval +34% to +85%)"."""
        return (
            f"{self.change_passed}/{self.change_runs} against {self.current_passed}/{self.current_runs} "
            f"({self.test} test, {confidence_label(self.level)} interval "
            f"{percent(self.low)} to {percent(self.high)})"
        )


def percent(x: float) -> str:
    """A signed percentage, whole unless that would hide which side of zero it is on:
    +34%, -25%, +0.46% (never "+0%" beside "better beyond chance"), +0% for zero itself."""
    if x == 0:
        return "+0%"
    for digits in range(4):
        text = f"{x * 100:+.{digits}f}"
        if float(text) != 0:
            return f"{text}%"
    return f"{x * 100:+.1e}%"


def confidence_label(level: float) -> str:
    """The interval's confidence for a level: 0.05 -> "95%", 0.0125 -> "98.75%"."""
    return f"{(1 - level) * 100:.4g}%"


# -- levels and the basic rules ---------------------------------------------------------


def better_beyond_chance(low: float) -> bool:
    """A change is better beyond chance when its interval's lower end is above zero."""
    return low > 0


def passes(passed: ArrayLike, runs: ArrayLike) -> np.bool_ | NDArray[np.bool_]:
    """A task is passed when more than half of its runs passed (elementwise on arrays)."""
    passed_each: np.bool_ | NDArray[np.bool_] = np.greater(2 * np.asarray(passed), np.asarray(runs))
    return passed_each


def check_same_tasks(current: Mapping[str, Tally], change: Mapping[str, Tally]) -> None:
    if not current:
        raise ImproverError("there are no tasks to compare on: run both on at least one task")
    if current.keys() != change.keys():
        raise ImproverError(
            "the change and the agent were not run on the same tasks "
            f"(only the agent: {_names(current.keys() - change.keys())}; "
            f"only the change: {_names(change.keys() - current.keys())}): run both on every task"
        )


def _names(names: set[str], shown: int = 5) -> str:
    listed = sorted(names)
    more = f" and {len(listed) - shown} more" if len(listed) > shown else ""
    return (", ".join(listed[:shown]) or "none") + more


# -- Wilson and Newcombe ----------------------------------------------------------------


def wilson_bounds(passed: ArrayLike, runs: ArrayLike, level: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Wilson's score interval for a pass rate, elementwise; no input checks."""
    x = np.asarray(passed, dtype=float)
    n = np.asarray(runs, dtype=float)
    from scipy import stats as scipy_stats  # here, not at the top: it costs every CLI start 0.6 s

    z = scipy_stats.norm.isf(level / 2)
    p = x / n
    shrink = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / shrink
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / shrink
    # At 0/n the lower bound is exactly 0 and at n/n the upper exactly 1; the formula
    # leaves rounding dust there, which would show as a gain where there is none.
    low = np.where(x == 0, 0.0, np.clip(centre - half, 0, 1))
    high = np.where(x == n, 1.0, np.clip(centre + half, 0, 1))
    return low, high


def newcombe_bounds(
    passed_a: ArrayLike, runs_a: ArrayLike, passed_b: ArrayLike, runs_b: ArrayLike, level: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Newcombe's hybrid score interval (method 10) for rate a - rate b, elementwise."""
    low_a, high_a = wilson_bounds(passed_a, runs_a, level)
    low_b, high_b = wilson_bounds(passed_b, runs_b, level)
    p_a = np.asarray(passed_a, dtype=float) / np.asarray(runs_a, dtype=float)
    p_b = np.asarray(passed_b, dtype=float) / np.asarray(runs_b, dtype=float)
    diff = p_a - p_b
    low = diff - np.sqrt((p_a - low_a) ** 2 + (high_b - p_b) ** 2)
    high = diff + np.sqrt((high_a - p_a) ** 2 + (p_b - low_b) ** 2)
    return low, high


def wilson_interval(passed: int, runs: int, level: float = 0.05) -> tuple[float, float]:
    """Wilson's score interval for `passed` of `runs`, at 1 - level confidence."""
    Tally(passed, runs)
    low, high = wilson_bounds(passed, runs, check_level(level))
    return float(low), float(high)


def newcombe_interval(
    passed_a: int, runs_a: int, passed_b: int, runs_b: int, level: float = 0.05
) -> tuple[float, float]:
    """Newcombe's interval for (passed_a / runs_a) - (passed_b / runs_b)."""
    Tally(passed_a, runs_a)
    Tally(passed_b, runs_b)
    low, high = newcombe_bounds(passed_a, runs_a, passed_b, runs_b, check_level(level))
    return float(low), float(high)


# -- the paired test --------------------------------------------------------------------


def sign_flip_pvalues(steps: ArrayLike) -> NDArray[np.float64]:
    """Exact one-sided sign-flip p-values, one per row of per-task integer differences.

    Row i holds one comparison's per-task differences on a common integer scale (with
    r runs per task, change passes minus agent passes). The p-value is the chance that
    flipping each task's sign at random gives a total at least the one observed. The
    null distribution depends only on how many tasks differ by each amount, so rows
    sharing those counts share one exact distribution (no 2^m enumeration needed).
    """
    table = np.atleast_2d(np.asarray(steps, dtype=np.int64))
    sizes = np.abs(table)
    largest = int(sizes.max(initial=0))
    if largest == 0:
        return np.ones(len(table))  # every task came out the same: no evidence either way
    counts = np.stack([(sizes == v).sum(axis=1) for v in range(1, largest + 1)], axis=1)
    observed = table.sum(axis=1)
    unique, inverse = np.unique(counts, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    pvalues = np.empty(len(table))
    for u, row in enumerate(unique):
        tail, offset = _upper_tail({v + 1: int(c) for v, c in enumerate(row) if c})
        rows = inverse == u
        pvalues[rows] = tail[observed[rows] + offset]
    return pvalues


def _upper_tail(counts: Mapping[int, int]) -> tuple[NDArray[np.float64], int]:
    """P(sum >= s) for the sum of randomly signed differences, indexed by s + offset."""
    from scipy import stats as scipy_stats  # here, not at the top: it costs every CLI start 0.6 s

    pmf = np.ones(1)
    for size, count in counts.items():
        # `count` tasks differing by `size` add size * (2h - count), h ~ Binomial(count, 1/2).
        spread = np.zeros(2 * size * count + 1)
        spread[:: 2 * size] = scipy_stats.binom.pmf(np.arange(count + 1), count, 0.5)
        pmf = np.convolve(pmf, spread)
    offset = (len(pmf) - 1) // 2
    return np.minimum(np.cumsum(pmf[::-1])[::-1], 1.0), offset


def paired_steps(change: Mapping[str, Tally], current: Mapping[str, Tally]) -> tuple[NDArray[np.int64], int]:
    """Each task's difference in pass fraction as integers over a common denominator.

    Returns (steps, denominator): task i's difference is steps[i] / denominator. The
    denominator is the least common multiple of every task's run counts, so tasks run a
    different number of times (a run that errored is not scored) stay exact.
    """
    check_same_tasks(current, change)
    names = sorted(current)
    denominator = reduce(math.lcm, (t.runs for arm in (change, current) for t in arm.values()))
    steps = [
        change[n].passed * (denominator // change[n].runs) - current[n].passed * (denominator // current[n].runs)
        for n in names
    ]
    return np.array(steps, dtype=np.int64), denominator


@dataclass(frozen=True)
class _SubsetMeans:
    """The sign-flip distribution, as the means of the subsets of tasks flipped.

    Flipping the signs of a subset A of the centred differences d_i - mu leaves the total
    at least the observed one exactly when the mean of d over A is at most mu (or A is
    empty). So the one-sided p-value at mu is `empty` plus the weight of subset means
    <= mu: a step function that never falls as mu grows. Inverting the test at every mu
    therefore gives an interval bounded by quantiles of these means (Hartigan, 1969), and
    its lower end is above zero exactly when the test at mu = 0 rejects.
    """

    means: NDArray[np.float64]  # sorted
    weights: NDArray[np.float64]
    empty: float

    def bounds(self, level: float) -> tuple[float, float]:
        tail = level / 2
        if self.empty > tail:
            # Too few tasks for any flip to be rare enough: nothing is excluded.
            return -1.0, 1.0
        rising = self.empty + np.cumsum(self.weights)
        falling = self.empty + np.cumsum(self.weights[::-1])[::-1]
        low = self.means[int(np.searchsorted(rising, tail, side="right"))]
        high = self.means[int(np.flatnonzero(falling > tail)[-1])]
        return float(low), float(high)


def _subset_means(steps: NDArray[np.int64], denominator: int) -> _SubsetMeans:
    m = len(steps)
    negative, positive = int(steps[steps < 0].sum()), int(steps[steps > 0].sum())
    width = positive - negative + 1
    if m * (m + 1) * width > EXACT_WORK or (m + 1) * width > EXACT_CELLS:
        return _sampled_subset_means(steps, denominator)
    # table[k, s - negative] = chance that a random subset has k tasks summing to s.
    table = np.zeros((m + 1, width))
    table[0, -negative] = 1.0
    for i, step in enumerate(steps):
        grown = 0.5 * table
        top = i + 1  # no subset of the first i tasks has more than i of them
        if step >= 0:
            grown[1 : top + 1, step:] += 0.5 * table[:top, : width - step]
        else:
            grown[1 : top + 1, : width + step] += 0.5 * table[:top, -step:]
        table = grown
    sizes, sums = np.nonzero(table[1:])
    means = (sums + negative) / ((sizes + 1) * denominator)
    weights = table[1:][sizes, sums]
    order = np.argsort(means, kind="stable")
    return _SubsetMeans(means[order], weights[order], float(table[0, -negative]))


def _sampled_subset_means(steps: NDArray[np.int64], denominator: int) -> _SubsetMeans:
    """Monte Carlo version for large task sets: fixed seed, so the answer is repeatable.

    The observed arrangement counts as one of draws + 1 equally likely ones (it is the
    empty subset), which keeps the sampled test valid rather than only approximate.
    """
    rng = np.random.default_rng(MONTE_CARLO_SEED)
    means: list[NDArray[np.float64]] = []
    chunk = max(1, 20_000_000 // len(steps))
    for start in range(0, MONTE_CARLO_DRAWS, chunk):
        picked = rng.integers(0, 2, size=(min(chunk, MONTE_CARLO_DRAWS - start), len(steps)), dtype=np.int8)
        counts = picked.sum(axis=1)
        sums = picked @ steps
        # An empty draw is the observed arrangement again: it counts toward every tail.
        means.append(np.where(counts > 0, sums / np.maximum(counts, 1) / denominator, -np.inf))
    drawn = np.sort(np.concatenate(means))
    share = 1.0 / (MONTE_CARLO_DRAWS + 1)
    empties = int(np.isneginf(drawn).sum())
    return _SubsetMeans(drawn[empties:], np.full(len(drawn) - empties, share), share * (1 + empties))


# -- the two comparisons ----------------------------------------------------------------


def compare_newcombe(change: Mapping[str, Tally], current: Mapping[str, Tally], level: float) -> Comparison:
    """Pooled runs of each arm, Newcombe's interval for the difference in pass rate."""
    check_same_tasks(current, change)
    counts = _pooled(change, current)
    low, high = newcombe_interval(*counts, level)
    return Comparison("newcombe", level, len(current), *counts, low, high, better_beyond_chance(low))


def compare_paired(change: Mapping[str, Tally], current: Mapping[str, Tally], level: float) -> Comparison:
    """The task-paired sign-flip test, its interval for the mean per-task difference.

    The test at zero is exact: with the change no better, both arms' runs of a task are
    alike, so each task's difference is symmetric about zero. (If instead the change
    helps some tasks as much as it hurts others, the flips overstate the spread of the
    total, so the test errs toward keeping less.) The interval inverts the same test at
    each shift mu, assuming the differences are symmetric about their mean; it puts the
    decision in numbers and excludes zero exactly when the test at zero rejects.

    Computed exactly over all 2^m flips (as a table of subset sizes and sums, not one by
    one) while that stays small; beyond it, from a fixed-seed sample of flips.
    """
    steps, denominator = paired_steps(change, current)
    low, high = _subset_means(steps, denominator).bounds(check_level(level))
    return Comparison("paired", level, len(current), *_pooled(change, current), low, high, better_beyond_chance(low))


def compare(test: str, change: Mapping[str, Tally], current: Mapping[str, Tally], level: float) -> Comparison:
    """Runs the named test ("newcombe" or "paired")."""
    if test == "newcombe":
        return compare_newcombe(change, current, level)
    if test == "paired":
        return compare_paired(change, current, level)
    raise ImproverError(f"no test named {test!r}: use one of {', '.join(TESTS)}")


def _pooled(change: Mapping[str, Tally], current: Mapping[str, Tally]) -> tuple[int, int, int, int]:
    return (
        sum(t.passed for t in change.values()),
        sum(t.runs for t in change.values()),
        sum(t.passed for t in current.values()),
        sum(t.runs for t in current.values()),
    )


# -- Thompson sampling ------------------------------------------------------------------


def thompson_draws(passed: ArrayLike, failed: ArrayLike, rng: np.random.Generator) -> NDArray[np.float64]:
    """One draw per arm from its Beta(1 + passed, 1 + failed) posterior."""
    won = np.asarray(passed)
    lost = np.asarray(failed)
    if won.ndim != 1 or won.shape != lost.shape or len(won) == 0:
        raise ImproverError("Thompson sampling needs one count of passes and of failures for each of at least one arm")
    if (won < 0).any() or (lost < 0).any():
        raise ImproverError("passes and failures are counts: none may be negative")
    return rng.beta(1 + won, 1 + lost)


def thompson_pick(passed: ArrayLike, failed: ArrayLike, rng: np.random.Generator) -> int:
    """The index of the arm whose posterior draw is highest."""
    return int(np.argmax(thompson_draws(passed, failed, rng)))
