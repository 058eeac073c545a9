"""Judging proposed changes, stage by stage, for the lesson loop and the code loop.

gate → staged trial → screen (improver.loop.screening) → challenge, with a challenger
(improver.loop.challenging) → confirm (improver.loop.confirming) → keep
(improver.loop.keeping). Each stage ends the change with a verdict, recorded here
(improver.loop.record), or hands the next stage what it needs. What differs between
the loops comes in plainly: how a variant runs (the agent, or the program built from
it: `trials.candidate`), how the lines are worded (`verdicts.wording`), and what a kept
change publishes and does next (`keeper`). Every change is judged against the agent as
it is, measured first on the tasks to choose on (`Judge.baseline`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from improver.base.variant import Variant
from improver.decide.archive import Archive, Archived
from improver.decide.decision import CHOOSE, Rule
from improver.loop.challenger import Challenger, Shown
from improver.loop.challenging import Challenged, challenge
from improver.loop.confirming import Confirmed, Examination, LocalExamination, SealedBaseline, confirm
from improver.loop.keeping import Keeper, Step, claim_body, kept
from improver.loop.proposer import Proposal, describe
from improver.loop.record import Record, Verdict, Verdicts
from improver.loop.running import Trials
from improver.loop.screening import Gates, Screened, gate, rate, screen, staged_trial, thin
from improver.seals.seal import Seal
from improver.tasks.task import TaskSet

ROOT_LABEL = "the agent as it was"


@dataclass
class Judge:
    """Judges the changes proposed on one seal, against the agent as it is."""

    profile: str
    seal: Seal
    train: TaskSet  # the tasks to choose on: the seal's, and practice tasks beside them
    runs: int
    baseline_runs: int  # the agent's runs of each task, as it is
    archive: Archive
    trials: Trials
    verdicts: Verdicts
    keeper: Keeper
    gates: Gates
    challenger: Challenger | None = None
    practice: TaskSet | None = None
    examination: Examination | None = None  # who asks the sealed tasks; default: this process
    follows: str | None = field(init=False)  # the last kept step's claim, which the next one follows

    def __post_init__(self) -> None:
        self.follows = self.verdicts.record.lineage.last_claim()
        if self.examination is None:
            self.examination = LocalExamination(
                self.seal, self.trials, SealedBaseline(self.seal, self.trials, self.baseline_runs)
            )

    async def baseline(self, current: Variant) -> tuple[Archived, bool]:
        """The agent as it is on the tasks to choose on, with `baseline_runs` runs of each
        task, and whether it was measured now: from the archive when it holds them, else
        tried afresh (a change just kept is measured afresh too, since its own runs were
        picked for looking good)."""
        base = self.archive.find(current)
        tasks = self.train.tasks
        if base is not None and base.runs == self.baseline_runs and not thin(base.tallies, base.tallies, tasks):
            return base, False
        result = await self.trials.trial(current, tasks, self.baseline_runs)
        tallies, wrong, errored = result.tallies(), result.wrong(), result.errored
        if base is None:
            base = self.archive.add(current, None, tallies, self.baseline_runs, ROOT_LABEL, wrong, errored)
        else:
            base.tallies, base.wrong, base.errored, base.runs = tallies, wrong, errored, self.baseline_runs
        self.archive.save()
        return base, True

    async def consider(self, proposal: Proposal, parent: Archived, current: Variant) -> Variant:
        """Judges `proposal`, a change to `parent`, against `current` (the agent as it is,
        in the archive); returns the agent as it is after: the change, when it is kept."""
        change = proposal.variant
        label = proposal.label or (describe(change, parent.variant) if change else "a proposal")
        turned = gate(proposal, self.gates, self.archive.tried)
        if turned is not None:
            return self._ends(turned, label, change, parent, current)
        assert change is not None  # the gate turns down a proposal that makes no change
        tried = await staged_trial(self.trials, change, parent, self.train.tasks, self.runs)
        if isinstance(tried, Verdict):
            return self._ends(tried, label, change, parent, current)
        archived = self.archive.add(
            change, parent.number, tried.tallies(), self.runs, label, tried.wrong(), tried.errored
        )
        return await self._judge(label, archived, parent, current)

    async def _judge(self, label: str, change: Archived, parent: Archived, current: Variant) -> Variant:
        """The change, tried on the tasks to choose on, screened, challenged, confirmed, kept."""
        base = self.archive.find(current)
        assert base is not None  # the baseline put it there
        terms = self.seal.terms
        rule = Rule.for_part(CHOOSE, terms.test, terms.confirmations, self.runs)
        screened = await screen(self.trials, change, base, self.train.tasks, rule)
        if isinstance(screened, Verdict):
            return self._ends(screened, label, change.variant, parent, current)
        challenged = await self._challenge(label, change, base, screened)
        if isinstance(challenged, Verdict):
            return self._ends(challenged, label, change.variant, parent, current)
        gains = rate(change.tallies) - rate(base.tallies)
        assert self.examination is not None
        confirmed = await confirm(
            self.examination,
            self.seal,
            change.variant,
            current,
            screened.said,
            gains,
            screened.errored,
            self.runs,
        )
        if isinstance(confirmed, Verdict):
            return self._ends(confirmed, label, change.variant, parent, current)
        self._keep(label, change, parent, current, screened, confirmed, challenged)
        return change.variant

    def _ends(
        self, verdict: Verdict, label: str, change: Variant | None, parent: Archived, current: Variant
    ) -> Variant:
        """The change ends with `verdict`, recorded; the agent stays as it is."""
        self.verdicts(verdict, label, change, parent)
        return current

    async def _challenge(
        self, label: str, change: Archived, current: Archived, screened: Screened
    ) -> Verdict | dict[str, Any] | None:
        """With a challenger, what its variants showed (for the kept step), or the verdict
        on a shortcut; None without one."""
        if self.challenger is None:
            return None
        screen = screened.said.comparison
        assert screen is not None
        shown = Shown(
            self.profile, self.train.operator, label, self.train.tasks, self.seal.real_tasks, self.seal.canary_in
        )
        said = await challenge(self.challenger, shown, self.trials, change, current, screen, self.runs)
        if isinstance(said, Challenged):
            self.verdicts.record.before_decision(said.event)
            return said.record
        return said

    def _keep(
        self,
        label: str,
        change: Archived,
        parent: Archived,
        before: Variant,
        screened: Screened,
        confirmed: Confirmed,
        challenged: dict[str, Any] | None,
    ) -> None:
        screen = screened.said.comparison
        assert screen is not None
        step = Step(
            label, change.variant, confirmed.said, screen, confirmed.number, confirmed.errored, confirmed.examination
        )
        body = claim_body(self.profile, self.seal, step, before, self.follows, self.practice, challenged)
        claim, pulse = claimed = self.keeper.publish(change.variant, before, body)
        change.kept = True
        self.verdicts(kept(step, body, claimed), label, change.variant, parent)
        record = self.verdicts.record
        if claim:
            self.follows = claim
            record.emit("published", f"published as claim {claim}", claim=claim, pulse=pulse)
        self.keeper.after(change.variant, body["step"], record)


def say_baseline(record: Record, base: Archived, name: str, current: Variant, **more: Any) -> None:
    """How the agent as it is (`name`: as the loop calls it) did on the tasks to choose on."""
    record.emit(
        "baseline",
        f"{name}: {base.counts().replace('runs passed', 'runs of the tasks to choose on passed')}",
        variant=current.id,
        passed=base.passed,
        judged=base.judged,
        errored=base.errored,
        **more,
    )
