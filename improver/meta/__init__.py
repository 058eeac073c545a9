"""The improver improved: problems, an improver graded by the loop it runs, kept only
when better beyond chance on problems given and held out.

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "check_problems": "problems",
    "KIND": "judging",
    "load_problem": "problems",
    "MetaLoop": "metaloop",
    "Problem": "problems",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
