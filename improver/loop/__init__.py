"""The lesson loop: the proposer, the gates a proposal must pass before it is tried, the
rounds, the challenger, practice tasks a model writes, and the lineage each decision
is recorded in; and what the code loop and the improver loop compose too: the trials
(running), the record of each decision (record), the decision with fresh runs on
contested tasks (contests), and the judging of a change stage by stage (judging: the
gate, the staged trial and the screen in screening, then challenging, confirming and
keeping).

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "Challenger": "challenger",
    "decided": "contests",
    "canary_examination": "confirming",
    "CanaryPassed": "confirming",
    "Examination": "confirming",
    "examination_body": "confirming",
    "Examined": "confirming",
    "examined_from": "confirming",
    "turned_down_by_examiner": "confirming",
    "LocalExamination": "confirming",
    "SealedBaseline": "confirming",
    "SealedText": "gates",
    "Publish": "keeping",
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
    "Event": "record",
    "how_it_went": "record",
    "Loop": "rounds",
    "BudgetTooSmall": "running",
    "Interrupted": "running",
    "Stop": "running",
    "Trials": "running",
    "SealReached": "writing",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
