"""What trainers take: the agent's work exported (SFT lines, environments), groups with
group-relative advantages, pass@k, and a judge's proposed marks.

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "check_out_dir": "export",
    "ENVIRONMENTS": "export",
    "Export": "export",
    "EXPORT_PASS_OVER": "export",
    "ExportRecord": "export",
    "read_exported": "export",
    "SFT": "export",
    "SFT_VALIDATION": "export",
    "TASKS": "export",
    "Transcript": "export",
    "VALIDATION_SHARE": "export",
    "GROUPS": "groups",
    "Judged": "judge",
    "Proposal": "judge",
    "read_proposals": "judge",
    "save_proposals": "judge",
    "Evaluation": "passk",
    "parse_ks": "passk",
    "run_eval": "passk",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
