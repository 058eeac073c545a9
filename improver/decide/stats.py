"""Whether a change is better than the agent beyond chance, and the helpers around it.

Three tests compare a change with the agent as it is, all run on the same tasks:

- "stratified" (the default) asks, task by task, whether the change's share of the
  task's passes is more than chance would split them: with the change no better, both
  arms' runs of a task are alike, so given how many passed, the change's are a
  hypergeometric draw. It sums the change's passes over tasks, each task weighted by
  the inverse of its runs' spread, and takes the exact null distribution of that sum.
  Exact at any number of tasks and runs; tasks every run of which came out the same
  drop out, so a lesson that fixes a few tasks shows as plainly as one that lifts all.
- "newcombe" pools every run of each arm and takes Newcombe's hybrid score interval
  (method 10, built from two Wilson intervals) for the difference of the pass rates.
  It treats the runs as independent draws, which they are not: runs of one task share
  that task's difficulty, and both arms run the same tasks. That makes it conservative.
- "paired" is the same exact test on the sum of the tasks' differences in pass
  fraction (change minus agent), every task weighing alike. (It was a sign-flip test,
  which took each task's difference as symmetric about zero when the change is no
  better; with 4 runs of the change against 16 of the agent it is not, and on tasks
  mostly passed it kept 1.5% of null changes at a one-sided 1.25%.)

A level here is the two-sided error of the interval: level 0.05 gives a 95% interval. A
change is better beyond chance when the interval's lower end is above zero (for the
exact tests, when the one-sided p is at most level / 2), so the chance of calling a
change better that is not is at most level / 2. The decision
(improver.decide.decision) asks one-sided questions: at one-sided alpha it takes the interval
at level 2 alpha, so a seal allowing k confirmations holds each at one-sided 0.05 / k.

The vectorised helpers (`stratified_pvalues`, `newcombe_bounds`, `passes`) take numpy arrays so the benches can decide thousands of simulated changes at once with the very
code the loop uses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

from improver.base.errors import ImproverError
from improver.decide.levels import TESTS, check_level

STRATIFIED_SCALE = 2.0  # a task passed half the time weighs 2 / 0.5 = 4
STRATIFIED_CELLS = 4_000_000  # rows x points of the stratified test's FFT done at once (64 MB)


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

    The counts are pooled over every run of every task. For newcombe and paired, `low`
    and `high` bound the difference in pass rate (newcombe) or the mean per-task
    difference in pass fraction (paired), change minus agent; the stratified test has
    no interval but its exact one-sided `p` and the mean per-task `gain`.
    """

    test: str
    level: float  # two-sided: the one-sided question is asked at half of it
    tasks: int
    change_passed: int
    change_runs: int
    current_passed: int
    current_runs: int
    low: float | None
    high: float | None
    better: bool
    p: float | None = None
    gain: float | None = None

    def describe(self) -> str:
        """E.g. "24/24 against 8/24 (newcombe test, 98.75% interval +34% to +85%)", or
        "24/24 against 8/24 (stratified test, one-sided p 0.0004 against 0.0125, +67% a task)"."""
        counts = f"{self.change_passed}/{self.change_runs} against {self.current_passed}/{self.current_runs}"
        if self.low is None or self.high is None:
            alpha = self.level / 2
            return (
                f"{counts} ({self.test} test, one-sided p {p_text(self.p or 1.0, alpha)} against {alpha:g}, "
                f"{percent(self.gain or 0.0)} a task)"
            )
        return (
            f"{counts} ({self.test} test, {confidence_label(self.level)} interval "
            f"{percent(self.low)} to {percent(self.high)})"
        )


def p_text(p: float, alpha: float) -> str:
    """A p-value with as many digits as it takes to show on which side of `alpha` it is."""
    for digits in range(2, 8):
        text = f"{p:.{digits}g}"
        if (float(text) <= alpha) == (p <= alpha):
            return text
    return f"{p:.3e}"


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
    z = -NormalDist().inv_cdf(level / 2)
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


