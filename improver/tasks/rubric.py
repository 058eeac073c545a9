"""Rubrics: a task's checks as gates and weights, for a reward finer than the share held.

A profile may declare one (`[rubric]` in profile.toml); harvest then writes it into
each task, so the reward is the same wherever the task goes (a seal, an export, the env
server). A rubric names checks by selector: `KIND` (every check of that kind, e.g.
`no_other_changes`) or `KIND:TOOL` for the kinds about a tool (`makes:pay`,
`avoids:pay`, `calls:notify`).

- gates: every check a gate names must hold, or the reward is 0;
- weights: a check's weight is that of `KIND:TOOL`, else of `KIND`, else 1; the reward
  is the weighted share of the checks that held.

Passed still means every check held. Without a rubric the reward is the plain share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from improver.base.errors import ImproverError
from improver.tasks.checks import KINDS, Score, describe, holds, score
from improver.tasks.runs import Run

TOOL_KINDS = tuple(kind for kind, needs in KINDS.items() if "tool" in needs)
FIELDS = ("gates", "weights")


@dataclass(frozen=True)
class Rubric:
    gates: tuple[str, ...] = ()
    weights: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"gates": list(self.gates), "weights": dict(self.weights)}

    def gated(self, check: dict[str, Any]) -> bool:
        return any(_selects(gate, check) for gate in self.gates)

    def weight(self, check: dict[str, Any]) -> float:
        kind = check["check"]
        if "tool" in check and f"{kind}:{check['tool']}" in self.weights:
            return self.weights[f"{kind}:{check['tool']}"]
        return self.weights.get(kind, 1.0)


def _selects(selector: str, check: dict[str, Any]) -> bool:
    kind, _, tool = selector.partition(":")
    return check["check"] == kind and (not tool or check.get("tool") == tool)


def parse_rubric(data: Any, tools: Sequence[str] | None = None) -> Rubric:
    """A rubric from its JSON or TOML table; ImproverError saying what is wrong. With
    `tools`, a selector must name one of them."""
    if not isinstance(data, dict):
        raise ImproverError('a rubric is a table: gates = ["KIND" or "KIND:TOOL", ...] and [weights] of the same')
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ImproverError(f"a rubric has gates and weights, not {unknown[0]!r}")
    gates, weights = data.get("gates", []), data.get("weights", {})
    if not isinstance(gates, list) or not all(isinstance(g, str) for g in gates):
        raise ImproverError('the rubric\'s gates must be a list of checks, e.g. ["avoids:pay", "no_other_changes"]')
    if not isinstance(weights, dict):
        raise ImproverError('the rubric\'s weights must be a table of checks and numbers, e.g. {"makes:pay" = 3}')
    if not gates and not weights:
        raise ImproverError(
            "the rubric declares neither gates nor weights; leave it out for the plain share of checks held"
        )
    for selector in [*gates, *weights]:
        _check_selector(selector, tools)
    for selector, weight in weights.items():
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not math.isfinite(weight) or weight < 0:
            raise ImproverError(f"the rubric's weight for {selector!r} must be a number, 0 or more, not {weight!r}")
    if weights and sum(weights.values()) <= 0:
        raise ImproverError("the rubric's weights sum to 0: give at least one check a weight above 0")
    return Rubric(tuple(gates), {s: float(w) for s, w in weights.items()})


def _check_selector(selector: str, tools: Sequence[str] | None) -> None:
    kind, colon, tool = selector.partition(":")
    if kind not in KINDS:
        raise ImproverError(
            f"the rubric names {selector!r}, which is no check: the checks are {', '.join(KINDS)} (as KIND or KIND:TOOL)"
        )
    if colon and kind not in TOOL_KINDS:
        raise ImproverError(f"the rubric names {selector!r}, but {kind} checks name no tool: write {kind!r}")
    if colon and (not tool or (tools is not None and tool not in tools)):
        known = ", ".join(tools or ())
        raise ImproverError(
            f"the rubric names {selector!r}, but there is no tool {tool!r} (the tools: {known or 'none'})"
        )


def score_run(checks: list[dict[str, Any]], tools: list[dict[str, Any]], run: Run, rubric: Rubric | None) -> Score:
    """The run's score: the plain share of checks held, or the rubric's reward."""
    if rubric is None:
        return score(checks, tools, run)
    held = [holds(c, checks, tools, run) for c in checks]
    failures = [
        describe(c) + (" (a gate: the reward is 0)" if rubric.gated(c) else "")
        for c, ok in zip(checks, held, strict=False)
        if not ok
    ]
    passed = bool(checks) and all(held)
    if any(not ok for c, ok in zip(checks, held, strict=False) if rubric.gated(c)):
        return Score(0.0, passed, failures)
    weights = [rubric.weight(c) for c in checks]
    total = sum(weights)
    reward = sum(w for w, ok in zip(weights, held, strict=False) if ok) / total if total > 0 else 0.0
    return Score(reward, passed, failures)
