"""Judging the improver's changes to itself: screened on the problems given, confirmed on
those held out, kept.

A change is turned down before it is graded when it was tried already or is the improver
as it is. Otherwise it and the improver as it is are graded afresh on the same
replications of each problem's grading loop (improver.meta.grading), and each problem
counts as the replications whose loop left the agent better than it was
(improver.meta.replications: why the replication is the unit). It goes on when its
replications did so more often beyond chance at the screening level, on no problem
falling behind, and is kept when they do so again on the problems held out, at the
level their confirmations allow: a confirmation spent, counted across runs in the
lineage for the set of held-out problems and for each of their tasks
(improver.meta.spending). The decisions are improver.decide.decision's, with fresh
replications of the change's loop on contested problems as the lesson loop has fresh
runs on contested tasks (improver.loop.contests). Every decision is a line in the
improver lineage (improver.loop.record), naming the replications' seeds; a kept
improver published with a wallet is an `agent.improver/v1` claim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from improver.base.digests import digest
from improver.base.errors import ImproverError
from improver.decide import levels
from improver.decide.decision import CHOOSE, SEALED, Decision, Outcome
from improver.decide.stats import Comparison, Tally
from improver.loop.keeping import Publish
from improver.loop.lineage import chosen_counts, comparison_json
from improver.loop.record import Record, how_it_went
from improver.loop.running import Trials
from improver.meta.grading import Grades, Replicated
from improver.meta.problems import Problem, held_digest, held_tasks
from improver.meta.proposing import Proposed
from improver.meta.replications import judged, part_rule
from improver.meta.spending import Spent
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
        self.held_tasks = held_tasks(self.held_out)  # and what they hold, task by task
        self.kept_by: dict[str, str] = {}  # improver id -> the step that kept it, in this run
        self.shown: dict[str, Replicated] = {}  # improver id -> its latest grades on the problems given
        lines = [line for _, line in self.record.lineage.lines()]
        self.tried = {line["improver"] for line in lines if line.get("improver")}
        self.history = [(line["change"], line["went"]) for line in lines if line.get("went")]  # as the improver is told
        allowed = {line["confirmations"] for line in lines if line.get("held_out_digest") == self.held}
        if allowed - {self.confirmations}:
            raise ImproverError(
                f"these held-out problems were given with --confirmations {allowed.pop()} before: their level is fixed "
                "by it, so give the same, or fresh held-out problems"
            )
        self.spent().check_new()
        self.follows = next(
            (line["claim"] for line in reversed(lines) if line["decision"] == "kept" and line.get("claim")), None
        )

    def spent(self) -> Spent:
        """What the held-out problems, and each of their tasks, have spent so far."""
        lines = tuple(line for _, line in self.record.lineage.lines())
        return Spent(self.held, self.held_tasks, self.confirmations, lines)

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
        # Named by both improvers: no other comparison draws these replications.
        comparison = digest({"change": change.id, "current": current.id})[:16]
        mine, theirs = await self.grades.compared(change, current, self.problems, f"{comparison}/{CHOOSE}")
        self.shown[current.id] = theirs
        said = await self._decided(CHOOSE, mine, theirs, comparison)
        graded = {"comparison": comparison, "replications": self.grades.replications, "seeds": {CHOOSE: mine.seeds()}}
        if said.outcome is Outcome.NOT_JUDGED:
            self._not_judged(label, change, said, **graded)
            return current
        screen = said.comparison
        assert screen is not None
        if said.outcome is not Outcome.GOES_ON:
            self._decide(
                "tried",
                f"tried {label}: the agent ended {_above(screen)} on the problems to choose on: {_verdict(said)}",
                label,
                change,
                choose=comparison_json(screen),
                lost=list(said.lost),
                **graded,
            )
            return current
        return await self._confirm(change, label, (screen, mine), proposer, current, graded)

    async def _confirm(
        self,
        change: Settings,
        label: str,
        screened: tuple[Comparison, Replicated],
        proposer: Settings,
        current: Settings,
        graded: dict[str, Any],
    ) -> Settings:
        screen, mine_given = screened
        number = self.spent().next_number()
        comparison = graded["comparison"]
        mine, theirs = await self.grades.compared(change, current, self.held_out, f"{comparison}/{SEALED}")
        said = await self._decided(SEALED, mine, theirs, comparison)
        graded = {**graded, "seeds": {**graded["seeds"], SEALED: mine.seeds()}}
        counted = {
            "confirmation": number,
            "confirmations": self.confirmations,
            "held_out_digest": self.held,
            "held_out_tasks": sorted(self.held_tasks),
            **graded,
        }
        if said.outcome is Outcome.NOT_JUDGED:
            self._not_judged(label, change, said, **counted)
            return current
        held = said.comparison
        assert held is not None
        if said.outcome is not Outcome.KEPT:
            self._decide(
                "not confirmed",
                f"tried {label}: the agent ended {_above(screen)} on the problems to choose on, but in "
                f"{held.describe()} of them on those held out: {_verdict(said)} (confirmation {number} of "
                f"{self.confirmations} spent)",
                label,
                change,
                choose=comparison_json(screen),
                held=comparison_json(held),
                lost=list(said.lost),
                **counted,
            )
            return current
        self.shown[change.id] = mine_given
        self._keep(change, label, (screen, held), number, proposer, current, counted)
        return change

    def _keep(
        self,
        change: Settings,
        label: str,
        compared: tuple[Comparison, Comparison],
        number: int,
        proposer: Settings,
        current: Settings,
        counted: dict[str, Any],
    ) -> None:
        """Keeps `change` (its comparisons on the problems given and held out), replacing
        `current`: the proposer, unless this round kept another first. `counted` is what its
        line holds beside its claim: the confirmation's tasks, the replications' seeds."""
        screen, held = compared
        step = digest({"improver": change.id, "held_out": self.held, "confirmation": number})[:16]
        body = self._body(change, label, compared, number, step, current)
        claim, pulse = self.publish(KIND, body) if self.publish else (None, None)
        parent_step = self.kept_by.get(proposer.id)
        self._decide(
            "kept",
            f"kept {label}: with it the agent ended {_above(screen)} on the problems to choose on, and in "
            f"{held.describe()} of them on the problems held out (confirmation {number} of {self.confirmations}), as "
            f"step {step}",
            label,
            change,
            **{**counted, **body},  # the same confirmation, counted as its claim says it
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
            "replications": self.grades.replications,  # a problem's, for each improver: the unit compared
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

    async def _decided(self, part: str, mine: Replicated, theirs: Replicated, comparison: str) -> Decision:
        """The decision on one part, each problem its replications, with fresh replications
        of the change's loop on a contested problem (improver.meta.replications)."""
        names = [p.name for p in mine.problems]
        drawn = dict.fromkeys(names, self.grades.replications)  # the change's replications so far, per problem

        async def more(name: str, count: int) -> list[dict[str, Tally]]:
            problem = mine.problems[names.index(name)]
            graded = await self.grades.more(mine.improver, problem, f"{comparison}/{part}", drawn[name], count)
            drawn[name] += count
            return [g.after for g in graded]

        rule = part_rule(part, self.test, self.confirmations, self.grades.replications)
        return await judged(rule, names, mine.afters(), theirs.afters(), more)

    def _decide(self, name: str, text: str, label: str, change: Settings | None, /, **data: Any) -> None:
        went = _went(name, data)
        self.history.append((label, went))
        if change is not None:
            self.tried.add(change.id)
        line = {"change": label, "improver": change.id if change else None, "went": went, **data}
        self.record.decision(name, text, line)


def _above(c: Comparison) -> str:
    """E.g. "above the mean of both improvers' grading loops in 12/12 against 0/12 (stratified test, ...) of them":
    how often a replication of each left the agent passing more held runs than the two's replications on average."""
    return f"above the mean of both improvers' grading loops in {c.describe()} of them"


def _verdict(said: Decision) -> str:
    if said.outcome is Outcome.LOSES_TASKS:
        return (
            f"its loops leave the agent above the mean less often on {', '.join(said.lost)}, where the improver "
            "as it is mostly left it above"
        )
    return "not better beyond chance"


def _went(name: str, data: dict[str, Any]) -> str:
    """How a change went, as the improver may be told: nothing a held-out problem said.
    Its reasons for turning one down name nothing held out, so it is told them."""
    if name == "turned down":
        return f"turned down before it was tried ({data.get('reason')})"
    if name == "kept":
        return f"kept{chosen_counts(data)}"
    return how_it_went(name, data, "problems")
