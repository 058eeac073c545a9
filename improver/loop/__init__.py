"""The lesson loop: the proposer, the gates a proposal must pass before it is tried, the
rounds, the challenger, practice tasks a model writes, and the lineage each decision
is recorded in.

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "Challenger": "challenger",
    "SealedText": "gates",
    "chosen_counts": "lineage",
    "CLAIMED": "lineage",
    "comparison_json": "lineage",
    "improver_summary": "lineage",
    "KIND": "lineage",
    "KINDS": "lineage",
    "Lineage": "lineage",
    "summary": "lineage",
    "Practice": "practice",
    "PracticeRequest": "practice",
    "Runner": "practice",
    "with_practice": "practice",
    "write_practice": "practice",
    "Failed": "proposer",
    "Proposal": "proposer",
    "Tried": "proposer",
    "BudgetTooSmall": "rounds",
    "decided": "rounds",
    "Event": "rounds",
    "how_it_went": "rounds",
    "Interrupted": "rounds",
    "Loop": "rounds",
    "Publish": "rounds",
    "Stop": "rounds",
    "SealReached": "writing",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
