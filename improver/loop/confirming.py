"""The confirmation: a change that held up so far, asked of the sealed tasks.

The last stage before a change is kept (improver.loop.judging). The seal must have a
confirmation left before it is asked anything; the agent as it is and the change run on
the sealed tasks (a canary passed stops the loop: the sealed answers have leaked); on a
reusable holdout the holdout answers the change's gain first, and may turn it down with
no confirmation spent; then a confirmation is spent and the decision made at its level,
with fresh runs on contested tasks. Errored runs that leave a sealed task without a
judged run leave the change not judged, before any confirmation is spent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from improver.base.errors import ImproverError
from improver.base.variant import Variant
from improver.decide import decision
from improver.decide.decision import SEALED, Decision, Outcome, Rule
from improver.decide.stats import Tally
from improver.episodes.trials import TrialResult
from improver.loop.contests import decided
from improver.loop.lineage import comparison_from, comparison_json
from improver.loop.record import Verdict, contests, left_out
from improver.loop.running import Stop, Trials
from improver.loop.screening import not_judged, rate, thin
from improver.seals.seal import Confirmation, Seal, SealSpent, is_canary
from improver.tasks.task import Task


@dataclass(frozen=True)
class Confirmed:
    """A change the sealed tasks confirmed: the decision, the confirmation it spent, and
    the runs errored on each part."""

    said: Decision
    number: int
    errored: dict[str, int]  # "choose", "sealed"
    examination: str | None = None  # the examiner's agent.examination/v1 claim, when one confirmed it


@dataclass(frozen=True)
class Examined:
    """What the sealed tasks said of a change, before it is worded: the decision (kept,
    not better, loses tasks, not judged, or turned down by the holdout, with its gain),
    the confirmation spent (None when none was), the sealed runs errored, and, when an
    examiner answered, its examination's claim."""

    said: Decision
    confirmation: Confirmation | None
    errored: int
    examination: str | None = None


class Examination(Protocol):
    """Whoever asks the sealed tasks: this process (`LocalExamination`), or an examiner
    that holds them on another machine. Stop when the seal is spent or a canary passed."""

    async def examine(self, change: Variant, current: Variant, gain_choose: float, runs: int) -> Examined: ...


@dataclass
class SealedBaseline:
    """The agent as it is on the sealed tasks, with the baseline's runs: tried once for
    each agent as it is, since every change confirmed against it is compared with it."""

    seal: Seal
    trials: Trials
    runs: int
    last: tuple[str, TrialResult] | None = None

    async def of(self, current: Variant) -> TrialResult:
        if self.last and self.last[0] == current.id:
            return self.last[1]
        result = await self.trials.trial(current, self.seal.sealed.tasks, self.runs)
        check_canaries_passed(self.seal, result)
        self.last = (current.id, result)
        return result


@dataclass(frozen=True)
class Arms:
    """The change and the agent as it is on the sealed tasks (canaries left out)."""

    real: list[Task]
    change: dict[str, Tally]
    current: dict[str, Tally]
    errored: int

    @property
    def missing(self) -> list[str]:
        """Sealed tasks left with no judged run in an arm: the change is not judged."""
        return thin(self.change, self.current, self.real)

    @property
    def gain(self) -> float:
        return rate(self.change) - rate(self.current)