def gap_bounds(
    variants: tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike],
    tasks: tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike],
    level: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Bounds on (gain on the variants) - (gain on the tasks), each gain a change's pass
    rate minus the agent's, from (change passed, change runs, agent passed, agent runs)
    of each: the four Wilson intervals recombined as Newcombe's are (Zou and Donner's
    MOVER), elementwise."""
    rates, lows, highs = [], [], []
    for passed, runs in (
        (variants[0], variants[1]),
        (variants[2], variants[3]),
        (tasks[0], tasks[1]),
        (tasks[2], tasks[3]),
    ):
        low, high = wilson_bounds(passed, runs, level)
        rates.append(np.asarray(passed, dtype=float) / np.asarray(runs, dtype=float))
        lows.append(low)
        highs.append(high)
    gap = (rates[0] - rates[1]) - (rates[2] - rates[3])
    # A rate counted with + lowers the gap by its distance to its own lower end, one counted with - by its upper.
    down = [rates[0] - lows[0], highs[1] - rates[1], highs[2] - rates[2], rates[3] - lows[3]]
    up = [highs[0] - rates[0], rates[1] - lows[1], rates[2] - lows[2], highs[3] - rates[3]]
    below, above = (np.sqrt(sum(d**2 for d in side)) for side in (down, up))
    return gap - below, gap + above


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


# -- the exact tests within each task -----------------------------------------------------


def stratified_weights(pooled_passed: ArrayLike, pooled_runs: ArrayLike) -> NDArray[np.int64]:
    """Each task's weight, from its runs of both arms pooled: about 1/sqrt(p(1 - p)).

    A task whose runs nearly all pass or all fail shows a gain of a few points plainly,
    one passed half the time hides it in its own noise; weighting each task by the
    inverse of its runs' spread counts the first more. Whole numbers (4 for a task
    passed half the time, up to 13 or so near none or all) keep the null distribution
    on a lattice; they depend on the pooled count alone, so the test stays exact.
    """
    t, n = np.asarray(pooled_passed, dtype=float), np.asarray(pooled_runs, dtype=float)
    p = (t + 0.5) / (n + 1)
    weights: NDArray[np.int64] = np.maximum(1, np.rint(STRATIFIED_SCALE / np.sqrt(p * (1 - p)))).astype(np.int64)
    return weights


def paired_weights(change_runs: NDArray[np.int64], current_runs: NDArray[np.int64]) -> NDArray[np.int64]:
    """1/(change runs) + 1/(agent runs) on a common whole-number scale, as small as it goes:
    a task's difference in pass fraction is its change passes times this, less a
    constant given its pooled passes. With every task run alike, every weight is 1."""
    scale = int(np.lcm.reduce(np.concatenate([change_runs.ravel(), current_runs.ravel(), [1]])))
    w = scale // np.maximum(change_runs, 1) + scale // np.maximum(current_runs, 1)
    weights: NDArray[np.int64] = w // max(1, int(np.gcd.reduce(w.ravel())))
    return weights


def stratified_pvalues(
    change_passed: ArrayLike,
    change_runs: ArrayLike,
    current_passed: ArrayLike,
    current_runs: ArrayLike,
    weighed: str = "stratified",
) -> NDArray[np.float64]:
    """Exact one-sided p-values that the change is better, one per row of tasks.

    With the change no better, a task's runs of both arms are alike, so given how many
    of them passed, which arm's they are is a random split: the change's passes are
    hypergeometric. Rows are comparisons, columns tasks. The statistic is a weighted
    sum of the change's passes: by `stratified_weights` ("stratified"), or by
    1/(change runs) + 1/(agent runs), which makes it the sum of the tasks' differences
    in pass fraction ("paired"). Its null distribution is the convolution of the tasks'
    hypergeometric ones, done on characteristic functions: tasks alike in (runs of each
    arm, pooled passes) share one factor, so a row costs a matrix product and one
    inverse FFT. A task whose runs all passed or all failed, in both arms, says nothing
    and drops out.
    """
    cp, cn, ap, an = np.broadcast_arrays(
        *(
            np.atleast_2d(np.asarray(x, dtype=np.int64))
            for x in (change_passed, change_runs, current_passed, current_runs)
        )
    )
    t, n = cp + ap, cn + an
    telling = (t > 0) & (t < n)
    w = np.where(telling, stratified_weights(t, n) if weighed == "stratified" else paired_weights(cn, an), 0)
    observed = (w * cp).sum(axis=1)
    reach = (w * cn).sum(axis=1)
    out = np.ones(len(cp))
    if not telling.any():
        return out
    keys, index = np.unique(np.stack([cn[telling], an[telling], t[telling]], axis=1), axis=0, return_inverse=True)
    rows = np.nonzero(telling)[0]
    counts = np.zeros((len(cp), len(keys)))
    np.add.at(counts, (rows, index.reshape(-1)), 1)
    size = 1 << int(reach.max()).bit_length()  # past the largest sum, so the circular convolution does not wrap
    weights = np.zeros(len(keys), dtype=np.int64)
    weights[index.reshape(-1)] = w[telling]
    factors = _log_factors(keys, weights, size)
    step = max(1, STRATIFIED_CELLS // size)
    for start in range(0, len(cp), step):
        chunk = slice(start, start + step)
        pmf = np.fft.irfft(np.exp(counts[chunk] @ factors), size)[:, : int(reach[chunk].max()) + 1]
        tail = np.cumsum(np.clip(pmf, 0, None)[:, ::-1], axis=1)[:, ::-1]
        got = tail[np.arange(len(tail)), observed[chunk]]
        out[chunk] = np.clip(np.where(reach[chunk] > 0, got, 1.0), 0.0, 1.0)
    return out


def _log_factors(keys: NDArray[np.int64], weights: NDArray[np.int64], size: int) -> NDArray[np.complex128]:
    """Per (change runs, agent runs, pooled passes) and its weight: the log characteristic
    function of that task's weighted hypergeometric term, on `size` points."""
    out = np.empty((len(keys), size // 2 + 1), dtype=np.complex128)
    for i, (cn, an, t) in enumerate(keys):
        k = np.arange(cn + 1)
        spread = np.zeros(size)
        spread[k * int(weights[i])] = hypergeom_pmf(int(cn + an), int(t), int(cn))
        factor = np.fft.rfft(spread)
        out[i] = np.log(np.where(np.abs(factor) < 1e-300, 1e-300, factor))
    return out


# -- the hypergeometric distribution --------------------------------------------------
# Its own few lines rather than scipy.stats, whose import alone took 0.6 s, a sixth of the
# demo's CPU. Binomials in exact integers, each ratio rounded once: no worse than scipy's.


@lru_cache(maxsize=4096)  # the loop asks the same few shapes again and again
def hypergeom_pmf(total: int, good: int, drawn: int) -> NDArray[np.float64]:
    """P(k of the `drawn` are good) for k = 0..drawn, the `drawn` taken at random from
    `total` of which `good` are good."""
    ways = math.comb(total, drawn)
    pmf = np.array([math.comb(good, k) * math.comb(total - good, drawn - k) / ways for k in range(drawn + 1)])
    pmf.setflags(write=False)  # cached: shared by every caller
    return pmf


@lru_cache(maxsize=4096)
def _hypergeom_cdf(total: int, good: int, drawn: int) -> NDArray[np.float64]:
    cdf = np.minimum(np.cumsum(hypergeom_pmf(total, good, drawn)), 1.0)
    cdf.setflags(write=False)  # cached: shared by every caller
    return cdf


def hypergeom_cdf(k: ArrayLike, total: ArrayLike, good: ArrayLike, drawn: ArrayLike) -> NDArray[np.float64]:
    """P(at most k of the `drawn` are good), elementwise, as `hypergeom_pmf`; each
    distinct (total, good, drawn) summed once."""
    arrays = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (k, total, good, drawn)))
    flat = np.stack([a.reshape(-1) for a in arrays], axis=1)
    keys, back = np.unique(flat, axis=0, return_inverse=True)
    found = np.array([_at_most(int(x), int(t), int(g), int(d)) for x, t, g, d in keys], dtype=float)
    return found[back.reshape(-1)].reshape(arrays[0].shape)


