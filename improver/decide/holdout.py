"""The reusable holdout: Thresholdout over a seal's sealed tasks.

Thresholdout is from Dwork, Feldman, Hardt, Pitassi, Reingold and Roth, "The reusable
holdout", Science 349 (2015). Each change's gain (its pass rate minus the agent's) is
measured on both parts of a seal. While the two gains agree within a noisy threshold the
answer is the gain on the tasks to choose on, and the sealed tasks say nothing about
themselves. When they disagree, the answer is the sealed gain with Laplace noise, one
unit of the budget is spent, and the threshold's noise is drawn afresh.

For n sealed tasks the noise scale is 1/(2 sqrt(n)) and the threshold four times that
(22.4% with 80 tasks, 10% with 400). A gain answered at or below the threshold is too
small for answers this coarse to tell from nothing, so the change is turned down and no
confirmation is spent on it. Any other change goes on to be confirmed as on any seal:
the holdout only ever turns a change down, never keeps one.

This module is pure logic over a small state. Whoever keeps the state (the seal, under
its file lock) loads it, asks, and writes back the answer's new state. The state holds
the current threshold noise, which must stay as secret as the sealed tasks: a seal's
claim publishes only the threshold and the noise scale.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Any

import numpy as np

from improver.base.errors import ImproverError

# The paper's Laplace scales, as multiples of the noise scale sigma: the threshold's
# noise, the noise added to each comparison, and the noise on a sealed answer.
THRESHOLD_NOISE_SCALE = 2.0
COMPARISON_NOISE_SCALE = 4.0
ANSWER_NOISE_SCALE = 1.0
THRESHOLD_IN_NOISES = 4.0


def system_rng() -> np.random.Generator:
    """A generator seeded from the operating system's randomness."""
    return np.random.default_rng(secrets.randbits(128))


@dataclass(frozen=True)
class Holdout:
    """A reusable holdout's state: what a seal keeps between questions."""

    threshold: float  # T, the gain at or below which a change is turned down
    noise: float  # sigma, the Laplace scale the other noises are multiples of
    threshold_noise: float  # gamma, the current draw added to T when comparing gains
    budget: int  # disagreements still allowed

    @classmethod
    def create(cls, sealed_tasks: int, budget: int, rng: np.random.Generator | None = None) -> Holdout:
        """A fresh holdout for `sealed_tasks` tasks allowing `budget` disagreements.

        Without `rng` the threshold's noise comes from the system's randomness, as it must
        for a real seal; tests pass a seeded generator.
        """
        if not _is_count(sealed_tasks) or sealed_tasks < 1:
            raise ImproverError(f"a reusable holdout needs at least one sealed task, not {sealed_tasks!r}")
        if not _is_count(budget) or budget < 1:
            raise ImproverError(f"a reusable holdout must allow at least one disagreement, not {budget!r}")
        noise = 1 / (2 * math.sqrt(sealed_tasks))
        return cls(
            threshold=THRESHOLD_IN_NOISES * noise,
            noise=noise,
            threshold_noise=_laplace(rng, THRESHOLD_NOISE_SCALE * noise),
            budget=budget,
        )

    @property
    def spent(self) -> bool:
        """No disagreement is left: the holdout answers nothing more; seal fresh tasks."""
        return self.budget == 0

    def ask(self, gain_choose: float, gain_sealed: float, rng: np.random.Generator | None = None) -> Answer:
        """Answers for a change's gains on the tasks to choose on and on the sealed tasks.

        The answer carries the holdout's next state; the caller stores it whatever the
        answer, since even an agreement was a question asked of the sealed tasks.
        """
        for name, gain in (("on the tasks to choose on", gain_choose), ("on the sealed tasks", gain_sealed)):
            if not isinstance(gain, (int, float)) or isinstance(gain, bool) or not -1 <= gain <= 1:
                raise ImproverError(f"a gain in pass rate is between -1 and 1; the gain {name} was {gain!r}")
        if self.spent:
            raise ImproverError(
                "the sealed tasks may disagree with the tasks to choose on no more "
                "(the reusable holdout's budget is spent): seal fresh tasks"
            )
        rng = rng or system_rng()
        comparison_noise = _laplace(rng, COMPARISON_NOISE_SCALE * self.noise)
        if abs(gain_sealed - gain_choose) <= self.threshold + self.threshold_noise + comparison_noise:
            return Answer(gain=float(gain_choose), turned_down=gain_choose <= self.threshold, spent=0, holdout=self)
        answered = gain_sealed + _laplace(rng, ANSWER_NOISE_SCALE * self.noise)
        after = Holdout(
            threshold=self.threshold,
            noise=self.noise,
            threshold_noise=_laplace(rng, THRESHOLD_NOISE_SCALE * self.noise),
            budget=self.budget - 1,
        )
        return Answer(gain=answered, turned_down=answered <= self.threshold, spent=1, holdout=after)

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "noise": self.noise,
            "threshold_noise": self.threshold_noise,
            "budget": self.budget,
        }

    @classmethod
    def from_json(cls, data: Any) -> Holdout:
        """Reads a state written by `to_json`; raises ImproverError saying what is wrong."""
        fields = ("threshold", "noise", "threshold_noise", "budget")
        if not isinstance(data, dict) or set(data) != set(fields):
            raise ImproverError(
                f"a reusable holdout's state must be an object with exactly {', '.join(fields)}: "
                "the seal file is damaged; seal fresh tasks"
            )
        numbers = [data[f] for f in fields[:3]]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in numbers):
            raise ImproverError(
                "a reusable holdout's threshold and noises must be finite numbers: the seal file is damaged"
            )
        if data["threshold"] <= 0 or data["noise"] <= 0:
            raise ImproverError("a reusable holdout's threshold and noise must be above zero: the seal file is damaged")
        if not _is_count(data["budget"]) or data["budget"] < 0:
            raise ImproverError(
                "a reusable holdout's budget must be a whole number of at least 0: the seal file is damaged"
            )
        return cls(float(data["threshold"]), float(data["noise"]), float(data["threshold_noise"]), data["budget"])


@dataclass(frozen=True)
class Answer:
    """What the sealed tasks say about one change.

    `turned_down` is the only verdict: a change not turned down still has to be confirmed.
    `spent` is 1 when the two parts disagreed (one unit of the budget), else 0.
    """

    gain: float
    turned_down: bool
    spent: int
    holdout: Holdout


def _laplace(rng: np.random.Generator | None, scale: float) -> float:
    return float((rng or system_rng()).laplace(0.0, scale))


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
