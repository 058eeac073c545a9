"""What the improver as it is is shown of itself, and what it proposes with propose_improver.

It is shown its instructions and settings, how the agent did with it on each problem's
held tasks, the held tasks the agent still failed, and how its changes went before. What
it proposes is held against the held-out problems' words before anything is tried: a
proposal holding one of their tasks stops the run (those tasks reached the proposer).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from improver.base.errors import ImproverError
from improver.base.nesting import loads_bounded
from improver.decide.stats import Tally
from improver.loop.gates import SealedText
from improver.loop.running import Stop
from improver.meta.problems import Graded, Problem
from improver.seals.settings import TUNABLE, Settings

TOOL_NAME = "propose_improver"
PROPOSE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Propose one change to the improver: the full new text of its instructions, new values of "
        "its settings, or both. What you leave out stays as it is.",
        "parameters": {
            "type": "object",
            "properties": {
                "instructions": {"type": "string", "description": "The full new text of its instructions."},
                "changes_per_round": {"type": "integer", "minimum": 1, "description": "Changes it proposes a round."},
                "failed_shown": {"type": "integer", "minimum": 1, "description": "Failed tasks it is shown."},
                "show_history": {"type": "boolean", "description": "Whether it sees what was tried before."},
            },
        },
    },
}


@dataclass(frozen=True)
class Proposed:
    """One propose_improver call: the improver it makes, or why it makes none."""

    improver: Settings | None
    why: str = ""  # why it makes none


def improver_messages(
    improver: Settings, graded: Sequence[Graded], tried: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    """What the improver is shown of itself, under its own instructions."""
    parts = [
        "The system you improve is an improver: a proposer that is shown an agent's work and proposes changes to what "
        "the agent has learned. It is graded by how much the agent improves on tasks its changes were not chosen on.",
        "What you may not change: the agent, and how the improver's changes are tried and kept.",
        "What you may change: the improver's instructions (below) and its settings: "
        + ", ".join(f"{name} ({label})" for name, label in TUNABLE.items())
        + ".",
        "Its instructions now:",
        textwrap.indent(improver.instructions.strip(), "    "),
        f"Its settings now: {improver.describe()}.",
        "How the agent did with it, on each problem's held tasks:",
        *(f"- {g.problem.name}: {_passed(g.before)} before its changes, {_passed(g.after)} after" for g in graded),
    ]
    failed = [(g, t) for g in graded for t in g.problem.held.tasks if t.name in g.after and not g.after[t.name].passes]
    shown = failed[: improver.failed_shown]
    if shown:
        parts.append(
            f"Tasks the agent still failed after its changes ({len(shown)} of {len(failed)}), with what went wrong:"
        )
        parts += [
            f"- {t.task}\n  went wrong: {'; '.join(g.wrong.get(t.name, [])) or 'it did not pass'}" for g, t in shown
        ]
    else:
        parts.append("The agent failed none of the held tasks after its changes.")
    if improver.show_history and tried:
        parts.append("Tried before, and how it went:")
        parts += [f"- {change}: {went}" for change, went in tried]
    parts.append(f"Propose up to {improver.changes_per_round} changes with {TOOL_NAME}.")
    return [{"role": "system", "content": improver.instructions}, {"role": "user", "content": "\n\n".join(parts)}]


def proposed(base: Settings, arguments: Any) -> Proposed:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    try:
        data = loads_bounded(text)
    except (ValueError, TypeError):  # not JSON, nested too deep, a number too long to read; not text
        return Proposed(None, "its arguments are not valid JSON")
    allowed = {"instructions", *TUNABLE}
    if not isinstance(data, dict) or not data:
        return Proposed(None, "it changes neither the instructions nor a setting")
    other = sorted(set(data) - allowed)
    if other:
        return Proposed(
            None, f"{other[0]!r} is not the improver's to change (it may change {', '.join(sorted(allowed))})"
        )
    try:
        return Proposed(Settings.from_json({**base.to_json(), **data}, TOOL_NAME))
    except (ImproverError, TypeError) as exc:
        return Proposed(None, str(exc).removeprefix(f"{TOOL_NAME}: "))


def check_held_out(calls: Sequence[dict[str, Any]], held: Sequence[tuple[Problem, SealedText]]) -> None:
    """Stop when a propose_improver call holds a task of a held-out problem."""
    for call in calls:
        said = _proposal_words(call["function"].get("arguments"))
        for problem, words in held:
            task = words.held_in(said)
            if task:
                raise Stop(
                    f"a proposal holds task {task} of held-out problem {problem.name}: the held-out tasks reached "
                    "the proposer; hold out fresh problems"
                )


def _proposal_words(arguments: Any) -> str:
    """What a propose_improver call says: the text of each of its values, or its arguments
    as given when they are no JSON object (JSON's escapes would split its words)."""
    try:
        data = loads_bounded(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return str(arguments)
    return "\n".join(str(v) for v in data.values()) if isinstance(data, dict) else str(arguments)


def _passed(tallies: dict[str, Tally]) -> str:
    return f"{sum(t.passed for t in tallies.values())}/{sum(t.runs for t in tallies.values())}"