@dataclass
class LocalExamination:
    """The sealed tasks asked here, in the trials' own sandbox and models."""

    seal: Seal
    trials: Trials
    baseline: SealedBaseline

    async def examine(self, change: Variant, current: Variant, gain_choose: float, runs: int) -> Examined:
        seal = self.seal
        seal_has_room(seal)
        seal.mark_asked()
        arms = await self.arms(change, current, runs)
        if arms.missing:
            return Examined(decision.not_judged(SEALED, arms.missing), None, arms.errored)
        held = _held_out(seal, gain_choose, arms.gain)
        if held:
            return Examined(held, None, arms.errored)
        try:
            confirmation = seal.spend_confirmation()
        except SealSpent as exc:
            raise Stop(str(exc)) from None
        return await self.judged(arms, change, confirmation, runs)

    async def arms(self, change: Variant, current: Variant, runs: int) -> Arms:
        """Both arms run; a canary passed stops the loop."""
        now = await self.baseline.of(current)
        mine = await self.trials.trial(change, self.seal.sealed.tasks, runs)
        check_canaries_passed(self.seal, mine)
        real = [t for t in self.seal.sealed.tasks if not is_canary(t)]
        return Arms(real, mine.tallies(real), now.tallies(real), mine.errored + now.errored)

    async def judged(self, arms: Arms, change: Variant, confirmation: Confirmation, runs: int) -> Examined:
        """The decision at the confirmation's level, with fresh runs on contested tasks."""
        terms = self.seal.terms
        rule = replace(Rule.for_part(SEALED, terms.test, confirmation.of, runs), level=confirmation.level)
        said, extra = await decided(
            rule, arms.real, arms.change, arms.current, lambda batch, n: self.trials.trial(change, batch, n)
        )
        return Examined(said, confirmation, arms.errored + extra)

    async def again(self, change: Variant, current: Variant, runs: int, confirmation: Confirmation) -> Examined:
        """An examination that spent `confirmation` run again (on a revealed seal): the
        same arms and the decision at that confirmation's level, nothing spent."""
        arms = await self.arms(change, current, runs)
        if arms.missing:
            return Examined(decision.not_judged(SEALED, arms.missing), None, arms.errored)
        return await self.judged(arms, change, confirmation, runs)


async def confirm(
    examination: Examination,
    seal: Seal,
    change: Variant,
    current: Variant,
    screened: Decision,
    gains: float,
    errored_choose: int,
    runs: int,
) -> Verdict | Confirmed:
    """`change` against `current` on the sealed tasks, worded; `screened` is the decision
    on the tasks to choose on, `gains` its gain there (the reusable holdout's question)."""
    examined = await examination.examine(change, current, gains, runs)
    said, errored = examined.said, {"choose": errored_choose, "sealed": examined.errored}
    if said.outcome is Outcome.NOT_JUDGED:
        return not_judged(said, errored["sealed"])
    if said.outcome is Outcome.TURNED_DOWN:  # by the examiner's gate: it holds the sealed tasks' words
        return Verdict(said, "turned down", str(said.reason), {"reason": said.reason})
    if said.outcome is Outcome.HOLDOUT_TURNED_DOWN:
        assert said.gain is not None
        return _turned_down(seal, screened, said.gain)
    assert examined.confirmation is not None
    if said.outcome is Outcome.KEPT:
        return Confirmed(said, examined.confirmation.number, errored, examined.examination)
    return _not_confirmed(said, screened, examined.confirmation, errored)


def turned_down_by_examiner(why: str) -> Examined:
    """What an examiner's refusal to examine a change holding its sealed tasks' words
    says: turned down, nothing spent (the gate the agent cannot hold without the text)."""
    return Examined(Decision(Outcome.TURNED_DOWN, SEALED, reason=why), None, 0)


def _held_out(seal: Seal, gain_choose: float, gain_sealed: float) -> Decision | None:
    """On a reusable holdout, its decision when it answers the change's gain at or below
    its threshold: turned down before a confirmation is spent."""
    if seal.terms.holdout is None:
        return None
    try:
        answer = seal.ask_holdout(gain_choose, gain_sealed)
    except ImproverError as exc:  # its budget went to another process since we looked
        raise Stop(str(exc)) from None
    if not answer.turned_down:
        return None
    return Decision(Outcome.HOLDOUT_TURNED_DOWN, SEALED, gain=answer.gain)


def _turned_down(seal: Seal, screened: Decision, gain: float) -> Verdict:
    held = decision.held_out(screened, gain, True)
    assert held is not None
    screen = screened.comparison
    assert screen is not None and seal.terms.holdout is not None
    threshold = seal.terms.holdout["threshold"]
    what = (
        f"better on the tasks to choose on ({screen.describe()}), but the sealed tasks "
        f"answer its gain at {gain:.1%}, at or below {threshold:.1%}: no confirmation spent"
    )
    return Verdict(held, "turned down", what, {"choose": comparison_json(screen), "holdout_gain": gain})


