"""The decision: whether a change is kept, as a pure function of the tallies.

No I/O and no randomness: the loop runs the trials and records, the CLI words what this
returns, and bench/decisions.py simulates thousands of changes through the very same
vectorised core (`judge_many`) that `decide` calls for one.

The rule, on each part of a seal (the tasks to choose on, then the sealed tasks):

1. **Better beyond chance, one-sided.** The change's first `runs` runs of each task are
   compared with the agent's baseline runs (`--baseline-runs`, measured once and reused
   for every change) by the seal's test, one-sided: at `SCREEN_LEVEL` on the tasks to
   choose on, at the seal's level 0.05/k on the sealed tasks. Runs added later to
   contested tasks never enter this test: they are drawn because a task looked worse,
   and would bias it.
2. **Loses no task the agent passes, on evidence.** A task is *contested* when the agent
   passes it (more than half its baseline runs) and the change does not (half or fewer
   of its first runs). A contested task gets fresh runs of the change, a batch of `runs`
   at a time, up to `contest_runs`. It is *lost* when, on those fresh runs alone, the
   change still does not pass it and is worse than the agent beyond chance: a one-sided
   Fisher exact test at `GUARD_LEVEL` divided by the number of contested tasks
   (Bonferroni over them). It is *cleared* when its fresh runs do as well as the agent's
   baseline, or when `contest_runs` fresh runs leave it undecided. Since the fresh runs
   are drawn only after the task was picked, the test on them is not biased by the
   picking, and the correction runs over the few contested tasks, not every task.

A change is kept when both parts say better and nothing lost; a change that is not
better is turned down without spending runs on contests.

With a challenger, a change that goes on from the tasks to choose on is judged once more
before the sealed tasks, on a third part (`CHALLENGE`): the variants a challenger wrote
of the tasks it newly passes. Both arms run the variants and, afresh, the tasks they
vary (fresh, since those tasks were picked for how well the change did on them). The
change is a shortcut when its gain on the variants is beyond chance smaller than its
gain on the tasks themselves: the upper end of the interval for the gap (`stats.gap_bounds`,
at `SCREEN_LEVEL` one-sided) below zero. Asking instead that it be better beyond chance
on a handful of variants would call most real gains shortcuts; the confirmation, not
the challenge, is what bounds false keeps. Variants the agent passes are guarded as on
any part. A shortcut spends no confirmation.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from improver.base.errors import ImproverError
from improver.decide import levels, stats
from improver.decide.stats import Comparison, Tally

SCREEN_LEVEL = 0.05  # one-sided: better beyond chance on the tasks to choose on (see the README for why 5%)
GUARD_LEVEL = 0.05  # a task counted lost when the change is worse on it beyond this, over the contested tasks
CLEARLY_WORSE_LEVEL = 0.025  # one-sided: dropped after one run of each task
BASELINE_FACTOR = 4  # --baseline-runs defaults to this many times --runs
CONTEST_FACTOR = 4  # a contested task gets at most this many times --runs fresh runs
CLEAR_LEAST = 4  # fresh runs that do as well as the agent clear a task only from this many (2 of 2 is luck at p = 0.2)
CONTEST_LEAST = 24  # and at least this many: at 2 runs, 8 fresh ones cannot tell a task lost among many contested
CHOOSE, SEALED = "choose", "sealed"
CHALLENGE = "challenge"  # the challenger's variants of the tasks a change newly passes


class Outcome(enum.Enum):
    """What a decision says; the loop records `value` as the lineage's decision."""

    KEPT = "kept"
    GOES_ON = "goes on"  # better on the tasks to choose on, losing none: to the sealed tasks
    NOT_BETTER = "not better"
    LOSES_TASKS = "loses tasks"
    MORE_RUNS = "more runs"  # contested tasks need fresh runs before the guard can say
    HOLDOUT_TURNED_DOWN = "holdout turned down"
    DROPPED = "dropped"  # clearly worse than its parent after one run of each task
    NOT_JUDGED = "not judged"
    TURNED_DOWN = "turned down"  # by a gate, before anything was tried


