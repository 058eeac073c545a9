"""Tasks: transcripts in the chat format, sessions harvested into tasks, the stand-ins
that replay a task's tools, the checks that score a run, rubrics, and the simulated
users that hold a conversation's hidden part.

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "text_of": "chat",
    "transcript_problem": "chat",
    "Harvest": "harvest",
    "HARVEST_PASS_OVER": "harvest",
    "Session": "harvest",
    "holds": "overlap",
    "word_runs": "overlap",
    "words_of": "overlap",
    "parse_rubric": "rubric",
    "Rubric": "rubric",
    "score_run": "rubric",
    "arguments_text": "runs",
    "Call": "runs",
    "Run": "runs",
    "continued": "simuser",
    "leaked": "simuser",
    "RecordedPerson": "simuser",
    "reply_of": "simuser",
    "USER_TURNS": "simuser",
    "user_view": "simuser",
    "build_task": "task",
    "Exclusion": "task",
    "load_tasks": "task",
    "MATCHES": "task",
    "parse_set": "task",
    "Task": "task",
    "TaskSet": "task",
    "tool_schema": "task",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
