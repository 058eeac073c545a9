"""The agent loop: ask the model, run its tool calls, feed back the results, until it
answers without tool calls (done), says it would ask a person, or hits a limit.

It speaks only to an `Episode`, so the same loop runs live (real providers and tools),
in trials (stand-ins, in-process) and as a candidate program (`agentd case --stdio`).
A live session also hears each message as it joins the transcript (`said`), so what it
did is written down as it happens, not only when it ends.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from improver import ASK_PERSON_TOOL, Case, Ending, Episode, LimitReached, ProviderError

LESSONS_HEADING = "## What you have learned"

# Told each message as it joins the transcript, in order: an assistant message (with the
# tool calls it asks for) before any of those calls runs, a tool's answer once it is back.
Said = Callable[[dict[str, Any]], None]

ASK_PERSON_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": ASK_PERSON_TOOL,
        "description": "Stop and ask a person, when you should not go on without one.",
        "parameters": {
            "type": "object",
            "properties": {"question": {"type": "string", "description": "What to ask the person."}},
            "required": ["question"],
        },
    },
}


def system_prompt(operator: str, lessons: str) -> str:
    """The operator's words first, then the lessons under their own heading."""
    operator = operator.strip()
    lessons = lessons.strip()
    if not lessons:
        return operator
    return f"{operator}\n\n{LESSONS_HEADING}\n\n{lessons}"


async def run_case(case: Case, episode: Episode, said: Said | None = None) -> Ending:
    messages: list[dict[str, Any]] = []

    def add(message: dict[str, Any]) -> None:
        messages.append(message)
        if said is not None:
            said(message)

    add({"role": "system", "content": system_prompt(case.operator, case.lessons)})
    add({"role": "user", "content": case.task})
    for earlier in case.conversation:  # a conversation going on: the person has replied
        add(earlier)
    tools = [*case.tools, ASK_PERSON_SCHEMA]
    while True:
        try:
            completion = await episode.model(messages, tools, None)
        except LimitReached as exc:
            return Ending("limit", messages=messages, error=str(exc))
        except ProviderError as exc:
            return Ending("errored", messages=messages, error=str(exc))
        message = _assistant(completion.message)
        add(message)
        calls = message.get("tool_calls") or []
        if not calls:
            return Ending("done", answer=message.get("content") or "", messages=messages)
        for call in calls:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            if name == ASK_PERSON_TOOL:
                return Ending("asked", answer=_question(arguments), messages=messages)
            try:
                result = await episode.tool(call["id"], name, arguments)
            except LimitReached as exc:
                return Ending("limit", messages=messages, error=str(exc))
            add({"role": "tool", "tool_call_id": call["id"], "content": result})


def _assistant(message: dict[str, Any]) -> dict[str, Any]:
    """Keeps only what the chat format defines, so transcripts stay portable."""
    kept: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        kept["tool_calls"] = [
            {
                "id": str(c.get("id") or f"call_{i}"),
                "type": "function",
                "function": {
                    "name": str(c["function"]["name"]),
                    "arguments": _arguments_text(c["function"].get("arguments")),
                },
            }
            for i, c in enumerate(message["tool_calls"])
        ]
    return kept


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


def _question(arguments: str) -> str:
    try:
        data = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    return str(data.get("question", "")) if isinstance(data, dict) else arguments
