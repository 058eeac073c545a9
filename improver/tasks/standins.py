"""Stand-ins: the tools of a task, answering what the real tools answered.

Each recorded call is answered by its exact input (canonical JSON equality of the parsed
arguments). Any other input to a tool that only reads gets an error saying no answer was
recorded for it: a run that asks something else learns nothing it could not have learnt
in the session. A tool that changes something answers `ok` to any other input; the call
is kept, and the checks see it. Arguments that are not a JSON object are treated alike:
an error from a tool that reads, `ok` from one that changes something.
"""

from __future__ import annotations

from typing import Any

from improver.base.digests import canonical
from improver.tasks.runs import Call

CHANGED = "ok"


class StandIns:
    def __init__(self, tools: list[dict[str, Any]], standins: list[dict[str, Any]]) -> None:
        self.changes = {t["name"]: bool(t.get("changes")) for t in tools}
        self.answers: dict[tuple[str, bytes], str] = {}
        for s in standins:
            self.answers.setdefault((s["tool"], canonical(s["arguments"])), s["answer"])

    def answer(self, call: Call) -> str:
        if call.tool not in self.changes:
            return f"error: there is no tool named {call.tool!r}"
        key = call.key()
        recorded = self.answers.get(key) if key is not None else None
        if recorded is not None:
            return recorded
        if self.changes[call.tool]:
            return CHANGED
        if key is None:
            return f"error: {call.tool} takes its arguments as a JSON object"
        return f"error: no answer was recorded for {call.tool} with this input"


def collect(exchanges: list[tuple[Call, str | None]]) -> list[dict[str, Any]]:
    """Stand-ins from a session's calls and what the real tools answered; the first
    answer to an input is the one kept, and a call left unanswered gives none."""
    seen: set[tuple[str, bytes]] = set()
    standins = []
    for call, answer in exchanges:
        key = call.key()
        if key is None or answer is None or key in seen:
            continue
        seen.add(key)
        standins.append({"tool": call.tool, "arguments": call.arguments, "answer": answer})
    return standins
