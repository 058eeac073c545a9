"""Keeping a confirmed change: its claim's body, what it publishes, what follows.

The last stage of judging a change (improver.loop.judging). The kept step is named by
the change, the seal and the confirmation; its body holds the change, the agent before
and after, the counts on both parts, the level and the test (and the practice tasks and
the challenge, when there were). What a kept change publishes and does next is the
`Keeper`'s: for a lesson, an agent.improvement/v1 claim and the profile's learned.json
(improver.loop.rounds); for code, a release (improver.code.codeloop).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from improver.base.digests import digest
from improver.base.variant import Variant
from improver.decide.decision import Decision
from improver.decide.stats import Comparison
from improver.loop.lineage import comparison_json
from improver.loop.record import Record, Verdict, left_out
from improver.seals.seal import Seal
from improver.tasks.task import TaskSet

Publish = Callable[[str, dict[str, Any]], tuple[str, int]]  # kind, body -> (claim id, Pulse)
Claimed = tuple[str, int] | tuple[None, None]  # a claim's id and Pulse, or neither unpublished


class Keeper(Protocol):
    """What keeping a change does besides its lineage line."""

    def publish(self, change: Variant, before: Variant, body: dict[str, Any]) -> Claimed:
        """Publishes the kept step `body` (the change replacing `before`), when it publishes."""
        ...

    def after(self, change: Variant, step: str, record: Record) -> None:
        """What follows once the kept step is recorded (and published)."""
        ...


@dataclass(frozen=True)
class Step:
    """What a kept step is made of, besides the seal and the change before it."""

    label: str
    change: Variant
    said: Decision  # the sealed tasks' decision
    screen: Comparison  # what the tasks to choose on said
    number: int  # the confirmation it spent
    errored: dict[str, int]
    examination: str | None = None  # the examiner's claim that confirmed it, on a seal an examiner holds


def step_id(change: Variant, seal: Seal, number: int) -> str:
    return digest({"variant": change.id, "seal": seal.id, "confirmation": number})[:16]


def claim_body(
    profile: str,
    seal: Seal,
    step: Step,
    before: Variant,
    follows: str | None,
    practice: TaskSet | None,
    challenged: dict[str, Any] | None,
) -> dict[str, Any]:
    """The kept step as its claim publishes it (and its lineage line holds it)."""
    sealed = step.said.comparison
    assert sealed is not None
    return {
        "profile": profile,
        "step": step_id(step.change, seal, step.number),
        "seal": seal.id,
        "seal_claim": seal.state().claim,
        "follows": follows,
        "change": step.label,
        "before": before.to_json(),
        "after": step.change.to_json(),
        "choose": comparison_json(step.screen),
        "sealed": comparison_json(sealed),
        "confirmation": step.number,
        "confirmations": seal.terms.confirmations,
        "level": seal.terms.level,  # one-sided; the intervals are two-sided at twice it
        "test": sealed.test,
        "errored": step.errored,
        **({"examination": step.examination} if step.examination else {}),
        **({"practice": practice.digest} if practice else {}),
        **({"challenge": challenged} if challenged else {}),
    }


def kept(step: Step, body: dict[str, Any], claimed: Claimed) -> Verdict:
    """The kept step's verdict; its line holds the body, the claim and its Pulse."""
    sealed = step.said.comparison
    assert sealed is not None
    errored = step.errored["choose"] + step.errored["sealed"]
    what = (
        f"{step.screen.describe()} on the tasks to choose on, and {sealed.describe()} on the sealed tasks "
        f"(confirmation {step.number} of {body['confirmations']}){left_out(errored)}"
    )
    claim, pulse = claimed
    data = {**body, "claim": claim, "pulse": pulse, "contested": list(step.said.contested)}
    return Verdict(step.said, "kept", what, data, "kept (confirmed)")
