"""The proposer: a model, under the improver's instructions, writing changes.

It is shown what the operator tells the agent (which it cannot change), what the agent
has learned, the models it may run on, the tasks it failed among those changes are
chosen on with what went wrong, and what was tried before and how it went. It is never
shown a sealed task nor anything a sealed task's run said: this module is given none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from improver.base.nesting import loads_bounded
from improver.base.protocol import Model, TokenUsage
from improver.base.variant import Variant
from improver.decide import codewords
from improver.decide.archive import Archive, Archived
from improver.seals.settings import Settings
from improver.tasks.task import Task

TOOL_NAME = "propose_change"
HISTORY_SHOWN = 30  # the most recent changes the proposer is told of
PROPOSE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Propose one change: the full new text of what the agent has learned, "
        "the models it runs on, or both. What you leave out stays as it is.",
        "parameters": {
            "type": "object",
            "properties": {
                "lessons": {"type": "string", "description": "The full new text of what the agent has learned."},
                "models": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "The models it runs on, as provider:model, the first its default.",
                },
            },
        },
    },
}


@dataclass(frozen=True)
class Failed:
    """A task to choose on that the variant failed, and what went wrong."""

    task: str
    wrong: list[str]


@dataclass(frozen=True)
class Tried:
    """A change tried before, and how it went, as the proposer may be told it."""

    change: str
    went: str


@dataclass(frozen=True)
class Proposal:
    """One propose_change call: the variant it makes, or why it makes none."""

    variant: Variant | None
    text: str  # everything the call said, for the canary check
    problem: str = ""
    label: str = ""  # how operator lines name it, when describe() cannot (a code change)


@dataclass(frozen=True)
class Proposals:
    proposals: list[Proposal]
    usage: TokenUsage
    said: str  # everything the answer said, text and every call's arguments, for the canary check


def failed_of(variant: Archived, tasks: Sequence[Task]) -> list[Failed]:
    """The tasks of `tasks` the variant does not pass, with what went wrong in its runs."""
    return [
        Failed(task.task, variant.wrong.get(task.name, []))
        for task in tasks
        if task.name in variant.tallies and not variant.tallies[task.name].passes
    ]


def tried_of(archive: Archive) -> list[Tried]:
    """The changes tried most recently, and how each went."""
    return [Tried(h["change"], h["went"]) for h in archive.history[-HISTORY_SHOWN:]]


def messages_for(
    settings: Settings,
    base: Variant,
    allowed_models: list[str],
    failed: list[Failed],
    history: list[Tried],
) -> list[dict[str, Any]]:
    parts = [
        "What the operator tells the agent (you cannot change it):",
        _block(base.operator),
        "What the agent has learned so far:",
        _block(base.lessons or "(nothing yet)"),
        f"The models it runs on: {', '.join(base.models)}.",
        f"The models it may run on: {', '.join(allowed_models)}.",
    ]
    shown = failed[: settings.failed_shown]
    if shown:
        parts.append(f"Tasks it failed ({len(shown)} of {len(failed)}), with what went wrong:")
        for f in shown:
            parts.append(f"- {f.task}\n  went wrong: {'; '.join(f.wrong) or 'it did not pass'}")
    else:
        parts.append("It failed none of the tasks changes are chosen on.")
    if settings.show_history and history:
        parts.append("Tried before, and how it went:")
        parts += [f"- {t.change}: {t.went}" for t in history]
    parts.append(f"Propose up to {settings.changes_per_round} changes with {TOOL_NAME}.")
    return [{"role": "system", "content": settings.instructions}, {"role": "user", "content": "\n\n".join(parts)}]


def _block(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.strip().splitlines()) or "    (empty)"


async def propose(
    model: Model, settings: Settings, base: Variant, messages: list[dict[str, Any]], max_tokens: int | None = None
) -> Proposals:
    """Asks the proposer once, held to `max_tokens` (what a token budget leaves); takes up
    to `changes_per_round` of its propose_change calls."""
    completion = await model.complete(messages, [PROPOSE_TOOL], max_tokens)
    every = completion.message.get("tool_calls") or []
    calls = [c for c in every if c.get("function", {}).get("name") == TOOL_NAME]
    proposals = [_proposal(base, c["function"].get("arguments")) for c in calls[: settings.changes_per_round]]
    # Every call counts for the canary check, those past changes_per_round and other tools too.
    said = "\n".join([str(completion.message.get("content") or ""), *codewords.call_texts(every)])
    return Proposals(proposals, completion.usage, said)


def _proposal(base: Variant, arguments: Any) -> Proposal:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    try:
        data = loads_bounded(text)
    except (ValueError, TypeError):  # not JSON, nested too deep, a number too long to read; not text
        return Proposal(None, str(text), "its arguments are not valid JSON")
    if not isinstance(data, dict) or ("lessons" not in data and "models" not in data):
        return Proposal(None, text, "it gives neither lessons nor models")
    lessons, models = data.get("lessons", base.lessons), data.get("models", list(base.models))
    if not isinstance(lessons, str):
        return Proposal(None, text, "its lessons are not text")
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        return Proposal(None, text, "its models are not a list of provider:model names")
    # A model named twice is still one model (a real proposer repeated its own): the first place counts.
    return Proposal(Variant(base.operator, lessons.strip(), tuple(dict.fromkeys(models))), text)


def describe(change: Variant, base: Variant, width: int = 100) -> str:
    """How operator lines name a change: `learns "..."`, `runs on M`, or both."""
    parts = []
    if change.lessons != base.lessons:
        lessons = " ".join(change.lessons.split())
        parts.append(f'learns "{lessons if len(lessons) <= width else lessons[: width - 1] + "…"}"')
    if change.models != base.models:
        parts.append(f"runs on {', '.join(change.models)}")
    return " and ".join(parts) or "changes nothing"
