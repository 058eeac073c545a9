"""The decision on one part, with fresh runs of the contested tasks until it no longer asks.

improver.decide.decision says MORE_RUNS while a task the agent passes looks lost and its
fresh runs cannot tell yet; these functions get it those runs, batch by batch, and ask
again. A contest whose runs keep erroring is settled as nothing lost after as many rounds
as the most fresh runs allow. The loops, the improver loop and an attester
(improver.trust.attest) decide by them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from improver.decide import decision
from improver.decide.decision import Decision, Evidence, Outcome, Rule
from improver.decide.stats import Tally
from improver.episodes.trials import TrialResult
from improver.tasks.task import Task

FreshRuns = Callable[[dict[str, int]], Awaitable[dict[str, Tally]]]  # {task: runs} -> {task: its fresh tally}


async def with_fresh_runs(
    rule: Rule,
    names: tuple[str, ...],
    mine: Mapping[str, Tally],
    current: Mapping[str, Tally],
    fresh: FreshRuns,
    varied: tuple[Tally, Tally] | None = None,
) -> Decision:
    """The decision on the tasks `names`, asking `fresh` for the runs it wants of the change
    on contested tasks (a task whose runs all errored is left out of its answer); `varied`
    on the CHALLENGE part (see `Evidence`)."""
    got: dict[str, Tally] = {}
    said = decision.decide(rule, Evidence(mine, current, got, varied), names)
    for _ in range(-(-rule.contest_runs // rule.runs)):
        if said.outcome is not Outcome.MORE_RUNS:
            return said
        for name, tally in (await fresh(said.more)).items():
            old = got.get(name)
            got[name] = Tally(tally.passed + (old.passed if old else 0), tally.runs + (old.runs if old else 0))
        said = decision.decide(rule, Evidence(mine, current, got, varied), names)
    return decision.settle(said)


async def decided(
    rule: Rule,
    tasks: Sequence[Task],
    mine: dict[str, Tally],
    current: dict[str, Tally],
    trial: Callable[[Sequence[Task], int], Awaitable[TrialResult]],
    varied: tuple[Tally, Tally] | None = None,
) -> tuple[Decision, int]:
    """The decision on one part, with the fresh runs of the change it asks for on
    contested tasks (`trial` runs them, the tasks needing as many runs in one batch); and
    the runs that errored on the way."""
    errored = 0

    async def fresh(more: dict[str, int]) -> dict[str, Tally]:
        nonlocal errored
        got: dict[str, Tally] = {}
        for runs in sorted(set(more.values())):
            result = await trial([t for t in tasks if more.get(t.name) == runs], runs)
            errored += result.errored
            got.update(result.tallies())
        return got

    said = await with_fresh_runs(rule, tuple(t.name for t in tasks), mine, current, fresh, varied)
    return said, errored