@dataclass(frozen=True)
class Rule:
    """What a part is judged by: the seal's test, the one-sided level, the run counts."""

    part: str  # CHOOSE, CHALLENGE or SEALED: what passing it means (going on, or being kept)
    test: str
    level: float  # one-sided
    runs: int  # the change's runs of each task, and one contest batch
    contest_runs: int  # the most fresh runs a contested task gets
    guard: float = GUARD_LEVEL

    @classmethod
    def for_part(cls, part: str, test: str, confirmations: int, runs: int) -> Rule:
        level = SCREEN_LEVEL if part == CHOOSE else levels.confirmation_level(confirmations)
        return cls(part, test, level, runs, contest_runs(runs))

    @classmethod
    def challenge(cls, runs: int) -> Rule:
        """The variants' rule: the gap in gain (`stats.gap_bounds`) at the screening level,
        whatever the seal's test; the variants' own line shows Newcombe's interval."""
        return cls(CHALLENGE, "newcombe", SCREEN_LEVEL, runs, contest_runs(runs))


def contest_runs(runs: int) -> int:
    """The most fresh runs a contested task gets: CONTEST_FACTOR batches, at least CONTEST_LEAST runs."""
    return max(CONTEST_FACTOR * runs, CONTEST_LEAST)


@dataclass(frozen=True)
class Evidence:
    """One part's tallies: the change's first runs, the agent's baseline, fresh contest runs."""

    change: Mapping[str, Tally]
    current: Mapping[str, Tally]
    fresh: Mapping[str, Tally] = field(default_factory=dict)
    varied: tuple[Tally, Tally] | None = None  # CHALLENGE: fresh runs of the varied tasks, the change's and the agent's


@dataclass(frozen=True)
class Decision:
    """The outcome and the figures behind it (the loop words them)."""

    outcome: Outcome
    part: str
    comparison: Comparison | None = None
    lost: tuple[str, ...] = ()
    contested: tuple[str, ...] = ()
    more: dict[str, int] = field(default_factory=dict)  # contested task -> fresh runs it needs next
    thin: tuple[str, ...] = ()
    gain: float | None = None  # the reusable holdout's answer
    reason: str = ""
    gap: tuple[float, float] | None = None  # CHALLENGE: bounds on (gain on the variants) - (gain on the tasks)


# -- the vectorised core ------------------------------------------------------------------


@dataclass(frozen=True)
class Judged:
    """Per row (one change), per task: what the rule says, as arrays."""

    better: NDArray[np.bool_]  # (rows,)
    contested: NDArray[np.bool_]  # (rows, tasks)
    lost: NDArray[np.bool_]
    pending: NDArray[np.bool_]  # contested, undecided: another batch of fresh runs needed

    passed: Outcome  # GOES_ON on the tasks to choose on, KEPT on the sealed tasks

    @property
    def outcome(self) -> NDArray[np.object_]:
        """Per row: NOT_BETTER, MORE_RUNS, LOSES_TASKS, or `passed`."""
        out = np.full(len(self.better), self.passed, dtype=object)
        out[self.lost.any(axis=1)] = Outcome.LOSES_TASKS
        out[self.pending.any(axis=1)] = Outcome.MORE_RUNS
        out[~self.better] = Outcome.NOT_BETTER
        return out


