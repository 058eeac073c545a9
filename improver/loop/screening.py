"""A change on the tasks to choose on: the gate, the staged trial, the screen.

The first stages of judging a change (improver.loop.judging). The gate turns a proposal
down before anything is tried (improver.loop.gates). The staged trial runs each task
once and drops a change clearly worse than its parent, so a bad change costs one run a
task, then runs the rest. The screen decides whether the change is better than the agent
as it is beyond chance, losing no task it passes (with fresh runs on contested tasks).
Each returns the verdict that ends the change here, or what the next stage needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from improver.base.variant import Variant
from improver.decide import decision
from improver.decide.archive import Archived
from improver.decide.decision import Decision, Outcome, Rule
from improver.decide.stats import Tally
from improver.episodes.trials import TrialResult
from improver.loop.contests import decided
from improver.loop.gates import SealedText, turned_down
from improver.loop.lineage import comparison_json
from improver.loop.proposer import Proposal
from improver.loop.record import Verdict, contests, left_out
from improver.loop.running import Trials, combine
from improver.tasks.task import Task


@dataclass(frozen=True)
class Gates:
    """What a proposed change is held to before it is tried, besides the changes tried."""

    allowed_models: list[str]
    sealed: SealedText
    max_lessons: int


def gate(proposal: Proposal, gates: Gates, tried: set[str]) -> Verdict | None:
    """The verdict turning `proposal` down, or None when its change may be tried."""
    if proposal.variant is None:
        return _turned_down(proposal.problem)
    why = turned_down(
        proposal.variant,
        allowed_models=gates.allowed_models,
        tried=tried,
        sealed=gates.sealed,
        max_lessons=gates.max_lessons,
    )
    return _turned_down(why) if why else None


def _turned_down(why: str) -> Verdict:
    said = decision.gate(why)
    return Verdict(said, "turned down", said.reason, {"reason": said.reason})


async def staged_trial(
    trials: Trials, change: Variant, parent: Archived, tasks: Sequence[Task], runs: int
) -> Verdict | TrialResult:
    """`runs` runs of each task, the first alone: a change clearly worse than its parent
    after it goes no further."""
    first = await trials.trial(change, tasks, 1)
    worse = decision.clearly_worse(first.tallies(), parent.tallies)
    if worse:
        assert worse.comparison is not None
        what = (
            f"clearly worse than variant {parent.number} after one run of each task "
            f"({worse.comparison.describe()}): goes no further"
        )
        return Verdict(worse, "tried", what, {"choose": comparison_json(worse.comparison)})
    rest = [await trials.trial(change, tasks, runs - 1)] if runs > 1 else []
    return combine([first, *rest])


@dataclass(frozen=True)
class Screened:
    """A change that goes on from the tasks to choose on: the decision, the runs errored."""

    said: Decision
    errored: int


async def screen(
    trials: Trials, change: Archived, current: Archived, tasks: Sequence[Task], rule: Rule
) -> Verdict | Screened:
    """The decision on the tasks to choose on, `change`'s runs against the agent's as it is."""
    errored = change.errored + current.errored
    said, extra = await decided(
        rule, tasks, change.tallies, current.tallies, lambda batch, runs: trials.trial(change.variant, batch, runs)
    )
    errored += extra
    if said.outcome is Outcome.NOT_JUDGED:
        return not_judged(said, errored)
    screened = said.comparison
    assert screened is not None
    if said.outcome is Outcome.GOES_ON:
        return Screened(said, errored)
    verdict = (
        f"it loses {', '.join(said.lost)}, which the agent passes"
        if said.outcome is Outcome.LOSES_TASKS
        else "not better beyond chance"
    )
    return Verdict(
        said,
        "tried",
        f"{screened.describe()}{contests(said)}{left_out(errored)}: {verdict}",
        {
            "choose": comparison_json(screened),
            "lost": list(said.lost),
            "contested": list(said.contested),
            "errored": errored,
        },
    )


def not_judged(said: Decision, errored: int) -> Verdict:
    """Errored runs left tasks without a judged run: the change is not judged, no confirmation spent."""
    thin = said.thin
    return Verdict(
        said,
        "not judged",
        f"{errored} runs errored (provider or harness faults), leaving {', '.join(thin[:3])}"
        f"{' ...' if len(thin) > 3 else ''} without a judged run; no confirmation spent",
        {"errored": errored, "thin": list(thin)},
    )


def thin(change: dict[str, Tally], current: dict[str, Tally], tasks: Sequence[Task]) -> list[str]:
    """The tasks errored runs left without a judged run in either arm."""
    return [t.name for t in tasks if t.name not in change or t.name not in current]


def rate(tallies: dict[str, Tally]) -> float:
    runs = sum(t.runs for t in tallies.values())
    return sum(t.passed for t in tallies.values()) / runs if runs else 0.0
