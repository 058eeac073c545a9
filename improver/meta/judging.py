"""Judging the improver's changes to itself: screened on the problems given, confirmed on
those held out, kept.

A change is turned down before it is graded when it was tried already or is the improver
as it is. Graded on the problems given (improver.meta.grading), it goes on when the
agent ends better with it beyond chance at the screening level, losing no held task; it is
kept when it does so again on the problems held out, at the level their confirmations
allow (a confirmation spent, counted across runs in the lineage). The decisions are
improver.decide.decision's, with fresh runs on contested tasks as the lesson loop's
(improver.loop.contests). Every decision is a line in the improver lineage
(improver.loop.record); a kept improver published with a wallet is an
`agent.improver/v1` claim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from improver.base.digests import digest
from improver.base.errors import ImproverError
from improver.decide import levels
from improver.decide.decision import CHOOSE, SEALED, Decision, Outcome, Rule
from improver.decide.stats import Comparison, Tally
from improver.loop.contests import with_fresh_runs
from improver.loop.keeping import Publish
from improver.loop.lineage import Lineage, chosen_counts, comparison_json
from improver.loop.record import Record, how_it_went
from improver.loop.running import Stop, Trials
from improver.meta.grading import Grades
from improver.meta.problems import Graded, Problem, held_digest
from improver.meta.proposing import Proposed
from improver.seals.claims import IMPROVER
from improver.seals.settings import Settings, describe_change

KIND = IMPROVER


@dataclass
class ImproverJudge:
    """Judges the improver's changes to itself, recording each decision."""

    profile: str
    problems: list[Problem]
    held_out: list[Problem]
    runs: int
    confirmations: int  # the held-out problems', fixed the first time they are given
    test: str
    grades: Grades
    trials: Trials
    record: Record
    publish: Publish | None = None
    apply: Callable[[Settings, str], None] | None = None

    def __post_init__(self) -> None:
        self.held = held_digest(self.held_out)  # what names the held-out problems
        self.kept_by: dict[str, str] = {}  # improver id -> the step that kept it, in this run
        lines = [line for _, line in self.record.lineage.lines()]
        self.tried = {line["improver"] for line in lines if line.get("improver")}
        self.history = [(line["change"], line["went"]) for line in lines if line.get("went")]  # as the improver is told
        allowed = {line["confirmations"] for line in lines if line.get("held_out_digest") == self.held}
        if allowed - {self.confirmations}:
            raise ImproverError(
                f"these held-out problems were given with --confirmations {allowed.pop()} before: their level is fixed "
                "by it, so give the same, or fresh held-out problems"
            )
        self.follows = next(
            (line["claim"] for line in reversed(lines) if line["decision"] == "kept" and line.get("claim")), None
        )

    async def consider(self, proposal: Proposed, proposer: Settings, current: Settings) -> Settings:
        """Judges `proposal`, made by `proposer`, against `current` (the improver as it is);
        returns the improver as it is after: the change, when it is kept."""
        change = proposal.improver
        if change is None:
            why = proposal.why
            self._decide("turned down", f"turned down: a proposal: {why}", "a proposal", None, reason=why)
            return current
        label = describe_change(change, proposer)
        why = (
            "tried already"
            if change.id in self.tried
            else ("it is the improver as it is" if change == proposer else "")
        )
        if why:
            self._decide("turned down", f"turned down: {label}: {why}", label, change, reason=why)
            return current
        mine = await self.grades.of(change, self.problems)
        theirs = await self.grades.as_it_is(current, self.problems)
        said = await self._decided(Rule.for_part(CHOOSE, self.test, self.confirmations, self.runs), mine, theirs)
        if said.outcome is Outcome.NOT_JUDGED:
            self._not_judged(label, change, said)
            return current
        screen = said.comparison
        assert screen is not None
        if said.outcome is not Outcome.GOES_ON:
            self._decide(
                "tried",
                f"tried {label}: the agent ended at {screen.describe()} on the problems to choose on: {_verdict(said)}",
                label,
                change,
                choose=comparison_json(screen),
                lost=list(said.lost),
            )
            return current
        return await self._confirm(change, label, screen, proposer, current)

    async def _confirm(
        self, change: Settings, label: str, screen: Comparison, proposer: Settings, current: Settings
    ) -> Settings:
        number = spent(self.record.lineage, self.held) + 1
        if number > self.confirmations:
            raise Stop(
                f"the held-out problems have spent their {self.confirmations} confirmations: give fresh held-out problems"
            )
        mine = await self.grades.of(change, self.held_out)
        theirs = await self.grades.as_it_is(current, self.held_out)
        said = await self._decided(Rule.for_part(SEALED, self.test, self.confirmations, self.runs), mine, theirs)
        counted = {"confirmation": number, "confirmations": self.confirmations, "held_out_digest": self.held}
        if said.outcome is Outcome.NOT_JUDGED:
            self._not_judged(label, change, said, **counted)
            return current
        held = said.comparison
        assert held is not None
        if said.outcome is not Outcome.KEPT:
            self._decide(
                "not confirmed",
                f"tried {label}: the agent ended at {screen.describe()} on the problems to choose on, but at "
                f"{held.describe()} on those held out: {_verdict(said)} (confirmation {number} of {self.confirmations} spent)",
                label,
                change,
                choose=comparison_json(screen),
                held=comparison_json(held),
                lost=list(said.lost),
                **counted,
            )
            return current
        self._keep(change, label, (screen, held), number, proposer, current)
        return change

    def _keep(
        self,
        change: Settings,
        label: str,
        compared: tuple[Comparison, Comparison],
        number: int,
        proposer: Settings,
        current: Settings,
    ) -> None:
        """Keeps `change` (its comparisons on the problems given and held out), replacing
        `current`: the proposer, unless this round kept another first."""
        screen, held = compared
        step = digest({"improver": change.id, "held_out": self.held, "confirmation": number})[:16]
        body = self._body(change, label, compared, number, step, current)
        claim, pulse = self.publish(KIND, body) if self.publish else (None, None)
        parent_step = self.kept_by.get(proposer.id)
        self._decide(
            "kept",
            f"kept {label}: with it the agent ended at {screen.describe()} on the problems to choose on, and at "
            f"{held.describe()} on the problems held out (confirmation {number} of {self.confirmations}), as step {step}",
            label,
            change,
            **body,
            claim=claim,
            pulse=pulse,
            proposed_by=proposer.id,
            proposed_by_step=parent_step,
        )
        if parent_step:
            self.record.emit(
                "self-improved",
                f"the improver step {parent_step} kept went on to propose the change step {step} kept",
                step=step,
                proposed_by_step=parent_step,
            )
        if claim:
            self.follows = claim
            self.record.emit("published", f"published as claim {claim}", claim=claim, pulse=pulse)
        self.kept_by[change.id] = step
        if self.apply:
            self.apply(change, step)
            self.record.emit("applied", f"profile {self.profile}'s improver is now the one step {step} kept", step=step)

    def _body(
        self,
        change: Settings,
        label: str,
        compared: tuple[Comparison, Comparison],
        number: int,
        step: str,
        before: Settings,
    ) -> dict[str, Any]:
        """The kept improver as its claim publishes it (and its lineage line holds it)."""
        screen, held = compared
        return {
            "profile": self.profile,
            "step": step,
            "follows": self.follows,
            "change": label,
            "before": before.to_json(),
            "after": change.to_json(),
            "improver": change.id,
            "problems": [p.digest for p in self.problems],
            "held_out": [p.digest for p in self.held_out],
            "held_out_digest": self.held,
            "choose": comparison_json(screen),
            "held": comparison_json(held),
            "confirmation": number,
            "confirmations": self.confirmations,
            "level": levels.confirmation_level(
                self.confirmations
            ),  # one-sided; the intervals are two-sided at twice it
            "test": self.test,
        }

    def _not_judged(self, label: str, change: Settings, said: Decision, **data: Any) -> None:
        thin = ", ".join(said.thin[:3]) + (" ..." if len(said.thin) > 3 else "")
        self._decide(
            "not judged",
            f"not judged {label}: errored runs left {thin} without a judged run",
            label,
            change,
            thin=list(said.thin),
            **data,
        )

    async def _decided(self, rule: Rule, mine: list[Graded], current: list[Graded]) -> Decision:
        """The decision on one part, over every problem's held tasks, with fresh runs of what
        the change's loops kept on the contested tasks, one task at a time."""
        tasks = {f"{i}/{t.name}": (g, t) for i, g in enumerate(mine) for t in g.problem.held.tasks}
        ours = {f"{i}/{n}": tally for i, g in enumerate(mine) for n, tally in g.after.items()}
        theirs = {f"{i}/{n}": tally for i, g in enumerate(current) for n, tally in g.after.items()}

        async def fresh(more: dict[str, int]) -> dict[str, Tally]:
            got = {}
            for key, runs in more.items():
                graded, task = tasks[key]
                tally = (await self.trials.trial(graded.kept, [task], runs)).tallies().get(task.name)
                if tally is not None:  # every fresh run errored: settled if it keeps on
                    got[key] = tally
            return got

        return await with_fresh_runs(rule, tuple(tasks), ours, theirs, fresh)

    def _decide(self, name: str, text: str, label: str, change: Settings | None, /, **data: Any) -> None:
        went = _went(name, data)
        self.history.append((label, went))
        if change is not None:
            self.tried.add(change.id)
        line = {"change": label, "improver": change.id if change else None, "went": went, **data}
        self.record.decision(name, text, line)


def spent(lineage: Lineage, held: str) -> int:
    """The confirmations spent on the held-out problems named `held`, by every run so far."""
    lines = lineage.lines()
    return max((line.get("confirmation", 0) for _, line in lines if line.get("held_out_digest") == held), default=0)


def _verdict(said: Decision) -> str:
    if said.outcome is Outcome.LOSES_TASKS:
        return f"the agent loses {', '.join(said.lost)}, which it passed with the improver as it is"
    return "not better beyond chance"


def _went(name: str, data: dict[str, Any]) -> str:
    """How a change went, as the improver may be told: nothing a held-out problem said.
    Its reasons for turning one down name nothing held out, so it is told them."""
    if name == "turned down":
        return f"turned down before it was tried ({data.get('reason')})"
    if name == "kept":
        return f"kept{chosen_counts(data)}"
    return how_it_went(name, data, "problems")