def _not_confirmed(said: Decision, screened: Decision, confirmation: Confirmation, errored: dict[str, int]) -> Verdict:
    """Not better on the sealed tasks, or losing one: the confirmation it spent is counted."""
    screen, sealed = screened.comparison, said.comparison
    assert screen is not None and sealed is not None
    lost = said.outcome is Outcome.LOSES_TASKS
    why = f"it loses sealed tasks {', '.join(said.lost)}" if lost else "not better on the sealed tasks"
    counted = f"confirmation {confirmation.number} of {confirmation.of}"
    return Verdict(
        said,
        "tried",
        f"better on the tasks to choose on ({screen.describe()}), but {why} ({sealed.describe()}"
        f"{contests(said)}; {counted} spent){left_out(errored['choose'] + errored['sealed'])}",
        {
            "choose": comparison_json(screen),
            "sealed": comparison_json(sealed),
            "lost": list(said.lost),
            "contested": list(said.contested),
            "confirmation": confirmation.number,
            "confirmations": confirmation.of,
            "errored": errored,
        },
    )


def seal_has_room(seal: Seal) -> None:
    """Before the sealed tasks are asked anything: a spent seal is noticed here, not after."""
    state = seal.state()
    if state.spent >= seal.terms.confirmations:
        raise Stop(f"seal {seal.id} has spent its {seal.terms.confirmations} confirmations: seal fresh tasks")
    if state.holdout is not None and state.holdout.spent:
        raise Stop(f"seal {seal.id}'s reusable holdout may disagree no more: seal fresh tasks")


class CanaryPassed(Stop):
    """A canary was passed: the sealed answers leaked, or the scoring was gamed."""


def check_canaries_passed(seal: Seal, result: TrialResult) -> None:
    for canary in seal.canaries:
        tally = result.per_task.get(canary.name)
        if tally and tally.passed:
            raise CanaryPassed(
                f"{canary.name} was passed: the sealed answers reached the agent or its scoring was gamed; seal fresh tasks"
            )


# -- an examination as the examiner's entry says it ----------------------------------------


def examination_body(
    examined: Examined, seal_claim: str, change: Variant, current: Variant, runs: int
) -> dict[str, Any]:
    """The agent.examination/v1 body: counts, the test and the decision, never a sealed
    task's name or text (lost, contested and thin tasks are counted, not named)."""
    said, spent = examined.said, examined.confirmation
    return {
        "seal_claim": seal_claim,
        "change": change.id,
        "current": current.id,
        "runs": runs,
        "outcome": said.outcome.value,
        "sealed": {**comparison_json(said.comparison), "better": said.comparison.better} if said.comparison else None,
        "confirmation": spent.number if spent else None,
        "confirmations": spent.of if spent else None,
        "level": spent.level if spent else None,
        "lost": len(said.lost),
        "contested": len(said.contested),
        "thin": len(said.thin),
        "holdout_gain": said.gain,
        "errored": examined.errored,
    }


def canary_examination(seal_claim: str, change: Variant, current: Variant, runs: int) -> dict[str, Any]:
    """The body that says a canary was passed (or its code word proposed): the loop stops on it."""
    return {
        "seal_claim": seal_claim,
        "change": change.id,
        "current": current.id,
        "runs": runs,
        "outcome": CANARY_PASSED,
        "confirmation": None,
    }


CANARY_PASSED = "canary passed"


def _unnamed(count: Any) -> tuple[str, ...]:
    """Sealed tasks counted, not named: "#1", "#2", …"""
    return tuple(f"#{i}" for i in range(1, int(count) + 1))


def examined_from(body: dict[str, Any], claim: str) -> Examined:
    """The examiner's entry read back as what the sealed tasks said; Stop on a canary."""
    if body.get("outcome") == CANARY_PASSED:
        raise Stop(
            f"the examiner reports a canary passed (examination {claim[:16]}): the sealed answers reached the "
            "agent or its scoring was gamed; seal fresh tasks"
        )
    try:
        outcome = Outcome(body["outcome"])
        sealed = comparison_from(body["sealed"]) if body.get("sealed") else None
        said = Decision(
            outcome,
            SEALED,
            sealed,
            lost=_unnamed(body.get("lost", 0)),
            contested=_unnamed(body.get("contested", 0)),
            thin=_unnamed(body.get("thin", 0)),
            gain=body.get("holdout_gain"),
        )
        n = body.get("confirmation")
        spent = Confirmation(n, body["confirmations"], body["level"]) if n is not None else None
        return Examined(said, spent, int(body.get("errored", 0)), claim)
    except (KeyError, TypeError, ValueError) as exc:
        raise Stop(f"the examiner's examination {claim[:16]} cannot be read ({exc}); nothing was kept") from None