def judge_many(
    rule: Rule,
    change_passed: ArrayLike,
    change_runs: ArrayLike,
    current_passed: ArrayLike,
    current_runs: ArrayLike,
    fresh_passed: ArrayLike = 0,
    fresh_runs: ArrayLike = 0,
    varied: tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike] | None = None,
) -> Judged:
    """The rule on many changes at once: one row per change, one column per task.

    Run counts broadcast (a number, or per cell where errored runs left fewer); fresh
    counts are the contest runs so far (0 where none). On the CHALLENGE part, `varied`
    is per row (change passed, change runs, agent passed, agent runs) on the fresh runs
    of the tasks varied, and "better" means the gain on the variants is not beyond
    chance smaller than on them.
    """
    cp, cn = np.asarray(change_passed, dtype=np.int64), np.asarray(change_runs, dtype=np.int64)
    ap, an = np.asarray(current_passed, dtype=np.int64), np.asarray(current_runs, dtype=np.int64)
    cp, cn, ap, an = np.broadcast_arrays(np.atleast_2d(cp), cn, ap, an)
    fp, fn = (np.broadcast_to(np.asarray(x, dtype=np.int64), cp.shape) for x in (fresh_passed, fresh_runs))
    if rule.part == CHALLENGE:
        if varied is None:
            raise ImproverError("a challenge is judged against fresh runs of the tasks it varies: none were given")
        better = not_smaller_many(cp, cn, ap, an, varied, rule.level)
    else:
        better = better_many(rule.test, cp, cn, ap, an, rule.level)
    contested = (2 * ap > an) & (2 * cp <= cn)
    count = np.maximum(contested.sum(axis=1, keepdims=True), 1)
    tried = contested & (fn > 0)
    worse = np.ones(cp.shape)
    if tried.any():
        worse[tried] = fisher_worse(fp[tried], fn[tried], ap[tried], an[tried])
    lost = tried & (2 * fp <= fn) & (worse <= rule.guard / count)
    as_well = (fp * an >= ap * np.maximum(fn, 1)) & (fn >= CLEAR_LEAST)
    cleared = tried & ~lost & (as_well | (fn >= rule.contest_runs))
    pending = contested & ~lost & ~cleared
    return Judged(better, contested, lost, pending, Outcome.KEPT if rule.part == SEALED else Outcome.GOES_ON)


def better_many(
    test: str,
    change_passed: NDArray[np.int64],
    change_runs: NDArray[np.int64],
    current_passed: NDArray[np.int64],
    current_runs: NDArray[np.int64],
    level: float,
) -> NDArray[np.bool_]:
    """Per row: better beyond chance at one-sided `level` by the named test."""
    if test in ("stratified", "paired"):
        return stats.stratified_pvalues(change_passed, change_runs, current_passed, current_runs, test) <= level
    if test == "newcombe":
        low, _ = stats.newcombe_bounds(
            change_passed.sum(axis=1),
            change_runs.sum(axis=1),
            current_passed.sum(axis=1),
            current_runs.sum(axis=1),
            2 * level,
        )
        return low > 0
    raise ImproverError(f"no test named {test!r}: use one of {', '.join(levels.TESTS)}")


def not_smaller_many(
    change_passed: NDArray[np.int64],
    change_runs: NDArray[np.int64],
    current_passed: NDArray[np.int64],
    current_runs: NDArray[np.int64],
    varied: tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike],
    level: float,
) -> NDArray[np.bool_]:
    """Per row: the gain on the variants (pooled) is not beyond chance smaller than on
    the tasks varied, at one-sided `level`."""
    pooled = tuple(x.sum(axis=1) for x in (change_passed, change_runs, current_passed, current_runs))
    _, high = stats.gap_bounds(pooled, varied, 2 * level)
    not_smaller: NDArray[np.bool_] = high >= 0
    return not_smaller


def fisher_worse(
    change_passed: ArrayLike, change_runs: ArrayLike, current_passed: ArrayLike, current_runs: ArrayLike
) -> NDArray[np.float64]:
    """One-sided Fisher exact p-values that the change passes less often than the agent."""
    x, n = np.asarray(change_passed), np.asarray(change_runs)
    return stats.hypergeom_cdf(x, n + np.asarray(current_runs), x + np.asarray(current_passed), n)


# -- one change -------------------------------------------------------------------------