def _at_most(k: int, total: int, good: int, drawn: int) -> float:
    if k < 0:
        return 0.0
    return 1.0 if k >= drawn else float(_hypergeom_cdf(total, good, drawn)[k])


def mean_gain(change: Mapping[str, Tally], current: Mapping[str, Tally]) -> float:
    """The mean over tasks of the change's pass fraction minus the agent's."""
    return float(np.mean([change[n].passed / change[n].runs - current[n].passed / current[n].runs for n in current]))


# -- the comparisons --------------------------------------------------------------------


def compare_newcombe(change: Mapping[str, Tally], current: Mapping[str, Tally], level: float) -> Comparison:
    """Pooled runs of each arm, Newcombe's interval for the difference in pass rate."""
    check_same_tasks(current, change)
    counts = _pooled(change, current)
    low, high = newcombe_interval(*counts, level)
    return Comparison("newcombe", level, len(current), *counts, low, high, better_beyond_chance(low))


def compare_paired(change: Mapping[str, Tally], current: Mapping[str, Tally], level: float) -> Comparison:
    """The exact test within each task on the sum of the tasks' differences in pass fraction."""
    return _compare_within("paired", change, current, level)


def compare_stratified(change: Mapping[str, Tally], current: Mapping[str, Tally], level: float) -> Comparison:
    """The exact test within each task, weighted (`stratified_pvalues`), one-sided at level / 2."""
    return _compare_within("stratified", change, current, level)


def _compare_within(test: str, change: Mapping[str, Tally], current: Mapping[str, Tally], level: float) -> Comparison:
    check_same_tasks(current, change)
    names = sorted(current)
    passed = [[arm[n].passed for n in names] for arm in (change, current)]
    runs = [[arm[n].runs for n in names] for arm in (change, current)]
    p = float(stratified_pvalues([passed[0]], [runs[0]], [passed[1]], [runs[1]], test)[0])
    better = p <= check_level(level) / 2
    return Comparison(
        test, level, len(current), *_pooled(change, current), None, None, better, p, mean_gain(change, current)
    )


def compare(test: str, change: Mapping[str, Tally], current: Mapping[str, Tally], level: float) -> Comparison:
    """Runs the named test ("stratified", "newcombe" or "paired")."""
    if test == "stratified":
        return compare_stratified(change, current, level)
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
