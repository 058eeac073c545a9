"""Replications of the grading loop: the unit an improver's change is judged on.

An improver is graded by the lesson loop it runs (improver.meta.grading), and that loop
is random: its seal's split, its draws, the proposer's and the agent's answers; whether
it keeps a lesson at all is often a coin it tosses. A test that takes the agent's runs on
the held tasks as its evidence (each run, or each task, a draw of its own) reads a lesson
one loop kept and the other did not as a gain on every held task at once: better beyond
chance by a wide margin, for an improver no better than the other. Grading the improver
as it is once, and comparing every proposal with that grade, made it worse still.

What is random between two improvers no better than each other is the loop. So every
comparison grades both afresh on the same R replications of each problem's grading loop
(replication r of problem p seeded by `replication_seed` from the run's seed, p's digest,
r and the comparison: the same seed for both improvers, no other comparison's), and the
unit of evidence is the replication:

- a replication's `score` is the share of the held runs the agent it left passed (a loop
  that kept nothing left the agent as it was, with its runs);
- on each problem the 2R scores of both improvers are cut at their mean (`Split`), and a
  replication "passes" when it is above the cut;
- each problem is one "task" of the decision, each improver's tally its replications
  above the cut of those judged (`columns`), and the decision is
  improver.decide.decision's, by whatever test the loop names, through `judged` (a
  contested problem's fresh runs are fresh replications of the change's loop).

Why this unit. With the improvers no better than each other the 2R loops of a problem are
alike and independent, so which of them are the change's is a random draw among them; the
cut depends on the 2R scores alone, not on whose they are, so the change's count above it
is hypergeometric given how many are above: exactly what the stratified test assumes of a
task's runs (and the replications are independent draws, as newcombe assumes of runs).
The test is exact whatever the loop's chance of keeping a lesson. (Replication r of both
improvers shares its seed, so the two are alike more often than two loops drawn apart:
that only makes a test that takes them as unpaired more cautious.) The alternatives the
audit names are not exact: one "task" per (problem, replication, held task) ties every
held task of a replication to one loop's agent, and one per (problem, replication) with
the held runs summed still counts that agent's runs as independent draws, so a lesson
kept by one loop and not the other reads as dozens of agreeing draws. Simulated (a lesson
lifting every held task 20 points, 16 held tasks of 4 runs, 6 replications, the
stratified test, the grading loop keeping its lesson 30%, 50% or 80% of the time), a
no-better change confirmed at 0.05/4 = 0.0125 on one held-out problem passes 10-11% of
the time with the held task as the unit, 2.5-6% with the summed replication, and 0.25%
with this one; bench/improvers.py has this unit's figures. The cut is the mean, not the
median: a loop that keeps nothing leaves the agent's score where it was, so the scores
fall in two clusters, and the mean falls between them where the median falls inside the
larger one (a better improver kept 40% of the time against 28%, at 3 held-out problems).

What it costs: the evidence is R draws a problem, not hundreds of runs, so the level a
confirmation is held to (0.05/k) wants replications and held-out problems. With one
held-out problem and 4 confirmations the stratified test confirms nothing from 4
replications (4 of 4 above the cut against 0 of 4 is p 0.014), and from 6 it confirms
6 of 6 against 1 of 6 (p 0.008) or 5 of 6 against none: hence REPLICATIONS = 6, and
more held-out problems for an improver better by less.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from improver.base.digests import digest
from improver.decide.decision import Decision, Rule
from improver.decide.stats import Tally
from improver.loop.contests import with_fresh_runs

REPLICATIONS = 6  # replications of the grading loop a problem, for each improver compared


def replication_seed(base: str, problem: str, replication: int, comparison: str) -> str:
    """The seed of replication `replication` of the grading loop on the problem whose digest
    is `problem`, in the comparison named `comparison`, for a run seeded `base`: both
    improvers compared get it, no other comparison does."""
    return digest({"seed": base, "problem": problem, "replication": replication, "comparison": comparison})[:16]


def score(after: Mapping[str, Tally]) -> float | None:
    """How a replication left the agent: the share of its judged runs of the held tasks that
    passed (runs that errored are in no tally); None when none was judged."""
    runs = sum(t.runs for t in after.values())
    return sum(t.passed for t in after.values()) / runs if runs else None


@dataclass(frozen=True)
class Split:
    """One problem of a comparison: its replications, both improvers', cut at their mean."""

    cut: float

    @classmethod
    def of(cls, change: Sequence[float | None], current: Sequence[float | None]) -> Split | None:
        """The cut of both improvers' scores on the problem; None when neither has one."""
        judged = [s for s in (*change, *current) if s is not None]
        return cls(statistics.fmean(judged)) if judged else None

    def tally(self, scores: Sequence[float | None]) -> Tally | None:
        """The replications above the cut, of those judged; None when none was."""
        judged = [s for s in scores if s is not None]
        return Tally(sum(s > self.cut for s in judged), len(judged)) if judged else None


@dataclass(frozen=True)
class Columns:
    """A part as the decision sees it: per problem, each improver's replications above the cut."""

    change: dict[str, Tally]
    current: dict[str, Tally]
    splits: dict[str, Split]


def columns(
    problems: Sequence[str],
    change: Sequence[Sequence[Mapping[str, Tally]]],
    current: Sequence[Sequence[Mapping[str, Tally]]],
) -> Columns:
    """Every problem, by its name: `change` and `current` hold, per problem, the held tasks'
    tallies each replication left. A problem without a judged replication in an arm is
    left out of that arm, so the decision says it was not judged."""
    if len(set(problems)) != len(problems):
        raise ValueError("each problem is one column: no name twice")  # refused on input (problems.check_problems)
    out = Columns({}, {}, {})
    for name, mine, theirs in zip(problems, change, current, strict=True):
        ours, others = [score(a) for a in mine], [score(a) for a in theirs]
        cut = Split.of(ours, others)
        if cut is None:
            continue
        out.splits[name] = cut
        for arm, scores in ((out.change, ours), (out.current, others)):
            tally = cut.tally(scores)
            if tally is not None:
                arm[name] = tally
    return out


def part_rule(part: str, test: str, confirmations: int, replications: int) -> Rule:
    """The decision's rule on a part, a problem's replications being its "runs"."""
    return Rule.for_part(part, test, confirmations, replications)


More = Callable[[str, int], Awaitable[Sequence[Mapping[str, Tally]]]]  # (problem, count) -> fresh replications


async def judged(
    rule: Rule,
    names: Sequence[str],
    change: Sequence[Sequence[Mapping[str, Tally]]],
    current: Sequence[Sequence[Mapping[str, Tally]]],
    more: More,
) -> Decision:
    """The decision on one part, over the problems `names` (`change` and `current` hold, per
    problem, the held tasks' tallies each replication left): the change's replications
    against the improver's as it is, problem by problem (`columns`). A contested problem
    (the improver as it is has more than half its replications above the cut, the change
    not) gets fresh replications of the change's loop from `more`, cut where its first ones
    were. NOT_JUDGED when a problem has no judged replication in an arm."""
    given = columns(names, change, current)

    async def fresh(wanted: dict[str, int]) -> dict[str, Tally]:
        got = {}
        for name, count in wanted.items():
            tally = given.splits[name].tally([score(after) for after in await more(name, count)])
            if tally is not None:  # every fresh replication errored: settled if it keeps on
                got[name] = tally
        return got

    return await with_fresh_runs(rule, tuple(sorted(names)), given.change, given.current, fresh)
