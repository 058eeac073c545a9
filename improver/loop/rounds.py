"""The lesson loop: the agent improves what it has learned on its seal, round after round.

Each round draws a variant to build on from the archive, has the proposer write
changes, and judges each (improver.loop.judging): the gates, a staged trial on the tasks
to choose on, the screen against the agent as it is, with a challenger variants of the
tasks the change newly passes (a shortcut turned down), the confirmation on the sealed
tasks at the seal's corrected level, losing no task the agent passes. Every decision is a
line in the lineage; a kept change published with a wallet is an `agent.improvement/v1`
claim, and with `apply` made the profile's.

Runs that errored (provider faults after retries) are never counted as failures: a
change whose evidence they leave too thin is not judged, and no confirmation is spent
on it. The kill switch is checked before each proposal and each trial; a stop request
(SIGTERM, Ctrl-C) ends the loop between steps, or cancels the trial under way, leaving
the archive and the seal as the last finished step left them (improver.loop.running).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from improver.base.protocol import ProviderError
from improver.base.variant import Variant
from improver.loop.given import Given
from improver.loop.judging import say_baseline
from improver.loop.keeping import Claimed, Publish
from improver.loop.proposer import TOOL_NAME, failed_of, messages_for, propose, tried_of
from improver.loop.record import Record, Verdict
from improver.loop.running import check_proposal
from improver.seals.claims import IMPROVEMENT
from improver.tasks.task import TaskSet


@dataclass
class Loop(Given):
    """The lesson loop: the proposer's changes to what the agent has learned, judged."""

    apply: Callable[[Variant, str], None] | None = None  # makes a kept change the profile's

    def __post_init__(self) -> None:
        keeper = KeptLessons(self.profile, self.publish, self.apply)
        self.compose(lambda _: self.agent, LessonWords(self.practice), keeper)

    async def _baseline(self) -> None:
        """The agent as it is, said only when measured afresh."""
        base, measured = await self.judge.baseline(self.current)
        if measured:
            say_baseline(self.record, base, "the agent as it is", self.current)

    async def _round(self) -> None:
        await self._baseline()
        self.trials.go(expected=self.limits.max_tokens)  # no round unless a run of what it proposes could follow
        number = self.record.round
        parent = self.archive.pick(self.rng)
        self.record.emit(
            "round",
            f"round {number}: building on variant {parent.number} ({parent.label}), {parent.counts()}",
            parent=parent.number,
        )
        failed = failed_of(parent, self.judge.train.tasks)
        messages = messages_for(self.settings, parent.variant, self.allowed_models, failed, tried_of(self.archive))
        try:
            answer = await propose(self.proposer, self.settings, parent.variant, messages, self.trials.left())
        except ProviderError as exc:
            self.record.emit("proposer", f"round {number}: the proposer errored ({exc}); no change this round")
            return
        self.trials.spend(answer.usage)
        check_proposal(self.seal.canary_in, answer.said)  # every call of the answer, before any is tried
        if not answer.proposals:
            self.record.emit("proposer", f"round {number}: the proposer proposed no change (no {TOOL_NAME} call)")
        for proposal in answer.proposals:
            self.current = await self.judge.consider(proposal, parent, self.current)


@dataclass(frozen=True)
class LessonWords:
    """A lesson's lines: "turned down: LABEL: why", or "tried|kept|not judged LABEL: what
    was found", a kept one ending with the step the lineage records it as."""

    practice: TaskSet | None

    def line(self, verdict: Verdict, label: str, change: Variant | None, number: int) -> str:
        if verdict.verb == "turned down":
            return f"turned down: {label}: {verdict.what}"
        kept_as = self._kept_as(verdict.data["step"]) if verdict.verb == "kept" else ""
        return f"{verdict.verb} {label}: {verdict.what}{kept_as}"

    def extra(self, number: int) -> dict[str, Any]:
        return {}

    def _kept_as(self, step: str) -> str:
        practice = f", chosen beside practice tasks {self.practice.digest[:16]}" if self.practice else ""
        return f", as step {step}{practice}"


@dataclass(frozen=True)
class KeptLessons:
    """A kept lesson: published as agent.improvement/v1 with a wallet, and with `apply`
    made the profile's."""

    profile: str
    publish_claim: Publish | None
    apply: Callable[[Variant, str], None] | None

    def publish(self, change: Variant, before: Variant, body: dict[str, Any]) -> Claimed:
        return self.publish_claim(IMPROVEMENT, body) if self.publish_claim else (None, None)

    def after(self, change: Variant, step: str, record: Record) -> None:
        if self.apply:
            self.apply(change, step)
            record.emit("applied", f"profile {self.profile} now has learned what step {step} kept", step=step)