def decide(rule: Rule, evidence: Evidence, names: tuple[str, ...] | None = None) -> Decision:
    """The decision on one part for one change: GOES_ON (or KEPT on the sealed part),
    NOT_BETTER, LOSES_TASKS, MORE_RUNS (with the fresh runs each contested task needs)
    or NOT_JUDGED (a task without a judged run in either arm)."""
    names = names if names is not None else tuple(sorted(evidence.current))
    thin = tuple(n for n in names if n not in evidence.change or n not in evidence.current)
    if thin:
        return Decision(Outcome.NOT_JUDGED, rule.part, thin=thin)
    names = tuple(sorted(names))
    column = {n: [evidence.change[n], evidence.current[n], evidence.fresh.get(n)] for n in names}
    cp, cn, ap, an, fp, fn = (np.array([[_count(column[n], i) for n in names]]) for i in range(6))
    varied = None if evidence.varied is None else _varied(evidence.varied)
    judged = judge_many(rule, cp, cn, ap, an, fp, fn, varied)
    comparison = replace(
        stats.compare(rule.test, _only(evidence.change, names), _only(evidence.current, names), 2 * rule.level),
        better=bool(judged.better[0]),
    )
    outcome = judged.outcome[0]
    contested = tuple(n for n, c in zip(names, judged.contested[0], strict=False) if c)
    more = {
        n: min(rule.runs, rule.contest_runs - _count(column[n], 5))
        for n, p in zip(names, judged.pending[0], strict=False)
        if p
    }
    lost = tuple(n for n, x in zip(names, judged.lost[0], strict=False) if x)
    gap = None
    if varied is not None:
        low, high = stats.gap_bounds((cp.sum(), cn.sum(), ap.sum(), an.sum()), varied, 2 * rule.level)
        gap = (float(low), float(high))
    more_runs = more if outcome is Outcome.MORE_RUNS else {}
    return Decision(outcome, rule.part, comparison, lost, contested, more_runs, gap=gap)


def _varied(tallies: tuple[Tally, Tally]) -> tuple[int, int, int, int]:
    change, current = tallies
    return change.passed, change.runs, current.passed, current.runs


def settle(decision: Decision) -> Decision:
    """A MORE_RUNS decision whose runs could not be had (every fresh run errored): its
    undecided tasks are cleared, since nothing showed them lost."""
    if decision.outcome is not Outcome.MORE_RUNS:
        return decision
    if decision.lost:
        return replace(decision, outcome=Outcome.LOSES_TASKS, more={})
    return replace(decision, outcome=Outcome.KEPT if decision.part == SEALED else Outcome.GOES_ON, more={})


def clearly_worse(change: Mapping[str, Tally], parent: Mapping[str, Tally]) -> Decision | None:
    """DROPPED when, after one run of each task, the change is worse than its parent
    beyond chance (pooled Newcombe, one-sided `CLEARLY_WORSE_LEVEL`)."""
    names = sorted(set(change) & set(parent))
    if not names:
        return None
    c = stats.compare_newcombe(_only(change, names), _only(parent, names), 2 * CLEARLY_WORSE_LEVEL)
    return Decision(Outcome.DROPPED, CHOOSE, c) if c.high is not None and c.high < 0 else None


def held_out(part_decision: Decision, answer_gain: float, turned_down: bool) -> Decision | None:
    """HOLDOUT_TURNED_DOWN when the reusable holdout answered the gain at or below its threshold."""
    if not turned_down:
        return None
    return Decision(Outcome.HOLDOUT_TURNED_DOWN, SEALED, part_decision.comparison, gain=answer_gain)


def gate(why: str) -> Decision:
    """TURNED_DOWN by a gate, before anything was tried."""
    return Decision(Outcome.TURNED_DOWN, CHOOSE, reason=why)


def not_judged(part: str, thin: list[str]) -> Decision:
    """NOT_JUDGED: errored runs left these tasks without a judged run in either arm."""
    return Decision(Outcome.NOT_JUDGED, part, thin=tuple(thin))


def _only(tallies: Mapping[str, Tally], names: tuple[str, ...] | list[str]) -> dict[str, Tally]:
    return {n: tallies[n] for n in names}


def _count(cell: list[Tally | None], i: int) -> int:
    """Column i of (change passed, change runs, agent passed, agent runs, fresh passed, fresh runs)."""
    tally = cell[i // 2]
    if tally is None:
        return 0
    return tally.passed if i % 2 == 0 else tally.runs
