"""Decisions: the statistical tests, the level each confirmation is held to, the
decision as a pure function of the tallies, the reusable holdout, canaries' code words,
and the archive the loop draws the variant to build on from.

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "Archive": "archive",
    "Archived": "archive",
    "CHALLENGE": "decision",
    "CHOOSE": "decision",
    "Decision": "decision",
    "Evidence": "decision",
    "Outcome": "decision",
    "Rule": "decision",
    "SEALED": "decision",
    "Answer": "holdout",
    "Holdout": "holdout",
    "DEFAULT_TEST": "levels",
    "TESTS": "levels",
    "Comparison": "stats",
    "Tally": "stats",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
