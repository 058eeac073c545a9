"""What a run did: the tool calls it made, how it ended and its last words.

A task's solution and failures are written in this shape, and the harness records every
run in it, so the checks score a replayed solution and a live candidate alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from improver.base.digests import canonical
from improver.base.errors import ImproverError
from improver.base.nesting import loads_bounded

# How a task's solution or failure may end (a run the harness records may also have
# errored, or broken the protocol; see improver.episodes.harness).
RUN_ENDINGS = ("done", "asked", "limit")


@dataclass(frozen=True)
class Call:
    """One tool call. `arguments` is the parsed JSON object, or the raw text when the
    candidate sent something that is not a JSON object (it is still a call)."""

    tool: str
    arguments: dict[str, Any] | str

    @classmethod
    def from_text(cls, tool: str, text: str) -> Call:
        """Parsed when the text is a JSON object with a canonical form; otherwise kept as
        sent (NaN, Infinity or an integer beyond 2**53 has none, so it matches nothing; JSON
        nested past the bound of improver.base.nesting is kept as text too)."""
        try:
            parsed = loads_bounded(text)
            if isinstance(parsed, dict):
                canonical(parsed)
                return cls(tool, parsed)
        except (ValueError, TypeError, ImproverError):  # not JSON, too deep, a number too long to read
            pass
        return cls(tool, text)

    def text(self) -> str:
        """The arguments as a model would send them."""
        if isinstance(self.arguments, dict):
            return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))
        return self.arguments

    def key(self) -> tuple[str, bytes] | None:
        """What stand-ins and checks match on: the tool and its canonical input."""
        return (self.tool, canonical(self.arguments)) if isinstance(self.arguments, dict) else None

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": self.arguments}


@dataclass(frozen=True)
class Run:
    calls: tuple[Call, ...] = ()
    answer: str = ""
    ended: str = "done"
    why: str = ""  # for a task's failures: what kind of wrong run this is
    state: str = ""  # the digest of the state its world was left in (improver.tasks.worlds); none without one

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"calls": [c.to_json() for c in self.calls], "answer": self.answer, "ended": self.ended}
        if self.why:
            data["why"] = self.why
        if self.state:
            data["state"] = self.state
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Run:
        """Assumes the shape was checked (improver.tasks.task does it on load)."""
        return cls(
            calls=tuple(Call(c["tool"], c["arguments"]) for c in data["calls"]),
            answer=data["answer"],
            ended=data["ended"],
            why=data.get("why", ""),
            state=data.get("state", ""),
        )


def arguments_text(arguments: dict[str, Any]) -> str:
    """Arguments as one short canonical line, for the checks' descriptions."""
    return canonical(arguments).decode()
